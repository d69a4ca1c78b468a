"""End to end: API callers forget words of their own conversation, through the real HTTP door
(POST /api/sessions/{id}/forget with aiohttp, POST /v1/memory/forget with the official `openai`
client's `post`), over real files or real Redis and the fake LLM: what matches is listed, then
erased from what the model is shown and from everything stored; another session or caller
cannot reach it; bad requests get the documented errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError

from membot.memory.redis import RedisRepository
from tests import api_support
from tests.api_support import API_TOKEN, OTHER_TOKEN, Answer, RunningApi, StartApi
from tests.e2e.helpers import prompt_texts
from tests.e2e.processes import until
from tests.e2e.test_forget import everything_stored
from tests.e2e.test_redis_e2e import on_redis
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, Reply
from tests.v1_support import openai_client

start_api = api_support.start_api

SECRET = "Zanzibar42"


async def forget_session(api: RunningApi, sid: str, body: Any, token: str = API_TOKEN) -> Answer:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await api.client.request(
        "POST", f"/api/sessions/{sid}/forget", data=data, headers=headers
    )


def shown_to_model(llm: FakeLLM) -> str:
    return json.dumps(prompt_texts(llm.chat_requests[-1]), ensure_ascii=False)


@pytest.mark.parametrize("backend", ["files", "redis"])
async def test_a_session_lists_then_erases_its_words(
    start_api: StartApi, llm: FakeLLM, data_dir: Path, redis_repo: RedisRepository, backend: str
) -> None:
    storage = on_redis(redis_repo) if backend == "redis" else {}
    api = await start_api(**storage)
    llm.script(
        Reply(tool_calls=[native_call("remember", {"fact": f"Password: {SECRET}"}, "c1")]),
        Reply(content="Noted."),
    )
    first = await api.client.chat({"message": f"my password is {SECRET}", "maxRounds": 5})
    assert first.status == 200, first.body
    sid = str(first.body["sessionId"])
    other = await api.client.chat({"message": "hello", "maxRounds": 5})
    other_sid = str(other.body["sessionId"])
    assert SECRET in await everything_stored(data_dir, redis_repo)

    # Another session holds no such words; an unknown one is 404.
    elsewhere = await forget_session(api, other_sid, {"words": SECRET})
    assert elsewhere.status == 200 and elsewhere.body["messages"] == 0
    unknown = await forget_session(api, str(uuid.uuid4()), {"words": SECRET})
    assert (unknown.status, unknown.body["code"]) == (404, "SESSION_NOT_FOUND")

    listed = await forget_session(api, sid, {"words": SECRET})
    assert listed.status == 200, listed.body
    assert listed.body["confirmed"] is False
    assert listed.body["messages"] >= 2 and listed.body["facts"] == 1
    assert SECRET in listed.body["shownMessages"][0]["text"]
    assert listed.body["shownMessages"][0]["role"] == "user"
    assert listed.body["shownFacts"] == [f"Password: {SECRET}"]
    # Listing erases nothing.
    assert SECRET in await everything_stored(data_dir, redis_repo)

    erased = await forget_session(api, sid, {"words": SECRET, "confirm": True})
    assert erased.status == 200, erased.body
    assert erased.body["confirmed"] is True
    assert erased.body["messages"] == listed.body["messages"] and erased.body["facts"] == 1
    assert SECRET not in await everything_stored(data_dir, redis_repo)

    again = await api.client.chat({"message": "what do you know?", "sessionId": sid})
    assert again.status == 200, again.body
    assert SECRET not in shown_to_model(llm)
    assert SECRET not in json.dumps(llm.chat_requests[-1])
    nothing = await forget_session(api, sid, {"words": SECRET})
    assert nothing.body["messages"] == 0 and nothing.body["facts"] == 0


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"words": ""}, 400, "WORDS_TOO_SHORT"),
        ({"words": " a ?! "}, 400, "WORDS_TOO_SHORT"),
        ({}, 400, "INVALID_REQUEST"),
        ({"words": 5}, 400, "INVALID_REQUEST"),
        (b"not json", 400, "INVALID_REQUEST"),
    ],
)
async def test_bad_forget_requests(
    start_api: StartApi, llm: FakeLLM, body: Any, status: int, code: str
) -> None:
    api = await start_api()
    sid = str((await api.client.chat({"message": "hello", "maxRounds": 3})).body["sessionId"])
    answer = await forget_session(api, sid, body)
    assert (answer.status, answer.body["code"]) == (status, code)
    assert isinstance(answer.body["error"], str)


async def test_forget_needs_a_token_and_a_session_id(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api()
    sid = str((await api.client.chat({"message": "hello", "maxRounds": 3})).body["sessionId"])
    refused = await forget_session(api, sid, {"words": "hello"}, token="wrong")
    assert (refused.status, refused.body["code"]) == (401, "UNAUTHORIZED")
    bad = await forget_session(api, "not-a-uuid", {"words": "hello"})
    assert (bad.status, bad.body["code"]) == (400, "INVALID_REQUEST")


async def v1_forget(client: AsyncOpenAI, body: dict[str, Any], **headers: str) -> Any:
    return await client.post(
        "/memory/forget", body=body, cast_to=object, options={"headers": headers}
    )


async def test_a_v1_caller_forgets_only_its_own_conversation(
    start_api: StartApi, llm: FakeLLM, data_dir: Path
) -> None:
    api = await start_api(api_tokens=f"{API_TOKEN},{OTHER_TOKEN}")
    async with openai_client(api) as alice, openai_client(api, OTHER_TOKEN) as other:
        for who, client in (("alice", alice), ("bob", alice)):
            await client.chat.completions.create(
                model="membot",
                messages=[{"role": "user", "content": f"{SECRET} for {who}"}],
                user=who,
            )
        await other.chat.completions.create(
            model="membot", messages=[{"role": "user", "content": f"{SECRET} by token"}]
        )
        # bob's conversation, and the other token's, are not alice's.
        listed = await v1_forget(alice, {"words": SECRET, "user": "alice"})
        assert listed["confirmed"] is False and listed["messages"] == 2  # question and answer
        assert all("alice" in m["text"] for m in listed["shownMessages"])
        erased = await v1_forget(alice, {"words": SECRET, "user": "alice", "confirm": True})
        assert erased["confirmed"] is True and erased["messages"] == 2
        stored = await everything_stored(data_dir, None)
        assert f"{SECRET} for alice" not in stored
        assert f"{SECRET} for bob" in stored and f"{SECRET} by token" in stored

        await alice.chat.completions.create(
            model="membot", messages=[{"role": "user", "content": "and now?"}], user="alice"
        )
        assert SECRET not in shown_to_model(llm)
        # Without `user`: the token's own conversation (the Open WebUI header names one too).
        header = await v1_forget(alice, {"words": SECRET}, **{"X-OpenWebUI-User-Id": "bob"})
        assert header["messages"] == 2
        by_token = await v1_forget(other, {"words": SECRET})
        assert by_token["messages"] == 2

        with pytest.raises(BadRequestError) as short:
            await v1_forget(alice, {"words": "x"})
        assert short.value.code == "words_too_short" and short.value.param == "words"
        error = short.value.body
        assert isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("door", ["api", "v1"])
async def test_a_confirm_during_a_turn_waits_for_it_and_erases_its_answer_too(
    start_api: StartApi, llm: FakeLLM, data_dir: Path, door: str
) -> None:
    """A confirm sent while a turn of the same conversation waits on the model is erased in
    the conversation's order: after the turn, so its question and its answer (which say the
    words) are erased with the rest, and nothing stored holds them after."""
    api = await start_api()
    async with openai_client(api) as client:
        if door == "api":
            first = await api.client.chat({"message": f"{SECRET} is my code", "maxRounds": 5})
            sid = str(first.body["sessionId"])

            async def chat() -> str:
                answer = await api.client.chat({"message": f"again {SECRET}", "sessionId": sid})
                assert answer.status == 200, answer.body
                return str(answer.body["content"])

            async def confirm() -> dict[str, Any]:
                erased = await forget_session(api, sid, {"words": SECRET, "confirm": True})
                assert erased.status == 200, erased.body
                return dict(erased.body)

        else:
            said = [{"role": "user", "content": f"{SECRET} is my code"}]
            await client.chat.completions.create(model="membot", messages=said, user="ann")

            async def chat() -> str:
                again = [{"role": "user", "content": f"again {SECRET}"}]
                done = await client.chat.completions.create(
                    model="membot", messages=again, user="ann"
                )
                return done.choices[0].message.content or ""

            async def confirm() -> dict[str, Any]:
                erased = await v1_forget(client, {"words": SECRET, "user": "ann", "confirm": True})
                return dict(erased)

        llm.gate = asyncio.Event()
        turn = asyncio.create_task(chat())
        await llm.wait_for_in_flight(1)  # the turn holds the conversation, waiting on the model
        erasing = asyncio.create_task(confirm())
        service = api.core.service
        await until(lambda: service.in_flight == 2, what="the confirm waiting for the turn")
        assert not erasing.done()
        llm.gate.set()
        answer = await turn
        assert SECRET in answer  # the answer said the words, and was stored ...
        erased = await erasing
    # ... and the confirm, after it, erased both turns' questions and answers.
    assert erased["confirmed"] is True and erased["messages"] == 4
    assert SECRET not in await everything_stored(data_dir, None)
