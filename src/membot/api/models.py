"""The API's wire format: pydantic models that validate requests and shape responses (its
errors: `membot.api.errors`). The OpenAPI document (`membot.api.openapi`) is generated from
these same models, so what is described is what is enforced."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from membot.api.base64s import decode, decoded_size
from membot.api.errors import ApiError, ErrorCode, invalid_attachment, media_error
from membot.api.output_schema import check_output_schema
from membot.core.media import Upload
from membot.core.sessions import SessionRequest
from membot.media.errors import TELEGRAM_DOWNLOAD_LIMIT, FileTooBig
from membot.memory.contract.state import MAX_PERSONA, SessionConfig

#: Larger bodies are refused (413) before they are parsed: room for a file of about 18 MB,
#: whose base64 takes a third more.
MAX_BODY_BYTES: Final = 25 * 1024 * 1024
MAX_ATTACHMENTS: Final = 10
_UPLOAD_KINDS: Final = {"image": "photo", "audio": "audio", "document": "document"}


class Attachment(BaseModel):
    """A file sent with the message, processed in the same turn: an image (shown to a model
    that sees images, kept for follow-up questions), audio (transcribed: the transcript is
    the user's words) or a document (PDF or text: read, kept, searchable)."""

    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, alias_generator=to_camel, title="Attachment"
    )

    type: Literal["image", "audio", "document"] = Field(description="What the file is.")
    mime_type: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(;.*)?$",
        description="Its MIME type, e.g. image/jpeg, audio/ogg, application/pdf.",
    )
    name: str | None = Field(
        default=None, max_length=255, description="Its file name (tells a document's type)."
    )
    data: str = Field(
        min_length=1,
        description="The file's bytes, base64 (standard alphabet, padded; no data: prefix).",
        json_schema_extra={"contentEncoding": "base64"},
    )

    async def to_upload(self, index: int = 0, max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT) -> Upload:
        """The bytes for the turn; INVALID_ATTACHMENT naming attachments[index] if not base64,
        PAYLOAD_TOO_LARGE (as the media layer refuses the bytes) if over `max_bytes`, known
        from the base64's length before it is decoded."""
        size = decoded_size(self.data)
        if size > max_bytes:
            too_big = FileTooBig(size, max_bytes)
            too_big.about(index + 1, self.name)
            raise media_error(too_big)
        try:
            data = await decode(self.data)
        except ValueError:  # binascii.Error too
            data = b""
        if not data:
            raise invalid_attachment(index)
        kind = _UPLOAD_KINDS[self.type]
        return Upload(kind, data, mime=self.mime_type, name=self.name)  # type: ignore[arg-type]


class ChatRequest(BaseModel):
    """POST /api/chat. Strict: `"3"` is not a number and `"true"` not a boolean. Fields not
    described here are ignored: a client that sends more than it must is still answered."""

    model_config = ConfigDict(
        strict=True, extra="ignore", frozen=True, alias_generator=to_camel, title="ChatRequest"
    )

    # Documented as a pattern, checked by the validator below with Python's idea of
    # whitespace (a superset of the regex engine's), so "blank" means one thing.
    message: str = Field(
        description="The user's message; not blank, at most API_MAX_MESSAGE_CHARS characters.",
        json_schema_extra={"pattern": r"\S"},
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        # An OpenRouter model id; nothing else (no spaces, no line breaks: it is logged).
        pattern=r"^[A-Za-z0-9._:/@~+-]+$",
        description="The model for the new session's rounds (an OpenRouter model id).",
    )
    max_tokens: int | None = Field(default=None, ge=1, description="Sent as max_tokens.")
    disable_search: bool | None = Field(
        default=None, description="No web search for this session even when WEB_SEARCH is on."
    )
    system_prompt: str | None = Field(
        default=None,
        description=(
            "Replaces the configured system prompt for the session (at most 4,000 characters, "
            "as a /persona)."
        ),
    )
    output_format: Literal["text", "json"] | None = Field(
        default=None, description="json: the completing answer is a JSON object."
    )
    output_schema: dict[str, Any] | str | None = Field(
        default=None,
        description="A JSON Schema (an object, or JSON text) the completing answer must match.",
    )
    max_rounds: int | None = Field(
        default=None,
        description="Start a consultation of this many rounds (1 to MAX_ROUNDS).",
    )
    session_id: uuid.UUID | None = Field(
        default=None, description="Continue this session; its first request's settings win."
    )
    stream: bool | None = Field(
        default=None,
        description=(
            "Answer as text/event-stream: `delta` events ({content}) while the model writes, "
            "then one `done` event (the ChatResponse), or one `error` event (ErrorResponse)."
        ),
    )
    attachments: list[Attachment] | None = Field(
        default=None,
        max_length=MAX_ATTACHMENTS,
        description=(
            "Files sent with the message, understood in the same turn (at most 10; the "
            "whole body at most 25 MB)."
        ),
    )

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | str | None) -> dict[str, Any] | None:
        return None if value is None else check_output_schema(value)

    @property
    def schema_object(self) -> dict[str, Any] | None:
        """outputSchema as an object (validation turned a string into one)."""
        return self.output_schema if isinstance(self.output_schema, dict) else None

    def check_sizes(self, max_message_chars: int) -> None:
        """ApiError(MESSAGE_TOO_LARGE) naming the first field over its cap (not the model's
        max_length: these are 413, not 400, and the message's cap is a setting)."""
        for field, value, cap in (
            ("message", self.message, max_message_chars),
            ("systemPrompt", self.system_prompt, MAX_PERSONA),
        ):
            if value is not None and len(value) > cap:
                raise ApiError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"{field} is {len(value):,} characters long; at most {cap:,} are taken.",
                )

    async def to_session_request(self, max_bytes: int = TELEGRAM_DOWNLOAD_LIMIT) -> SessionRequest:
        """The request for the core, its attachments decoded (each at most `max_bytes`)."""
        config = SessionConfig(
            model=self.model,
            system_prompt=self.system_prompt,
            max_tokens=self.max_tokens,
            output_format=self.output_format or "text",
            output_schema=self.schema_object,
            disable_search=bool(self.disable_search),
        )
        return SessionRequest(
            message=self.message,
            session_id=self.session_id,
            max_rounds=self.max_rounds,
            config=config,
            uploads=tuple(
                [await a.to_upload(i, max_bytes) for i, a in enumerate(self.attachments or ())]
            ),
        )


class SourceLink(BaseModel):
    model_config = ConfigDict(
        json_schema_serialization_defaults_required=True, title="Source", frozen=True
    )

    url: str = Field(description="The page's address.")
    title: str = Field(description="The page's title (empty when the provider gave none).")


class CitationRef(BaseModel):
    model_config = ConfigDict(
        json_schema_serialization_defaults_required=True, title="Citation", frozen=True
    )

    id: int = Field(description="The cited message's id: its position in the session's archive.")
    date: datetime = Field(description="When the cited message was written (UTC).")
    author: str = Field(description="Who wrote it: its sender's name, else `user` or `assistant`.")
    quote: str = Field(description="The part of it the answer rests on, as written there.")


class ChatResponse(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        serialize_by_alias=True,
        json_schema_serialization_defaults_required=True,
        title="ChatResponse",
    )

    content: str = Field(description="The answer (a JSON object's text for JSON output).")
    model: str = Field(description="The model the provider reports for this answer.")
    is_complete: bool = Field(description="The dialog is over; the session takes no more.")
    round: int = Field(ge=1, description="The round this answer is.")
    max_rounds: int = Field(ge=1, description="The session's number of rounds.")
    session_id: uuid.UUID = Field(description="Send it back to continue the session.")
    sources: list[SourceLink] = Field(
        default_factory=list,
        description=(
            "The pages the answer cites, in order, each once: the model's web searches "
            "(WEB_SEARCH, unless disableSearch). Empty when it searched nothing."
        ),
    )
    citations: list[CitationRef] = Field(
        default_factory=list,
        description=(
            "Earlier messages of the session the answer rests on, in the order first cited, "
            "each once: what the model's search of the archive found and it cited. Empty "
            "when it cited none."
        ),
    )


class Health(BaseModel):
    model_config = ConfigDict(title="Health", json_schema_serialization_defaults_required=True)

    status: Literal["ok"] = "ok"


def parse_chat_request(body: bytes) -> ChatRequest:
    """The request, or ApiError(INVALID_REQUEST) saying what is wrong with it."""
    try:
        return ChatRequest.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(ErrorCode.INVALID_REQUEST, validation_sentence(exc)) from None


def validation_sentence(exc: ValidationError) -> str:
    """The first problem, in words; pydantic's messages name the rule, not the input."""
    error = exc.errors(include_url=False, include_input=False)[0]
    if error["type"] == "json_invalid":
        return "The request body is not valid JSON."
    if error["type"] == "model_type" or not error["loc"]:
        return "The request body must be a JSON object."
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"The field {where} is required."
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith(where):  # our own checks name the field already
        return f"{message}."
    return f"The field {where} is invalid: {message}."
