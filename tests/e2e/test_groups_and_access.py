"""Groups and the allowlist, end to end over the fakes.

Groups: the bot answers only when mentioned, replied to, or given a command; everything else
is silence (no answer, no model call, nothing stored). Memory is per chat, and the model sees
each group message as "Name: text". Allowlist: outsiders get one short refusal, never the model,
and leave no trace on disk.
"""

from __future__ import annotations

from pathlib import Path

from membot.bot import texts
from membot.bot.render import render
from tests.conftest import StartBot
from tests.e2e.helpers import HELP_TEXT, NO_SUMMARY_YET, prompt_texts, roles_and_texts, stored
from tests.fakes import BOT_USERNAME, FakeLLM, FakeTelegram, utf16_len

NOT_ALLOWED = texts.EN.NOT_ALLOWED
GROUP = -200
OTHER_GROUP = -300
BOB = {"user_id": 501, "first_name": "Bob", "last_name": "Stone"}
CAROL = {"user_id": 502, "first_name": "Carol"}


def files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []


def mention_of(username: str) -> list[dict[str, object]]:
    return [{"type": "mention", "offset": 0, "length": utf16_len(f"@{username}")}]


async def test_group_answers_a_mention_and_ignores_chatter(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    # None of these is addressed to the bot.
    tg.push_text(GROUP, "lunch at noon, anyone?", **BOB)
    tg.push_text(GROUP, "@other_bot play a song", entities=mention_of("other_bot"), **BOB)
    tg.push_text(GROUP, "/help@other_bot", **CAROL)
    tg.push_text(GROUP, f"I think {BOT_USERNAME} is asleep", **CAROL)  # no @, no entity
    tg.push_sticker(GROUP, **BOB)
    tg.push_photo(GROUP, caption="look", **CAROL)
    # A chat's updates are handled in order: once this is answered, the chatter was handled.
    tg.push_mention(GROUP, "what is 2+2?", **CAROL)

    [answer] = await tg.wait_for_messages(GROUP, 1)
    assert answer.text == "ANSWER: Carol: what is 2+2?"
    assert len(tg.messages_to(GROUP)) == 1, "chatter got an answer"
    [request] = llm.requests
    # The model sees who spoke, without the @mention and without the chatter.
    assert prompt_texts(request) == [("user", "Carol: what is 2+2?")]
    lines = stored(data_dir, GROUP)
    assert [(m["role"], m["content"]) for m in lines] == [
        ("user", "what is 2+2?"),
        ("assistant", "ANSWER: Carol: what is 2+2?"),
    ]
    assert (lines[0]["user_id"], lines[0]["name"]) == (502, "Carol")
    # In a group the answer is threaded under the question it answers.
    assert answer.reply_to_message_id == lines[0]["tg_message_id"]
    # Chatter leaves no trace on disk, not even in the journal.
    assert "lunch" not in (data_dir / "inbox.jsonl").read_text()


async def test_group_mention_is_case_insensitive_and_stripped(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    shouted = f"@{BOT_USERNAME.upper()}"
    tg.push_text(GROUP, f"{shouted}, hello", entities=mention_of(BOT_USERNAME), **BOB)
    [answer] = await tg.wait_for_messages(GROUP, 1)
    assert answer.text == "ANSWER: Bob Stone: hello"
    assert roles_and_texts(data_dir, GROUP)[0] == ("user", "hello")
    assert stored(data_dir, GROUP)[0]["name"] == "Bob Stone"


async def test_group_reply_to_the_bot_and_commands_are_answered(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    tg.push_mention(GROUP, "my name is Carol", **CAROL)
    await tg.wait_for_messages(GROUP, 1)
    carol_message = stored(data_dir, GROUP)[0]["tg_message_id"]

    # A reply to the bot's answer is addressed to it, with no mention needed.
    tg.push_text(GROUP, "and I am Bob", reply_to_bot=True, **BOB)
    sent = await tg.wait_for_messages(GROUP, 2)
    assert sent[1].text == "ANSWER: Bob Stone: and I am Bob"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "Carol: my name is Carol"),
        ("assistant", "ANSWER: Carol: my name is Carol"),
        ("user", "Bob Stone: and I am Bob"),
    ]

    # A reply to another person's message is not.
    tg.push_text(GROUP, "hi Carol!", reply_to=carol_message, **BOB)
    # Commands are, with or without the bot's @username, and never reach the model.
    tg.push_text(GROUP, "/help", **BOB)
    tg.push_text(GROUP, f"/summary@{BOT_USERNAME}", **CAROL)
    sent = await tg.wait_for_messages(GROUP, 4)
    assert [m.text for m in sent[2:]] == [HELP_TEXT, NO_SUMMARY_YET]
    assert len(llm.requests) == 2
    people = [(m["user_id"], m["name"]) for m in stored(data_dir, GROUP) if m["role"] == "user"]
    assert people == [(502, "Carol"), (501, "Bob Stone")]
    assert "hi Carol!" not in str(stored(data_dir, GROUP))


async def test_memory_is_per_chat_even_for_the_same_person(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    tg.push_mention(GROUP, "the vault code is 4711", **BOB)
    await tg.wait_for_messages(GROUP, 1)
    tg.push_mention(OTHER_GROUP, "what is the vault code?", **BOB)
    await tg.wait_for_messages(OTHER_GROUP, 1)
    tg.push_text(501, "tell me the vault code")  # Bob, privately
    await tg.wait_for_messages(501, 1)

    assert prompt_texts(llm.chat_requests[1]) == [("user", "Bob Stone: what is the vault code?")]
    # A private chat is not a group: no name prefix.
    assert prompt_texts(llm.chat_requests[2]) == [("user", "tell me the vault code")]
    for chat in (OTHER_GROUP, 501):
        assert "4711" not in str(stored(data_dir, chat))
    chat_dirs = [p.name for p in data_dir.iterdir() if p.is_dir()]
    assert sorted(chat_dirs) == sorted(str(c) for c in (GROUP, OTHER_GROUP, 501))


async def test_outsider_is_refused_in_one_line_and_leaves_no_trace(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(allowed_user_ids=frozenset({7}))
    outsider = 8
    tg.push_text(outsider, "hello, who are you?")
    for command in ("/start", "/help", "/summary", "/reset"):
        tg.push_text(outsider, command)
    tg.push_sticker(outsider)
    sent = await tg.wait_for_messages(outsider, 6)
    assert [m.text for m in sent] == [NOT_ALLOWED] * 6
    assert "\n" not in NOT_ALLOWED
    # In the language of the outsider's Telegram app, when the bot speaks it.
    tg.push_text(outsider, "привет", language_code="ru")
    tg.push_text(outsider, "hallo", language_code="de-AT")
    sent = await tg.wait_for_messages(outsider, 8)
    assert [m.text for m in sent[6:]] == [texts.RU.NOT_ALLOWED, NOT_ALLOWED]
    assert llm.requests == []
    assert files_under(data_dir) == []

    # Someone on the list is answered as usual.
    tg.push_text(7, "hello, who are you?")
    [answer] = await tg.wait_for_messages(7, 1)
    assert answer.text == "ANSWER: hello, who are you?"
    assert len(llm.requests) == 1
    assert [p.parent.name for p in files_under(data_dir) if p.name == "messages.txt"] == ["7"]


async def test_outsider_in_a_group_cannot_use_or_wipe_the_bot(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(allowed_user_ids=frozenset({BOB["user_id"]}))
    tg.push_mention(GROUP, "remember: the deploy is on Friday", **BOB)
    await tg.wait_for_messages(GROUP, 1)
    before = (data_dir / str(GROUP) / "messages.txt").read_bytes()

    tg.push_text(GROUP, "chatting, not to the bot", **CAROL)  # silence, not a refusal
    tg.push_mention(GROUP, "when is the deploy?", **CAROL)
    tg.push_text(GROUP, f"/reset@{BOT_USERNAME}", **CAROL)
    sent = await tg.wait_for_messages(GROUP, 3)
    assert [m.text for m in sent[1:]] == [NOT_ALLOWED, NOT_ALLOWED]
    assert len(llm.requests) == 1
    # The refused /reset wiped nothing, and the refusals were not stored.
    assert (data_dir / str(GROUP) / "messages.txt").read_bytes() == before

    tg.push_mention(GROUP, "when is the deploy?", **BOB)
    sent = await tg.wait_for_messages(GROUP, 4)
    assert sent[3].text == "ANSWER: Bob Stone: when is the deploy?"
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "Bob Stone: remember: the deploy is on Friday"),
        ("assistant", "ANSWER: Bob Stone: remember: the deploy is on Friday"),
        ("user", "Bob Stone: when is the deploy?"),
    ]


async def test_forum_topic_answers_stay_in_the_topic(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    forum, topic = -400, 7
    await start_bot()
    long_answer = "\n\n".join(f"Paragraph {i}: " + "words " * 150 for i in range(8))
    llm.script(long_answer)
    tg.push_mention(forum, "write a lot", chat_type="supergroup", thread_id=topic, **BOB)
    tg.push_text(forum, "/summary", chat_type="supergroup", thread_id=topic, **BOB)
    sent = await tg.wait_for_messages(forum, len(render(long_answer)) + 1)
    assert len(sent) >= 3 and sent[-1].text == NO_SUMMARY_YET
    # Every part, not only the first (which is a reply), and the command's answer too.
    # As Telegram reads it: a number, sent as JSON (bot/session.py) or in a form.
    assert [str(m.params.get("message_thread_id")) for m in sent] == [str(topic)] * len(sent)
    assert [str(p.get("message_thread_id")) for p in tg.action_params] == [str(topic)]
