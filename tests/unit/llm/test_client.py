"""Per-call options, provider reasons and structured output, against the real FakeLLM server
(over HTTP, through the real OpenAI client)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import jsonschema.validators
import pytest

from membot.llm.client import OpenAIChatModel
from membot.llm.errors import LLMRejected
from membot.llm.model import CallOptions, ModelRequest
from membot.llm.structured import OutputSpec, load_schema
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Reply

SERVER_TOOL = {"type": "openrouter:web_search"}
REMEMBER = {"type": "function", "function": {"name": "remember", "parameters": {}}}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# ---- options on the wire ----------------------------------------------------------------------


async def test_no_options_send_a_plain_request(llm: FakeLLM, model: OpenAIChatModel) -> None:
    reply = await model.complete(ModelRequest([user("hi")], options=CallOptions()))
    assert reply.content == "ANSWER: hi" and reply.model == "test/model"
    assert set(llm.requests[0]) == {"model", "messages"}


async def test_options_reach_the_wire(llm: FakeLLM, model: OpenAIChatModel) -> None:
    response_format = {"type": "json_object"}
    options = CallOptions(
        model="other/model",
        max_tokens=64,
        response_format=response_format,
        require_parameters=True,
    )
    reply = await model.complete(ModelRequest([user("hi")], options=options))
    sent = llm.requests[0]
    assert sent["model"] == "other/model" and reply.model == "other/model"
    assert sent["max_tokens"] == 64
    assert sent["response_format"] == response_format
    assert sent["provider"] == {"require_parameters": True}
    assert "tools" not in sent and "plugins" not in sent
    # The override is per call: the next plain call uses the client's model again.
    await model.complete(ModelRequest([user("again")]))
    assert llm.requests[1]["model"] == "test/model"


async def test_sampling_goes_verbatim_and_never_replaces_a_field(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    sampling = {"temperature": 0.3, "stop": ["END"], "model": "x/y", "max_tokens": 5}
    options = CallOptions(max_tokens=64, sampling=sampling)
    await model.complete(ModelRequest([user("hi")], options=options))
    sent = llm.requests[0]
    assert (sent["temperature"], sent["stop"]) == (0.3, ["END"])
    assert (sent["model"], sent["max_tokens"]) == ("test/model", 64)


async def test_a_number_past_64_bits_still_reaches_the_wire(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    # An API client's seed (or max_tokens) is any JSON integer: sent as written, for the
    # provider to take or refuse, not an error of membot's own before the call.
    seed = 2**70 + 1  # no float holds it: what arrives is the integer itself
    options = CallOptions(sampling={"seed": seed})
    reply = await model.complete(ModelRequest([user("hi")], options=options))
    assert reply.content == "ANSWER: hi" and llm.requests[0]["seed"] == seed
    streamed = [p async for p in model.stream(ModelRequest([user("hi")], options=options))]
    assert "".join(p for p in streamed if isinstance(p, str)) == "ANSWER: hi"
    assert llm.requests[1]["seed"] == seed


async def test_web_search_joins_function_tools(llm: FakeLLM, model: OpenAIChatModel) -> None:
    options = CallOptions(web_search=True)
    await model.complete(
        ModelRequest([user("x")], tools=[REMEMBER], tool_choice="auto", options=options)
    )
    sent = llm.requests[0]
    assert sent["tools"] == [REMEMBER, SERVER_TOOL] and sent["tool_choice"] == "auto"
    assert "plugins" not in sent


async def test_web_search_alone_sends_no_tool_choice(llm: FakeLLM, model: OpenAIChatModel) -> None:
    await model.complete(
        ModelRequest(
            [user("x")], tools=[], tool_choice="auto", options=CallOptions(web_search=True)
        )
    )
    sent = llm.requests[0]
    assert sent["tools"] == [SERVER_TOOL]
    assert "tool_choice" not in sent and "plugins" not in sent


def test_max_tokens_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        CallOptions(max_tokens=0)


# ---- web search fallback to the plugin --------------------------------------------------------


async def test_refused_server_tool_falls_back_to_the_plugin(
    llm: FakeLLM, model: OpenAIChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    llm.refuse_server_tools = True
    options = CallOptions(web_search=True)
    with caplog.at_level(logging.WARNING, logger="membot.llm.client"):
        first = await model.complete(ModelRequest([user("news?")], options=options))
    assert first.content == "ANSWER: news?"
    [refused] = llm.rejected_requests
    assert refused["tools"] == [SERVER_TOOL] and "plugins" not in refused
    retry = llm.requests[0]
    assert retry["plugins"] == [{"id": "web"}] and "tools" not in retry
    assert "refused the web search tool (http 400)" in caplog.text

    # Remembered for this model: straight to the plugin, no second refusal.
    await model.complete(
        ModelRequest([user("more")], tools=[REMEMBER], tool_choice="auto", options=options)
    )
    assert len(llm.rejected_requests) == 1 and len(llm.errors) == 1
    second = llm.requests[1]
    assert second["plugins"] == [{"id": "web"}]
    assert second["tools"] == [REMEMBER] and second["tool_choice"] == "auto"

    # Per model: another model still gets the server tool first.
    await model.complete(
        ModelRequest([user("y")], options=CallOptions(model="b/model", web_search=True))
    )
    assert llm.rejected_requests[-1]["model"] == "b/model" and len(llm.rejected_requests) == 2


async def test_failed_retry_is_not_remembered(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(
        Reply(status=400, error_message="context too long"),
        Reply(status=400, error_message="context too long (plugin)"),
    )
    with pytest.raises(LLMRejected) as rejected:
        await model.complete(ModelRequest([user("x")], options=CallOptions(web_search=True)))
    assert rejected.value.reason == "context too long (plugin)"
    assert "tools" in llm.requests[0] and "plugins" in llm.requests[1]
    # The refusal was not about the server tool, so the next call tries it again.
    await model.complete(ModelRequest([user("y")], options=CallOptions(web_search=True)))
    assert llm.requests[2]["tools"] == [SERVER_TOOL] and "plugins" not in llm.requests[2]


async def test_other_refusals_are_not_retried(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(status=403, error_message="key limit"))
    with pytest.raises(LLMRejected):
        await model.complete(ModelRequest([user("x")], options=CallOptions(web_search=True)))
    llm.script(Reply(status=400, error_message="bad"))
    with pytest.raises(LLMRejected):
        await model.complete(ModelRequest([user("x")]))
    assert len(llm.requests) == 2


# ---- what comes back --------------------------------------------------------------------------


async def test_reported_model_is_returned_and_logged(
    llm: FakeLLM, model: OpenAIChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script(Reply(content="routed", model="vendor/concrete"))
    with caplog.at_level(logging.INFO, logger="membot.llm.client"):
        reply = await model.complete(
            ModelRequest([user("secret words")], options=CallOptions(model="openrouter/auto"))
        )
    assert reply.model == "vendor/concrete"
    [record] = [r for r in caplog.records if r.name == "membot.llm.client"]
    line = record.getMessage()
    assert "model=vendor/concrete status=ok" in line and "tokens=" in line
    assert "secret" not in line and "routed" not in line


async def test_rejected_carries_the_provider_reason(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(status=400, error_message="Invalid value\n\n   for 'max_tokens':  too big"))
    with pytest.raises(LLMRejected) as rejected:
        await model.complete(
            ModelRequest([user("private text")], options=CallOptions(max_tokens=10**9))
        )
    error = rejected.value
    assert error.status == 400
    assert error.reason == "Invalid value for 'max_tokens': too big"
    assert str(error) == "the provider refused the request"


async def test_rejected_reason_for_an_unknown_model(llm: FakeLLM, model: OpenAIChatModel) -> None:
    llm.script(Reply(status=404, error_message="No endpoints found for nope/model."))
    with pytest.raises(LLMRejected) as rejected:
        await model.complete(ModelRequest([user("x")], options=CallOptions(model="nope/model")))
    assert rejected.value.status == 404
    assert rejected.value.reason == "No endpoints found for nope/model."
    assert llm.requests[0]["model"] == "nope/model"


async def test_rejected_reason_is_cut_and_includes_upstream_words(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    upstream = {"message": "Provider returned error", "metadata": {"raw": "upstream says no"}}
    llm.script(
        Reply(status=422, error_message="x" * 1000),
        Reply(status=400, raw_body={"error": {**upstream, "code": 400}}),
    )
    with pytest.raises(LLMRejected) as long:
        await model.complete(ModelRequest([user("x")]))
    assert len(long.value.reason) == 300 and long.value.reason.endswith("…")
    with pytest.raises(LLMRejected) as wrapped:
        await model.complete(ModelRequest([user("x")]))
    assert wrapped.value.reason == "Provider returned error: upstream says no"


# ---- structured output ------------------------------------------------------------------------


def test_load_schema_accepts_dicts_and_json_text() -> None:
    assert load_schema(PERSON) == PERSON
    assert load_schema(json.dumps(PERSON)) == PERSON
    assert load_schema({}) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "outputSchema is not valid JSON"),
        ("[1, 2]", "outputSchema must be a JSON object"),
        (42, "outputSchema must be a JSON object"),
        ({"type": "nope"}, "outputSchema is not a valid JSON Schema: 'nope' is not valid"),
        ({"type": "object", "required": "name"}, "outputSchema is not a valid JSON Schema: "),
        ({"type": "string"}, "outputSchema must describe a JSON object"),
    ],
)
def test_load_schema_rejects(value: object, message: str) -> None:
    with pytest.raises(ValueError) as bad:
        load_schema(value)
    assert str(bad.value).startswith(message) and "\n" not in str(bad.value)


def test_an_invalid_schema_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        OutputSpec({"type": "nope"})


def test_check_without_schema() -> None:
    spec = OutputSpec()
    assert spec.check('{"a": 1}') is None
    assert spec.check('  \n```json\n{"a": 1}\n```\n ') is None
    assert spec.check('```\n{"a": 1}\n```') is None
    assert spec.check('[{"a": 1}]') == "the reply is a JSON array, not a JSON object"
    assert spec.check('"text"') == "the reply is a JSON string, not a JSON object"
    reason = spec.check("Sure! Here it is: {}")
    assert reason is not None and reason.startswith("the reply is not valid JSON")
    # Only one fence is tolerated; two blocks are not one JSON object.
    assert spec.check('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```') is not None


def test_clean_strips_one_fence() -> None:
    spec = OutputSpec()
    assert spec.clean('```JSON\n{"a": 1}\n```') == '{"a": 1}'
    assert spec.clean('  {"a": 1} \n') == '{"a": 1}'
    assert spec.clean('{"code": "```"}') == '{"code": "```"}'


def test_check_with_schema() -> None:
    spec = OutputSpec(PERSON)
    assert spec.check('{"name": "Ann", "age": 7}') is None
    assert spec.check('```json\n{"name": "Ann"}\n```') is None
    assert spec.check('{"name": "Ann", "age": "seven"}') == (
        "'seven' is not of type 'integer' (at $.age)"
    )
    assert spec.check('{"age": 7}') == "'name' is a required property (at $)"
    assert spec.check("[]") == "the reply is a JSON array, not a JSON object"
    long = spec.check(json.dumps({"name": "Ann", "age": "x" * 1000}))
    assert long is not None and len(long) == 300


def test_validator_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    real = jsonschema.validators.validator_for

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(schema)
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.validators, "validator_for", counting)
    spec = OutputSpec(PERSON)
    for _ in range(3):
        spec.check('{"name": "Ann"}')
        spec.check('{"age": 1}')
    # jsonschema itself calls validator_for for metaschemas and subschemas; ours is the root.
    assert sum(schema is PERSON for schema in built) == 1


def test_response_format_shapes() -> None:
    free = OutputSpec()
    assert free.response_format() == {"type": "json_object"}
    assert free.require_parameters is False
    typed = OutputSpec(PERSON)
    assert typed.response_format() == {
        "type": "json_schema",
        "json_schema": {"name": "response", "strict": False, "schema": PERSON},
    }
    assert typed.require_parameters is True


def test_repair_message() -> None:
    message = OutputSpec(PERSON).repair_message("'name' is a required property (at $)")
    assert message["role"] == "user"
    content = message["content"]
    assert "'name' is a required property (at $)" in content
    assert "only a JSON object" in content
    assert json.dumps(PERSON, separators=(",", ":")) in content

    plain = OutputSpec().repair_message("the reply is a JSON array, not a JSON object")
    assert "JSON array" in plain["content"] and "Schema" not in plain["content"]


async def test_structured_request_round_trip(llm: FakeLLM, model: OpenAIChatModel) -> None:
    spec = OutputSpec(PERSON)
    options = CallOptions(
        response_format=spec.response_format(), require_parameters=spec.require_parameters
    )
    llm.script('```json\n{"name": 1}\n```', '{"name": "Ann"}')
    first = await model.complete(ModelRequest([user("who?")], options=options))
    reason = spec.check(first.content)
    assert reason == "1 is not of type 'string' (at $.name)"
    history = [
        user("who?"),
        {"role": "assistant", "content": first.content},
        spec.repair_message(reason),
    ]
    second = await model.complete(ModelRequest(history, options=options))
    assert spec.check(second.content) is None
    assert json.loads(spec.clean(second.content)) == {"name": "Ann"}
    assert llm.requests[1]["response_format"]["json_schema"]["schema"] == PERSON
    assert llm.requests[1]["provider"] == {"require_parameters": True}


def test_a_backtracking_pattern_runs_out_of_time_instead_of_holding_the_loop() -> None:
    # `^(a|aa)+$` needs exponential time to fail on forty "a"s and a "b" in a backtracking
    # engine (hours with Python's `re`); the second branch matches. With the time limit the
    # first branch gives up and the check says "does not match", which only a bounded
    # search can answer: an unbounded one would still be running.
    spec = OutputSpec({"type": "object", "properties": {"v": {"pattern": "^(a|aa)+$|^a+b"}}})
    reason = spec.check(json.dumps({"v": "a" * 40 + "b"}))
    assert reason is not None and "does not match" in reason
    assert spec.check(json.dumps({"v": "aab"})) is None


def test_pattern_properties_and_additional_properties_use_the_bounded_search() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    spec = OutputSpec(schema)
    assert spec.check('{"x-count": 3}') is None
    assert spec.check('{"x-count": "three"}') is not None
    assert "unexpected" in (spec.check('{"other": 1}') or "")
