"""End to end: answers shown while they are written (STREAMING), over the real bot, the fake
Bot API (which records every sendMessageDraft) and the fake LLM streaming with pacing.

A private chat sees growing drafts, about one a second, then the answer as a message equal
to what was stored; a group sees one message; a flood-wait on drafts pauses the drafts, not
the answer; STREAMING=false is the single message of before; text beside a tool call streams
into the draft and is then sent as its own message, as without drafts."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from membot.bot.drafts import TELEGRAM_PACING, DraftPacing
from tests.conftest import StartBot
from tests.e2e.helpers import stored
from tests.fakes import Draft, FakeLLM, FakeTelegram, Pacing, Reply

CHAT = 3003
GROUP = -3004
# About 2.5 s of writing: 100 pieces of 8 characters, 25 ms apart, the first after 0.2 s.
WRITING = Pacing(chars=8, first_delay=0.2, delay=0.025)
ANSWER = "**Plan**: " + " ".join(f"step{n}" for n in range(130)) + "."
# Drafts ten times as often as Telegram's pacing, for the tests about something else: the
# model writes four times as fast as WRITING (0.6 s), so an answer still shows a few drafts.
FAST = DraftPacing(interval=0.1, first_after=0.03, backoff=0.5, typing_every=0.5)
QUICK_WRITING = Pacing(chars=8, first_delay=0.05, delay=0.006)


async def ask(tg: FakeTelegram, chat_id: int, text: str, answers: int = 1) -> list[str]:
    before = len(tg.messages_to(chat_id))
    if chat_id < 0:
        tg.push_mention(chat_id, text)
    else:
        tg.push_text(chat_id, text)
    sent = await tg.wait_for_messages(chat_id, before + answers)
    return [m.text for m in sent[before:]]


def assert_paced(drafts: list[Draft], pacing: DraftPacing = TELEGRAM_PACING) -> None:
    # At most one draft per interval, measured on the fake's clock (with room for scheduling).
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(drafts)]
    assert all(gap >= 0.9 * pacing.interval for gap in gaps), gaps


async def test_a_private_chat_sees_drafts_then_the_stored_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script(Reply(content=ANSWER, pacing=WRITING))
    [answer] = await ask(tg, CHAT, "plan my week")
    final = tg.messages_to(CHAT)[-1]
    drafts = tg.drafts_to(CHAT)
    assert 2 <= len(drafts) <= 4, [d.text for d in drafts]
    assert drafts[0].at < final.at and drafts[-1].at < final.at
    # One draft id per answer, with the Stop button; each draft shows more of the answer,
    # rendered as the message is (the Markdown as entities, from the first draft on). The
    # stream is read twice a second, so its last read may bring the end: the last draft may
    # show it all.
    assert len({d.draft_id for d in drafts}) == 1 and all(d.can_stop for d in drafts)
    lengths = [len(d.text) for d in drafts]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1] <= len(answer)
    assert all(answer.startswith(d.text.rstrip()) for d in drafts)
    assert all({"type": "bold", "offset": 0, "length": 4} in d.entities for d in drafts)
    assert answer.startswith("Plan: step0") and final.entities[0]["type"] == "bold"
    assert_paced(drafts)
    # The typing indicator ran until the first draft; the message is what was stored.
    assert (CHAT, "typing") in tg.actions
    assert stored(data_dir, CHAT)[-1]["content"] == ANSWER
    assert llm.streams == 1


async def test_a_group_gets_no_drafts_and_one_message(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.script(Reply(content=ANSWER, pacing=WRITING))
    [answer] = await ask(tg, GROUP, "plan my week")
    assert answer.startswith("Plan: step0") and tg.drafts == []
    assert tg.call_count("sendMessageDraft") == 0 and llm.streams == 0
    assert len(tg.messages_to(GROUP)) == 1
    assert stored(data_dir, GROUP)[-1]["content"] == ANSWER


async def test_a_flood_wait_pauses_the_drafts_not_the_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    tg.fail_next("sendMessageDraft", 429, "Too Many Requests: retry after 30", chat_id=CHAT)
    llm.script(Reply(content=ANSWER, pacing=QUICK_WRITING))
    [answer] = await ask(tg, CHAT, "plan my week")
    # The first draft was refused for 30 s: no other was tried; the answer came at once.
    assert tg.call_count("sendMessageDraft") == 1 and tg.drafts == []
    assert ("sendMessageDraft", "Too Many Requests: retry after 30") in tg.errors
    assert answer.startswith("Plan: step0")
    assert stored(data_dir, CHAT)[-1]["content"] == ANSWER
    # The next answer has drafts again: the pause was for the refused answer's drafts.
    llm.script(Reply(content=ANSWER, pacing=QUICK_WRITING))
    await ask(tg, CHAT, "and next week?")
    assert tg.drafts_to(CHAT)


async def test_streaming_off_keeps_the_single_message(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(streaming=False)
    llm.script(Reply(content=ANSWER, pacing=WRITING))
    [answer] = await ask(tg, CHAT, "plan my week")
    assert answer.startswith("Plan: step0") and len(tg.messages_to(CHAT)) == 1
    assert tg.drafts == [] and tg.call_count("sendMessageDraft") == 0 and llm.streams == 0
    assert (CHAT, "typing") in tg.actions
    assert stored(data_dir, CHAT)[-1]["content"] == ANSWER


async def test_text_beside_a_tool_call_streams_into_the_draft(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST, summary_every=1000)
    note = "Let me note that down for you, Anna, so I remember it next time."
    call = {"function": {"name": "remember", "arguments": {"fact": "Anna drinks green tea"}}}
    llm.script(
        Reply(content=note, tool_calls=[call], pacing=QUICK_WRITING),
        Reply(content=ANSWER, pacing=QUICK_WRITING),
    )
    sent = await ask(tg, CHAT, "remember: I drink green tea", answers=2)
    # The note was shown in the draft as it was written, then sent as its own message (it
    # replaces the draft: seen once); the answer then grew in the same draft, from empty.
    assert sent[0] == note and sent[1].startswith("Plan: step0")
    drafts = tg.drafts_to(CHAT)
    assert drafts[0].text == note[: len(drafts[0].text)] and len(drafts[0].text) >= 24
    note_at = tg.messages_to(CHAT)[-2].at
    after = [d for d in drafts if d.at > note_at]
    assert after and all(sent[1].startswith(d.text.rstrip()) for d in after)
    assert len({d.draft_id for d in drafts}) == 1
    assert_paced(drafts, FAST)
    turn = stored(data_dir, CHAT)
    assert [m["role"] for m in turn] == ["user", "assistant", "tool", "assistant"]
    assert turn[1]["content"] == note and turn[3]["content"] == ANSWER
    assert llm.streams == 2


async def test_a_tight_sending_budget_shows_fewer_drafts_and_every_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # Two sends a second for the whole bot: drafts may use it only when both are free (half
    # of it is kept for messages), and are skipped rather than waited for.
    await start_bot(telegram_bot_rate=2.0)
    chats = [CHAT + n for n in range(1, 5)]
    llm.script(*(Reply(content=ANSWER, pacing=WRITING) for _ in chats))
    for chat in chats:
        tg.push_text(chat, "plan my week")
    finals = [(await tg.wait_for_messages(chat, 1))[0] for chat in chats]
    # Every answer arrived whole and was stored first.
    assert all(m.text.startswith("Plan: step0") and m.text.endswith("step129.") for m in finals)
    assert all(stored(data_dir, chat)[-1]["content"] == ANSWER for chat in chats)
    # Four chats streaming 2.5 s each would see 3 drafts apiece with room to spare; here
    # drafts went at most as fast as the bot's budget refills, half a second apart at least.
    drafts = tg.drafts
    assert 1 <= len(drafts) <= 6, [(d.chat_id, round(d.at, 2)) for d in drafts]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(drafts)]
    assert all(gap >= 0.4 for gap in gaps), gaps
    assert tg.call_count("sendMessageDraft") == len(drafts)  # skipped ones were never sent


async def test_no_draft_in_the_first_moments_of_an_answer(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # A fast model's answer is done within them: a draft the message replaces a moment
    # later would be a Bot API call for nothing (bot/drafts.py DraftPacing.first_after).
    await start_bot()
    llm.script(Reply(content=ANSWER, pacing=Pacing(chars=8, delay=0.006)))  # writing at once
    pushed_at = time.monotonic()
    [answer] = await ask(tg, CHAT, "plan my week")
    drafts = tg.drafts_to(CHAT)
    assert drafts and drafts[0].at - pushed_at >= TELEGRAM_PACING.first_after
    assert answer.startswith("Plan: step0") and stored(data_dir, CHAT)[-1]["content"] == ANSWER
