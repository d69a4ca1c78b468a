"""Property: whatever a client sends to POST /api/chat, the API answers without a 5xx and with
a body that matches what its own OpenAPI document promises for that status.

Bodies come from the request schema in the served document (hypothesis-jsonschema), from
arbitrary JSON values, and from valid requests with fields swapped for arbitrary values; some
continue sessions opened by earlier examples. The fake model always answers validly (a
JSON object when one is asked for, and generated output schemas are ones "{}" matches), so
a 5xx here is a bug of the API, not of the model.

(hypothesis is held below 6.170.10 in pyproject.toml: hypothesis-jsonschema 0.23.1 uses an
internal, `many.more()`, that release removed.)
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from tests import api_support
from tests.api_support import API_TOKEN, RunningApi, StartApi
from tests.fakes import FakeLLM, Reply

start_api = api_support.start_api

SIMPLE_SCHEMAS: list[Any] = [None, {"type": "object"}, '{"type": "object"}', {"properties": {}}]
# Values that are not valid schemas at all: the API must refuse them with a 400.
BAD_SCHEMAS: list[Any] = ["{", "[]", {"type": "string"}, {"$ref": "http://x/y"}, {"$schema": 1}]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _inlined(node: Any, schemas: dict[str, Any]) -> Any:
    """``node`` with its references to the document's components replaced by them (the
    strategy is drawn from the request's schema alone)."""
    if isinstance(node, list):
        return [_inlined(item, schemas) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return _inlined(copy.deepcopy(schemas[ref.rsplit("/", 1)[1]]), schemas)
    return {key: _inlined(value, schemas) for key, value in node.items()}


class Served:
    """The running API, its document, and the strategies drawn from that document."""

    def __init__(self, api: RunningApi, document: dict[str, Any]) -> None:
        self.api = api
        self.document = document
        self.sessions: list[str] = []
        schemas = document["components"]["schemas"]
        request = _inlined(copy.deepcopy(schemas["ChatRequest"]), schemas)
        request["properties"]["outputSchema"] = {"enum": SIMPLE_SCHEMAS}
        fields = [f for f in request["properties"] if f != "outputSchema"]
        swapped = st.fixed_dictionaries(
            {"message": st.text(max_size=30) | json_values},
            optional={
                **{name: json_values for name in fields if name != "message"},
                "outputSchema": st.sampled_from(SIMPLE_SCHEMAS + BAD_SCHEMAS),
            },
        )
        garbage = json_values.map(lambda v: json.dumps(v).encode()[:-1] or b"{")
        kinds = {"documented": from_schema(request), "swapped": swapped, "json": json_values}
        kinds["garbage"] = garbage
        # Mostly documented requests (most of them answered). Hypothesis favours the ends of
        # a list it samples from, so the rarer kinds sit in the middle.
        order = ["documented"] * 3 + ["swapped", "json", "garbage", "swapped"] + ["documented"] * 3
        self.bodies = st.sampled_from(order).flatmap(kinds.__getitem__)
        responses = document["paths"]["/api/chat"]["post"]["responses"]
        self.validators = {
            status: Draft202012Validator(
                {
                    **spec["content"]["application/json"]["schema"],
                    "components": document["components"],
                },
                format_checker=Draft202012Validator.FORMAT_CHECKER,
            )
            for status, spec in responses.items()
        }

    def validator(self, status: int) -> Draft202012Validator:
        return self.validators.get(str(status), self.validators["default"])


@pytest.fixture
async def served(start_api: StartApi, llm: FakeLLM) -> Served:
    def valid(body: dict[str, Any]) -> Reply | str:
        return "{}" if "response_format" in body else llm.default_reply(body)

    llm.set_responder(valid)
    api = await start_api()
    document = await api.client.request("GET", "/api/openapi.json")
    assert document.status == 200
    return Served(api, document.body)


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
async def test_every_answer_matches_the_document(served: Served, data: st.DataObject) -> None:
    body: Any = data.draw(served.bodies, label="body")
    # Drawn whether or not there are sessions yet: what is drawn may not depend on them.
    pick = data.draw(st.none() | st.integers(0, 10_000), label="continue session")
    if pick is not None and served.sessions and isinstance(body, dict):
        body["sessionId"] = served.sessions[pick % len(served.sessions)]
    tokens = [API_TOKEN] * 9 + [None, "x" * 20] + [API_TOKEN] * 9
    token = data.draw(st.sampled_from(tokens), label="token")
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()

    answer = await served.api.client.chat(raw, token=token)

    event(f"{answer.status} {answer.code or ''}".strip())  # --hypothesis-show-statistics
    assert answer.status < 500, answer.body
    errors = sorted(served.validator(answer.status).iter_errors(answer.body), key=str)
    assert not errors, (answer.status, answer.body, [e.message for e in errors])
    if answer.status == 200 and answer.body["sessionId"] not in served.sessions:
        served.sessions.append(answer.body["sessionId"])
