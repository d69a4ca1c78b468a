"""The OpenAPI 3.1 description of the API, generated from the pydantic models that validate
requests and shape responses (`membot.api.models`), so the two cannot drift apart."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from membot.api.errors import CHAT_ERRORS, ERROR_SENTENCE, ERROR_STATUS, ErrorCode, ErrorResponse
from membot.api.forget import ForgetRequest, ForgetResponse
from membot.api.models import ChatRequest, ChatResponse, Health
from membot.api.v1.openapi import MODELS as V1_MODELS
from membot.api.v1.openapi import v1_paths
from membot.memory.contract.state import MAX_PERSONA

_REF = "#/components/schemas/{model}"
#: What GET /api/sessions/{sessionId}/export can answer besides the ZIP.
EXPORT_ERRORS = (
    ErrorCode.INVALID_REQUEST,
    ErrorCode.UNAUTHORIZED,
    ErrorCode.SESSION_NOT_FOUND,
    ErrorCode.INTERNAL_ERROR,
    ErrorCode.SERVICE_UNAVAILABLE,
)
#: What POST /api/sessions/{sessionId}/forget can answer besides its 200.
FORGET_ERRORS = (ErrorCode.WORDS_TOO_SHORT, *EXPORT_ERRORS)
_MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (ForgetRequest, "validation"),
    (ForgetResponse, "serialization"),
    (ChatRequest, "validation"),
    (ChatResponse, "serialization"),
    (ErrorResponse, "serialization"),
    (Health, "serialization"),
    *V1_MODELS,
]


def build_document(max_rounds: int, max_message_chars: int) -> dict[str, Any]:
    """The document served at /api/openapi.json; `max_rounds` is MAX_ROUNDS,
    `max_message_chars` API_MAX_MESSAGE_CHARS."""
    refs, schemas = models_json_schema(_MODELS, ref_template=_REF)
    components: dict[str, Any] = schemas["$defs"]
    request = components["ChatRequest"]["properties"]
    _bound_integer(request["maxRounds"], 1, max_rounds)
    _bound_string(request["message"], max_message_chars)
    _bound_string(request["systemPrompt"], MAX_PERSONA)

    def ref(model: type[BaseModel], mode: JsonSchemaMode) -> dict[str, Any]:
        return dict(refs[(model, mode)])

    chat = {
        "summary": "Send a message: a single answer, a new session, or a session's next round",
        "operationId": "chat",
        "security": [{"bearerAuth": []}],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref(ChatRequest, "validation")}},
        },
        "responses": {
            "200": _answer(ref(ChatResponse, "serialization")),
            **_errors(CHAT_ERRORS),
            "default": _json("Any other error", _ERROR),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "membot chat API",
            "version": "1.0.0",
            "description": (
                "Single requests and multi-round dialogs with the assistant. A request "
                "without maxRounds and sessionId is one complete round; maxRounds opens a "
                "session of that many rounds; sessionId continues one. /v1 is the same "
                "memory behind OpenAI's Chat Completions, for OpenAI's clients."
            ),
        },
        "paths": {
            "/api/chat": {"post": chat},
            "/api/sessions/{sessionId}/export": {"get": _export()},
            "/api/sessions/{sessionId}/forget": {
                "post": _forget(
                    ref(ForgetRequest, "validation"), ref(ForgetResponse, "serialization")
                )
            },
            "/api/openapi.json": {
                "get": _open_get(
                    "This document", {"type": "object"}, "openapi", "The OpenAPI document"
                )
            },
            "/healthz": {
                "get": _open_get(
                    "Liveness", ref(Health, "serialization"), "health", "The server is up"
                )
            },
            **v1_paths(ref),
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }


_ERROR: dict[str, Any] = {"$ref": _REF.format(model="ErrorResponse")}
_SESSION_ID: dict[str, Any] = {
    "name": "sessionId",
    "in": "path",
    "required": True,
    "description": "The session's id, as POST /api/chat returned it.",
    "schema": {"type": "string", "format": "uuid"},
}


def _export() -> dict[str, Any]:
    zip_file = {"type": "string", "format": "binary"}
    return {
        "summary": "The session's whole memory as one ZIP",
        "description": (
            "conversation.md (each message with its date and sender), messages.jsonl (every "
            "message as stored), summary.md, facts.json, tasks.json and files/ (the files "
            "its messages refer to): what the session holds when the request comes."
        ),
        "operationId": "exportSession",
        "security": [{"bearerAuth": []}],
        "parameters": [_SESSION_ID],
        "responses": {
            "200": {
                "description": "The ZIP (Content-Disposition names it).",
                "content": {"application/zip": {"schema": zip_file}},
            },
            **_errors(EXPORT_ERRORS),
            "default": _json("Any other error", _ERROR),
        },
    }


def _forget(asked: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "summary": "What words match in the session, or (confirm: true) erase it for good",
        "description": (
            "Messages holding every word (or the phrase), tool calls and results with them, "
            "facts and the summary saying them. confirm: true erases it after the session's "
            "request in progress, if any, and makes the summary again. `user` is not taken."
        ),
        "operationId": "forgetInSession",
        "security": [{"bearerAuth": []}],
        "parameters": [_SESSION_ID],
        "requestBody": {"required": True, "content": {"application/json": {"schema": asked}}},
        "responses": {
            "200": _json("What matches, or what was erased", answer),
            **_errors(FORGET_ERRORS),
            "default": _json("Any other error", _ERROR),
        },
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _answer(done: dict[str, Any]) -> dict[str, Any]:
    """200: the ChatResponse as JSON, or with `stream: true` as server-sent events."""
    answer = _json(
        "The answer. With stream: true, text/event-stream: `delta` events while the model "
        "writes, then one `done` event (this ChatResponse) or one `error` event "
        "(an ErrorResponse: nothing was stored). Errors found before the stream opens are "
        "the JSON errors below, with their statuses.",
        done,
    )
    delta = {
        "type": "object",
        "properties": {"content": {"type": "string", "description": "More of the answer."}},
        "required": ["content"],
    }
    answer["content"]["text/event-stream"] = {
        "schema": {
            "type": "string",
            "description": "event: delta|done|error, then data: one line of JSON, per event.",
        },
        # The data of each event (OpenAPI 3.1 has no words for an event stream's items).
        "x-events": {"delta": delta, "done": done, "error": _ERROR},
    }
    return answer


def _errors(codes: tuple[ErrorCode, ...]) -> dict[str, Any]:
    """One response per status, its schema narrowed to the codes that status carries."""
    by_status: dict[int, list[ErrorCode]] = defaultdict(list)
    for code in codes:
        by_status[ERROR_STATUS[code]].append(code)
    out: dict[str, Any] = {}
    for status in sorted(by_status):
        listed = by_status[status]
        schema = {"allOf": [_ERROR, {"properties": {"code": {"enum": [c.value for c in listed]}}}]}
        description = " ".join(f"{c.value}: {ERROR_SENTENCE[c]}" for c in listed)
        out[str(status)] = _json(description, schema)
    return out


def _open_get(summary: str, schema: dict[str, Any], operation: str, ok: str) -> dict[str, Any]:
    """A GET that needs no token."""
    return {
        "summary": summary,
        "operationId": operation,
        "security": [],
        "responses": {"200": _json(ok, schema), "default": _json("An error", _ERROR)},
    }


def _bound_string(prop: dict[str, Any], max_length: int) -> None:
    """Document a length cap; enforced by the server with its own code (MESSAGE_TOO_LARGE)."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") == "string":
            branch["maxLength"] = max_length


def _bound_integer(prop: dict[str, Any], minimum: int, maximum: int) -> None:
    """Document a range on an optional integer. Not enforced by the model on purpose:
    out-of-range values have their own error codes."""
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") == "integer":
            branch["minimum"] = minimum
            branch["maximum"] = maximum
