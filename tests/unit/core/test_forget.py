"""What a request to forget finds (core/forget.py): every message holding the words, in any
form the search matches or as written, wherever the archive keeps them (tool calls, citations'
quotes, a document's text); a matched call's results; in a group, a member's own turns only;
and a confirmation that erases what holds them now, then finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from membot.core.forget import Forgetting, Forgotten
from membot.core.turn import Incoming
from membot.ids import ConversationId
from membot.memory import FileRepository, MemoryRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.contract.citation import Citation
from membot.tasks import TaskSupervisor

GROUP = ConversationId.telegram(-500)
ANN, BOB = 51, 52


def call(name: str, arguments: str, call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def a_group() -> tuple[MemoryRepository, Forgetting]:
    repo = MemoryRepository()
    doc = new_file_key("txt")
    await repo.put_file(GROUP, doc, b"the contract says Zanzibar")
    cited = Citation(id=1, ts=datetime(2026, 1, 1, tzinfo=UTC), author="Ann", quote="Zanzibar")
    await repo.append(
        GROUP,
        [
            Message("user", "We fly to Zanzibar", user_id=ANN, name="Ann"),  # 1
            Message("assistant", "Have a good flight"),  # 2
            Message("user", "what was the island?", user_id=BOB, name="Bob"),  # 3
            Message(
                "assistant", "", tool_calls=(call("search_history", '{"query": "island"}', "s1"),)
            ),
            Message("tool", "[#1] Ann: We fly to Zanzibar", tool_call_id="s1"),  # 5
            Message("assistant", "The island Ann named.", citations=(cited,)),  # 6
            Message("user", "note the \\u0445 flights", user_id=ANN, name="Ann"),  # 7
            Message(
                "assistant",
                "",
                tool_calls=(call("remember", '{"fact": "Flights \\u0445 zanzibar"}', "r1"),),
            ),  # 8
            Message("tool", "Remembered", tool_call_id="r1"),  # 9
            Message("user", "", user_id=BOB, attachments=(Attachment("document", doc),)),  # 10
            Message("assistant", "Read it."),  # 11
        ],
    )
    await repo.add_fact(GROUP, "Ann flies to Zanzibar", 10)
    return repo, Forgetting(repo, None, TaskSupervisor())


async def test_everything_that_holds_the_words_is_found_wherever_it_is() -> None:
    _, forgetting = await a_group()
    found = await forgetting.find(GROUP, "zanzibar")
    # Ann's words, Bob's search's result quoting them, the answer citing them, the remember
    # call and its result, Bob's document.
    assert found.seqs == (1, 5, 6, 8, 9, 10)
    assert [m.seq for m in found.shown] == [1, 6, 10]  # tool plumbing is counted, not shown
    assert found.facts == ("Ann flies to Zanzibar",)
    # A form of the word ("flights" for "flight"), and stopwords need not be there.
    assert (await forgetting.find(GROUP, "my flights")).seqs == (2, 7, 8, 9)


async def test_a_member_finds_only_their_own_turns() -> None:
    _, forgetting = await a_group()
    assert (await forgetting.find(GROUP, "zanzibar", member=ANN)).seqs == (1, 8, 9)
    # Bob's turns: his question's search result and the answer citing Ann, his document.
    assert (await forgetting.find(GROUP, "zanzibar", member=BOB)).seqs == (5, 6, 10)


async def test_confirming_erases_what_holds_the_words_then() -> None:
    repo, forgetting = await a_group()
    request = forgetting.ask(GROUP, "Zanzibar", await forgetting.find(GROUP, "nothing"), ANN)
    # Found nothing when asked; said since: found when confirmed.
    assert await forgetting.confirm(request) == Forgotten(6, 1)
    assert forgetting.pending(request.token) is None
    assert (await forgetting.find(GROUP, "zanzibar")).empty
    kept = [m.content for m in await repo.tail(GROUP, 20) if not m.forgotten]
    assert kept == [
        "Have a good flight",
        "what was the island?",
        "",
        "note the \\u0445 flights",
        "Read it.",
    ]


async def test_an_imported_conversations_title_is_what_its_messages_said(tmp_path: Path) -> None:
    # An imported message's name is its conversation's title ("ChatGPT: <title>"), which
    # the export's owner (or ChatGPT) wrote about it: words in it are forgotten with it.
    repo = FileRepository(tmp_path)
    chat = ConversationId.telegram(77)
    imported = "ChatGPT: Divorce papers for Anna"
    await repo.append(
        chat,
        [
            Message("user", "how do I file it?", name=imported, origin="chatgpt:c1:n1"),
            Message("assistant", "Start with form A.", name=imported, origin="chatgpt:c1:n2"),
            Message("user", "hello", user_id=77, name="Me"),
        ],
    )
    forgetting = Forgetting(repo, None, TaskSupervisor())
    found = await forgetting.find(chat, "divorce papers")
    assert found.seqs == (1, 2)
    forgotten = await forgetting.confirm(forgetting.ask(chat, "divorce papers", found, 77))
    assert forgotten == Forgotten(2, 0)
    stored = "\n".join(p.read_text("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file())
    assert "Divorce" not in stored
    assert "hello" in stored
    assert (await forgetting.find(chat, "divorce papers")).empty


def test_the_model_asks_to_forget_only_where_the_button_can_be_shown() -> None:
    # The confirmation is shown after an ordinary turn in the chat: a guest query's answer
    # (posted in another chat) or a due task's has nobody to press it, and would leave it
    # to pop up after some later message.
    forgetting = Forgetting(MemoryRepository(), None, TaskSupervisor())
    private = ConversationId.telegram(ANN)
    assert forgetting.desk(Incoming(private, "forget it", user_id=ANN)) is not None
    assert forgetting.desk(Incoming(private, "forget it", user_id=ANN, guest="q1")) is None
    assert forgetting.desk(Incoming(private, "forget it", user_id=ANN, task="t1")) is None
    assert forgetting.desk(Incoming(ConversationId.api(uuid4()), "x", user_id=ANN)) is None
