"""End to end: what a stopped answer costs. The provider reports a streamed answer's usage
only at its end, so an answer stopped while it was written (the Stop button, an API client
that went away) is charged an estimate of its tokens at the model's list price, read from
the provider's model list (the fake's /models lists `pricing` as OpenRouter does). It counts
against the user's budget like a finished answer: a user who keeps pressing Stop is refused
once the budget is spent. On the files ledger and on Redis; and for an API session, whose
client gone before any answer is charged the prompt the provider received."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from membot.bot import texts
from membot.clock import utc_now
from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from membot.usage.ledger import day_key, month_key
from tests.api_support import API_TOKEN, StartApi, start_api
from tests.e2e.test_budgets import START, Clock, StartClocked, say, start_clocked
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_stop import ANSWER, SLOW, STOPPED, WITHIN
from tests.fakes import FakeLLM, FakeTelegram, Pacing, Reply

__all__ = ["start_api", "start_clocked"]  # fixtures, used by name

CHAT = 7070
EN = texts.EN
# Per token: a prompt of a few hundred tokens costs a few hundredths, each stop about as much.
PRICE = ("0.0001", "0.0002")
BUDGET = Decimal("0.1")


async def stop_next_answer(tg: FakeTelegram, llm: FakeLLM, text: str) -> str | None:
    """Send `text`; press Stop on the answer's first draft. The final message's text, or
    None when no answer was started (the message was refused: the refusal is the reply)."""
    drafts, messages = len(tg.drafts_to(CHAT)), len(tg.messages_to(CHAT))
    llm.script(Reply(content=ANSWER, pacing=SLOW))
    tg.push_text(CHAT, text)
    await tg.wait_until(
        lambda: len(tg.drafts_to(CHAT)) > drafts or len(tg.messages_to(CHAT)) > messages,
        what="a draft or a reply",
    )
    if len(tg.drafts_to(CHAT)) == drafts:
        return None
    gone = llm.streams_gone
    tg.press_stop(CHAT, tg.drafts_to(CHAT)[drafts].draft_id)
    await llm.wait_until(lambda: llm.streams_gone == gone + 1, WITHIN, what="the stream closed")
    [final] = (await tg.wait_for_messages(CHAT, messages + 1))[messages:]
    return final.text


async def test_stopped_answers_count_against_the_budget(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked
) -> None:
    await stop_until_refused(tg, llm, start_clocked)


async def test_stopped_answers_count_against_the_budget_on_redis(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked, redis_repo: RedisRepository
) -> None:
    """Cost kept in Redis as an integer count of 10^-12: the estimate's too."""
    await stop_until_refused(tg, llm, start_clocked, **on_redis(redis_repo))


async def stop_until_refused(
    tg: FakeTelegram, llm: FakeLLM, start_clocked: StartClocked, **settings: Any
) -> None:
    """A user with a small daily budget who stops every answer is refused in the end."""
    llm.models = {"test/model": ["text"]}
    llm.prices = {"test/model": PRICE}
    bot = await start_clocked(Clock(), user_daily_budget=str(BUDGET), **settings)
    ledger = bot.app.parts.core.ledger
    spent = before = Decimal(0)
    stops = 0
    for n in range(1, 20):
        final = await stop_next_answer(tg, llm, f"plan my year, take {n}")
        if final is None:
            break
        assert final.endswith(STOPPED)
        stops += 1
        day = await ledger.totals("user", str(CHAT), day_key(START))
        # Each stop is charged: its tokens estimated, priced, counted toward the budget.
        assert day.cost > spent and (day.calls, day.estimated, day.unpriced) == (stops, stops, 0)
        before, spent = spent, day.cost
    # Several stops fit the budget; the one that reached it was the last let through.
    assert stops >= 3 and before < BUDGET <= spent
    refused = tg.messages_to(CHAT)[-1].text
    assert refused == EN.OVER_DAILY.format(wait="in 1 h 0 min")
    assert len(llm.chat_requests) == stops  # the refused message never reached the model
    # /usage shows the money the stopped answers cost.
    shown = await say(tg, CHAT, "/usage")
    assert shown.split("\n")[1].endswith(f"cost {format(spent.normalize(), 'f')}")
    month = await ledger.totals("chat", str(ConversationId.telegram(CHAT)), month_key(START))
    assert (month.cost, month.estimated) == (spent, stops)


async def test_an_api_client_gone_mid_answer_is_charged_the_estimate(
    start_api: StartApi, llm: FakeLLM
) -> None:
    llm.models = {"test/model": ["text"]}
    llm.prices = {"test/model": PRICE}
    api = await start_api(llm_timeout=300.0)  # only the client's going ends the call
    await api.core.serving()  # the model list, as the API process fetches it at start
    llm.script(Reply(content="слово " * 400, pacing=Pacing(chars=6, delay=120.0)))
    async with api.client.http.post(
        api.client.base_url + "/api/chat",
        json={"message": "hammer", "stream": True},
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    ) as response:
        assert response.status == 200
        seen = b""
        while b"event: delta" not in seen:
            seen += await response.content.readany()
        response.close()  # the client goes away mid-answer
    await llm.wait_until(lambda: llm.streams_gone == 1, what="the model's stream to be closed")
    assert await api.core.service.wait_idle(5.0)
    now = utc_now()
    rows = await api.core.ledger.report(day_key(now - timedelta(days=1)), day_key(now))
    [row] = rows  # the session's chat: API sessions have no user
    assert row.kind == "chat" and row.subject.startswith("api:")
    prompt, completion = (Decimal(p) for p in PRICE)
    totals = row.totals
    assert (totals.calls, totals.estimated, totals.unpriced, totals.completion_tokens) == (
        1,
        1,
        0,
        2,  # "слово " is 6 characters: 2 tokens at 4 a token
    )
    assert totals.cost == totals.prompt_tokens * prompt + 2 * completion > 0


async def test_an_api_client_gone_before_a_plain_answer_is_charged_its_prompt(
    start_api: StartApi, llm: FakeLLM
) -> None:
    """The provider bills the prompt of a request it received, answered or not: a client
    that leaves at once is charged it (estimated, at the list price), nothing more."""
    llm.models = {"test/model": ["text"]}
    llm.prices = {"test/model": PRICE}
    api = await start_api(llm_timeout=300.0)  # only the client's going ends the call
    await api.core.serving()
    llm.script(Reply(content="never sent", hang=True))
    request = asyncio.ensure_future(
        api.client.http.post(
            api.client.base_url + "/api/chat",
            json={"message": "hammer"},
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
    )
    await llm.wait_for_in_flight(1)
    request.cancel()  # the client gives up: its connection closes
    with pytest.raises(asyncio.CancelledError):
        await request
    await llm.wait_until(lambda: llm.in_flight == 0, what="the model's call to be closed")
    assert await api.core.service.wait_idle(5.0)
    now = utc_now()
    [row] = await api.core.ledger.report(day_key(now - timedelta(days=1)), day_key(now))
    assert row.kind == "chat" and row.subject.startswith("api:")
    totals = row.totals
    assert (totals.calls, totals.estimated, totals.unpriced) == (1, 1, 0)
    assert totals.prompt_tokens > 0 and totals.completion_tokens == 0
    assert totals.cost == totals.prompt_tokens * Decimal(PRICE[0])
