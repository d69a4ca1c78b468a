"""Private answers in groups, end to end over the fakes: what concerns one member (/memory,
/usage, /tasks, a rate-limit refusal) reaches that member only, as an ephemeral message; where
the group takes none, a private message; where the member cannot be written to privately
either, the group gets the answer or, for /memory, a note to open a private chat
(bot/personal.py)."""

from __future__ import annotations

from membot.bot import texts
from tests.conftest import StartBot
from tests.e2e.test_tools import QUIET, native_call, tool_step
from tests.fakes import BOT_USERNAME, FakeLLM, FakeTelegram, SentMessage

GROUP = -7300
TITLE = "Book club"
ANN = 731
BOB = 732
EN = texts.EN


async def command(tg: FakeTelegram, text: str, user_id: int, *, where: int = GROUP) -> SentMessage:
    """A member sends a command in the group; the one message the bot then sends anywhere."""
    before = len(tg.sent)
    tg.push_text(GROUP, text, user_id=user_id, first_name=f"User {user_id}", title=TITLE)
    [sent] = (await tg.wait_for_total(before + 1, timeout=30))[before:]
    assert sent.chat_id == where, tg.describe()
    return sent


async def remembered(tg: FakeTelegram, llm: FakeLLM, fact: str, user_id: int) -> None:
    """A member asks the bot to remember `fact`; the model does."""
    llm.script(*tool_step(None, native_call("remember", {"fact": fact}), then="Noted."))
    before = len(tg.messages_to(GROUP))
    tg.push_mention(GROUP, f"remember: {fact}", user_id=user_id, title=TITLE)
    await tg.wait_for_messages(GROUP, before + 1, timeout=30)


async def test_in_a_group_what_concerns_one_member_reaches_them_alone(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(user_rate_limit=2, **QUIET)
    await remembered(tg, llm, "The club reads Dune in March", ANN)  # the first of two a minute
    public = tg.seen_by(GROUP, BOB)

    shown = await command(tg, "/memory", ANN)
    assert shown.receiver_user_id == ANN
    assert "The club reads Dune in March" in shown.text
    usage = await command(tg, "/usage", BOB)
    assert usage.receiver_user_id == BOB and usage.text.startswith("Your usage")
    listing = await command(tg, "/tasks", ANN)
    assert (listing.receiver_user_id, listing.text) == (ANN, EN.NO_TASKS)

    # Ann's second message this minute is the last she may send: her third is refused,
    # and the refusal is hers alone.
    llm.script("Sure.")
    before = len(tg.messages_to(GROUP))
    tg.push_mention(GROUP, "and one more thing", user_id=ANN, title=TITLE)
    await tg.wait_for_messages(GROUP, before + 1, timeout=30)
    refused = await mention(tg, "and another", ANN)
    assert refused.receiver_user_id == ANN
    assert refused.text.startswith("Too many messages")

    # Bob saw none of Ann's, Ann none of Bob's; the answers to the group are everyone's.
    assert tg.seen_by(GROUP, BOB)[len(public) :] == [usage, tg.messages_to(GROUP)[before]]
    assert usage not in tg.seen_by(GROUP, ANN)
    assert tg.messages_to(ANN) == tg.messages_to(BOB) == []  # nothing went privately


async def mention(tg: FakeTelegram, text: str, user_id: int) -> SentMessage:
    before = len(tg.sent)
    tg.push_mention(GROUP, text, user_id=user_id, title=TITLE)
    [sent] = (await tg.wait_for_total(before + 1, timeout=30))[before:]
    return sent


async def test_where_the_group_takes_no_ephemeral_message_it_goes_privately(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(**QUIET)
    await remembered(tg, llm, "The club meets on Fridays", ANN)
    tg.refuse_ephemeral()
    shown = await command(tg, "/memory", ANN, where=ANN)
    assert shown.receiver_user_id is None
    assert shown.text.startswith(EN.PERSONAL_FROM.format(chat=TITLE) + "\n\n")
    assert "The club meets on Fridays" in shown.text
    assert "reply_markup" not in shown.params  # a button pressed there would act on that chat
    usage = await command(tg, "/usage", BOB, where=BOB)
    assert "Your usage" in usage.text
    assert [m.text for m in tg.messages_to(GROUP)] == ["Noted."]


async def test_a_member_who_never_started_the_bot_is_asked_to(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot(**QUIET)
    await remembered(tg, llm, "Bob's address is 5 Elm Street", BOB)
    tg.refuse_ephemeral()
    tg.never_started(ANN)
    # The group's facts are not shown to the group for one member's asking: a note instead.
    note = await command(tg, "/memory", ANN)
    assert note.text == EN.PERSONAL_START.format(name=f"User {ANN}", bot=BOT_USERNAME)
    assert all("Elm Street" not in m.text for m in tg.messages_to(GROUP))
    # What may be seen by all is shown in the group.
    usage = await command(tg, "/usage", ANN)
    assert usage.text.startswith("Your usage") and usage.receiver_user_id is None
    assert tg.messages_to(ANN) == []


async def test_in_a_private_chat_the_answer_is_an_ordinary_message(
    tg: FakeTelegram, start_bot: StartBot
) -> None:
    await start_bot(**QUIET)
    tg.push_text(ANN, "/usage")
    [usage] = await tg.wait_for_messages(ANN, 1, timeout=30)
    assert usage.receiver_user_id is None and usage.text.startswith("Your usage")
