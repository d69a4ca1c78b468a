"""membot as an MCP server (`membot mcp`): one conversation's memory, for another agent.

`desk.py` is what the tools do, on the storage contract and the archive search, free of any
transport; `server.py` puts it behind the official SDK's server over stdio or Streamable HTTP
(with a bearer token); `cli.py` reads the settings and opens the storage the bot uses.
"""
