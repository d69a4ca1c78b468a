"""A restart mid-stream, with real processes: `python -m membot run` is killed with
kill -9 while the draft of an answer is on screen; nothing of that answer (nor its question)
is on disk, and the restarted bot answers the update once, whole, and stores it once.

The draft is a preview: the answer is stored before it is sent, so a kill before the end of
the stream leaves nothing half-stored, and the update, kept in the journal (DATA_DIR/inbox.jsonl)
before Telegram was told it arrived, is answered by the next run."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import bot_env
from tests.e2e.helpers import HELP_TEXT, roles_and_texts
from tests.e2e.test_drafts import ANSWER, WRITING
from tests.fakes import FakeLLM, FakeTelegram, Pacing, Reply
from tests.fakes.process import spawn_membot

CHAT = 1901
QUESTION = "plan my week"
# The first run's answer is written slowly: about 16 s for the whole, the first piece after
# 0.2 s; the kill lands after the first draft, long before the end.
SLOW = Pacing(chars=8, first_delay=0.2, delay=0.15)
# Seconds a process gets to start and show what is waited for: importing alone takes 3-7 s
# on an idle machine, several times that on a loaded 2-core one.
WITHIN = 120


async def test_a_kill_mid_stream_stores_nothing_and_the_restart_answers_once(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    env = bot_env(tg, llm, data_dir)
    llm.script(Reply(content=ANSWER, pacing=SLOW), Reply(content=ANSWER, pacing=WRITING))
    stderr_path = tmp_path / "membot.stderr"
    with open(stderr_path, "wb") as stderr:
        first = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        try:
            tg.push_text(CHAT, QUESTION)
            await tg.wait_until(lambda: bool(tg.drafts_to(CHAT)), WITHIN, what="the first draft")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbot stderr:\n{stderr_path.read_text()}") from None
        finally:
            first.kill()
            await first.wait()
    assert first.returncode == -signal.SIGKILL
    # The model noticed its reader die: the stream was cut short, not written to the end.
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the stream's client gone")
    shown = tg.drafts_to(CHAT)
    assert shown and len(shown[-1].text) < len(ANSWER) // 2
    # Nothing of the answer anywhere in the chat's files, nor half a turn; nothing sent.
    assert tg.messages_to(CHAT) == []
    assert roles_and_texts(data_dir, CHAT) == []
    chat_dir = data_dir / str(CHAT)
    files = [p for p in chat_dir.rglob("*") if p.is_file()] if chat_dir.exists() else []
    assert not any(b"step0" in p.read_bytes() for p in files), files
    # Telegram was told the update arrived: it will not send it again; the journal has it.
    assert tg.pending_updates() == 0

    with open(stderr_path, "ab") as stderr:
        second = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        try:
            # A chat's updates go in order, a replayed one first: once /help is answered,
            # the question from before the kill has been dealt with.
            tg.push_text(CHAT, "/help")
            await tg.wait_until(
                lambda: HELP_TEXT in [m.text for m in tg.messages_to(CHAT)],
                WITHIN,
                what="the /help answer after the restart",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbot stderr:\n{stderr_path.read_text()}") from None
        finally:
            second.send_signal(signal.SIGTERM)
            await second.wait()
    assert second.returncode == 0, stderr_path.read_text()
    # Answered once, whole, after the restart, in the draft first; stored once.
    [answer, help_text] = [m.text for m in tg.messages_to(CHAT)]
    assert help_text == HELP_TEXT
    assert answer.startswith("Plan: step0") and answer.endswith("step129.")
    assert len(llm.chat_requests) == 2 and llm.streams == 2
    assert len({d.draft_id for d in tg.drafts_to(CHAT)}) == 2
    assert roles_and_texts(data_dir, CHAT) == [("user", QUESTION), ("assistant", ANSWER)]
    assert "Traceback" not in stderr_path.read_text()
