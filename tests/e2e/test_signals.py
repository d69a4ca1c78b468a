"""Ctrl-C with an answer in flight, on real processes: a stop, however hurried, never loses
more than `kill -9` does.

One Ctrl-C (or SIGTERM) lets the answers in progress finish; duplicates arriving together (a
terminal's process group, a wrapper forwarding the same Ctrl-C) are that one stop; a later
second one cuts the answers in progress short and leaves their updates in the journal
(QUEUE=local) or on the stream (QUEUE=redis), answered once after the restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from tests.api_support import API_TOKEN, ApiClient, free_port
from tests.conftest import API_KEY, TOKEN, bot_env
from tests.e2e.helpers import HELP_TEXT, roles_and_texts
from tests.e2e.test_drafts import ANSWER, WRITING
from tests.fakes import FakeLLM, FakeTelegram, Pacing, Reply
from tests.fakes.process import membot_env

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/0"
CHAT = 2401
QUESTION = "plan my week"
# Written in about 3 s: in flight when the Ctrl-C lands, finished well within the grace.
STEADY = Pacing(chars=8, first_delay=0.2, delay=0.025)
# Written in about 100 s: only a second Ctrl-C ends the process before it is done.
ENDLESS = Pacing(chars=8, first_delay=0.2, delay=0.75)
# Longer apart than duplicates of one Ctrl-C (signals.DUPLICATES): the operator pressed again.
SECOND_PRESS = 1.5


async def spawn(
    cwd: Path, env: dict[str, str], log: Path, *argv: str
) -> asyncio.subprocess.Process:
    """A process in a session (and so a process group) of its own, as a terminal starts one."""
    with open(log, "ab") as out:
        return await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True
        )


def ctrl_c(process: asyncio.subprocess.Process) -> None:
    """What a terminal does on Ctrl-C: SIGINT to every process of the foreground group."""
    os.killpg(process.pid, signal.SIGINT)


async def ended(process: asyncio.subprocess.Process, log: Path, timeout: float) -> int:
    try:
        async with asyncio.timeout(timeout):
            return await process.wait()
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise AssertionError(f"still running after {timeout} s:\n{log.read_text()}") from None


async def in_flight(tg: FakeTelegram, log: Path) -> None:
    """The answer is being written: its first draft is on screen."""
    try:
        await tg.wait_until(lambda: bool(tg.drafts_to(CHAT)), 60, what="the first draft")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nbot output:\n{log.read_text()}") from None


async def restart_and_help(cwd: Path, env: dict[str, str], tg: FakeTelegram, log: Path) -> None:
    """A new `membot run`: a chat's updates go in order, a replayed one first, so once /help
    is answered the question from before the stop has been dealt with. Then stopped."""
    process = await spawn(cwd, env, log, sys.executable, "-m", "membot", "run")
    try:
        tg.push_text(CHAT, "/help")
        await tg.wait_until(
            lambda: HELP_TEXT in [m.text for m in tg.messages_to(CHAT)],
            60,
            what=f"the /help answer after the restart; output:\n{log.read_text()}",
        )
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        await ended(process, log, 60)
    assert process.returncode == 0, log.read_text()


def answered_once(tg: FakeTelegram, llm: FakeLLM, data_dir: Path, *, asked: int) -> None:
    [answer, help_text] = [m.text for m in tg.messages_to(CHAT)]
    assert help_text == HELP_TEXT
    assert answer.startswith("Plan: step0") and answer.endswith("step129."), answer
    assert len(llm.chat_requests) == asked
    assert roles_and_texts(data_dir, CHAT) == [("user", QUESTION), ("assistant", ANSWER)]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.skipif((ROOT / ".env").exists(), reason="make run would read the checkout's .env")
async def test_ctrl_c_on_make_run_finishes_the_answer_in_flight(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    env = bot_env(tg, llm, data_dir, log_level="INFO")
    log = tmp_path / "make-run.log"
    llm.script(Reply(content=ANSWER, pacing=STEADY))
    make = await spawn(ROOT, env, log, "make", "--no-print-directory", "run")
    try:
        tg.push_text(CHAT, QUESTION)
        await in_flight(tg, log)
        ctrl_c(make)  # pressed twice, quickly: one stop
        ctrl_c(make)
        await ended(make, log, 60)
    finally:
        if make.returncode is None:
            os.killpg(make.pid, signal.SIGKILL)
            await make.wait()
    output = log.read_text()
    assert "membot run stopped" in output, output
    assert "Traceback" not in output, output
    # Answered before the process ended, in the one stop the two presses were.
    assert [m.text for m in tg.messages_to(CHAT)] == [ANSWER.replace("**", "")]

    await restart_and_help(tmp_path, env, tg, log)
    answered_once(tg, llm, data_dir, asked=1)


async def test_a_second_ctrl_c_leaves_the_answer_in_flight_to_the_restart(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    env = bot_env(tg, llm, data_dir, log_level="INFO")
    log = tmp_path / "membot.log"
    llm.script(Reply(content=ANSWER, pacing=ENDLESS), Reply(content=ANSWER, pacing=WRITING))
    bot = await spawn(tmp_path, env, log, sys.executable, "-m", "membot", "run")
    try:
        tg.push_text(CHAT, QUESTION)
        await in_flight(tg, log)
        ctrl_c(bot)
        await asyncio.sleep(SECOND_PRESS)  # the scenario: pressed again a moment later
        ctrl_c(bot)
        await ended(bot, log, 20)  # not the 100 s the answer would take
    finally:
        if bot.returncode is None:
            os.killpg(bot.pid, signal.SIGKILL)
            await bot.wait()
    output = log.read_text()
    assert bot.returncode == 0, output
    assert "Traceback" not in output, output
    # Nothing of it sent or stored; Telegram counts it delivered: the journal has it.
    assert tg.messages_to(CHAT) == []
    assert roles_and_texts(data_dir, CHAT) == []
    assert tg.pending_updates() == 0

    await restart_and_help(tmp_path, env, tg, log)
    answered_once(tg, llm, data_dir, asked=2)
    # The operator was told what was left.
    assert "1 update(s) cut short by the second signal, left pending" in output, output


async def test_a_second_ctrl_c_leaves_the_update_on_the_stream(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path, redis_repo: RedisRepository
) -> None:
    env = bot_env(
        tg,
        llm,
        data_dir,
        log_level="INFO",
        queue="redis",
        storage="redis",
        redis_url=REDIS_URL,
        redis_prefix=redis_repo.prefix,
        claim_idle="1",
    )
    log = tmp_path / "membot.log"
    llm.script(Reply(content=ANSWER, pacing=ENDLESS), Reply(content=ANSWER, pacing=WRITING))
    bot = await spawn(tmp_path, env, log, sys.executable, "-m", "membot", "run")
    try:
        tg.push_text(CHAT, QUESTION)
        await in_flight(tg, log)
        ctrl_c(bot)
        await asyncio.sleep(SECOND_PRESS)
        ctrl_c(bot)
        await ended(bot, log, 20)
    finally:
        if bot.returncode is None:
            os.killpg(bot.pid, signal.SIGKILL)
            await bot.wait()
    output = log.read_text()
    assert bot.returncode == 0, output
    assert "Traceback" not in output, output
    assert tg.messages_to(CHAT) == []

    await restart_and_help(tmp_path, env, tg, log)
    [answer, help_text] = [m.text for m in tg.messages_to(CHAT)]
    assert help_text == HELP_TEXT
    assert answer.startswith("Plan: step0") and answer.endswith("step129."), answer
    assert len(llm.chat_requests) == 2
    messages = redis_repo.iter_messages(ConversationId.telegram(CHAT))
    stored = [(m.role, m.content) async for m in messages]
    assert stored == [("user", QUESTION), ("assistant", ANSWER)]
    assert "1 update(s) cut short by the second signal, left pending" in output, output


async def test_a_second_signal_ends_membot_api_with_a_request_in_flight(
    llm: FakeLLM, tmp_path: Path, data_dir: Path
) -> None:
    """The first SIGTERM lets the request finish, however long (up to the grace); a second one
    cuts it short: the process ends cleanly at once, its client is told nothing was
    answered, and nothing of the round is stored (the client may send it again)."""
    port = free_port()
    env = membot_env(
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        data_dir=str(data_dir),
        api_port=str(port),
        api_tokens=API_TOKEN,
        log_level="INFO",
    )
    llm.script(Reply(content="never", hang=True))
    log = tmp_path / "api.log"
    api = await spawn(tmp_path, env, log, sys.executable, "-m", "membot", "api")
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        async with asyncio.timeout(60):
            while "HTTP API listening" not in log.read_text():
                assert api.returncode is None, log.read_text()
                await asyncio.sleep(0.1)  # polling the log for a condition, with a deadline
        asking = asyncio.create_task(client.chat({"message": "plan my week"}))
        await llm.wait_until(lambda: len(llm.chat_requests) == 1, what="the model asked")
        api.send_signal(signal.SIGTERM)
        await asyncio.sleep(SECOND_PRESS)
        assert api.returncode is None and not asking.done()  # the first waits for it
        api.send_signal(signal.SIGTERM)
        await ended(api, log, 20)
        with contextlib.suppress(aiohttp.ClientError):
            answer = await asking
            assert answer.status >= 500, answer
    finally:
        await client.close()
        if api.returncode is None:
            os.killpg(api.pid, signal.SIGKILL)
            await api.wait()
    output = log.read_text()
    assert api.returncode == 0, output
    assert "membot api stopped" in output and "Traceback" not in output, output
    assert not (data_dir / "api").exists() or not any((data_dir / "api").rglob("messages.txt"))


async def test_ctrl_c_during_a_start_up_that_hangs_ends_it(
    llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """A Bot API that takes the connection and never answers: the start-up waits on it, and
    one Ctrl-C ends the process there, cleanly."""
    reached = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        reached.set()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = membot_env(
        telegram_bot_token=TOKEN,
        telegram_api_base=f"http://127.0.0.1:{port}",
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        data_dir=str(data_dir),
        log_level="INFO",
    )
    log = tmp_path / "membot.log"
    bot = await spawn(tmp_path, env, log, sys.executable, "-m", "membot", "run")
    try:
        await asyncio.wait_for(reached.wait(), 60)
        ctrl_c(bot)
        await ended(bot, log, 20)
    finally:
        if bot.returncode is None:
            os.killpg(bot.pid, signal.SIGKILL)
            await bot.wait()
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    output = log.read_text()
    assert bot.returncode == 0, output
    assert "start-up cut short" in output and "Traceback" not in output, output
