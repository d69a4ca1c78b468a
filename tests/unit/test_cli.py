"""The command line as an operator's shell meets it: `membot --version`, and output piped
into a reader that stops early (`membot usage --json | head`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import pytest

from membot.config import env_names
from membot.ids import ConversationId
from membot.memory import FileRepository, Message

SECRETS = {
    "TELEGRAM_BOT_TOKEN": "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef",
    "OPENROUTER_API_KEY": "sk-or-v1-0123456789abcdef0123456789abcdef",
}


def membot(
    cwd: Path, *args: str, stdout: int, buffered: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """`python -m membot ARGS` from `cwd`, with no setting from this process's environment
    but the two secrets and DATA_DIR there; `buffered`: stdout as an operator's shell gives
    it (a pipe is block-buffered), else written at once (PYTHONUNBUFFERED)."""
    names = set(env_names())
    env = {k: v for k, v in os.environ.items() if k.upper() not in names}
    env.update(SECRETS, DATA_DIR=str(cwd / "data"))
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "membot", *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=60,
    )


def test_version_is_the_installed_packages(tmp_path: Path) -> None:
    result = membot(tmp_path, "--version", stdout=subprocess.PIPE)
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode() == f"membot {version('membot')}\n"


def store_a_chat(data: Path) -> None:
    async def write() -> None:
        repo = FileRepository(data)
        when = datetime(2025, 3, 1, 14, 2, tzinfo=UTC)
        message = Message(role="user", content="My sister lives in Kazan", ts=when)
        await repo.append(ConversationId.telegram(42), [message])
        await repo.close()

    asyncio.run(write())


@pytest.mark.parametrize(
    "args",
    [
        ("usage",),
        ("usage", "--json"),
        ("search", "42", "Kazan"),
        ("search", "42", "Kazan", "--json"),
        ("check-config",),
        ("--version",),
        ("--help",),
    ],
)
@pytest.mark.parametrize("buffered", [True, False])
def test_a_reader_that_stops_early_ends_the_output_quietly(
    tmp_path: Path, args: tuple[str, ...], buffered: bool
) -> None:
    store_a_chat(tmp_path / "data")
    read_end, write_end = os.pipe()
    # The reader has gone before membot writes, as `| head` that has read enough: every
    # write to the pipe fails (EPIPE).
    os.close(read_end)
    try:
        result = membot(tmp_path, *args, stdout=write_end, buffered=buffered)
    finally:
        os.close(write_end)
    # Nothing on stderr (no traceback, no "Exception ignored"), and an exit status that says
    # the output was not all written, as Python's docs advise for SIGPIPE. (argparse's own
    # --help ignores a failed write itself and exits 0 when nothing was buffered.)
    assert result.stderr.decode() == ""
    assert result.returncode == (0 if args == ("--help",) and not buffered else 1)
