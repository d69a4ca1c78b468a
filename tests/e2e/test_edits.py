"""Edited messages, end to end over the fakes: the bot asks Telegram for them, and an edit of
a text message is a new turn that tells the model the user changed an earlier message,
through the same filters as any message (the allowlist, a group's addressing rules)."""

from __future__ import annotations

import json
from pathlib import Path

from membot.bot import texts
from membot.bot.handlers.edits import EDIT_NOTE
from membot.intake.contract import Entry
from membot.intake.repeats import question_of
from tests.conftest import StartBot
from tests.e2e.helpers import prompt_texts, roles_and_texts, stored
from tests.e2e.test_conversation import say
from tests.fakes import BOT_USERNAME, FakeLLM, FakeTelegram, utf16_len

CHAT = 7007
GROUP = -7100
BOB = {"user_id": 701, "first_name": "Bob"}
MENTION = [{"type": "mention", "offset": 0, "length": utf16_len(f"@{BOT_USERNAME}")}]


async def test_an_edited_message_is_answered_as_an_edit(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    assert tg.allowed_updates is not None and "edited_message" in tg.allowed_updates
    assert await say(tg, CHAT, "book a table for 5 people") == "ANSWER: book a table for 5 people"
    asked = stored(data_dir, CHAT)[0]["tg_message_id"]

    tg.push_edit(CHAT, "book a table for 6 people")
    [answer] = (await tg.wait_for_messages(CHAT, 2))[1:]
    edit = EDIT_NOTE.format(text="book a table for 6 people")
    assert answer.text == f"ANSWER: {edit}"
    # The model sees the earlier message and its answer, then the edit, said as one.
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "book a table for 5 people"),
        ("assistant", "ANSWER: book a table for 5 people"),
        ("user", edit),
    ]
    assert roles_and_texts(data_dir, CHAT)[2:] == [("user", edit), ("assistant", answer.text)]
    assert stored(data_dir, CHAT)[2]["tg_message_id"] == asked


async def test_an_edited_command_or_caption_is_not_acted_on(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    await say(tg, CHAT, "/help")
    tg.push_edit(CHAT, "/reset")
    # The chat's next message is answered after the edit (one lane, in order): nothing came
    # between them.
    assert await say(tg, CHAT, "hello") == "ANSWER: hello"
    assert len(tg.messages_to(CHAT)) == 2 and len(llm.chat_requests) == 1


async def test_in_a_group_an_edit_is_answered_only_when_addressed(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    tg.push_text(GROUP, "lunch at noon?", **BOB)
    tg.push_edit(GROUP, "lunch at one?")  # still chatter: silence
    tg.push_edit(GROUP, f"@{BOT_USERNAME} lunch at one?", entities=MENTION)
    [answer] = await tg.wait_for_messages(GROUP, 1)
    assert answer.text == "ANSWER: Bob: " + EDIT_NOTE.format(text="lunch at one?")
    assert len(llm.chat_requests) == 1


async def test_an_outsiders_edit_is_refused(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(allowed_user_ids=frozenset({1}))
    tg.push_text(CHAT, "hi")
    tg.push_edit(CHAT, "hi there")
    sent = await tg.wait_for_messages(CHAT, 2)
    assert [m.text for m in sent] == [texts.EN.NOT_ALLOWED] * 2
    assert llm.requests == []


def test_an_edit_is_never_taken_for_its_answered_original() -> None:
    """It keeps its message's id, whose question the archive holds: the repeat check must not
    call the edit answered (it would be dropped after a takeover)."""
    message = {"message_id": 5, "chat": {"id": CHAT, "type": "private"}, "text": "v2"}
    entry = Entry(
        0, "9", 9, str(CHAT), json.dumps({"update_id": 9, "edited_message": message}), True
    )
    assert question_of(entry) is None
