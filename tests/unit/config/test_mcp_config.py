"""MCP_CONFIG and MCP_PUBLIC: the servers' file read with the settings, every problem one line
naming the file and the entry (exit status 2, no traceback), and nothing of its secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membot.config import ConfigError, McpServerEntry, load_settings, masked
from tests.unit.config.test_settings import BASE_ENV, BASE_ENV_FIELDS, run_membot


def config(tmp_path: Path, servers: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}) if servers is not None else "{}")
    return path


def load(**values: Any) -> Any:
    return load_settings(_env_file=None, **BASE_ENV_FIELDS, **values)


def test_both_kinds_of_entries_are_read(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        {
            "notes": {"command": "uvx", "args": ["notes-mcp"], "env": {"NOTES_DIR": "/srv"}},
            "wiki": {"url": "https://wiki.example.com/mcp", "headers": {"X-Key": "k-123"}},
            "old": {"command": "x", "disabled": True, "type": "stdio"},
        },
    )
    settings = load(mcp_config=path, mcp_public="wiki,old", mcp_tool_timeout=5)
    mcp = settings.mcp
    assert mcp.servers == (
        McpServerEntry("notes", command="uvx", args=("notes-mcp",), env={"NOTES_DIR": "/srv"}),
        McpServerEntry("wiki", url="https://wiki.example.com/mcp", headers={"X-Key": "k-123"}),
        McpServerEntry("old", command="x", disabled=True),
    )
    assert mcp.public == {"wiki", "old"} and mcp.tool_timeout == 5
    shown = masked(settings)
    assert shown["MCP_CONFIG"] == str(path) and shown["MCP_PUBLIC"] == "wiki,old"
    assert "k-123" not in json.dumps(shown)


def test_no_file_no_servers() -> None:
    settings = load()
    assert settings.mcp.servers == () and settings.mcp.tool_timeout == 60


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ({"my notes": {"command": "x"}}, "server 'my notes': a name is 1-30 letters"),
        ({"x" * 31: {"command": "x"}}, "a name is 1-30 letters"),
        ({"a": {"command": "x", "url": "http://h/mcp"}}, 'needs either "command"'),
        ({"a": {}}, 'needs either "command"'),
        ({"a": "uvx notes"}, "must be an object"),
        ({"a": {"command": ""}}, '"command" must be a non-empty string'),
        ({"a": {"command": "x", "args": "--dir /srv"}}, '"args" must be a list of strings'),
        ({"a": {"command": "x", "env": {"N": 1}}}, '"env" must be an object of strings'),
        ({"a": {"command": "x", "envs": {}}}, "unknown key(s) envs"),
        ({"a": {"url": "ftp://h/mcp"}}, '"url" must be an http:// or https:// URL'),
        ({"a": {"url": "https://h/sse", "type": "sse"}}, "SSE is not supported"),
        ({"a": {"command": "x", "type": "http"}}, 'does not go with "command"'),
        ({"a": {"command": "x", "disabled": "yes"}}, '"disabled" must be true or false'),
        (None, 'needs an object "mcpServers"'),
    ],
)
def test_a_bad_entry_names_the_file_and_the_entry(tmp_path: Path, servers: Any, words: str) -> None:
    path = config(tmp_path, servers)
    with pytest.raises(ConfigError) as caught:
        load(mcp_config=path)
    message = str(caught.value)
    assert message.startswith(f"configuration error: MCP_CONFIG is invalid: {path}: ")
    assert words in message and "\n" not in message


def test_a_file_that_does_not_read_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"MCP_CONFIG is invalid: .*missing\.json: cannot be"):
        load(mcp_config=tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"a": {"command": "x",}}}')
    with pytest.raises(ConfigError, match=r"is not JSON \(.* at line 1 column"):
        load(mcp_config=broken)


def test_mcp_public_names_only_servers_of_the_file(tmp_path: Path) -> None:
    path = config(tmp_path, {"notes": {"command": "x"}})
    with pytest.raises(ConfigError, match=r"MCP_PUBLIC is invalid: wiki not in MCP_CONFIG"):
        load(mcp_config=path, mcp_public="notes,wiki")
    with pytest.raises(ConfigError, match=r"MCP_PUBLIC is invalid: notes not in MCP_CONFIG"):
        load(mcp_public="notes")


def test_membot_stops_with_exit_status_2_and_one_line(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"wiki": {"url": "https://w/mcp",'
        ' "headers": {"Authorization": "Bearer s3cret"}, "x": 1}}}'
    )
    result = run_membot(tmp_path, {**BASE_ENV, "MCP_CONFIG": "mcp.json"}, "run")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "membot: configuration error: MCP_CONFIG is invalid: mcp.json: server 'wiki': "
        "unknown key(s) x; an entry may have disabled, headers, type, url"
    ]
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr
