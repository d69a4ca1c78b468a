"""The /v1 endpoint's wire format: OpenAI's Chat Completions request, validated with pydantic
(the fields beside the messages are weighed in `fields.py`; others are ignored), and what
membot takes from it: the last user message (its text and its files), the system prompt,
the model. The responses' schemas, for the OpenAPI document, are in `shapes.py`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from membot.api.v1.errors import V1Error, invalid
from membot.api.v1.parts import ContentPart, Lenient, content_of
from membot.core.media import Upload
from membot.memory.contract.state import MAX_PERSONA

#: `model` for the default model (OPENROUTER_MODEL), listed by GET /v1/models.
DEFAULT_MODEL = "membot"
#: The longest `user` (or X-OpenWebUI-User-Id) taken.
MAX_USER = 256
# As /api/chat's `model`: an OpenRouter model id (it is logged).
_MODEL_ID = r"^[A-Za-z0-9._:/@~+-]+$"
_FIELD = re.compile(r"[a-z_][a-z0-9_]*")
_TYPES = frozenset({"str", "int", "float", "bool", "dict", "list"})


class InMessage(Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(Lenient):
    include_usage: bool | None = None


class JsonSchemaFormat(Lenient):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = Field(default=None, max_length=MAX_PERSONA)
    schema_: dict[str, Any] | None = Field(
        default=None, alias="schema", description="A JSON Schema of an object."
    )
    strict: bool | None = None


class ResponseFormat(Lenient):
    """What the answer must be: held to it (docs/api.md, "Structured answers")."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = Field(
        default=None, description="With type json_schema: its name and schema."
    )


class CompletionRequest(Lenient):
    """POST /v1/chat/completions, as OpenAI defines it. membot reads the fields below."""

    model_config = ConfigDict(extra="ignore", frozen=True, title="ChatCompletionRequest")

    model: str = Field(
        min_length=1,
        max_length=200,
        pattern=_MODEL_ID,
        description="One of GET /v1/models: `membot` (the default model) or one of MODELS.",
    )
    messages: list[InMessage] = Field(
        min_length=1,
        description=(
            "The conversation as the client keeps it. Only the last message, the user's, is "
            "the new turn; `system` (or `developer`) messages replace SYSTEM_PROMPT for this "
            "request; the rest is not read again (membot has its own memory)."
        ),
    )
    stream: bool | None = Field(default=None, description="chat.completion.chunk events.")
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        default=None,
        max_length=MAX_USER,
        description="Whose memory: each user is a conversation of its own.",
    )
    n: int | None = Field(default=None, ge=1, description="Only 1 is taken.")
    tools: list[Any] | None = Field(default=None, description="Refused: membot runs its own.")
    functions: list[Any] | None = Field(default=None, description="Refused, as tools.")
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: ResponseFormat | None = None
    # Sent to the provider as they are, for each of the turn's model calls (fields.py).
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    logit_bias: dict[str, float] | None = None
    reasoning_effort: str | None = Field(default=None, max_length=20, pattern=r"^[a-z]+$")
    verbosity: str | None = Field(default=None, max_length=20, pattern=r"^[a-z]+$")
    # OpenRouter's own, which some OpenAI clients send (Open WebUI's advanced parameters).
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = Field(default=None, gt=0, le=2)
    # Refused unless they ask for nothing (fields.py).
    logprobs: bool | None = Field(default=None, description="Refused when true.")
    top_logprobs: int | None = Field(default=None, ge=0, description="Refused above 0.")
    tool_choice: Any = Field(default=None, description="Only none or auto: no client tools.")
    function_call: Any = Field(default=None, description="Only none or auto, as tool_choice.")
    modalities: list[str] | None = Field(default=None, description="Only text.")
    audio: Any = Field(default=None, description="Refused: membot answers in text.")

    @property
    def usage_asked(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


@dataclass(frozen=True, slots=True)
class Turn:
    """What membot takes from a request."""

    text: str
    uploads: tuple[Upload, ...]
    system_prompt: str | None
    model: str | None  # None: the default
    max_tokens: int | None
    places: tuple[str, ...] = ()  # each upload's content part (messages.N.content.K)


def parse(body: bytes) -> CompletionRequest:
    """The request, or a 400 in OpenAI's shape saying what is wrong with it."""
    try:
        return CompletionRequest.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        # Of a union's members, the one that tells most: a broken rule over a wrong type,
        # then the one pydantic got furthest into (`stop` of 5 strings is too long, not
        # "not a string").
        error = max(errors, key=lambda e: (not e["type"].endswith("_type"), len(e["loc"])))
        param = _param(error["loc"])
        sentence = _sentence(error["type"], param, str(error["msg"]))
        if param is not None and param.startswith("response_format"):
            # As OpenAI names it: the field, whatever inside it is wrong.
            raise invalid(sentence, "response_format", "invalid_response_format") from None
        raise invalid(sentence, param) from None


def _param(loc: tuple[int | str, ...]) -> str | None:
    """The field at fault as OpenAI names it (`messages.0.role`): without the member of a
    union pydantic tried (`stop.str`, `content.list[ContentPart]`)."""
    path = [str(p) for p in loc if isinstance(p, int) or _FIELD.fullmatch(p)]
    return ".".join(p for p in path if p not in _TYPES) or None


def _sentence(kind: str, where: str | None, message: str) -> str:
    if kind == "json_invalid":
        return "The request body is not valid JSON."
    if where is None:
        return "The request body must be a JSON object."
    if kind == "missing":
        return f"The field {where} is required."
    return f"The field {where} is invalid: {message.removeprefix('Value error, ')}."


async def take_turn(request: CompletionRequest, max_message_chars: int) -> Turn:
    """The new turn: the last message, which must be the user's; V1Error otherwise, and for
    what membot does not do (client-side tools, several choices)."""
    if request.tools or request.functions:
        param = "tools" if request.tools else "functions"
        sentence = (
            "Client-side tools are not supported: membot runs its own tools (memory search, "
            "facts, the web). Send the request without `tools`."
        )
        raise invalid(sentence, param, "tools_not_supported")
    if request.n is not None and request.n > 1:
        raise invalid("Only one choice is answered: n must be 1.", "n", "n_not_supported")
    last = request.messages[-1]
    if last.role != "user":
        raise invalid("The last message must be the user's (role: user).", "messages")
    where = f"messages.{len(request.messages) - 1}.content"
    text, uploads, places = await content_of(last.content, where)
    if not text.strip() and not uploads:
        raise invalid("The last user message is empty.", where)
    if len(text) > max_message_chars:
        raise _too_long(where, len(text), max_message_chars)
    system = "\n\n".join(
        _text_of(m.content) for m in request.messages if m.role in ("system", "developer")
    ).strip()
    if len(system) > MAX_PERSONA:
        raise _too_long("messages (system)", len(system), MAX_PERSONA)
    model = None if request.model == DEFAULT_MODEL else request.model
    return Turn(
        text=text,
        uploads=uploads,
        system_prompt=system or None,
        model=model,
        max_tokens=request.max_completion_tokens or request.max_tokens,
        places=places,
    )


def _too_long(where: str, length: int, cap: int) -> V1Error:
    sentence = f"{where} is {length:,} characters long; at most {cap:,} are taken."
    return invalid(sentence, where, "string_above_max_length")


def _text_of(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):
        return "\n".join(p.text for p in content if p.type == "text" and p.text)
    return content or ""
