"""/forget end to end over the fakes, on files and on Redis: the matches shown with a button,
erased once the one who asked confirms, and then looked for everywhere (the archive, the
search, the summary, the facts, the next prompt, every file under DATA_DIR, every Redis key
of the test); the next turn goes on. In a group a member cannot forget another's messages,
nor see another's request (an ephemeral message, else a private one). The model's
forget_messages asks the same way. An export on its way when the user confirms is made again
without the words, and what exports of the chat left in DATA_DIR/.exports is deleted."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from membot.bot.texts import forget as forget_texts
from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository, Message
from membot.memory.redis import RedisRepository
from membot.search import HistorySearch
from tests.conftest import StartBot
from tests.e2e.processes import until
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, FakeTelegram, Reply, SentMessage
from tests.redis_keys import stored_values

CHAT = 7007
GROUP = -7100
SECRET = "hunter2swordfish"
EN = forget_texts.EN
ANN = {"user_id": 555, "first_name": "Ann"}
BOB = {"user_id": 556, "first_name": "Bob"}
# Summaries early: the second covers the secret's turn, the first does not.
SMALL = {"window_size": 4, "summary_every": 2}


async def say(tg: FakeTelegram, chat: int, text: str, **kw: Any) -> str:
    before = len(tg.messages_to(chat))
    if chat < 0 and not text.startswith("/"):
        tg.push_mention(chat, text, **kw)
    else:
        tg.push_text(chat, text, **kw)
    return (await tg.wait_for_messages(chat, before + 1, timeout=20))[before].text


def buttons(tg: FakeTelegram, chat: int) -> list[tuple[str, str]]:
    markup = tg.messages_to(chat)[-1].params["reply_markup"]
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def press(tg: FakeTelegram, chat: int, data: str, **kw: Any) -> dict[str, Any]:
    """Press a button under the bot's last message; Telegram's answer to the press."""
    answers = len(tg.callback_answers)
    tg.push_callback(chat, tg.messages_to(chat)[-1].message_id, data, **kw)
    await tg.wait_until(lambda: len(tg.callback_answers) > answers, what="the button's answer")
    return tg.callback_answers[-1]


def summaries_quote_everything(llm: FakeLLM) -> None:
    """A summary that keeps every word of what it summarizes (the secret included)."""

    def reply(body: dict[str, Any]) -> Reply:
        if any(b is body for b in llm.summary_requests):
            return Reply(content="SUMMARY: " + body["messages"][-1]["content"][-300:])
        return llm.default_reply(body)

    llm.set_responder(reply)


async def everything_stored(data_dir: Path, redis: RedisRepository | None) -> str:
    found = []
    for path in data_dir.rglob("*"):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):  # the bot's own moves
            found.append(path.read_bytes().decode("utf-8", "replace"))
    if redis is not None:
        found += await stored_values(redis.client, redis.prefix)
    return "\n".join(found)


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_forget_shows_confirms_and_leaves_nothing_anywhere(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    redis_repo: RedisRepository,
    backend: str,
) -> None:
    storage = on_redis(redis_repo) if backend == "redis" else {}
    await start_bot(**SMALL, **storage)
    summaries_quote_everything(llm)
    repo: ChatRepository = redis_repo if backend == "redis" else FileRepository(data_dir)
    cid = ConversationId.telegram(CHAT)
    await say(tg, CHAT, "hello there")
    llm.script(
        Reply(tool_calls=[native_call("remember", {"fact": f"Password: {SECRET}"}, "c1")]),
        Reply(content="Noted."),
    )
    await say(tg, CHAT, f"my password is {SECRET}, remember it")
    for text in ("the weather is fine", "tell me a joke", "thanks a lot"):
        await say(tg, CHAT, text)
    await llm.wait_until(lambda: len(llm.summary_requests) >= 2, timeout=20, what="2 summaries")
    await llm.wait_until(lambda: llm.in_flight == 0, timeout=20, what="summaries saved")
    assert SECRET in await repo.get_summary(cid)
    assert SECRET in await everything_stored(data_dir, redis_repo)

    listing = await say(tg, CHAT, f"/forget {SECRET}")
    # The question, the remember call holding the words and its result; the fact.
    assert listing.startswith(EN.FOUND.format(messages=3, facts=1))
    assert f"· Alice: my password is {SECRET}" in listing  # shown with its date
    assert listing.count(SECRET) == 2  # the question and the fact: tool plumbing is counted
    (yes, yes_data), (no, _) = buttons(tg, CHAT)
    assert (yes, no) == (EN.BUTTON_YES, EN.BUTTON_NO)
    await press(tg, CHAT, yes_data)
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    # The summary said the secret too: listed, and said gone.
    assert listing.endswith(EN.IN_SUMMARY)
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=3, facts=1) + "\n\n" + EN.DONE_SUMMARY

    messages = [m async for m in repo.iter_messages(cid)]
    assert len(messages) == 12  # every slot kept
    assert sum(m.forgotten for m in messages) == 3
    assert not any(SECRET in m.to_json() for m in messages)
    assert await repo.get_facts(cid) == []
    # A fact held the words, and every summary is made agreeing with the facts: all go, to
    # be made again from what is left.
    assert await repo.get_summary(cid) == ""
    assert (await repo.get_meta(cid)).summarized_upto == 0
    search = HistorySearch(repo, data_dir)
    assert await search.search(cid, SECRET) == []
    assert SECRET not in await everything_stored(data_dir, redis_repo)

    answer = await say(tg, CHAT, "what did I tell you before?")
    assert answer == "ANSWER: what did I tell you before?"
    assert SECRET not in json.dumps(llm.chat_requests[-1])
    assert SECRET not in await everything_stored(data_dir, redis_repo)


async def personal(tg: FakeTelegram, text: str, user: dict[str, Any]) -> SentMessage:
    """A member's command in the group; the one message the bot then sends, anywhere."""
    before = len(tg.sent)
    tg.push_text(GROUP, text, **user)
    [sent] = (await tg.wait_for_total(before + 1, timeout=20))[before:]
    return sent


def buttons_of(message: SentMessage) -> list[str]:
    markup = message.params["reply_markup"]["inline_keyboard"]
    return [b["callback_data"] for row in markup for b in row]


async def test_a_member_forgets_only_their_own_and_sees_it_alone(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    tg.set_admins(GROUP, [700])
    await say(tg, GROUP, "my code is zebra42", **ANN)
    await say(tg, GROUP, "hello all", **BOB)
    # Bob's /forget finds nothing of his: Ann's message and the bot's answer to her are hers.
    nothing = await personal(tg, "/forget zebra42", BOB)
    assert (nothing.text, nothing.receiver_user_id) == (EN.NONE, BOB["user_id"])
    listing = await personal(tg, "/forget zebra42", ANN)
    assert listing.receiver_user_id == ANN["user_id"]  # an ephemeral message: Ann's alone
    assert listing.text.startswith(EN.FOUND.format(messages=2, facts=0))
    assert all(not m.text.startswith("Found") for m in tg.seen_by(GROUP, BOB["user_id"]))
    assert listing.ephemeral_message_id is not None
    tg.press_ephemeral(GROUP, listing.ephemeral_message_id, buttons_of(listing)[0], ANN["user_id"])
    done = EN.DONE.format(messages=2, facts=0)
    await tg.wait_until(
        lambda: tg.ephemeral_message(GROUP, listing.ephemeral_message_id)["text"] == done,
        what="the list replaced",
    )
    stored = (data_dir / str(GROUP) / "messages.txt").read_text()
    assert "zebra42" not in stored and "hello all" in stored
    # An administrator forgets anyone's.
    found = await personal(tg, "/forget hello all", {"user_id": 700, "first_name": "Ada"})
    assert found.text.startswith(EN.FOUND.format(messages=2, facts=0))


async def test_where_the_group_takes_no_ephemeral_message_the_member_confirms_privately(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, GROUP, "my code is zebra42", **ANN)
    tg.refuse_ephemeral()
    before = len(tg.sent)
    tg.push_text(GROUP, "/forget zebra42", **ANN)
    listing, ask = (await tg.wait_for_total(before + 2, timeout=20))[before:]
    ann = ANN["user_id"]
    assert (listing.chat_id, ask.chat_id) == (ann, ann)  # her private chat, not the group
    assert EN.FOUND.format(messages=2, facts=0) in listing.text
    assert ask.text == EN.CONFIRM_HERE
    tg.push_callback(ann, ask.message_id, buttons_of(ask)[0], user_id=ann)
    await tg.wait_until(lambda: bool(tg.edits), what="the question replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=2, facts=0)
    assert "zebra42" not in (data_dir / str(GROUP) / "messages.txt").read_text()
    # The list, which quoted the words, is taken back from her private chat too.
    await tg.wait_until(lambda: (ann, listing.message_id) in tg.deleted, what="the list deleted")


async def test_the_models_forget_messages_asks_the_user_to_confirm(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await say(tg, CHAT, f"my card is {SECRET}")
    llm.script(
        Reply(tool_calls=[native_call("forget_messages", {"words": SECRET}, "f1")]),
        Reply(content="I found it; please confirm below."),
    )
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, "please erase my card number from your memory")
    sent = await tg.wait_for_messages(CHAT, before + 2, timeout=20)
    assert sent[before].text == "I found it; please confirm below."
    assert sent[before + 1].text.startswith(EN.FOUND.format(messages=2, facts=0))
    result = next(m for m in llm.chat_requests[-1]["messages"] if m["role"] == "tool")
    assert "asked to confirm" in result["content"] and SECRET not in result["content"]
    await press(tg, CHAT, buttons(tg, CHAT)[0][1])
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    # What was found, and the request to the model itself (its call holds the words).
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=4, facts=0)
    assert SECRET not in "".join(p.read_text("utf-8", "replace") for p in data_dir.rglob("*.*"))


async def test_words_with_fewer_than_two_letters_or_digits_are_refused_as_the_api_does(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    """`/forget a` would list (and erase) nearly every message: refused with a sentence, as
    the API's WORDS_TOO_SHORT; the model's forget_messages the same way. Nothing is asked
    and nothing erased; two letters or digits are looked for."""
    await start_bot()
    await say(tg, CHAT, "a cat 7 is mine; 42 too")
    too_short = EN.TOO_SHORT.format(chars=2)
    for words in ("a", "7", " ? ! x "):
        assert await say(tg, CHAT, f"/forget {words}") == too_short
    llm.script(
        Reply(tool_calls=[native_call("forget_messages", {"words": "a"}, "f1")]),
        Reply(content="Those words are too short to look for."),
    )
    assert await say(tg, CHAT, "forget a") == "Those words are too short to look for."
    result = next(m for m in llm.chat_requests[-1]["messages"] if m["role"] == "tool")
    assert "at least 2 letters or digits" in result["content"]
    assert "a cat 7 is mine" in "".join(
        p.read_text("utf-8", "replace") for p in data_dir.rglob("*.txt")
    )
    assert (await say(tg, CHAT, "/forget 42")).startswith(EN.FOUND.format(messages=2, facts=0))


async def test_the_memory_screens_forget_button_says_how(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, CHAT, "hello")
    await press(tg, CHAT, "memory:forget")
    await tg.wait_until(lambda: tg.messages_to(CHAT)[-1].text == EN.HOW, what="how to forget")


async def test_a_confirmation_past_telegrams_time_for_the_press_still_replaces_the_list(
    tg: FakeTelegram, start_bot: StartBot
) -> None:
    # Telegram takes a button's answer for about 15 s; erasing a long chat and building its
    # index again may take longer. The list, which quotes the words, is replaced all the same.
    await start_bot()
    await say(tg, CHAT, f"my password is {SECRET}")
    await say(tg, CHAT, f"/forget {SECRET}")
    (_, yes_data), _ = buttons(tg, CHAT)
    tg.callback_answers_too_old = True
    tg.push_callback(CHAT, tg.messages_to(CHAT)[-1].message_id, yes_data)
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=2, facts=0)


def zip_text(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return "\n".join(zf.read(n).decode("utf-8", "replace") for n in zf.namelist())


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_forget_stops_an_export_being_sent_and_deletes_the_chats_leftovers(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    redis_repo: RedisRepository,
    backend: str,
) -> None:
    await start_bot(**(on_redis(redis_repo) if backend == "redis" else {}))
    await say(tg, CHAT, f"my password is {SECRET}")
    await say(tg, CHAT, "the weather is fine")
    # ZIPs a killed process left, fresh (the daily sweep would keep them): this chat's, and
    # other chats' (one whose id starts with this one's).
    exports = data_dir / ".exports"
    exports.mkdir(mode=0o700, exist_ok=True)
    for name in (f"tg-{CHAT}-0123abcd.zip", f"tg-{CHAT}-side-4567.md"):
        (exports / name).write_text(f"left by a crash: {SECRET}")
    others = [exports / f"tg-{CHAT}1-89ab.zip", exports / "tg-7008-cdef.zip"]
    for path in others:
        path.write_text(f"another chat's: {SECRET}")
    # An export on its way to Telegram when the user erases the words.
    tg.hold_uploads()
    assert await say(tg, CHAT, "/export") == texts.EN.EXPORT_STARTED
    await tg.wait_until(lambda: tg.uploads_waiting == 1, timeout=30, what="the upload")
    await say(tg, CHAT, f"/forget {SECRET}")
    await press(tg, CHAT, buttons(tg, CHAT)[0][1])
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=2, facts=0)
    tg.release_uploads()
    await tg.wait_until(lambda: bool(tg.documents_to(CHAT)), timeout=30, what="the export")
    # The upload under way was not completed; the export was made again, without the words.
    assert tg.uploads_abandoned == 1
    [document] = tg.documents_to(CHAT)
    sent = zip_text(document.data)
    assert "the weather is fine" in sent and SECRET not in sent
    await until(lambda: sorted(exports.iterdir()) == sorted(others), what="only others' left")


async def test_words_left_only_in_the_summary_are_found_and_the_summary_made_again(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, redis_repo: RedisRepository
) -> None:
    # Redis keeps REDIS_MAX_MESSAGES of a chat: the message that said the words is trimmed
    # away, the summary made from it still says them.
    cid = ConversationId.telegram(CHAT)
    redis_repo.max_messages = 100
    await redis_repo.append(
        cid, [Message("user", f"my password is {SECRET}", user_id=CHAT), Message("assistant", "ok")]
    )
    meta = await redis_repo.get_meta(cid)
    assert await redis_repo.save_summary(
        cid, f"The user's password is {SECRET}.", 1, 2, meta.generation
    )
    for n in range(50):
        await redis_repo.append(
            cid, [Message("user", f"chat {n}", user_id=CHAT), Message("assistant", "fine")]
        )
    assert SECRET not in "".join([m.to_json() async for m in redis_repo.iter_messages(cid)])
    await start_bot(**on_redis(redis_repo))

    listing = await say(tg, CHAT, f"/forget {SECRET}")
    assert listing.startswith(EN.FOUND.format(messages=0, facts=0))
    assert listing.endswith(EN.IN_SUMMARY)
    await press(tg, CHAT, buttons(tg, CHAT)[0][1])
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    assert tg.edits[-1]["text"] == EN.DONE.format(messages=0, facts=0) + "\n\n" + EN.DONE_SUMMARY
    assert SECRET not in await redis_repo.get_summary(cid)
    assert SECRET not in await everything_stored(Path("/nonexistent"), redis_repo)
    await say(tg, CHAT, "what is my password?")
    assert SECRET not in json.dumps(llm.chat_requests[-1])


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_a_task_holding_the_words_is_listed_and_cancelled(
    tg: FakeTelegram,
    llm: FakeLLM,
    start_bot: StartBot,
    data_dir: Path,
    redis_repo: RedisRepository,
    backend: str,
) -> None:
    await start_bot(**(on_redis(redis_repo) if backend == "redis" else {}))
    when = f"{(datetime.now(UTC) + timedelta(days=1)).date()}T09:00"
    for n, task in enumerate((f"tell me to change {SECRET}", "water the plants")):
        llm.script(
            Reply(tool_calls=[native_call("schedule_task", {"when": when, "task": task}, f"t{n}")]),
            Reply(content="Set."),
        )
        await say(tg, CHAT, "remind me tomorrow at nine, please")
    assert SECRET in await everything_stored(data_dir, redis_repo)

    listing = await say(tg, CHAT, f"/forget {SECRET}")
    # The model's call that set it (and its result) are messages; the task is listed too.
    assert listing.startswith(EN.FOUND.format(messages=2, facts=0))
    assert f"• {EN.TASK} " in listing and f": tell me to change {SECRET}" in listing
    await press(tg, CHAT, buttons(tg, CHAT)[0][1])
    await tg.wait_until(lambda: bool(tg.edits), what="the list replaced")
    done = tg.edits[-1]["text"]
    assert done.endswith(EN.DONE_TASKS.format(tasks=1))
    tasks = await say(tg, CHAT, "/tasks")
    assert "water the plants" in tasks and SECRET not in tasks
    assert SECRET not in await everything_stored(data_dir, redis_repo)
