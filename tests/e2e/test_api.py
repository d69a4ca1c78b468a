"""End to end: clients talk to the real HTTP API (ApiServer over the real core, real files)
and the real fake LLM; the contract docs/api.md describes."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from membot.api.models import MAX_BODY_BYTES
from membot.api.server import DEFAULT_PORT, ApiServer
from membot.core.consult import FINAL_NOTE
from membot.ids import ConversationId
from membot.llm.client import WEB_SEARCH_TOOL
from membot.wiring import build_core
from tests import api_support
from tests.api_support import API_TOKEN, OTHER_TOKEN, ApiClient, ManualClock, RunningApi, StartApi
from tests.conftest import API_KEY, StartBot
from tests.e2e.helpers import prompt_texts, system_prompt
from tests.fakes import FakeLLM, FakeTelegram, Reply
from tests.fakes.process import membot_env, spawn_membot

start_api = api_support.start_api

# docs/api.md's example consultation (a gym coach, three rounds), in Russian: non-ASCII text
# on the wire both ways.
COACH_SYSTEM = "Ты - эксперт в области спорта и тренажерного зала"
COACH_MESSAGES = (
    "Помоги мне выяснить какие веса мне подобрать",
    "Упражнения на сегодня - хаммер, бабочка",
    "Новичок, в зале я 2 месяца",
)
COACH_ANSWERS = (
    "Какие упражнения вас интересуют?",
    "Спасибо за информацию! Уточните пожалуйста...",
    "Для силовой тренировки с вашими упражнениями (хаммер, бабочка) как новичку...",
)
SCHEMA = {
    "type": "object",
    "properties": {"weights": {"type": "array", "items": {"type": "string"}}},
    "required": ["weights"],
}


def coach_body(message: str, session_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "systemPrompt": COACH_SYSTEM,
        "message": message,
        "model": "sonar",
        "maxTokens": 256,
        "disableSearch": True,
        "maxRounds": 3,
    }
    if session_id is not None:
        body["sessionId"] = session_id
    return body


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api()


async def open_session(api: RunningApi, rounds: int = 3, **fields: Any) -> str:
    answer = await api.client.chat({"message": "help me plan", "maxRounds": rounds, **fields})
    assert answer.status == 200, answer.body
    return str(answer.body["sessionId"])


# -- docs/api.md's example ---------------------------------------------------------------------


async def test_non_ascii_text_comes_as_utf8_not_escapes(api: RunningApi, llm: FakeLLM) -> None:
    """A Russian answer reads as it is in curl: UTF-8 in the body, not \\u escapes."""
    llm.script(COACH_ANSWERS[0])
    async with api.client.http.post(
        api.client.base_url + "/api/chat",
        json={"message": COACH_MESSAGES[0]},
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    ) as response:
        raw = await response.read()
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert COACH_ANSWERS[0].encode() in raw
    assert b"\\u" not in raw


async def test_the_documented_consultation_of_three_rounds(api: RunningApi, llm: FakeLLM) -> None:
    llm.script(*COACH_ANSWERS)
    first = await api.client.chat(coach_body(COACH_MESSAGES[0]))
    assert first.status == 200, first.body
    sid = first.body["sessionId"]
    assert uuid.UUID(sid).version == 4
    assert first.body == {
        "content": COACH_ANSWERS[0],
        "model": "sonar",
        "isComplete": False,
        "round": 1,
        "maxRounds": 3,
        "sessionId": sid,
        "sources": [],
        "citations": [],
    }
    second = await api.client.chat(coach_body(COACH_MESSAGES[1], sid))
    assert (second.status, second.body["round"], second.body["isComplete"]) == (200, 2, False)
    assert second.body["content"] == COACH_ANSWERS[1]
    third = await api.client.chat(coach_body(COACH_MESSAGES[2], sid))
    assert third.status == 200
    assert third.body == {
        "content": COACH_ANSWERS[2],
        "model": "sonar",
        "isComplete": True,
        "round": 3,
        "maxRounds": 3,
        "sessionId": sid,
        "sources": [],
        "citations": [],
    }

    prompts = [system_prompt(r) for r in llm.chat_requests]
    assert all(p.startswith(COACH_SYSTEM) for p in prompts)
    assert "Round 1 of 3" in prompts[0] and "Round 2 of 3" in prompts[1]
    final = FINAL_NOTE.format(round=3, max_rounds=3, initial_request=COACH_MESSAGES[0])
    assert final in prompts[2]
    assert f'"{COACH_MESSAGES[0]}"' in prompts[2]
    assert "final round" not in prompts[0] + prompts[1]
    # The whole dialog is sent in the last round.
    assert prompt_texts(llm.chat_requests[2]) == [
        ("user", COACH_MESSAGES[0]),
        ("assistant", COACH_ANSWERS[0]),
        ("user", COACH_MESSAGES[1]),
        ("assistant", COACH_ANSWERS[1]),
        ("user", COACH_MESSAGES[2]),
    ]
    for request in llm.chat_requests:
        assert request["model"] == "sonar" and request["max_tokens"] == 256
        assert "response_format" not in request
    assert [m["content"] for m in api.stored(sid)] == [
        text for pair in zip(COACH_MESSAGES, COACH_ANSWERS, strict=True) for text in pair
    ]

    again = await api.client.chat(coach_body("one more thing", sid))
    assert (again.status, again.code) == (400, "DIALOG_COMPLETED")
    assert len(llm.chat_requests) == 3


async def test_a_request_without_rounds_is_one_complete_plain_round(
    api: RunningApi, llm: FakeLLM
) -> None:
    answer = await api.client.chat({"message": "what is 2+2?"})
    assert answer.status == 200
    sid = answer.body["sessionId"]
    assert answer.body == {
        "content": "ANSWER: what is 2+2?",
        "model": "test/model",
        "isComplete": True,
        "round": 1,
        "maxRounds": 1,
        "sessionId": sid,
        "sources": [],
        "citations": [],
    }
    prompt = system_prompt(llm.chat_requests[0])
    assert "Round" not in prompt and "final round" not in prompt
    assert "membot" in prompt  # the configured system prompt, as none was given
    assert len(api.stored(sid)) == 2  # the session exists...
    later = await api.client.chat({"message": "and 3+3?", "sessionId": sid})
    assert (later.status, later.code) == (400, "DIALOG_COMPLETED")  # ...and is complete


async def test_max_rounds_one_is_a_final_round_at_once(api: RunningApi, llm: FakeLLM) -> None:
    answer = await api.client.chat({"message": "plan my week", "maxRounds": 1})
    assert answer.body["isComplete"] is True
    assert (answer.body["round"], answer.body["maxRounds"]) == (1, 1)
    final = FINAL_NOTE.format(round=1, max_rounds=1, initial_request="plan my week")
    assert final in system_prompt(llm.chat_requests[0])


async def test_a_session_keeps_the_settings_of_its_first_request(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 3, model="first/model", systemPrompt="Be brief.", maxTokens=100)
    answer = await api.client.chat(
        {
            "message": "next",
            "sessionId": sid,
            "model": "other/model",
            "systemPrompt": "Be verbose.",
            "maxTokens": 5,
            "maxRounds": 2,
            "outputFormat": "json",
        }
    )
    assert answer.status == 200
    assert (answer.body["round"], answer.body["maxRounds"], answer.body["model"]) == (
        2,
        3,
        "first/model",
    )
    second = llm.chat_requests[1]
    assert (second["model"], second["max_tokens"]) == ("first/model", 100)
    assert system_prompt(second).startswith("Be brief.")
    assert "Be verbose." not in system_prompt(second)
    assert "response_format" not in second


async def test_the_model_is_the_one_the_provider_reports(api: RunningApi, llm: FakeLLM) -> None:
    llm.script(Reply(content="hi", model="provider/resolved-model"))
    answer = await api.client.chat({"message": "hi", "model": "openrouter/auto"})
    assert llm.chat_requests[0]["model"] == "openrouter/auto"
    assert answer.body["model"] == "provider/resolved-model"


async def test_max_tokens_and_unknown_fields(api: RunningApi, llm: FakeLLM) -> None:
    answer = await api.client.chat({"message": "hi", "maxTokens": 42, "temperature": 0.3})
    assert answer.status == 200
    assert llm.chat_requests[0]["max_tokens"] == 42
    assert "temperature" not in llm.chat_requests[0]


# -- request errors ----------------------------------------------------------------------------

INVALID_BODIES: list[Any] = [
    b"{not json",
    b"",
    [1, 2],
    "a string",
    None,
    {},
    {"message": ""},
    {"message": " \n\t "},
    {"message": 5},
    {"message": None},
    {"message": "hi", "maxRounds": "3"},
    {"message": "hi", "maxRounds": 2.5},
    {"message": "hi", "maxRounds": True},
    {"message": "hi", "maxTokens": 0},
    {"message": "hi", "maxTokens": "256"},
    {"message": "hi", "disableSearch": "true"},
    {"message": "hi", "outputFormat": "xml"},
    {"message": "hi", "sessionId": "not-a-uuid"},
    {"message": "hi", "sessionId": 42},
    {"message": "hi", "model": ""},
    {"message": "hi", "systemPrompt": ["a"]},
    {"message": "hi", "outputSchema": "{not json"},
    {"message": "hi", "outputSchema": [1]},
    {"message": "hi", "outputSchema": {"type": "string"}},
    {"message": "hi", "outputSchema": {"type": "object", "required": "weights"}},
    {"message": "hi", "outputSchema": {"$ref": "http://169.254.169.254/latest"}},
    {"message": "hi", "outputSchema": {"properties": {"a": {"$ref": "#/$defs/missing"}}}},
    {"message": "hi", "outputSchema": {"properties": {"a": {"$id": "http://x/a", "$ref": "#"}}}},
    {"message": "hi", "outputSchema": {"$schema": ["x"]}},
    {"message": "hi", "outputSchema": {"$schema": "https://example.com/unknown"}},
    {"message": "hi", "outputSchema": {"properties": {"a": {"pattern": "(unclosed"}}}},
    {
        "message": "hi",
        "outputSchema": {"patternProperties": {"^x": {}}, "unevaluatedProperties": False},
    },
    # A model id is logged: line breaks and spaces could forge log lines.
    {"message": "hi", "model": "openai/gpt-4o\nERROR forged line"},
    {"message": "hi", "model": "a model"},
]


@pytest.mark.parametrize("body", INVALID_BODIES, ids=lambda b: json.dumps(b, default=str)[:40])
async def test_invalid_requests(api: RunningApi, llm: FakeLLM, body: Any) -> None:
    answer = await api.client.chat(body)
    assert (answer.status, answer.code) == (400, "INVALID_REQUEST"), answer.body
    assert isinstance(answer.body["error"], str) and answer.body["error"].endswith(".")
    assert set(answer.body) == {"error", "code"}
    assert llm.requests == [] and api.sessions_on_disk() == []


async def test_an_output_schema_may_be_given_as_text(api: RunningApi, llm: FakeLLM) -> None:
    llm.script('{"weights": ["10 kg"]}')
    answer = await api.client.chat({"message": "weights?", "outputSchema": json.dumps(SCHEMA)})
    assert answer.status == 200
    assert json.loads(answer.body["content"]) == {"weights": ["10 kg"]}


async def test_an_output_schema_may_refer_within_itself(api: RunningApi, llm: FakeLLM) -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"weight": {"type": "string", "$anchor": "weight"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/weight"}, "b": {"$ref": "#weight"}},
    }
    llm.script('{"a": 1}', '{"a": "1 kg", "b": "2 kg"}')
    answer = await api.client.chat({"message": "weights?", "outputSchema": schema})
    assert (answer.status, json.loads(answer.body["content"])) == (200, {"a": "1 kg", "b": "2 kg"})


@pytest.mark.parametrize(
    ("rounds", "code"),
    [(0, "INVALID_MAX_ROUNDS"), (-3, "INVALID_MAX_ROUNDS"), (11, "MAX_ROUNDS_EXCEEDED")],
)
async def test_max_rounds_out_of_range(
    api: RunningApi, llm: FakeLLM, rounds: int, code: str
) -> None:
    answer = await api.client.chat({"message": "hi", "maxRounds": rounds})
    assert (answer.status, answer.code) == (400, code)
    assert llm.requests == []


async def test_max_rounds_up_to_the_setting(start_api: StartApi) -> None:
    api = await start_api(max_rounds=4, consult_rounds=2)
    assert (await api.client.chat({"message": "hi", "maxRounds": 4})).status == 200
    too_many = await api.client.chat({"message": "hi", "maxRounds": 5})
    assert (too_many.status, too_many.code) == (400, "MAX_ROUNDS_EXCEEDED")
    assert "4" in too_many.body["error"]


async def test_unknown_session(api: RunningApi, llm: FakeLLM) -> None:
    answer = await api.client.chat({"message": "hi", "sessionId": str(uuid.uuid4())})
    assert (answer.status, answer.code) == (404, "SESSION_NOT_FOUND")
    assert llm.requests == [] and api.sessions_on_disk() == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {API_TOKEN}"},
        {"Authorization": f"Bearer {API_TOKEN}x"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer тест"},
    ],
)
async def test_unauthorized(api: RunningApi, llm: FakeLLM, headers: dict[str, str]) -> None:
    answer = await api.client.request(
        "POST", "/api/chat", data=b'{"message": "hi"}', headers=headers
    )
    assert (answer.status, answer.code) == (401, "UNAUTHORIZED")
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert llm.requests == []


async def test_every_configured_token_is_accepted(start_api: StartApi) -> None:
    api = await start_api(api_tokens=f" {API_TOKEN} , {OTHER_TOKEN} ")
    for token in (API_TOKEN, OTHER_TOKEN):
        assert (await api.client.chat({"message": "hi"}, token=token)).status == 200
    assert (await api.client.chat({"message": "hi"}, token="bearer-token-unknown")).status == 401


async def test_payload_too_large(api: RunningApi, llm: FakeLLM) -> None:
    def body_of(size: int) -> bytes:  # padded with a field the server ignores
        head, tail = b'{"message": "hi", "padding": "', b'"}'
        return head + b"x" * (size - len(head) - len(tail)) + tail

    limit = MAX_BODY_BYTES  # 25 MB: room for an attachment (tests/e2e/test_api_media.py)
    assert (await api.client.chat(body_of(limit))).status == 200
    declared = await api.client.chat(body_of(limit + 1))
    assert (declared.status, declared.code) == (413, "PAYLOAD_TOO_LARGE")

    async def chunks() -> AsyncIterator[bytes]:  # chunked: no Content-Length to go by
        data = body_of(limit + 1000)
        for start in range(0, len(data), 8192):
            yield data[start : start + 8192]

    streamed = await api.client.request(
        "POST", "/api/chat", data=chunks(), headers=api_support.AUTH
    )
    assert (streamed.status, streamed.code) == (413, "PAYLOAD_TOO_LARGE")
    assert len(llm.chat_requests) == 1


async def test_routing_errors_are_json(api: RunningApi) -> None:
    missing = await api.client.request("GET", "/api/nothing-here")
    assert (missing.status, missing.code) == (404, "NOT_FOUND")
    wrong = await api.client.request("GET", "/api/chat", headers=api_support.AUTH)
    assert (wrong.status, wrong.code) == (405, "METHOD_NOT_ALLOWED")
    assert "POST" in wrong.headers["Allow"]
    put = await api.client.request("PUT", "/healthz")
    assert (put.status, put.code) == (405, "METHOD_NOT_ALLOWED")


async def test_health_and_openapi_need_no_token(api: RunningApi) -> None:
    health = await api.client.request("GET", "/healthz")
    assert (health.status, health.body) == (200, {"status": "ok"})
    document = await api.client.request("GET", "/api/openapi.json")
    assert document.status == 200 and document.body["openapi"].startswith("3.1")
    chat = document.body["paths"]["/api/chat"]["post"]
    assert set(chat["responses"]) == {
        "200", "400", "401", "404", "409", "413", "429", "500", "502", "503", "504", "default"
    }  # fmt: skip
    schemas = document.body["components"]["schemas"]
    assert set(schemas["ChatResponse"]["required"]) == {
        "content", "model", "isComplete", "round", "maxRounds", "sessionId", "sources",
        "citations"
    }  # fmt: skip
    assert set(schemas["ChatRequest"]["properties"]) == {
        "message", "model", "maxTokens", "disableSearch", "systemPrompt", "outputFormat",
        "outputSchema", "maxRounds", "sessionId", "attachments", "stream",
    }  # fmt: skip
    assert schemas["ChatRequest"]["properties"]["maxRounds"]["anyOf"][0]["maximum"] == 10
    events = chat["responses"]["200"]["content"]["text/event-stream"]["x-events"]
    assert set(events) == {"delta", "done", "error"}
    assert events["done"] == chat["responses"]["200"]["content"]["application/json"]["schema"]


# -- the model's errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (Reply(status=429), 429, "LLM_RATE_LIMITED"),
        (Reply(status=503), 502, "LLM_UNAVAILABLE"),
        (Reply(status=500), 502, "LLM_UNAVAILABLE"),
        (Reply(status=401, error_message="Incorrect API key"), 502, "LLM_UNAVAILABLE"),
        (Reply(status=400, error_message="bogus/x is not a valid model ID"), 400, "MODEL_REJECTED"),
        (Reply(status=404, error_message="No endpoints found for x/y"), 400, "MODEL_REJECTED"),
    ],
)  # fmt: skip
async def test_model_errors(
    api: RunningApi, llm: FakeLLM, reply: Reply, status: int, code: str
) -> None:
    # With web search on, a 400 or 404 is first taken for a refused search tool and the call
    # is sent again with the plugin (llm/client.py): a provider that refuses the request
    # refuses that one too.
    llm.script(*[reply] * (2 if code == "MODEL_REJECTED" else 1))
    answer = await api.client.chat({"message": "hi", "maxRounds": 2})
    assert (answer.status, answer.code) == (status, code)
    if code == "MODEL_REJECTED":
        assert reply.error_message in answer.body["error"]
    assert api.sessions_on_disk() == []  # a first round that fails opens no session


async def test_a_model_timeout_is_504(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(llm_timeout=0.3)
    llm.script(Reply(hang=True))
    answer = await api.client.chat({"message": "hi"})
    assert (answer.status, answer.code) == (504, "LLM_TIMEOUT")
    assert api.sessions_on_disk() == []


async def test_a_failed_round_can_be_sent_again(api: RunningApi, llm: FakeLLM) -> None:
    sid = await open_session(api, 3)
    llm.script(Reply(status=503))
    failed = await api.client.chat({"message": "my answer", "sessionId": sid})
    assert (failed.status, failed.code) == (502, "LLM_UNAVAILABLE")
    assert len(api.stored(sid)) == 2
    again = await api.client.chat({"message": "my answer", "sessionId": sid})
    assert (again.status, again.body["round"]) == (200, 2)
    assert "Round 2 of 3" in system_prompt(llm.chat_requests[-1])


# -- structured output -----------------------------------------------------------------------


async def test_output_schema_valid(api: RunningApi, llm: FakeLLM) -> None:
    llm.script('```json\n{"weights": ["20 kg"]}\n```')
    answer = await api.client.chat({"message": "weights?", "outputSchema": SCHEMA})
    assert answer.status == 200
    assert answer.body["content"] == '{"weights": ["20 kg"]}'
    [request] = llm.chat_requests
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "strict": False, "schema": SCHEMA},
    }
    assert request["provider"] == {"require_parameters": True}


async def test_output_schema_applies_to_the_completing_answer_only(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 2, outputSchema=SCHEMA)
    llm.script('{"weights": []}')
    final = await api.client.chat({"message": "beginner", "sessionId": sid})
    assert final.body["isComplete"] is True and final.body["content"] == '{"weights": []}'
    first, second = llm.chat_requests
    assert "response_format" not in first
    assert second["response_format"]["json_schema"]["schema"] == SCHEMA


async def test_output_schema_repaired_once(api: RunningApi, llm: FakeLLM) -> None:
    llm.script('{"weights": "heavy"}', '{"weights": ["heavy"]}')
    answer = await api.client.chat({"message": "weights?", "outputSchema": SCHEMA})
    assert answer.status == 200 and answer.body["content"] == '{"weights": ["heavy"]}'
    first, repair = llm.chat_requests
    assert repair["response_format"] == first["response_format"]
    assert repair["provider"] == {"require_parameters": True}
    assert repair["messages"][-2] == {"role": "assistant", "content": '{"weights": "heavy"}'}
    assert "could not be used" in repair["messages"][-1]["content"]


async def test_output_invalid_twice_is_502_and_changes_nothing(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 2, outputSchema=SCHEMA)
    llm.script("not json at all", '{"weights": 3}')
    failed = await api.client.chat({"message": "beginner", "sessionId": sid})
    assert (failed.status, failed.code) == (502, "INVALID_OUTPUT")
    assert len(api.stored(sid)) == 2
    llm.script('{"weights": ["5 kg"]}')
    again = await api.client.chat({"message": "beginner", "sessionId": sid})
    assert (again.status, again.body["round"], again.body["isComplete"]) == (200, 2, True)

    llm.script("nope", "still nope")
    first_round = await api.client.chat({"message": "x", "outputSchema": SCHEMA})
    assert (first_round.status, first_round.code) == (502, "INVALID_OUTPUT")
    assert api.sessions_on_disk() == [sid]


async def test_output_format_json(api: RunningApi, llm: FakeLLM) -> None:
    llm.script("[1, 2]", '{"ok": true}')
    answer = await api.client.chat({"message": "json please", "outputFormat": "json"})
    assert answer.status == 200 and json.loads(answer.body["content"]) == {"ok": True}
    first, repair = llm.chat_requests
    assert first["response_format"] == repair["response_format"] == {"type": "json_object"}
    assert "provider" not in first


async def test_output_format_text_is_plain(api: RunningApi, llm: FakeLLM) -> None:
    answer = await api.client.chat({"message": "hi", "outputFormat": "text"})
    assert answer.body["content"] == "ANSWER: hi"
    assert "response_format" not in llm.chat_requests[0]


# -- web search --------------------------------------------------------------------------------


def searches(request: dict[str, Any]) -> bool:
    return WEB_SEARCH_TOOL in (request.get("tools") or [])


async def test_disable_search(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(web_search=True)
    await api.client.chat({"message": "news?"})
    await api.client.chat({"message": "news?", "disableSearch": False})
    await api.client.chat({"message": "news?", "disableSearch": True})
    sid = await open_session(api, 3, disableSearch=True)
    await api.client.chat({"message": "more", "sessionId": sid, "disableSearch": False})
    assert [searches(r) for r in llm.chat_requests] == [True, True, False, False, False]


async def test_no_search_when_web_search_is_off(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(web_search=False)
    await api.client.chat({"message": "news?", "disableSearch": False})
    assert not searches(llm.chat_requests[0])


# -- sessions: concurrency, expiry, restart ----------------------------------------------------


async def test_a_second_request_of_a_busy_session_is_refused_at_once(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 3)
    llm.gate = asyncio.Event()
    first = asyncio.create_task(api.client.chat({"message": "answer A", "sessionId": sid}))
    await llm.wait_for_in_flight(1)
    second = await api.client.chat({"message": "answer B", "sessionId": sid})
    assert (second.status, second.code) == (409, "SESSION_BUSY")
    llm.gate.set()
    answered = await first
    assert (answered.status, answered.body["round"]) == (200, 2)
    assert [m["content"] for m in api.stored(sid)][2:] == ["answer A", "ANSWER: answer A"]
    last = await api.client.chat({"message": "answer C", "sessionId": sid})
    assert (last.body["round"], last.body["isComplete"]) == (3, True)


async def test_an_expired_session_is_gone_at_once(api: RunningApi, llm: FakeLLM) -> None:
    sid = await open_session(api, 3)
    done = (await api.client.chat({"message": "one shot"})).body["sessionId"]
    api.clock.advance(api.settings.session_ttl + 1)
    for session in (sid, done):  # completed sessions expire the same way
        answer = await api.client.chat({"message": "still there?", "sessionId": session})
        assert (answer.status, answer.code) == (404, "SESSION_NOT_FOUND")
        assert not api.session_dir(session).exists()
    assert len(llm.chat_requests) == 2
    assert api.server.sweeper.sweeps == 0  # gone before any sweep came by


async def test_an_expired_session_being_swept_is_not_found_rather_than_busy(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 3)
    api.clock.advance(api.settings.session_ttl + 1)
    # Whoever holds the expired session's turn (the sweep deleting it, here the test), a
    # request for it is SESSION_NOT_FOUND, not SESSION_BUSY.
    async with api.core.service.exclusive(ConversationId.api(sid)):
        answer = await api.client.chat({"message": "still there?", "sessionId": sid})
    assert (answer.status, answer.code) == (404, "SESSION_NOT_FOUND")


async def test_a_fact_remembered_in_a_failed_round_is_not_kept(
    api: RunningApi, llm: FakeLLM
) -> None:
    sid = await open_session(api, 3)
    remember = {"function": {"name": "remember", "arguments": {"fact": "The user is a beginner"}}}
    llm.script(Reply(content=None, tool_calls=[remember]), Reply(status=503))
    answer = await api.client.chat({"message": "I'm a beginner", "sessionId": sid})
    assert (answer.status, answer.code) == (502, "LLM_UNAVAILABLE")
    assert not (api.session_dir(sid) / "facts.json").exists()
    # Sent again, the round goes through, and only now is the fact kept.
    llm.script(Reply(content=None, tool_calls=[remember]), "Noted.")
    answer = await api.client.chat({"message": "I'm a beginner", "sessionId": sid})
    assert (answer.status, answer.body["round"]) == (200, 2)
    facts = json.loads((api.session_dir(sid) / "facts.json").read_text())["facts"]
    assert [f["text"] for f in facts] == ["The user is a beginner"]


async def test_the_sweep_removes_expired_sessions(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(session_ttl=1.0)  # swept every 0.5 s
    assert api.server.sweeper.interval == 0.5
    old = await open_session(api, 3)
    api.clock.advance(10)
    await api.server.sweeper.wait_for_sweep()
    assert api.sessions_on_disk() == []
    answer = await api.client.chat({"message": "hello?", "sessionId": old})
    assert (answer.status, answer.code) == (404, "SESSION_NOT_FOUND")

    api.clock.set(-100)  # a session used just now is far from its TTL
    fresh = await open_session(api, 3)
    await api.server.sweeper.wait_for_sweep()
    assert api.sessions_on_disk() == [fresh]
    assert (await api.client.chat({"message": "yes", "sessionId": fresh})).status == 200


async def test_a_restart_between_rounds_carries_on(
    start_api: StartApi, llm: FakeLLM, data_dir: Path
) -> None:
    clock = ManualClock()
    first = await start_api(clock=clock)
    sid = await open_session(first, 3, systemPrompt="Coach.", model="coach/model")
    await first.stop()

    second = await start_api(clock=clock)
    assert second.settings.data_dir == data_dir
    answer = await second.client.chat({"message": "beginner", "sessionId": sid})
    assert (answer.status, answer.body["round"], answer.body["model"]) == (200, 2, "coach/model")
    request = llm.chat_requests[-1]
    assert system_prompt(request).startswith("Coach.") and "Round 2 of 3" in system_prompt(request)
    assert prompt_texts(request) == [
        ("user", "help me plan"),
        ("assistant", "ANSWER: help me plan"),
        ("user", "beginner"),
    ]


async def test_stop_accepting_lets_requests_in_progress_finish(
    api: RunningApi, llm: FakeLLM
) -> None:
    llm.gate = asyncio.Event()
    in_flight = asyncio.create_task(api.client.chat({"message": "slow"}))
    await llm.wait_for_in_flight(1)
    await api.server.stop_accepting()
    late = ApiClient(api.server.url)
    try:
        with pytest.raises(aiohttp.ClientConnectionError):
            await late.chat({"message": "too late"})
    finally:
        await late.close()
    llm.gate.set()
    answer = await in_flight
    assert answer.status == 200 and answer.body["content"] == "ANSWER: slow"


# -- logs ------------------------------------------------------------------------------------


async def test_logs_carry_session_round_status_and_never_text(
    api: RunningApi, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    secret, prompt = "MY-PRIVATE-MESSAGE-4711", "MY-PRIVATE-SYSTEM-PROMPT-0815"
    answer = await api.client.chat({"message": secret, "systemPrompt": prompt, "maxRounds": 2})
    sid = answer.body["sessionId"]
    await api.client.chat({"message": secret, "sessionId": sid})
    refused = Reply(status=400, error_message=f"cannot handle {secret}")
    llm.script(refused, refused)  # the second: the retry with the web plugin
    await api.client.chat({"message": secret, "systemPrompt": prompt})
    await api.client.chat({"message": secret, "maxRounds": "x"})
    await api.client.chat({"message": secret}, token="wrong-token-but-long-enough")

    for record in caplog.records:
        text = record.getMessage()
        for private in (secret, prompt, API_TOKEN, "wrong-token-but-long-enough"):
            assert private not in text, (record.name, text)
    lines = [r.getMessage() for r in caplog.records if r.name == "membot.api"]
    assert any(f"session={sid} round=1 " in line and "status=200" in line for line in lines)
    assert any(f"session={sid} round=2 " in line and "status=200" in line for line in lines)
    assert any("status=400" in line and "code=MODEL_REJECTED" in line for line in lines)
    assert any("status=401" in line and "code=UNAUTHORIZED" in line for line in lines)
    assert all("duration=" in line for line in lines if "status=" in line)


# -- the API in `membot run` and `membot api` --------------------------------------------------


async def test_the_api_beside_the_bot_in_one_process(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot
) -> None:
    port = api_support.free_port()
    await start_bot(api_port=port, api_tokens=API_TOKEN)
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        llm.gate = asyncio.Event()
        tg.push_text(1001, "hello bot")
        from_api = asyncio.create_task(client.chat({"message": "hello api", "maxRounds": 2}))
        await llm.wait_for_in_flight(2)  # both front doors are waiting on the model at once
        llm.gate.set()
        answer = await from_api
        [sent] = await tg.wait_for_messages(1001, 1)
    finally:
        await client.close()
    assert sent.text == "ANSWER: hello bot"
    assert (answer.status, answer.body["content"], answer.body["round"]) == (
        200,
        "ANSWER: hello api",
        1,
    )


async def test_membot_api_serves_until_sigterm(
    llm: FakeLLM, tmp_path: Path, data_dir: Path
) -> None:
    port = api_support.free_port()
    env = membot_env(
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        data_dir=str(data_dir),
        api_port=str(port),
        api_tokens=API_TOKEN,
        log_level="INFO",
    )
    process = await spawn_membot(
        tmp_path, env, "api", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(60):
            while "HTTP API listening" not in (line := (await process.stderr.readline()).decode()):
                assert line, f"membot api exited: {''.join(seen)}"
                seen.append(line)
        client = ApiClient(f"http://127.0.0.1:{port}")
        try:
            answer = await client.chat({"message": "private-words"})
        finally:
            await client.close()
        assert (answer.status, answer.body["content"]) == (200, "ANSWER: private-words")
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            rest = (await process.stderr.read()).decode()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert "membot api stopped" in rest
    assert "status=200" in rest and "private-words" not in rest


async def test_membot_api_defaults_to_port_8080(make_settings: Any) -> None:
    settings = make_settings(api_tokens=API_TOKEN)
    assert settings.api_port is None
    core = build_core(settings)
    try:
        assert ApiServer(settings, core).port == DEFAULT_PORT == 8080
    finally:
        await core.aclose()
