"""End to end: every error of the /v1 endpoint in OpenAI's shape and status, as the official
`openai` client raises them (AuthenticationError, BadRequestError, NotFoundError,
RateLimitError, InternalServerError), against the real API server, the real core, real files
or a real Redis, and the fake LLM. Nothing of a refused request is stored."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from membot.ids import ConversationId
from membot.redis.health import AlwaysUp
from tests import api_support
from tests.api_support import API_TOKEN, RunningApi, StartApi
from tests.e2e.processes import PrivateRedis
from tests.e2e.test_redis_outage import redis_server, redis_settings
from tests.fakes import FakeLLM, Reply
from tests.v1_support import archive, openai_client, v1_conversations

start_api = api_support.start_api
__all__ = ["redis_server"]  # the fixture, used by name

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api()


@pytest.fixture
async def client(api: RunningApi) -> AsyncIterator[AsyncOpenAI]:
    async with openai_client(api) as client:
        yield client


def error_of(exc: openai.APIStatusError) -> dict[str, Any]:
    """The response's `error` object, as the client read it."""
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert exc.response.headers["Content-Type"] == "application/json; charset=utf-8"
    return dict(body["error"])


async def test_a_bad_key_is_401(api: RunningApi, llm: FakeLLM) -> None:
    async with openai_client(api, "not-a-token-of-ours") as client:
        with pytest.raises(openai.AuthenticationError) as raised:
            await client.chat.completions.create(model="membot", messages=HELLO)
        with pytest.raises(openai.AuthenticationError) as listing:
            await client.models.list()
    for exc in (raised.value, listing.value):
        error = error_of(exc)
        assert (exc.status_code, error["code"]) == (401, "invalid_api_key")
        assert error["type"] == "invalid_request_error"
        assert exc.response.headers["WWW-Authenticate"] == "Bearer"
    assert llm.requests == [] and v1_conversations(api) == []


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
            "tools_not_supported",
            "tools",
        ),
        ({"n": 2}, "n_not_supported", "n"),
        ({"messages": []}, "invalid_request", "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "invalid_request", "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "invalid_request", "messages.0.role"),
        ({"model": "has spaces"}, "invalid_request", "model"),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "unsupported_content",
            "messages.0.content.0",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "https://x.org/a.png"}}
                        ],
                    }
                ]
            },
            "invalid_image_url",
            "messages.0.content.0",
        ),
    ],
)
async def test_a_bad_request_is_400(
    api: RunningApi,
    client: AsyncOpenAI,
    llm: FakeLLM,
    fields: dict[str, Any],
    code: str,
    param: str,
) -> None:
    body: dict[str, Any] = {"model": "membot", "messages": HELLO, **fields}
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(**body)
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"], error["param"]) == (400, code, param)
    assert error["type"] == "invalid_request_error" and error["message"]
    assert llm.requests == [] and v1_conversations(api) == []


async def test_a_body_that_is_not_json_is_400_in_openais_shape(api: RunningApi) -> None:
    answer = await api.client.request(
        "POST",
        "/v1/chat/completions",
        data=b"{not json",
        headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status == 400
    assert answer.body == {
        "error": {
            "message": "The request body is not valid JSON.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request",
        }
    }
    unknown = await api.client.request("GET", "/v1/nothing", headers={})
    assert (unknown.status, unknown.body["error"]["code"]) == (404, "not_found")


async def test_a_too_long_message_is_400(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(api_max_message_chars=1000)
    async with openai_client(api) as client:
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(
                model="membot", messages=[{"role": "user", "content": "x" * 1001}]
            )
    error = error_of(raised.value)
    assert (error["code"], error["param"]) == ("string_above_max_length", "messages.0.content")
    assert llm.requests == []


async def test_a_model_not_offered_is_404_model_not_found(
    start_api: StartApi, llm: FakeLLM
) -> None:
    api = await start_api(openrouter_model="vendor/default", models="vendor/a")
    async with openai_client(api) as client:
        with pytest.raises(openai.NotFoundError) as raised:
            await client.chat.completions.create(model="vendor/other", messages=HELLO)
    error = error_of(raised.value)
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert "membot, vendor/default, vendor/a" in error["message"]
    assert llm.requests == []


async def test_a_spent_budget_is_429_insufficient_quota(start_api: StartApi, llm: FakeLLM) -> None:
    llm.cost_per_call = "0.25"
    api = await start_api(user_daily_budget="0.1")
    async with openai_client(api) as client:
        await client.chat.completions.create(model="membot", messages=HELLO, user="frank")
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="membot", messages=HELLO, user="frank")
        # Another caller has a budget of their own.
        await client.chat.completions.create(model="membot", messages=HELLO, user="grace")
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"], error["type"]) == (
        429,
        "insufficient_quota",
        "insufficient_quota",
    )
    assert "daily budget" in error["message"]
    assert int(raised.value.response.headers["Retry-After"]) > 0
    assert len(llm.chat_requests) == 2
    assert len(archive(api, ConversationId.v1_user("frank"))) == 2  # the refused one: nothing


async def test_the_rate_limit_is_429_rate_limit_exceeded(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(user_rate_limit=1)
    async with openai_client(api) as client:
        await client.chat.completions.create(model="membot", messages=HELLO, user="heidi")
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="membot", messages=HELLO, user="heidi")
        await client.chat.completions.create(model="membot", messages=HELLO, user="ivan")
    error = error_of(raised.value)
    assert (error["code"], error["type"]) == ("rate_limit_exceeded", "rate_limit_error")
    assert 0 < int(raised.value.response.headers["Retry-After"]) <= 60
    assert len(llm.chat_requests) == 2


@pytest.mark.parametrize(
    ("reply", "kind", "status", "code"),
    [
        (Reply(status=429), openai.RateLimitError, 429, "llm_rate_limited"),
        (Reply(status=500), openai.InternalServerError, 502, "llm_unavailable"),
        (Reply(status=503), openai.InternalServerError, 502, "llm_unavailable"),
    ],
)
async def test_the_providers_failure(
    api: RunningApi,
    client: AsyncOpenAI,
    llm: FakeLLM,
    reply: Reply,
    kind: type[openai.APIStatusError],
    status: int,
    code: str,
) -> None:
    llm.script(reply)
    with pytest.raises(kind) as raised:
        await client.chat.completions.create(model="membot", messages=HELLO, user="judy")
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"]) == (status, code)
    assert archive(api, ConversationId.v1_user("judy")) == []


async def test_a_failure_after_the_stream_opened_is_an_error_event(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """The client raises on the error event; nothing of the turn is stored."""
    remember = {"function": {"name": "remember", "arguments": {"fact": "likes tea"}}}
    llm.script(Reply("Let me note that.", tool_calls=[remember]), Reply(status=503))
    stream = await client.chat.completions.create(
        model="membot", messages=HELLO, user="kim", stream=True
    )
    with pytest.raises(openai.APIError) as raised:
        async for _ in stream:
            pass
    assert raised.value.body == {
        "message": "The model provider is unavailable right now.",
        "type": "server_error",
        "param": None,
        "code": "llm_unavailable",
    }
    assert archive(api, ConversationId.v1_user("kim")) == []


async def test_redis_down_is_503_with_queue_redis(
    start_api: StartApi, redis_server: PrivateRedis
) -> None:
    await redis_server.start()
    api = await start_api(**redis_settings(redis_server), queue="redis")
    assert isinstance(api.core.health, AlwaysUp)
    async with openai_client(api) as client:
        await client.chat.completions.create(model="membot", messages=HELLO, user="leo")
        await redis_server.stop()
        with pytest.raises(openai.InternalServerError) as raised:
            await client.chat.completions.create(model="membot", messages=HELLO, user="leo")
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"]) == (503, "service_unavailable")


async def test_redis_down_is_503_not_an_answer_without_memory(
    start_api: StartApi, redis_server: PrivateRedis, llm: FakeLLM
) -> None:
    """QUEUE=local answers Telegram chats without memory while Redis is down; a /v1 caller's
    turn is refused instead, and nothing is spooled for later."""
    await redis_server.start()
    api = await start_api(**redis_settings(redis_server))
    async with openai_client(api) as client:
        await client.chat.completions.create(model="membot", messages=HELLO, user="mia")
        await redis_server.stop(signal.SIGKILL)
        for _ in range(2):  # as the breaker opens, and while it is open
            with pytest.raises(openai.InternalServerError) as raised:
                await client.chat.completions.create(model="membot", messages=HELLO, user="mia")
            error = error_of(raised.value)
            assert (raised.value.status_code, error["code"]) == (503, "service_unavailable")
    assert len(llm.chat_requests) == 1
    spool = api.settings.data_dir / "redis-spool.jsonl"
    assert not spool.exists() or not any(
        json.loads(line).get("op") == "append" for line in spool.read_text().splitlines()
    )
