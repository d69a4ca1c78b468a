"""/memory and its Delete buttons (bot/handlers/memory.py), fed to the dispatcher: the facts
and the summary, who may delete, a press that comes after the list changed."""

from __future__ import annotations

from typing import Any

from membot.bot import texts
from membot.bot.handlers.memory import MEMORY_EXPORT, MEMORY_FORGET, FactDelete, fact_hash
from membot.ids import ConversationId
from membot.memory.contract.models import Message
from tests.fakes import FakeTelegram, SentMessage
from tests.unit.bot.conftest import Door

CHAT = 7701
GROUP = -7700
CID = ConversationId.telegram(CHAT)
GID = ConversationId.telegram(GROUP)
EN = texts.EN
ADA = 771  # the group's administrator
BOB = 772


def buttons(message: SentMessage | dict[str, Any]) -> list[str]:
    params = message.params if isinstance(message, SentMessage) else message
    markup = params.get("reply_markup") or {"inline_keyboard": []}
    return [b["callback_data"] for row in markup["inline_keyboard"] for b in row]


def delete(n: int, fact: str) -> str:
    return FactDelete(n=n, h=fact_hash(fact)).pack()


async def keep(door: Door, cid: ConversationId, *facts: str) -> None:
    for fact in facts:
        await door.repository.add_fact(cid, fact, 100)


async def test_memory_shows_the_facts_with_delete_buttons_and_the_summary(door: Door) -> None:
    await keep(door, CID, "Likes tea", "Has a cat")
    meta = await door.repository.get_meta(CID)
    await door.repository.save_summary(CID, "They talked about cats.", 0, 0, meta.generation)
    listing, summary = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    assert listing.text == EN.FACTS.format(facts="1. Likes tea\n2. Has a cat")
    assert buttons(listing) == [delete(0, "Likes tea"), delete(1, "Has a cat")]
    assert summary.text == EN.SUMMARY.format(summary="They talked about cats.")
    assert buttons(summary) == [MEMORY_FORGET, MEMORY_EXPORT]


async def test_nothing_kept_says_so_with_forget_and_export(door: Door) -> None:
    [shown] = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    assert shown.text == EN.NO_FACTS and buttons(shown) == [MEMORY_FORGET, MEMORY_EXPORT]
    await door.repository.append(CID, [Message(role="user", content="hello")])
    meta = await door.repository.get_meta(CID)
    assert await door.repository.save_summary(CID, "They said hello.", 1, 1, meta.generation)
    facts, summary = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    assert (facts.text, buttons(facts)) == (EN.NO_FACTS, [])
    assert summary.text == EN.SUMMARY.format(summary="They said hello.")


async def test_delete_removes_the_fact_and_the_list_shows_the_rest(door: Door) -> None:
    await keep(door, CID, "Likes tea", "Has a cat", "Lives in Porto")
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    answer = await door.press(CHAT, listing.message_id, delete(0, "Likes tea"))
    assert answer["text"] == EN.FACT_DELETED.format(fact="Likes tea")
    assert await door.repository.get_facts(CID) == ["Has a cat", "Lives in Porto"]
    edited = door.tg.edits[-1]
    assert edited["text"] == EN.FACTS.format(facts="1. Has a cat\n2. Lives in Porto")
    assert buttons(edited) == [
        delete(0, "Has a cat"),
        delete(1, "Lives in Porto"),
        MEMORY_FORGET,
        MEMORY_EXPORT,
    ]
    # A button of the list as it was: "Lives in Porto" moved up, and is still found.
    answer = await door.press(CHAT, listing.message_id, delete(2, "Lives in Porto"))
    assert answer["text"] == EN.FACT_DELETED.format(fact="Lives in Porto")
    assert await door.repository.get_facts(CID) == ["Has a cat"]


async def test_a_fact_changed_meanwhile_is_not_deleted(door: Door) -> None:
    await keep(door, CID, "Lives in Porto", "Has a cat")
    [listing] = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    # Corrected in words meanwhile: the old fact went, a new one came.
    await door.repository.remove_facts(CID, ["Lives in Porto"])
    await keep(door, CID, "Lives in Lisbon")
    answer = await door.press(CHAT, listing.message_id, delete(0, "Lives in Porto"))
    assert answer["text"] == EN.FACT_CHANGED
    assert str(answer.get("show_alert")).lower() == "true"
    assert await door.repository.get_facts(CID) == ["Has a cat", "Lives in Lisbon"]
    # The message now lists what it listed that is still kept.
    assert door.tg.edits[-1]["text"] == EN.FACTS.format(facts="1. Has a cat")


async def test_in_a_group_only_an_administrator_deletes(door: Door) -> None:
    door.tg.set_admins(GROUP, [ADA])
    await keep(door, GID, "The club reads Dune")
    [mine] = await door.sent(GROUP, door.tg.push_text(GROUP, "/memory", user_id=BOB))
    assert mine.receiver_user_id == BOB
    assert buttons(mine) == [MEMORY_FORGET, MEMORY_EXPORT]  # no Delete for a member
    [theirs] = await door.sent(GROUP, door.tg.push_text(GROUP, "/memory", user_id=ADA))
    assert theirs.receiver_user_id == ADA
    assert buttons(theirs)[0] == delete(0, "The club reads Dune")
    answer = await door.press_ephemeral(GROUP, theirs, delete(0, "The club reads Dune"), ADA)
    assert answer["text"] == EN.FACT_DELETED.format(fact="The club reads Dune")
    assert await door.repository.get_facts(GID) == []
    assert theirs.ephemeral_message_id is not None
    shown = door.tg.ephemeral_message(GROUP, theirs.ephemeral_message_id)
    assert shown["text"] == EN.NO_FACTS
    assert buttons(shown) == [MEMORY_FORGET, MEMORY_EXPORT]


async def test_a_press_from_one_who_is_no_longer_an_administrator_is_refused(
    door: Door, tg: FakeTelegram
) -> None:
    """The press is checked, not only the buttons shown: an administrator demoted after
    asking (the bot asks Telegram again once its minute-long cache runs out)."""
    tg.set_admins(GROUP, [ADA])
    await keep(door, GID, "The club reads Dune")
    [theirs] = await door.sent(GROUP, tg.push_text(GROUP, "/memory", user_id=ADA))
    admins = door.app.dispatcher["admins"]
    admins.ttl = 0.0
    tg.set_admins(GROUP, [BOB])
    answer = await door.press_ephemeral(GROUP, theirs, delete(0, "The club reads Dune"), ADA)
    assert answer["text"] == EN.ADMINS_ONLY
    assert await door.repository.get_facts(GID) == ["The club reads Dune"]


async def test_a_long_list_is_several_messages_each_with_its_buttons(door: Door) -> None:
    facts = [f"Fact {i}: " + "the user likes long, detailed notes. " * 12 for i in range(12)]
    await keep(door, CID, *facts)
    shown = await door.sent(CHAT, door.tg.push_text(CHAT, "/memory"))
    assert len(shown) >= 2
    pressed = [b for m in shown for b in buttons(m) if b.startswith("fact:")]
    assert pressed == [delete(i, f) for i, f in enumerate(facts)]
    assert [MEMORY_FORGET in buttons(m) for m in shown] == [False] * (len(shown) - 1) + [True]
    # Deleting from the second message edits that one only, with the numbers as they are now.
    second = shown[1]
    first_there = int(buttons(second)[0].split(":")[1])
    await door.press(CHAT, second.message_id, buttons(second)[0])
    edited = door.tg.edits[-1]
    assert int(edited["message_id"]) == second.message_id
    assert f"{first_there + 1}. {facts[first_there + 1]}" in edited["text"]
    assert facts[first_there] not in edited["text"]
