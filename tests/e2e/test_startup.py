"""Start-up that cannot go on (a Bot API that refuses the token or is not there, a port
taken, Redis unreachable): one line on stderr, no traceback, every role, `membot api` too."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.api_support import API_TOKEN, ApiClient, free_port
from tests.conftest import TOKEN
from tests.fakes import FakeTelegram
from tests.fakes.process import membot_env, spawn_membot

PIPE = asyncio.subprocess.PIPE
# Seconds a process gets to start and end: importing alone takes 3-7 s on an idle machine,
# several times that on a loaded 2-core one running the suite's other processes.
EXITS_WITHIN = 120


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
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=EXITS_WITHIN)
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


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def closed_redis_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


async def test_membot_api_with_its_port_taken_is_one_line_and_never_imports_aiogram(
    tmp_path: Path,
) -> None:
    env = membot_env(openrouter_api_key="sk-test", data_dir=str(tmp_path / "data"))
    with taken_port() as port:
        env.update(API_PORT=str(port), API_TOKENS=API_TOKEN)
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-X", "importtime", "-m", "membot", "api"),
            cwd=tmp_path,
            env=env,
            stdout=PIPE,
            stderr=PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=EXITS_WITHIN)
    lines = stderr.decode().splitlines()
    imported = [line for line in lines if line.startswith("import time:")]
    said = [line for line in lines if not line.startswith("import time:")]
    assert process.returncode == 1
    assert len(said) == 1 and said[0].startswith("membot: "), said
    assert f"'127.0.0.1', {port}" in said[0] and "address already in use" in said[0]
    # Python's own record of what the process imported: the HTTP API alone needs no aiogram
    # (seconds of start-up: docs/benchmarks.md, Start-up).
    assert any(" membot.api.server" in line for line in imported)
    assert not [line for line in imported if "aiogram" in line]


async def test_membot_run_with_the_api_port_taken_is_one_line(
    tg: FakeTelegram, tmp_path: Path
) -> None:
    with taken_port() as port:
        env = membot_env(
            telegram_bot_token=TOKEN,
            telegram_api_base=tg.base_url,
            openrouter_api_key="sk-test",
            data_dir=str(tmp_path / "data"),
            api_port=str(port),
            api_tokens=API_TOKEN,
        )
        process = await spawn_membot(tmp_path, env, "run", stdout=PIPE, stderr=PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=EXITS_WITHIN)
    output = stderr.decode()
    assert process.returncode == 1
    assert "Traceback" not in output, output
    # After what it logged while starting, the one line that says why it ended.
    last = output.strip().splitlines()[-1]
    assert last.startswith("membot: ") and "address already in use" in last, output


async def test_a_worker_without_redis_is_one_line(tmp_path: Path) -> None:
    env = membot_env(
        telegram_bot_token="1:TOKEN",
        openrouter_api_key="sk-test",
        data_dir=str(tmp_path / "data"),
        queue="redis",
        storage="redis",
        redis_url=closed_redis_url(),
    )
    process = await spawn_membot(tmp_path, env, "worker", stdout=PIPE, stderr=PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=EXITS_WITHIN)
    output = stderr.decode()
    assert process.returncode == 1
    assert "Traceback" not in output, output
    # After the WARNING logged while it tried, the one line that says why it ended.
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith("membot: cannot reach Redis at start-up (REDIS_URL): ")
    ), output


async def test_membot_api_without_redis_serves_and_answers_503(tmp_path: Path) -> None:
    """`membot api` takes nothing from the stream: with QUEUE=redis and Redis down it starts
    (its storage check only warns), answers that the storage is unavailable, stops cleanly."""
    port = free_port()
    env = membot_env(
        openrouter_api_key="sk-test",
        data_dir=str(tmp_path / "data"),
        queue="redis",
        storage="redis",
        redis_url=closed_redis_url(),
        api_port=str(port),
        api_tokens=API_TOKEN,
        log_level="INFO",
    )
    process = await spawn_membot(tmp_path, env, "api", stdout=PIPE, stderr=PIPE)
    assert process.stderr is not None
    seen: list[str] = []
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        async with asyncio.timeout(60):
            while "membot api started" not in (line := (await process.stderr.readline()).decode()):
                assert line, f"membot api exited: {''.join(seen)}"
                seen.append(line)
        answer = await client.chat({"message": "hello"})
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            rest = (await process.stderr.read()).decode()
            assert await process.wait() == 0, rest
    finally:
        await client.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert (answer.status, answer.body["code"]) == (503, "SERVICE_UNAVAILABLE")
    assert "membot api stopped" in rest and "Traceback" not in "".join(seen) + rest
