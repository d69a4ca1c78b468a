"""Drafts over the fake Bot API: none for text the model has finished writing (the message
that replaces a draft follows at once), and the next step's text shown again."""

from __future__ import annotations

from aiogram import Bot

from membot.bot.drafts import DraftPacing, Drafts
from tests.fakes import FakeTelegram

CHAT = 7501
# No wait before the first draft and typing re-sent often: the loop runs many rounds while
# the test watches the indicator, each one a chance for a draft.
PACING = DraftPacing(interval=0.01, first_after=0.0, backoff=0.5, typing_every=0.02)
WRITTEN = "The whole answer, written by the model already."


def typing(tg: FakeTelegram) -> int:
    return tg.actions.count((CHAT, "typing"))


async def test_no_draft_shows_what_the_model_has_finished_writing(
    tg: FakeTelegram, bot: Bot
) -> None:
    async with Drafts(bot, CHAT, PACING) as drafts:
        drafts.add(WRITTEN)
        drafts.written()
        # Typing goes on while no draft is shown: rounds of the loop that sent nothing.
        await tg.wait_until(lambda: typing(tg) >= 4, what="the typing indicator, 4 times")
        assert tg.drafts_to(CHAT) == []
        # A later step's text is being written: it is shown.
        await drafts.reset()
        drafts.add("Now the tool has answered, the rest of it is being written.")
        await tg.wait_for_call("sendMessageDraft")
    [draft] = tg.drafts_to(CHAT)
    assert draft.text == "Now the tool has answered, the rest of it is being written."


async def test_text_still_being_written_is_shown(tg: FakeTelegram, bot: Bot) -> None:
    async with Drafts(bot, CHAT, PACING) as drafts:
        drafts.add(WRITTEN)
        await tg.wait_for_call("sendMessageDraft")
    assert [d.text for d in tg.drafts_to(CHAT)] == [WRITTEN]
