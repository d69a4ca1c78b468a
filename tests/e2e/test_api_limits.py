"""End to end: what an API client may ask of the operator's key and disk, against the real
HTTP API, the real core, real files and the fake LLM: only the models MODELS offers, and
messages and system prompts of bounded size, each stored once."""

from __future__ import annotations

import base64
import binascii
import contextlib
from pathlib import Path
from typing import Any

import pytest

from membot.core.consult import FINAL_NOTE
from membot.memory.redis import RedisRepository
from tests import api_support
from tests.api_support import RunningApi, StartApi
from tests.e2e.helpers import system_prompt
from tests.e2e.test_redis_e2e import on_redis
from tests.fakes import FakeLLM

start_api = api_support.start_api

OFFERED = "vendor/offered"
OTHER = "vendor/other"
FOREIGN = "anthropic/claude-opus-4"


def occurrences(directory: Path, text: str) -> int:
    """How many times `text` is on disk anywhere under `directory`."""
    needle = text.encode()
    return sum(p.read_bytes().count(needle) for p in directory.rglob("*") if p.is_file())


async def in_redis(repo: RedisRepository, text: str) -> int:
    """How many times `text` is in Redis under the test's key prefix, whatever the key type
    (files are kept there in base64)."""
    needle, found = text.encode(), 0
    client = repo.client
    async for key in client.scan_iter(match=f"{repo.prefix}*"):
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            values = [await client.get(key)]
        elif kind == "hash":
            values = list((await client.hgetall(key)).values())
        elif kind == "list":
            values = await client.lrange(key, 0, -1)
        elif kind == "zset":
            values = await client.zrange(key, 0, -1)
        else:
            values = []
        for value in values:
            raw = value if isinstance(value, bytes) else str(value).encode()
            found += raw.count(needle)
            with contextlib.suppress(binascii.Error, ValueError):  # a file, as Redis keeps it
                found += base64.b64decode(raw, validate=True).count(needle)
    return found


# -- models ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_that_MODELS_does_not_offer_is_refused(
    start_api: StartApi, llm: FakeLLM, stream: bool
) -> None:
    api = await start_api(openrouter_model="test/model", models=f"{OFFERED},{OTHER}")
    refused = await api.client.chat({"message": "hi", "model": FOREIGN, "stream": stream})
    assert (refused.status, refused.code) == (400, "MODEL_NOT_ALLOWED")
    assert refused.headers["Content-Type"].startswith("application/json")
    # It names what may be asked for: the default model too, as /model offers it.
    for model in ("test/model", OFFERED, OTHER):
        assert model in refused.body["error"]
    assert llm.chat_requests == [] and api.sessions_on_disk() == []

    for model in (OFFERED, "test/model", None):
        body: dict[str, Any] = {"message": "hi", "stream": stream}
        if model is not None:
            body["model"] = model
        assert (await api.client.chat(body)).status == 200
    assert [r["model"] for r in llm.chat_requests] == [OFFERED, "test/model", "test/model"]


async def test_any_model_may_be_asked_for_while_MODELS_is_empty(
    start_api: StartApi, llm: FakeLLM
) -> None:
    api = await start_api(openrouter_model="test/model")
    answer = await api.client.chat({"message": "hi", "model": FOREIGN})
    assert answer.status == 200
    assert llm.chat_requests[-1]["model"] == FOREIGN


async def test_a_session_on_a_model_MODELS_no_longer_offers_is_refused(
    start_api: StartApi, llm: FakeLLM
) -> None:
    before = await start_api(models=OFFERED)
    opened = await before.client.chat({"message": "plan", "model": OFFERED, "maxRounds": 3})
    assert opened.status == 200
    sid = opened.body["sessionId"]
    await before.stop()

    after = await start_api(models=OTHER, data_dir=before.settings.data_dir)
    refused = await after.client.chat({"message": "go on", "sessionId": sid})
    assert (refused.status, refused.code) == (400, "MODEL_NOT_ALLOWED")
    assert OFFERED in refused.body["error"] and OTHER in refused.body["error"]
    assert len(llm.chat_requests) == 1
    assert [m["content"] for m in after.stored(sid)][:1] == ["plan"]
    assert len(after.stored(sid)) == 2  # the refused round left nothing


# -- sizes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_an_oversize_message_or_system_prompt_is_413_and_goes_nowhere(
    api: RunningApi, llm: FakeLLM, stream: bool
) -> None:
    megabyte = "x" * 1_000_000
    cases = [
        ({"message": megabyte}, "message", "100,000"),
        ({"message": "x" * 100_001}, "message", "100,000"),
        ({"message": "hi", "systemPrompt": megabyte}, "systemPrompt", "4,000"),
        ({"message": "hi", "systemPrompt": "s" * 4_001}, "systemPrompt", "4,000"),
    ]
    for body, field, cap in cases:
        refused = await api.client.chat({**body, "maxRounds": 3, "stream": stream})
        assert (refused.status, refused.code) == (413, "MESSAGE_TOO_LARGE"), field
        assert field in refused.body["error"] and cap in refused.body["error"]
    assert llm.chat_requests == [] and api.sessions_on_disk() == []

    at_caps = {"message": "m" * 100_000, "systemPrompt": "s" * 4_000, "stream": stream}
    assert (await api.client.chat(at_caps)).status == 200
    assert len(llm.chat_requests) == 1


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api()


async def test_the_message_cap_is_a_setting(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(api_max_message_chars=50)
    refused = await api.client.chat({"message": "x" * 51})
    assert (refused.status, refused.code) == (413, "MESSAGE_TOO_LARGE")
    assert "at most 50" in refused.body["error"]
    assert (await api.client.chat({"message": "x" * 50})).status == 200
    document = (await api.client.request("GET", "/api/openapi.json")).body
    message = document["components"]["schemas"]["ChatRequest"]["properties"]["message"]
    assert message["maxLength"] == 50


async def test_the_message_and_the_system_prompt_are_each_stored_once(
    start_api: StartApi, llm: FakeLLM
) -> None:
    """A consultation's system prompt and initial request ride in every round's prompt, and
    are kept once on disk, across a restart."""
    prompt = "PROMPT-MARK " + "p" * 3_980
    request = "REQUEST-MARK " + "r" * 99_980
    llm.script("Which exercises?", "And how long?", "The plan.")
    api = await start_api()
    first = await api.client.chat({"message": request, "systemPrompt": prompt, "maxRounds": 3})
    assert first.status == 200
    sid = first.body["sessionId"]
    assert (await api.client.chat({"message": "squats", "sessionId": sid})).status == 200
    await api.stop()
    api = await start_api(data_dir=api.settings.data_dir)
    last = await api.client.chat({"message": "two months", "sessionId": sid})
    assert (last.status, last.body["isComplete"]) == (200, True)

    assert all(system_prompt(r).startswith(prompt) for r in llm.chat_requests)
    final = FINAL_NOTE.format(round=3, max_rounds=3, initial_request=request)
    assert final in system_prompt(llm.chat_requests[-1])
    session = api.session_dir(sid)
    assert occurrences(session, "PROMPT-MARK") == 1
    assert occurrences(session, "REQUEST-MARK") == 1


async def test_a_single_round_keeps_its_message_once(api: RunningApi, llm: FakeLLM) -> None:
    llm.script("Noted.")
    answer = await api.client.chat({"message": "ONE-MARK " + "o" * 5_000, "systemPrompt": "be"})
    assert answer.status == 200
    assert occurrences(api.session_dir(answer.body["sessionId"]), "ONE-MARK") == 1


async def test_on_redis_too_each_is_stored_once(
    start_api: StartApi, llm: FakeLLM, redis_repo: RedisRepository
) -> None:
    prompt = "PROMPT-MARK " + "p" * 3_980
    request = "REQUEST-MARK " + "r" * 5_000
    llm.script("Which exercises?", "The plan.")
    api = await start_api(**on_redis(redis_repo))
    first = await api.client.chat({"message": request, "systemPrompt": prompt, "maxRounds": 2})
    assert first.status == 200
    last = await api.client.chat({"message": "squats", "sessionId": first.body["sessionId"]})
    assert (last.status, last.body["isComplete"]) == (200, True)
    assert all(system_prompt(r).startswith(prompt) for r in llm.chat_requests)
    final = FINAL_NOTE.format(round=2, max_rounds=2, initial_request=request)
    assert final in system_prompt(llm.chat_requests[-1])
    assert await in_redis(redis_repo, "PROMPT-MARK") == 1
    assert await in_redis(redis_repo, "REQUEST-MARK") == 1
