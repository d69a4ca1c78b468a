"""End to end: where a remembered answer comes from. The fake model searches the archive
(search_history, whose lines start with each message's id) and answers with `[#id]` markers:
the user never sees a marker (message, draft, API content or delta), an id the search did not
return is dropped, and what is cited comes back: in Telegram as a reply to the cited message
quoting it (or a dated quote under the answer), in the API as `citations`."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from membot.bot import texts
from membot.bot.drafts import DraftPacing
from tests import api_support
from tests.api_support import StartApi
from tests.conftest import StartBot, bot_env
from tests.e2e.helpers import stored
from tests.e2e.processes import Runs
from tests.fakes import FakeLLM, FakeTelegram, Pacing, Reply
from tests.fakes.telegram.records import SentMessage

start_api = api_support.start_api

PLAN = "I fly to Lisbon on May 3rd, back on the 10th."


def search(query: str) -> dict[str, Any]:
    return {"function": {"name": "search_history", "arguments": json.dumps({"query": query})}}


def found_ids(request: dict[str, Any]) -> list[int]:
    """The ids search_history showed the model in this request's tool results."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    return [int(n) for text in results for n in re.findall(r"^\[#(\d+)\]", text, re.M)]


async def test_the_api_returns_what_an_answer_cites_and_never_a_marker(
    start_api: StartApi, llm: FakeLLM
) -> None:
    api = await start_api()
    llm.script("Noted.")
    first = await api.client.chat({"message": PLAN, "maxRounds": 3})
    sid = first.body["sessionId"]
    cited = "You fly on May 3rd [#1], back on the 10th [#1]. The hotel is booked [#77]."
    llm.script(Reply(tool_calls=[search("Lisbon flight")]), Reply(content=cited))
    streamed = await api.client.chat(
        {"message": "When do I fly?", "sessionId": sid, "stream": True}
    )
    assert streamed.status == 200, streamed.body
    assert found_ids(llm.chat_requests[-1])[:1] == [1]
    clean = "You fly on May 3rd, back on the 10th. The hotel is booked."
    pieces = [data["content"] for kind, data in streamed.events if kind == "delta"]
    assert "".join(pieces) == streamed.body["content"] == clean
    assert not any("[" in piece or "#" in piece for piece in pieces)
    # 77 was never shown to the model: dropped. 1 is cited once.
    [citation] = streamed.body["citations"]
    written = datetime.fromisoformat(api.stored(sid)[0]["ts"])
    assert datetime.fromisoformat(citation.pop("date")) == written
    assert citation == {"id": 1, "author": "user", "quote": PLAN}
    kept = api.stored(sid)[-1]
    assert kept["content"] == clean and [c["id"] for c in kept["citations"]] == [1]

    # The plain call returns the same; a round that cites nothing returns none.
    llm.script(Reply(tool_calls=[search("hotel")]), Reply(content="No hotel was named [#99]."))
    plain = await api.client.chat({"message": "Which hotel?", "sessionId": sid})
    assert plain.body["content"] == "No hotel was named." and plain.body["citations"] == []


# -- Telegram -------------------------------------------------------------------------------

CHAT = 2801
GROUP = -2800
FAST = DraftPacing(interval=0.1, first_after=0.03, backoff=0.5, typing_every=0.5)
WRITING = Pacing(chars=3, first_delay=0.05, delay=0.01)  # a marker spread over chunks
FLOOD = "Too Many Requests: retry after 600"


async def ask(tg: FakeTelegram, chat_id: int, text: str, **kw: Any) -> SentMessage:
    """Send one message (a mention in a group); the one answer the chat then gets."""
    before = len(tg.messages_to(chat_id))
    if chat_id < 0:
        tg.push_mention(chat_id, text, **kw)
    else:
        tg.push_text(chat_id, text, **kw)
    return (await tg.wait_for_messages(chat_id, before + 1))[before]


def entity_text(message: SentMessage, kind: str) -> list[str]:
    raw = message.text.encode("utf-16-le")
    return [
        raw[2 * e["offset"] : 2 * (e["offset"] + e["length"])].decode("utf-16-le")
        for e in message.entities
        if e["type"] == kind
    ]


async def test_an_answer_replies_to_the_message_it_cites_quoting_it(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot(drafts=FAST)
    await ask(tg, CHAT, PLAN)
    await ask(tg, CHAT, "Thanks, and remind me to pack.")
    cited = "You fly on May 3rd [#1], back on the 10th. Your hotel is the Ritz [#42]."
    llm.script(Reply(tool_calls=[search("Lisbon flight")]), Reply(content=cited, pacing=WRITING))
    answer = await ask(tg, CHAT, "When do I fly?")
    assert found_ids(llm.chat_requests[-1])[:1] == [1]
    # No marker anywhere; 42 was made up and is gone without a trace.
    assert answer.text == "You fly on May 3rd, back on the 10th. Your hotel is the Ritz."
    drafts = [d.text for d in tg.drafts_to(CHAT)]
    assert drafts and not any("[" in text or "#" in text for text in drafts)
    # The answer is a reply to the message it cites, quoting it.
    original = stored(data_dir, CHAT)[0]
    assert answer.reply_to_message_id == original["tg_message_id"]
    assert answer.params["reply_parameters"]["quote"] == PLAN
    kept = stored(data_dir, CHAT)[-1]
    assert kept["content"] == answer.text and [c["id"] for c in kept["citations"]] == [1]


async def test_several_citations_reply_to_the_first_and_quote_the_rest_with_their_dates(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await ask(tg, CHAT, PLAN)  # answered "ANSWER: ..." (the fake's default)
    llm.script(
        Reply(tool_calls=[search("Lisbon")]),
        Reply(content="You fly on May 3rd [#1], as I noted [#2]."),
    )
    answer = await ask(tg, CHAT, "When do I fly?")
    first, mine = stored(data_dir, CHAT)[:2]
    assert answer.reply_to_message_id == first["tg_message_id"]
    day = f"{datetime.fromisoformat(mine['ts']):%Y-%m-%d}"
    assert answer.text == (
        "You fly on May 3rd, as I noted.\n\n"
        f"{texts.EN.CITED}\n"
        f"{texts.EN.CITED_SELF}, {day}: “{mine['content']}”"
    )
    [quoted] = entity_text(answer, "blockquote")
    assert quoted.startswith(texts.EN.CITED_SELF)
    [when] = [e for e in answer.entities if e["type"] == "date_time"]
    assert when["unix_time"] == int(datetime.fromisoformat(mine["ts"]).timestamp())
    assert entity_text(answer, "date_time") == [day]


async def test_in_a_group_the_answer_replies_to_the_question_and_quotes_what_it_cites(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await ask(tg, GROUP, PLAN, user_id=11, first_name="Ann")
    llm.script(Reply(tool_calls=[search("Lisbon")]), Reply(content="On May 3rd [#1]."))
    tg.push_mention(GROUP, "When does Ann fly?", user_id=12, first_name="Bob")
    question = len(tg.messages_to(GROUP))
    [answer] = (await tg.wait_for_messages(GROUP, question + 1))[question:]
    [asked] = [m for m in stored(data_dir, GROUP) if m["content"] == "When does Ann fly?"]
    assert answer.reply_to_message_id == asked["tg_message_id"]  # Bob is answered
    assert "quote" not in answer.params["reply_parameters"]
    day = f"{datetime.fromisoformat(stored(data_dir, GROUP)[0]['ts']):%Y-%m-%d}"
    assert answer.text == f"On May 3rd.\n\n{texts.EN.CITED}\nAnn, {day}: “{PLAN}”"


async def test_a_quote_telegram_refuses_leaves_the_reply_without_it(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    await start_bot()
    await ask(tg, CHAT, PLAN)
    llm.script(Reply(tool_calls=[search("Lisbon")]), Reply(content="On May 3rd [#1]."))
    tg.fail_next("sendMessage", 400, "Bad Request: QUOTE_TEXT_INVALID", chat_id=CHAT)
    answer = await ask(tg, CHAT, "When do I fly?")
    assert answer.text == "On May 3rd."
    assert answer.reply_to_message_id == stored(data_dir, CHAT)[0]["tg_message_id"]
    assert "quote" not in answer.params["reply_parameters"]


async def test_an_answer_resent_after_a_kill_cites_the_same_way(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """The answer is stored, its message waits out a flood-wait, the process is killed; the
    next one sends it as the reply it was, with the same quote, without a marker."""
    runs = Runs(tmp_path, bot_env(tg, llm, data_dir, log_level="INFO"))
    llm.script(
        "Noted.",
        Reply(tool_calls=[search("Lisbon")]),
        Reply(content="On May 3rd [#1], as I said [#2]."),
    )
    try:
        first = await runs.spawn("run")
        tg.push_text(CHAT, PLAN)
        await tg.wait_for_messages(CHAT, 1, timeout=120.0)
        tg.fail_next("sendMessage", 429, FLOOD, chat_id=CHAT)
        tg.push_text(CHAT, "When do I fly?")
        await runs.until("the answer stored", lambda: len(stored(data_dir, CHAT)) >= 6)
        await runs.until("the flood-wait", lambda: bool(tg.errors))
        await runs.kill(first)
        assert len(tg.messages_to(CHAT)) == 1
        second = await runs.spawn("run")
        await runs.until("the stored answer sent", lambda: len(tg.messages_to(CHAT)) == 2)
        await runs.stop(second)
    finally:
        runs.close()
    answer = tg.messages_to(CHAT)[1]
    plan, noted = stored(data_dir, CHAT)[:2]
    day = f"{datetime.fromisoformat(noted['ts']):%Y-%m-%d}"
    assert (
        answer.text
        == f"On May 3rd, as I said.\n\n{texts.EN.CITED}\n{texts.EN.CITED_SELF}, {day}: “Noted.”"
    )
    assert answer.reply_to_message_id == plan["tg_message_id"]
    assert answer.params["reply_parameters"]["quote"] == PLAN
    assert len(llm.chat_requests) == 3
