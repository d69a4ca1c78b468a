"""Start-up against a Bot API that refuses the token or is not there: one line, no traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes import FakeTelegram
from tests.fakes.process import membot_env, spawn_membot


async def run_membot(tmp_path: Path, api_base: str, token: str) -> tuple[int, str]:
    env = membot_env(
        telegram_bot_token=token,
        telegram_api_base=api_base,
        openrouter_api_key="sk-test",
        data_dir=str(tmp_path / "data"),
    )
    process = await spawn_membot(
        tmp_path, env, "run", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, stderr.decode()


async def test_a_refused_token_names_the_variable_and_exits_2(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    code, stderr = await run_membot(tmp_path, tg.base_url, "999:NOT-THE-TOKEN")
    assert code == 2
    assert stderr.strip().splitlines() == [
        "membot: TELEGRAM_BOT_TOKEN is invalid: the Bot API refused it (401 Unauthorized)"
    ]
    assert tg.call_count("getUpdates") == 0


async def test_an_unreachable_bot_api_is_one_line(tmp_path: Path) -> None:
    # A port nothing listens on: bind one, note it, close it.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    code, stderr = await run_membot(tmp_path, f"http://127.0.0.1:{port}", "1:TOKEN")
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"membot: cannot reach the Telegram Bot API at http://127.0.0.1:{port}"
    )
    assert "TELEGRAM_API_BASE" in lines[0]
