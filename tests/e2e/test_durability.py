"""Durability: a damaged archive at start-up, a kill -9 under load, and bad configuration.

The kill -9 test runs the bot as a real process (`python -m membot run`) against the fakes
and SIGKILLs it while answers are being sent. What FileRepository guarantees, and what is
asserted: a turn (question + answer) is written with one write() and fdatasync'd *before*
the answer is sent, so every answer a user received is on disk after its question, and every
newline-terminated line is whole JSON. Only the final line may be unterminated: SIGKILL can
stop a write() between pages, which the repository documents ("at worst one torn last line")
and repairs on the next append.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.bot.app import COMMANDS
from membot.intake.journal import Journal
from membot.memory import FileRepository
from tests.conftest import API_KEY, TOKEN, StartBot
from tests.e2e.helpers import HELP_TEXT, meta, prompt_texts, roles_and_texts
from tests.e2e.test_conversation import say
from tests.fakes import FakeLLM, FakeTelegram, without_now
from tests.fakes.process import membot_env, spawn_membot

CHAT = 1001


def line(seq: int, role: str, content: str, **extra: Any) -> bytes:
    record = {"seq": seq, "ts": f"2026-01-01T00:00:{seq:02d}.000Z", "role": role}
    record.update(content=content, **extra)
    return json.dumps(record).encode() + b"\n"


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """Every newline-terminated line parsed (a bad one fails the test), and the unterminated
    rest (b"" when the file ends with a newline)."""
    *complete, rest = path.read_bytes().split(b"\n")
    return [json.loads(raw) for raw in complete], rest


def readable(path: Path) -> list[dict[str, Any]]:
    """The lines a reader can use, skipping damaged ones."""
    out = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


async def test_a_torn_tool_exchange_does_not_block_the_chat(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # A kill -9 tore a tool turn's write after the call: its result never reached the disk.
    # The fake, like OpenAI, refuses a call without its result with 400 on every later turn.
    call = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
    chat_dir = data_dir / str(CHAT)
    chat_dir.mkdir(parents=True)
    (chat_dir / "messages.txt").write_bytes(
        line(1, "user", "what is 6*7?", user_id=CHAT, name="Alice")
        + line(2, "assistant", "Let me calculate.", tool_calls=[call])
        + line(3, "tool", "42", tool_call_id="call_1", name="calc")[:30]
    )
    await start_bot()
    assert await say(tg, CHAT, "are you there?") == "ANSWER: are you there?"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "what is 6*7?"),
        ("assistant", "Let me calculate."),
        ("user", "are you there?"),
    ]


async def test_damaged_archive_at_startup_is_read_around_and_repaired(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat_dir = data_dir / str(CHAT)
    chat_dir.mkdir(parents=True)
    path = chat_dir / "messages.txt"
    path.write_bytes(
        line(1, "user", "my cat is called Tom", user_id=CHAT, name="Alice")
        + line(2, "assistant", "Nice name!")
        + b"\x00\x00\x00\x00 garbage left by a bad disk \xff\n"  # corrupt middle line
        + line(3, "user", "and my dog is Rex", user_id=CHAT, name="Alice")
        + line(4, "assistant", "Noted.")
        + line(5, "user", "I also have a parr")[:40]  # torn last line, no newline
    )
    with caplog.at_level(logging.WARNING):
        await start_bot()
        assert await say(tg, CHAT, "what pets do I have?") == "ANSWER: what pets do I have?"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "my cat is called Tom"),
        ("assistant", "Nice name!"),
        ("user", "and my dog is Rex"),
        ("assistant", "Noted."),
        ("user", "what pets do I have?"),
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("torn" in w and "messages.txt" in w for w in warnings), warnings
    assert any("corrupt" in w and "messages.txt" in w for w in warnings), warnings

    # The new exchange starts on a fresh line, numbered after the last good message.
    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    new = [json.loads(raw) for raw in raw_lines[-3:-1]]
    assert [(m["seq"], m["role"], m["content"]) for m in new] == [
        (5, "user", "what pets do I have?"),
        (6, "assistant", "ANSWER: what pets do I have?"),
    ]
    # ...and is read back on the next turn.
    await say(tg, CHAT, "and their names?")
    assert prompt_texts(llm.chat_requests[-1])[-3:] == [
        ("user", "what pets do I have?"),
        ("assistant", "ANSWER: what pets do I have?"),
        ("user", "and their names?"),
    ]
    assert meta(data_dir, CHAT)["messages_total"] == 8


def text_update(update_id: int, chat: int, message_id: int, text: str) -> dict[str, Any]:
    """A private text message as Telegram sends it (and as the journal keeps it)."""
    user = {"id": chat, "is_bot": False, "first_name": "Alice"}
    message = {
        "message_id": message_id,
        "date": 1_767_225_600,
        "chat": {"id": chat, "type": "private", "first_name": "Alice"},
        "from": user,
        "text": text,
    }
    if text.startswith("/"):
        command = text.split()[0]
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
    return {"update_id": update_id, "message": message}


def write_inbox(data_dir: Path, *updates: dict[str, Any]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "inbox.jsonl").write_text("".join(json.dumps(u) + "\n" for u in updates))


async def help_answered(tg: FakeTelegram, chat: int) -> list[str]:
    """Send /help and wait for its answer; the chat's texts so far. Replayed updates go
    first, so everything replayed for the chat is done by then."""
    tg.push_text(chat, "/help")
    await tg.wait_until(
        lambda: HELP_TEXT in [m.text for m in tg.messages_to(chat)], what="the /help answer"
    )
    return [m.text for m in tg.messages_to(chat)]


async def test_a_message_received_before_a_crash_is_answered_once_after_it(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # The crashed run journaled it, and never confirmed it: Telegram sends it again too.
    update = text_update(500, CHAT, 77, "did you get this?")
    write_inbox(data_dir, update)
    tg.push_update(update)
    await start_bot()
    assert await help_answered(tg, CHAT) == ["ANSWER: did you get this?", HELP_TEXT]
    assert len(llm.chat_requests) == 1
    assert [t for _, t in roles_and_texts(data_dir, CHAT)] == [
        "did you get this?",
        "ANSWER: did you get this?",
    ]


async def test_handled_messages_do_not_stay_in_the_journal(
    tg: FakeTelegram, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, CHAT, "my secret is 1234")
    # The chat's updates run one after another: by the time /reset is answered, the message
    # before it has been marked done. Nothing is in flight, so the journal holds nothing that
    # a crash now could bring back after the reset.
    assert await say(tg, CHAT, "/reset") == texts.RESET_DONE
    assert (data_dir / "inbox.jsonl").read_text() == ""


async def test_a_reset_is_never_undone_by_a_replay_while_other_chats_are_busy(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    held = llm.gate = asyncio.Event()  # another chat's answer stays in flight meanwhile
    tg.push_text(CHAT + 1, "a slow question")
    await llm.wait_for_in_flight(1)
    llm.gate = None
    await say(tg, CHAT, "my secret is 1234")
    assert await say(tg, CHAT, "/reset") == texts.RESET_DONE
    # If the process died now, a restart must not bring the secret back into the wiped chat:
    # its done mark reached the disk before the reset ran. Only the slow question is due.
    replay = await Journal(data_dir, commands=COMMANDS).unanswered(FileRepository(data_dir))
    assert [r["message"]["text"] for r in replay] == ["a slow question"]
    held.set()
    await tg.wait_for_messages(CHAT + 1, 1)


async def test_answered_messages_and_commands_are_not_replayed(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat_dir = data_dir / str(CHAT)
    chat_dir.mkdir(parents=True)
    (chat_dir / "messages.txt").write_bytes(
        line(1, "user", "answered already", user_id=CHAT, name="Alice", tg_message_id=11)
        + line(2, "assistant", "ANSWER: answered already")
    )
    write_inbox(
        data_dir,
        text_update(20, CHAT, 10, "/reset"),  # replaying it could wipe what came after it
        text_update(21, CHAT, 11, "answered already"),
        text_update(22, CHAT, 12, "never answered"),
    )
    with caplog.at_level(logging.WARNING):
        await start_bot()
        assert await help_answered(tg, CHAT) == ["ANSWER: never answered", HELP_TEXT]
    assert [t for _, t in roles_and_texts(data_dir, CHAT)] == [
        "answered already",
        "ANSWER: answered already",
        "never answered",
        "ANSWER: never answered",
    ]
    assert any("1 message(s) received before a crash" in r.getMessage() for r in caplog.records)


CHATS = range(301, 307)
PER_CHAT = 10
SUMMARY_EVERY = 4


async def test_kill_9_under_load_loses_no_message_and_answers_none_twice(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path, tmp_path: Path
) -> None:
    pushed = {chat: [f"chat {chat} message {i}" for i in range(PER_CHAT)] for chat in CHATS}
    for i in range(PER_CHAT):
        for chat in CHATS:
            tg.push_text(chat, pushed[chat][i])
    llm.latency = 0.05  # simulated model latency: turns are still in flight when the kill lands
    env = membot_env(
        telegram_bot_token=TOKEN,
        telegram_api_base=tg.base_url,
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        openrouter_model="test/model",
        data_dir=str(data_dir),
        log_level="WARNING",
        summary_every=str(SUMMARY_EVERY),
    )
    stderr_path = tmp_path / "membot.stderr"
    with open(stderr_path, "wb") as stderr:
        process = await spawn_membot(tmp_path, env, "run", stdout=stderr, stderr=stderr)
        try:
            await tg.wait_for_total(15, timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nbot stderr:\n{stderr_path.read_text()}") from None
        finally:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    llm.latency = 0.0
    answers = list(tg.sent)
    assert len(answers) >= 15
    assert "Traceback" not in stderr_path.read_text()

    for chat in CHATS:
        sent = [m.text for m in answers if m.chat_id == chat]
        chat_dir = data_dir / str(chat)
        if not (chat_dir / "messages.txt").exists():
            assert sent == []
            continue
        lines, torn = read_jsonl(chat_dir / "messages.txt")
        assert [m["seq"] for m in lines] == list(range(1, len(lines) + 1))
        roles = [m["role"] for m in lines]
        # A turn is one write: only a torn write can leave a question without its answer.
        dangling = ["user"] if torn and len(lines) % 2 else []
        assert roles == ["user", "assistant"] * (len(lines) // 2) + dangling, (chat, torn)
        questions = [m["content"] for m in lines if m["role"] == "user"]
        assert questions == pushed[chat][: len(questions)]
        on_disk = [m["content"] for m in lines if m["role"] == "assistant"]
        assert on_disk == [f"ANSWER: {q}" for q in questions[: len(on_disk)]]
        # Everything the user saw is remembered, in the order it was seen.
        assert sent == on_disk[: len(sent)], chat

        chat_meta = json.loads((chat_dir / "meta.json").read_text())
        assert chat_meta["conversation"] == f"tg:{chat}"
        assert chat_meta["messages_total"] <= len(lines)  # meta may lag the archive, never lead
        if (chat_dir / "summary.txt").exists():
            assert (chat_dir / "summary.txt").read_text().startswith("SUMMARY #")
        if (chat_dir / "summaries.log").exists():
            log_lines, _ = read_jsonl(chat_dir / "summaries.log")
            for entry in log_lines:
                assert 1 <= entry["covers_from"] <= entry["covers_to"] <= len(lines)

    # The killed bot had fetched (and so confirmed) every update: Telegram will not send the
    # unanswered ones again. A new bot on the same DATA_DIR answers them from its journal.
    assert tg.pending_updates() == 0
    await start_bot(window_size=50, summary_every=SUMMARY_EVERY)
    for chat in CHATS:
        # A chat's updates are handled in order, and replayed ones come first: once this is
        # answered, every message the chat sent before the kill has been dealt with.
        tg.push_text(chat, "/help")
    await tg.wait_until(
        lambda: all(HELP_TEXT in [m.text for m in tg.messages_to(c)] for c in CHATS),
        timeout=30,
        what="every chat's /help after the replay",
    )
    for chat in CHATS:
        lines = readable(data_dir / str(chat) / "messages.txt")
        # Every message is on disk exactly once, in order, each followed by its answer.
        assert [(m["role"], m["content"]) for m in lines] == [
            pair for q in pushed[chat] for pair in (("user", q), ("assistant", f"ANSWER: {q}"))
        ], chat
        sent = [m.text for m in tg.messages_to(chat) if m.text != HELP_TEXT]
        expected = [f"ANSWER: {q}" for q in pushed[chat]]
        # Never answered twice; in order; and at most the one turn the kill caught between
        # its append and its send is on disk but was never shown.
        assert len(set(sent)) == len(sent), chat
        assert sent == [e for e in expected if e in sent], chat
        assert len(expected) - len(sent) <= 1, (chat, len(sent))

    # ...and it remembers: the whole archive before a new question is in its prompt.
    chat = CHATS[0]
    tg.push_text(chat, "what do you remember?")
    await tg.wait_until(
        lambda: "ANSWER: what do you remember?" in [m.text for m in tg.messages_to(chat)],
        what="the restarted bot's answer",
    )
    request = next(
        r
        for r in llm.chat_requests
        if without_now(r["messages"][-1]["content"]) == "what do you remember?"
    )
    archive = readable(data_dir / str(chat) / "messages.txt")
    asked_at = next(i for i, m in enumerate(archive) if m["content"] == "what do you remember?")
    assert prompt_texts(request)[:-1] == [(m["role"], m["content"]) for m in archive[:asked_at]]


@pytest.mark.parametrize(
    ("settings", "variable"),
    [
        ({"window_size": "0"}, "WINDOW_SIZE"),
        ({"window_size": "lots"}, "WINDOW_SIZE"),
        ({"telegram_bot_token": None}, "TELEGRAM_BOT_TOKEN"),
    ],
    ids=["window-zero", "window-not-a-number", "no-token"],
)
async def test_run_with_bad_config_exits_2_before_touching_anything(
    tg: FakeTelegram,
    llm: FakeLLM,
    data_dir: Path,
    tmp_path: Path,
    settings: dict[str, str | None],
    variable: str,
) -> None:
    values: dict[str, str | None] = {
        "telegram_bot_token": TOKEN,
        "telegram_api_base": tg.base_url,
        "openrouter_api_key": API_KEY,
        "openrouter_base_url": llm.base_url,
        "data_dir": str(data_dir),
        **settings,
    }
    env = membot_env(**{k: v for k, v in values.items() if v is not None})
    process = await spawn_membot(
        tmp_path, env, "run", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        stdout, stderr = await process.communicate()
    assert process.returncode == 2
    err = stderr.decode()
    assert "Traceback" not in err
    [message] = err.strip().splitlines()
    assert message.startswith("membot: configuration error: ") and variable in message
    assert stdout == b""
    # It stopped before talking to anyone or creating anything.
    assert tg.calls == [] and llm.requests == []
    assert not data_dir.exists()
