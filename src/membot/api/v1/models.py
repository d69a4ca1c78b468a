"""The /v1 endpoint's wire format: OpenAI's Chat Completions request, validated with pydantic
(fields membot does not use, such as `temperature`, are accepted and ignored), and what
membot takes from it: the last user message (its text and its images), the system prompt,
the model. The responses' schemas, for the OpenAPI document, are in `shapes.py`."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from membot.api.models import MAX_ATTACHMENTS, validation_sentence
from membot.api.v1.errors import V1Error, invalid
from membot.core.media import Upload
from membot.memory.contract.state import MAX_PERSONA

#: `model` for the default model (OPENROUTER_MODEL), listed by GET /v1/models.
DEFAULT_MODEL = "membot"
#: The longest `user` (or X-OpenWebUI-User-Id) taken.
MAX_USER = 256
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[^;,]*)*?);base64,(.*)", re.DOTALL)
# As /api/chat's `model`: an OpenRouter model id (it is logged).
_MODEL_ID = r"^[A-Za-z0-9._:/@~+-]+$"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ImageUrl(_Lenient):
    url: str = Field(description="A data: URL (base64); membot fetches no address.")


class ContentPart(_Lenient):
    type: str = Field(description="text or image_url; others are refused.")
    text: str | None = None
    image_url: ImageUrl | None = None


class InMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(_Lenient):
    include_usage: bool | None = None


class CompletionRequest(_Lenient):
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


def parse(body: bytes) -> CompletionRequest:
    """The request, or a 400 in OpenAI's shape saying what is wrong with it."""
    try:
        return CompletionRequest.model_validate_json(body)
    except ValidationError as exc:
        param = _param(exc)
        raise invalid(validation_sentence(exc), param) from None


def _param(exc: ValidationError) -> str | None:
    loc = exc.errors(include_url=False, include_input=False)[0]["loc"]
    return ".".join(str(p) for p in loc) or None


def take_turn(request: CompletionRequest, max_message_chars: int) -> Turn:
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
    text, uploads = _content(last.content, where)
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
    )


def _too_long(where: str, length: int, cap: int) -> V1Error:
    sentence = f"{where} is {length:,} characters long; at most {cap:,} are taken."
    return invalid(sentence, where, "string_above_max_length")


def _text_of(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):
        return "\n".join(p.text for p in content if p.type == "text" and p.text)
    return content or ""


def _content(content: str | list[ContentPart] | None, where: str) -> tuple[str, tuple[Upload, ...]]:
    if not isinstance(content, list):
        return content or "", ()
    texts: list[str] = []
    uploads: list[Upload] = []
    for i, part in enumerate(content):
        if part.type == "text":
            texts.append(part.text or "")
        elif part.type == "image_url" and part.image_url is not None:
            uploads.append(_image(part.image_url.url, f"{where}.{i}"))
        else:
            raise invalid(
                f"A content part of type {part.type[:40]!r} is not taken: text and "
                "image_url (a data: URL) are.",
                f"{where}.{i}",
                "unsupported_content",
            )
    if len(uploads) > MAX_ATTACHMENTS:
        raise invalid(f"At most {MAX_ATTACHMENTS} images are taken.", where, "too_many_images")
    return "\n".join(texts), tuple(uploads)


def _image(url: str, where: str) -> Upload:
    """An image_url part as the turn's upload, as /api/chat's image attachments are."""
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        raise invalid(
            "An image must be a data: URL (data:image/...;base64,...); membot fetches no address.",
            where,
            "invalid_image_url",
        )
    try:
        data = base64.b64decode(match.group(3), validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if not data:
        raise invalid("An image's data is not valid base64, or is empty.", where, "invalid_image")
    return Upload("photo", data, mime=match.group(1))
