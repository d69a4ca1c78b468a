"""/memory end to end over the fakes and real files: see the facts and the summary, delete a
fact with its button (gone from DATA_DIR and from the next prompt), in a group from the list
only the asking administrator sees, and correct a fact in words: the model's forget and
remember tools change the facts, the summary is brought in line, and /memory shows both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from membot.bot import texts
from membot.bot.handlers.memory import MEMORY_EXPORT, MEMORY_FORGET, FactDelete, fact_hash
from membot.ids import ConversationId
from membot.memory.contract.models import Message
from membot.memory.files import FileRepository
from tests.conftest import StartBot
from tests.e2e.helpers import system_prompt
from tests.e2e.processes import until
from tests.e2e.test_tools import QUIET, native_call, tool_step
from tests.fakes import FakeLLM, FakeTelegram, Reply, SentMessage

CHAT = 7801
GROUP = -7800
ADA = 781  # the group's administrator
EN = texts.EN


def facts_on_disk(data_dir: Path, chat: int) -> list[str]:
    path = data_dir / str(chat) / "facts.json"
    return [f["text"] for f in json.loads(path.read_text())["facts"]] if path.exists() else []


def buttons(params: dict[str, Any]) -> list[str]:
    markup = params.get("reply_markup") or {"inline_keyboard": []}
    return [b["callback_data"] for row in markup["inline_keyboard"] for b in row]


async def remember(tg: FakeTelegram, llm: FakeLLM, chat: int, *facts: str, **who: Any) -> None:
    """The model remembers each fact in a turn of its own (one turn's calls run at once, so
    their order in the list would not be the test's)."""
    for fact in facts:
        llm.script(*tool_step(None, native_call("remember", {"fact": fact}), then="Noted."))
        before = len(tg.messages_to(chat))
        if chat < 0:
            tg.push_mention(chat, "remember this", **who)
        else:
            tg.push_text(chat, "remember this")
        await tg.wait_for_messages(chat, before + 1, timeout=30)


async def show(tg: FakeTelegram, chat: int, count: int = 1, **who: Any) -> list[SentMessage]:
    before = len(tg.sent)
    tg.push_text(chat, "/memory", **who)
    return (await tg.wait_for_total(before + count, timeout=30))[before:]


async def test_delete_removes_the_fact_from_disk_and_the_next_prompt(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(**QUIET)
    await remember(tg, llm, CHAT, "Ann drinks green tea", "Ann's bank pin is 8642")
    [listing] = await show(tg, CHAT)
    assert listing.text == EN.FACTS.format(
        facts="1. Ann drinks green tea\n2. Ann's bank pin is 8642"
    )
    pin = FactDelete(n=1, h=fact_hash("Ann's bank pin is 8642")).pack()
    assert buttons(listing.params) == [
        FactDelete(n=0, h=fact_hash("Ann drinks green tea")).pack(),
        pin,
        MEMORY_FORGET,
        MEMORY_EXPORT,
    ]
    answered = len(tg.callback_answers)
    tg.push_callback(CHAT, listing.message_id, pin)
    await tg.wait_until(lambda: len(tg.callback_answers) > answered and bool(tg.edits), 30)
    assert tg.callback_answers[answered]["text"] == EN.FACT_DELETED.format(
        fact="Ann's bank pin is 8642"
    )
    assert tg.edits[-1]["text"] == EN.FACTS.format(facts="1. Ann drinks green tea")
    assert facts_on_disk(data_dir, CHAT) == ["Ann drinks green tea"]
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, "what do you know about me?")
    await tg.wait_for_messages(CHAT, before + 1, timeout=30)
    prompt = system_prompt(llm.chat_requests[-1])
    assert "- Ann drinks green tea" in prompt and "8642" not in prompt


async def test_in_a_group_the_administrator_deletes_from_their_own_list(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(**QUIET)
    tg.set_admins(GROUP, [ADA])
    await remember(tg, llm, GROUP, "The club reads Dune", user_id=782)
    [listing] = await show(tg, GROUP, user_id=ADA)
    assert listing.receiver_user_id == ADA and listing.ephemeral_message_id is not None
    answered = len(tg.callback_answers)
    delete = FactDelete(n=0, h=fact_hash("The club reads Dune")).pack()
    tg.press_ephemeral(GROUP, listing.ephemeral_message_id, delete, ADA)
    await tg.wait_until(lambda: len(tg.callback_answers) > answered and bool(tg.edits), 30)
    assert tg.callback_answers[answered]["text"].startswith("Deleted")
    assert tg.edits[-1]["receiver_user_id"] in (ADA, str(ADA))
    assert tg.ephemeral_message(GROUP, listing.ephemeral_message_id)["text"] == EN.NO_FACTS
    assert facts_on_disk(data_dir, GROUP) == []
    assert all("Dune" not in m.text for m in tg.seen_by(GROUP, 782) if m.text != "Noted.")


async def test_a_fact_corrected_in_words_corrects_the_summary_too(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # What the chat had: a summary that says Porto, and the fact.
    repo = FileRepository(data_dir)
    cid = ConversationId.telegram(CHAT)
    said = [
        Message(role="user", content="I live in Porto"),
        Message(role="assistant", content="Nice!"),
    ]
    await repo.append(cid, said)
    meta = await repo.get_meta(cid)
    await repo.save_summary(cid, "Ann lives in Porto and likes tea.", 1, 2, meta.generation)
    await repo.add_fact(cid, "Ann lives in Porto", 100)
    await repo.close()

    await start_bot(**QUIET)
    forget = native_call("forget", {"fact": "lives in Porto"}, "call_1")
    keep = native_call("remember", {"fact": "Ann lives in Lisbon"}, "call_2")
    llm.script(
        *tool_step(None, forget, keep, then="Got it: Lisbon."),
        Reply(content="Ann lives in Lisbon and likes tea."),  # the summary, corrected
    )
    tg.push_text(CHAT, "forget that I live in Porto, I moved to Lisbon")
    await tg.wait_for_messages(CHAT, 1, timeout=30)
    await llm.wait_until(lambda: len(llm.summary_requests) == 1, 30, what="the correction")
    summary_file = data_dir / str(CHAT) / "summary.txt"
    corrected = "Ann lives in Lisbon and likes tea."
    await until(lambda: summary_file.read_text() == corrected, what="the summary", timeout=30)
    assert facts_on_disk(data_dir, CHAT) == ["Ann lives in Lisbon"]

    facts, summary = await show(tg, CHAT, 2)
    assert facts.text == EN.FACTS.format(facts="1. Ann lives in Lisbon")
    assert summary.text == EN.SUMMARY.format(summary="Ann lives in Lisbon and likes tea.")
    # The next prompt: the corrected fact and summary, nothing saying Porto is current.
    tg.push_text(CHAT, "where do I live?")
    await tg.wait_for_messages(CHAT, 4, timeout=30)
    prompt = system_prompt(llm.chat_requests[-1])
    assert "- Ann lives in Lisbon" in prompt and "Ann lives in Lisbon and likes tea." in prompt
    assert "Porto" not in prompt


async def test_a_fact_deleted_with_its_button_corrects_the_summary_too(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    # Deleted with 🗑, a fact the summary repeats would still reach every prompt through it.
    repo = FileRepository(data_dir)
    cid = ConversationId.telegram(CHAT)
    await repo.append(cid, [Message("user", "I live in Porto"), Message("assistant", "Nice!")])
    meta = await repo.get_meta(cid)
    await repo.save_summary(cid, "Ann lives in Porto and likes tea.", 1, 2, meta.generation)
    await repo.add_fact(cid, "Ann lives in Porto", 100)
    await repo.close()

    await start_bot(**QUIET)
    llm.script(Reply(content="Ann likes tea."))  # the summary, corrected
    listing, _ = await show(tg, CHAT, 2)
    tg.push_callback(CHAT, listing.message_id, buttons(listing.params)[0])
    await llm.wait_until(lambda: len(llm.summary_requests) == 1, 30, what="the correction")
    assert "Ann lives in Porto" in json.dumps(llm.summary_requests[0])  # as no longer true
    summary_file = data_dir / str(CHAT) / "summary.txt"
    await until(
        lambda: summary_file.read_text() == "Ann likes tea.", what="the summary", timeout=30
    )
    assert facts_on_disk(data_dir, CHAT) == []
