"""End to end: where a remembered answer comes from. The fake model searches the archive
(search_history, whose lines start with each message's id) and answers with `[#id]` markers:
the user never sees a marker (message, draft, API content or delta), an id the search did not
return is dropped, and what is cited comes back: in Telegram as a reply to the cited message
quoting it (or a dated quote under the answer), in the API as `citations`."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from tests import api_support
from tests.api_support import StartApi
from tests.fakes import FakeLLM, Reply

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
