"""The /v1 endpoint in the OpenAPI document (`membot.api.openapi` builds the whole): its
paths, described from the same pydantic models that validate its requests and shape its
answers (`models.py`, `shapes.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode

from membot.api.v1.models import CompletionRequest
from membot.api.v1.shapes import Chunk, Completion, ModelCard, ModelList, V1ErrorResponse

MODELS: Final[list[tuple[type[BaseModel], JsonSchemaMode]]] = [
    (CompletionRequest, "validation"),
    (Completion, "serialization"),
    (Chunk, "serialization"),
    (ModelList, "serialization"),
    (ModelCard, "serialization"),
    (V1ErrorResponse, "serialization"),
]
_FORGET = "#/components/schemas/Forget"  # api/forget.py's models, in the document's components
Ref = Callable[[type[BaseModel], JsonSchemaMode], dict[str, Any]]

# Each status the endpoint answers with, and its codes (`error.code`).
_ERRORS: Final = {
    "400": "invalid_request, invalid_response_format, tools_not_supported, n_not_supported, "
    "logprobs_not_supported, modalities_not_supported, unsupported_content, "
    "invalid_image_url, invalid_image, invalid_file, too_many_images, "
    "string_above_max_length, model_rejected, model_sees_no_images and the other attachment "
    "codes of /api/chat in lower case",
    "401": "invalid_api_key",
    "404": "model_not_found",
    "413": "payload_too_large",
    "429": "insufficient_quota (a budget), rate_limit_exceeded (USER_RATE_LIMIT), "
    "llm_rate_limited (the provider); with Retry-After for the first two",
    "500": "internal_error",
    "502": "llm_unavailable, llm_timeout, invalid_output",
    "503": "service_unavailable (the storage is down)",
}


def v1_paths(ref: Ref) -> dict[str, Any]:
    error = ref(V1ErrorResponse, "serialization")
    errors = {status: _json(codes, error) for status, codes in _ERRORS.items()}
    answer = _json(
        "The answer, stored. With stream: true, text/event-stream: `data:` events of "
        "chat.completion.chunk, then `data: [DONE]` (an error after the stream opened: one "
        "`data:` event with an OpenAI error object, and no [DONE]).",
        ref(Completion, "serialization"),
    )
    answer["content"]["text/event-stream"] = {
        "schema": {"type": "string", "description": "data: one chunk of JSON, per event."},
        "x-events": {"chunk": ref(Chunk, "serialization"), "error": error},
    }
    completions = {
        "summary": "OpenAI's Chat Completions: the last user message, answered from membot's "
        "memory of the caller (user, else X-OpenWebUI-User-Id, else the token)",
        "operationId": "chatCompletions",
        "security": [{"bearerAuth": []}],
        "parameters": [
            {
                "name": "X-OpenWebUI-User-Id",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "maxLength": 256},
                "description": "Whose memory, when the body has no `user` (Open WebUI).",
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref(CompletionRequest, "validation")}},
        },
        "responses": {"200": answer, **errors},
    }
    models = {
        "summary": "The models `model` may name: membot (the default) and MODELS",
        "operationId": "listModels",
        "security": [{"bearerAuth": []}],
        "responses": {
            "200": _json("The models", ref(ModelList, "serialization")),
            "401": errors["401"],
        },
    }
    model = {
        "summary": "One model `model` may name, by id (a slash in it as %2F or as it is)",
        "operationId": "retrieveModel",
        "security": [{"bearerAuth": []}],
        "parameters": [
            {"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}
        ],
        "responses": {
            "200": _json("The model", ref(ModelCard, "serialization")),
            "401": errors["401"],
            "404": _json("model_not_found: not one GET /v1/models lists", error),
        },
    }
    forget = {
        "summary": "What words match in the caller's own conversation (as the chat call "
        "names it: user, else X-OpenWebUI-User-Id, else the token), or (confirm: true) "
        "erase it for good",
        "operationId": "forgetInConversation",
        "security": [{"bearerAuth": []}],
        "parameters": completions["parameters"],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _FORGET + "Request"}}},
        },
        "responses": {
            "200": _json("What matches, or what was erased", {"$ref": _FORGET + "Response"}),
            "400": _json("invalid_request, words_too_short", error),
            "401": errors["401"],
            "503": errors["503"],
        },
    }
    return {
        "/v1/chat/completions": {"post": completions},
        "/v1/memory/forget": {"post": forget},
        "/v1/models": {"get": models},
        "/v1/models/{model}": {"get": model},
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}
