"""MCP_CONFIG: the MCP servers whose tools membot offers, read from a JSON file in the format
other MCP clients use:

    {"mcpServers": {
        "notes": {"command": "uvx", "args": ["notes-mcp"], "env": {"NOTES_DIR": "/srv/notes"}},
        "wiki": {"url": "https://wiki.example.com/mcp", "headers": {"Authorization": "Bearer …"}}
    }}

An entry with `command` is run as a child process (stdio), one with `url` is reached over
Streamable HTTP. Every problem is a ValueError whose one line names the file and the entry;
the file's values (tokens in headers, the env) are never part of it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A server's name starts its tools' names (`<server>_<tool>`), which providers hold to
# ^[a-zA-Z0-9_-]{1,64}$: the name leaves room for the tool's.
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,29}")
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "type", "disabled"})
_HTTP_KEYS = frozenset({"url", "headers", "type", "disabled"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})


@dataclass(frozen=True, slots=True)
class McpServerEntry:
    """One server of MCP_CONFIG: a command to run (stdio) or a URL (Streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    # Only these (and the SDK's safe defaults: PATH, HOME, ...) reach a child: never ours.
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # `"disabled": true`: named (MCP_PUBLIC may name it) but not started.
    disabled: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


def read_mcp_config(path: Path) -> tuple[McpServerEntry, ...]:
    """The servers the file names, in its order. Raises ValueError: "MCP_CONFIG is invalid:
    <path>: <what>"."""

    def bad(problem: str) -> ValueError:
        return ValueError(f"MCP_CONFIG is invalid: {path}: {problem}")

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError:
        raise bad("is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad(f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise bad('needs an object "mcpServers" of servers by name')
    entries = []
    for name, raw in servers.items():
        try:
            entries.append(_entry(name, raw))
        except ValueError as exc:
            raise bad(f"server {name!r}: {exc}") from None
    return tuple(entries)


def _entry(name: str, raw: Any) -> McpServerEntry:
    if not SERVER_NAME.fullmatch(name):
        raise ValueError("a name is 1-30 letters, digits, _ or -, starting with a letter or digit")
    if not isinstance(raw, dict):
        raise ValueError("must be an object with a command or a url")
    disabled = raw.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ValueError('"disabled" must be true or false')
    has_command, has_url = "command" in raw, "url" in raw
    if has_command == has_url:
        raise ValueError('needs either "command" (stdio) or "url" (Streamable HTTP), not both')
    kind = raw.get("type")
    if has_command:
        _only(raw, _STDIO_KEYS)
        if kind not in (None, "stdio"):
            raise ValueError(f'"type" {kind!r} does not go with "command" (stdio)')
        command = raw["command"]
        if not isinstance(command, str) or not command.strip():
            raise ValueError('"command" must be a non-empty string')
        args = raw.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError('"args" must be a list of strings')
        cwd = raw.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise ValueError('"cwd" must be a directory path')
        return McpServerEntry(
            name,
            command=command,
            args=tuple(args),
            env=_strings(raw, "env"),
            cwd=cwd,
            disabled=disabled,
        )
    _only(raw, _HTTP_KEYS)
    if kind is not None and kind not in _HTTP_TYPES:
        hint = " (SSE is not supported: give the server's Streamable HTTP endpoint)"
        raise ValueError(f'"type" {kind!r} is not Streamable HTTP{hint if kind == "sse" else ""}')
    url = raw["url"]
    if not isinstance(url, str) or not re.match(r"https?://[^\s/]+", url):
        raise ValueError('"url" must be an http:// or https:// URL')
    return McpServerEntry(name, url=url, headers=_strings(raw, "headers"), disabled=disabled)


def _only(raw: dict[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)}; an entry may have {', '.join(sorted(known))}"
        )


def _strings(raw: dict[str, Any], key: str) -> dict[str, str]:
    value = raw.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f'"{key}" must be an object of strings')
    return dict(value)


def check_public(public: tuple[str, ...], servers: tuple[McpServerEntry, ...]) -> None:
    """MCP_PUBLIC names only servers of MCP_CONFIG (a typo must not open or close one)."""
    names = [s.name for s in servers]
    unknown = [p for p in public if p not in names]
    if unknown:
        known = ", ".join(names) or "none"
        raise ValueError(
            f"MCP_PUBLIC is invalid: {', '.join(unknown)} not in MCP_CONFIG (its servers: {known})"
        )
