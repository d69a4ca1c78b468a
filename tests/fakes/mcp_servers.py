"""Real MCP servers for the tests and the bench, written with the official SDK (`MCPServer`).

    python -m tests.fakes.mcp_servers                       # over stdio (a child process)
    python -m tests.fakes.mcp_servers --http PORT           # Streamable HTTP on 127.0.0.1:PORT/mcp
    python -m tests.fakes.mcp_servers --down-while FILE     # exits at once while FILE exists

Its tools: `echo` and `add` (plain results), `fail` (raises: an is_error result), `hang`
(sleeps), `die` (the process exits mid-call), `env` (the names of the variables it can see,
and the value of MCP_FAKE_GREETING), `token` (the request's X-Token header), `picture` (a
PNG), `long_text`, and `lookup`, whose schema has a `$ref` and a nullable field, as pydantic
models give them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

# A 2x2 red PNG, small and valid (Pillow opens it).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000002000000020802000000fdd49a73"
    "0000001649444154789c63fccfc0c0c0c0c0c4c0c0c0c0c000000d1d01036ac29b"
    "e90000000049454e44ae426082"
)


class Query(BaseModel):
    """What to look up."""

    word: str = Field(description="The word")
    language: str | None = Field(default=None, description="Its language, if known")


def build(name: str = "fake") -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two whole numbers."""
        return str(a + b)

    @server.tool()
    def fail(message: str) -> str:
        """Always fails, with this message."""
        raise ToolError(message)

    @server.tool()
    async def hang(seconds: float = 3600.0) -> str:
        """Take this long to answer."""
        await asyncio.sleep(seconds)
        return "woke up"

    @server.tool()
    def die() -> str:
        """The server process exits while answering."""
        os._exit(3)

    @server.tool()
    def env() -> str:
        """The environment this server runs with."""
        return json.dumps(
            {"names": sorted(os.environ), "greeting": os.environ.get("MCP_FAKE_GREETING")}
        )

    @server.tool()
    def token(ctx: Context) -> str:
        """The X-Token header of the request (Streamable HTTP)."""
        return (ctx.headers or {}).get("x-token", "(none)")

    @server.tool()
    def picture() -> Image:
        """A small red picture."""
        return Image(data=PNG, format="png")

    @server.tool()
    def long_text(chars: int) -> str:
        """This many characters of text."""
        return "x" * chars

    @server.tool()
    def lookup(query: Query, limit: int | None = None) -> str:
        """Look a word up."""
        return f"{query.word} ({query.language or 'any'}), limit {limit}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve on 127.0.0.1:PORT/mcp")
    parser.add_argument("--name", default="fake")
    parser.add_argument("--down-while", type=Path, default=None)
    args = parser.parse_args()
    if args.down_while is not None and args.down_while.exists():
        print("fake MCP server: down on purpose", file=sys.stderr)
        sys.exit(1)
    server = build(args.name)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
