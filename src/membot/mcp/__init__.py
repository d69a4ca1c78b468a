"""Tools from MCP servers (MCP_CONFIG), offered to the model beside the built-ins.

`hub` (`McpTools`: every server, and which tools a turn is offered), `server` (one server's
session, kept open and retried, its tools and calls), `transport` (stdio or Streamable HTTP),
`schema` (tool names and schemas as providers take them), `results` (a call's result as text
and images for the model). The official `mcp` SDK does the protocol; it is imported only by
a process whose MCP_CONFIG names servers (`hub` imports `server` when it is built)."""
