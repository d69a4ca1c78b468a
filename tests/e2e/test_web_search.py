"""End to end: web search in every chat and the sources of an answer, against the fake LLM
(OpenRouter's url_citation annotations, in a plain answer and spread over a stream's deltas)
through the real client: the sources shown under the answer in Telegram as numbered links (a
long answer with them still split within Telegram's limits, and resent the same after a
kill -9), kept in the archive, shown to the model in the next turn; returned by the API and in
its SSE `done`; found again by search_history; /search off takes the web search out of the
request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from membot.bot import texts
from membot.bot.render import TELEGRAM_LIMIT, render
from membot.llm.wire import WEB_SEARCH_TOOL
from membot.memory.contract.models import Source
from tests import api_support
from tests.api_support import StartApi
from tests.conftest import StartBot, bot_env
from tests.e2e.helpers import roles_and_texts, stored
from tests.e2e.processes import Runs
from tests.e2e.test_tools import native_call, tool_messages, tool_step
from tests.fakes import FakeLLM, FakeTelegram, Reply, utf16_len
from tests.fakes.telegram.records import SentMessage

start_api = api_support.start_api

CHAT = 2701
GROUP = -2700
HEAD = texts.EN.SOURCES
PAGES = [
    ("https://example.org/visit", "Opening hours and tickets – City Museum"),
    ("https://example.org/news/thursdays", "City Museum extends Thursday hours"),
]
LISTED = f"{HEAD}\n1. {PAGES[0][1]}\n2. {PAGES[1][1]}"
FLOOD = "Too Many Requests: retry after 600"


async def ask(
    tg: FakeTelegram, chat_id: int, text: str, answers: int = 1, **kw: Any
) -> list[SentMessage]:
    """Send one message (a mention in a group); the `answers` messages the chat then gets."""
    before = len(tg.messages_to(chat_id))
    if chat_id < 0:
        tg.push_mention(chat_id, text, **kw)
    else:
        tg.push_text(chat_id, text, **kw)
    return (await tg.wait_for_messages(chat_id, before + answers))[before:]


def links(*sent: SentMessage) -> list[tuple[str, str]]:
    """(link text, url) of every text link in these messages, in order."""
    found = []
    for message in sent:
        raw = message.text.encode("utf-16-le")
        for e in message.entities:
            if e["type"] == "text_link":
                text = raw[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
                found.append((text, e["url"]))
    return found


def searches(request: dict[str, Any]) -> bool:
    return WEB_SEARCH_TOOL in (request.get("tools") or []) or "plugins" in request


async def test_sources_are_links_under_the_answer_kept_and_shown_to_the_model_next(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.search_sources = PAGES
    # A private chat: the answer is streamed, its annotations spread over the deltas.
    [sent] = await ask(tg, CHAT, "When is the museum open?")
    assert llm.streams == 1
    assert sent.text == f"ANSWER: When is the museum open?\n\n{LISTED}"
    assert links(sent) == [(title, url) for url, title in PAGES]
    kept = stored(data_dir, CHAT)[-1]
    assert kept["sources"] == [{"url": url, "title": title} for url, title in PAGES]

    llm.search_sources = None  # the next answer searches nothing
    [again] = await ask(tg, CHAT, "Send me the first link again")
    assert links(again) == [] and again.text == "ANSWER: Send me the first link again"
    earlier = llm.chat_requests[-1]["messages"][-2]
    assert earlier["role"] == "assistant"
    assert earlier["content"] == (
        "ANSWER: When is the museum open?\n\n"
        "[Sources shown to the user under this answer:\n"
        f"1. {PAGES[0][1]}: {PAGES[0][0]}\n"
        f"2. {PAGES[1][1]}: {PAGES[1][0]}]"
    )
    assert "sources" not in stored(data_dir, CHAT)[-1]

    # Later, search_history finds the link by what the page was about.
    find = native_call("search_history", {"query": "Thursday hours"})
    llm.script(*tool_step(None, find, then="Here it is."))
    [found] = await ask(tg, CHAT, "What was that news about the museum?")
    assert found.text == "Here it is."
    assert PAGES[1][0] in tool_messages(llm.chat_requests[-1])[0]["content"]


async def test_in_a_group_the_plain_answer_carries_its_sources_too(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    llm.search_sources = PAGES
    [sent] = await ask(tg, GROUP, "When is the museum open?", user_id=11, first_name="Ann")
    assert llm.streams == 0  # groups get one message: a plain call
    assert sent.text.endswith(LISTED)
    assert links(sent) == [(title, url) for url, title in PAGES]
    assert sent.reply_to_message_id is not None  # threaded as a reply, as any group answer


async def test_a_long_answer_with_sources_is_split_within_telegrams_limits(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 397 for i in range(6))
    sources = [(f"https://example.org/page/{n}", f"Page {n}: what it says 🔎") for n in range(8)]
    expected = render(long, sources=[Source(u, t) for u, t in sources], sources_head=HEAD)
    assert len(expected) == 4  # two paragraphs a message, then the list alone
    llm.script(Reply(content=long, sources=sources))
    sent = await ask(tg, CHAT, "Tell me everything about the museum", answers=4)
    assert [m.text for m in sent] == [p.text for p in expected]
    assert all(utf16_len(m.text) <= TELEGRAM_LIMIT for m in sent)
    assert sent[-1].text.startswith(HEAD) and links(*sent[:-1]) == []
    assert links(*sent) == [(title, url) for url, title in sources]


async def test_search_off_takes_the_web_search_out_of_the_request(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    await start_bot()
    llm.search_sources = PAGES
    assert [m.text for m in await ask(tg, CHAT, "/search off")] == [texts.EN.SEARCH_SET_OFF]
    [plain] = await ask(tg, CHAT, "When is the museum open?")
    assert not searches(llm.chat_requests[-1])
    assert plain.text == "ANSWER: When is the museum open?" and links(plain) == []
    assert [m.text for m in await ask(tg, CHAT, "/search on")] == [texts.EN.SEARCH_SET_ON]
    [cited] = await ask(tg, CHAT, "And now?")
    assert searches(llm.chat_requests[-1])
    assert cited.text.endswith(LISTED)


async def test_the_api_returns_the_sources_plain_and_in_the_done_event(
    start_api: StartApi, llm: FakeLLM
) -> None:
    api = await start_api()
    llm.search_sources = PAGES
    listed = [{"url": url, "title": title} for url, title in PAGES]
    plain = await api.client.chat({"message": "When is the museum open?"})
    assert plain.status == 200 and plain.body["sources"] == listed
    assert api.stored(plain.body["sessionId"])[-1]["sources"] == listed
    streamed = await api.client.chat({"message": "When is the museum open?", "stream": True})
    assert [kind for kind, _ in streamed.events][-1] == "done"
    assert streamed.body["sources"] == listed
    assert {**streamed.body, "sessionId": None} == {**plain.body, "sessionId": None}
    off = await api.client.chat({"message": "When is it open?", "disableSearch": True})
    assert off.body["sources"] == [] and not searches(llm.chat_requests[-1])


async def test_an_answer_resent_after_a_kill_has_the_same_links(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """The answer is stored, its message waits out a flood-wait, the process is killed; the
    restarted one sends it with its sources, without asking the model again."""
    runs = Runs(tmp_path, bot_env(tg, llm, data_dir, log_level="INFO"))
    llm.script(Reply(content="Open 10 to 18.", sources=PAGES))
    tg.fail_next("sendMessage", 429, FLOOD, chat_id=GROUP)
    try:
        first = await runs.spawn("run")
        tg.push_mention(GROUP, "When is the museum open?", user_id=11, first_name="Ann")
        await runs.until(
            "the answer stored",
            lambda: ("assistant", "Open 10 to 18.") in roles_and_texts(data_dir, GROUP),
        )
        await runs.until("the flood-wait", lambda: bool(tg.errors))
        await runs.kill(first)
        assert tg.messages_to(GROUP) == []
        second = await runs.spawn("run")
        await runs.until("the stored answer sent", lambda: bool(tg.messages_to(GROUP)))
        await runs.stop(second)
    finally:
        runs.close()
    [sent] = tg.messages_to(GROUP)
    assert sent.text == f"Open 10 to 18.\n\n{LISTED}"
    assert links(sent) == [(title, url) for url, title in PAGES]
    assert len(llm.chat_requests) == 1
