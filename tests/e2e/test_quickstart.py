"""The README's quick start: `.env.example` copied as `.env` as shipped, only the two secrets
filled in, then `membot check-config` and `membot run` from that directory."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.conftest import API_KEY, TOKEN
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.process import membot_env, spawn_membot

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def shipped_env(directory: Path, **secrets: str) -> None:
    """`cp .env.example .env` in `directory`, then each secret written after its `NAME=`."""
    text = ENV_EXAMPLE.read_text()
    for name, value in secrets.items():
        line = f"\n{name}=\n"
        assert line in text, f".env.example no longer ships {name} empty"
        text = text.replace(line, f"\n{name}={value}\n")
    (directory / ".env").write_text(text)


async def membot(directory: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await spawn_membot(
        directory, env, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_the_shipped_env_file_with_its_secrets_passes_check_config(tmp_path: Path) -> None:
    shipped_env(tmp_path, TELEGRAM_BOT_TOKEN=TOKEN, OPENROUTER_API_KEY=API_KEY)
    code, stdout, stderr = await membot(tmp_path, membot_env(), "check-config")
    assert (code, stderr) == (0, "")
    assert stdout.splitlines()[-1] == "configuration OK"
    assert "API_PORT=(not set)" in stdout.splitlines()


async def test_the_shipped_env_file_without_its_secrets_names_both(tmp_path: Path) -> None:
    shipped_env(tmp_path)
    for command in ("check-config", "run"):
        code, stdout, stderr = await membot(tmp_path, membot_env(), command)
        assert (code, stdout) == (2, "")
        assert stderr == (
            "membot: configuration error: "
            "TELEGRAM_BOT_TOKEN and OPENROUTER_API_KEY are required but not set\n"
        )


async def test_the_shipped_env_file_with_one_secret_names_the_other(tmp_path: Path) -> None:
    shipped_env(tmp_path, TELEGRAM_BOT_TOKEN=TOKEN)
    code, _, stderr = await membot(tmp_path, membot_env(), "check-config")
    assert code == 2
    assert stderr == "membot: configuration error: OPENROUTER_API_KEY is required but not set\n"


async def test_the_shipped_env_file_with_its_secrets_runs_the_bot(
    tg: FakeTelegram, llm: FakeLLM, tmp_path: Path
) -> None:
    shipped_env(tmp_path, TELEGRAM_BOT_TOKEN=TOKEN, OPENROUTER_API_KEY=API_KEY)
    # The real services' addresses, in the environment (which wins over .env), are the fakes.
    env = membot_env(telegram_api_base=tg.base_url, openrouter_base_url=llm.base_url)
    tg.push_text(5001, "hello from the quick start")
    stderr_path = tmp_path / "membot.stderr"
    with open(stderr_path, "wb") as stderr:
        process = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        answered = asyncio.ensure_future(tg.wait_for_messages(5001, 1, timeout=60))
        exited = asyncio.ensure_future(process.wait())
        await asyncio.wait({answered, exited}, return_when=asyncio.FIRST_COMPLETED)
        if not answered.done():
            answered.cancel()
            raise AssertionError(f"membot exited {process.returncode}:\n{stderr_path.read_text()}")
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await exited
        [answer] = answered.result()
    assert answer.text == "ANSWER: hello from the quick start"
    assert process.returncode == 0, stderr_path.read_text()
    assert "Traceback" not in stderr_path.read_text()
    # DATA_DIR=data, as shipped: relative to the directory it was started from.
    assert (tmp_path / "data" / "5001" / "messages.txt").exists()
