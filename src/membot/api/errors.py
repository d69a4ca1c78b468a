"""The API's errors on the wire: each stable code with its status and sentence, the JSON
body `{"error", "code"}`, and what each failure becomes. Front doors catch families, not
every class: `Busy` is 409 SESSION_BUSY, `Unavailable` (the storage) 503 SERVICE_UNAVAILABLE,
an `LLMError` its provider code, a `SessionError` its own."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Final

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from membot.core.media import ModelSeesNoImages
from membot.core.sessions import (
    DialogCompleted,
    InvalidMaxRounds,
    MaxRoundsExceeded,
    ModelNotAllowed,
    SessionError,
    SessionNotFound,
)
from membot.errors import Busy, MembotError, Unavailable
from membot.llm.errors import LLMError, LLMInvalidOutput, LLMRateLimited, LLMRejected, LLMTimeout
from membot.media.errors import (
    AudioTooLong,
    BrokenFile,
    FileTooBig,
    ImageTooLarge,
    MediaError,
    NoAudio,
    NoTextLayer,
    NotThatKind,
    TooComplex,
    UnsupportedType,
)


class ErrorCode(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_MAX_ROUNDS = "INVALID_MAX_ROUNDS"
    MAX_ROUNDS_EXCEEDED = "MAX_ROUNDS_EXCEEDED"
    DIALOG_COMPLETED = "DIALOG_COMPLETED"
    MODEL_REJECTED = "MODEL_REJECTED"
    MODEL_NOT_ALLOWED = "MODEL_NOT_ALLOWED"
    UNAUTHORIZED = "UNAUTHORIZED"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    NOT_FOUND = "NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    SESSION_BUSY = "SESSION_BUSY"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    LLM_RATE_LIMITED = "LLM_RATE_LIMITED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    LLM_UNAVAILABLE = "LLM_UNAVAILABLE"
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    LLM_TIMEOUT = "LLM_TIMEOUT"
    INVALID_ATTACHMENT = "INVALID_ATTACHMENT"
    UNSUPPORTED_ATTACHMENT = "UNSUPPORTED_ATTACHMENT"
    BROKEN_ATTACHMENT = "BROKEN_ATTACHMENT"
    NO_TEXT_LAYER = "NO_TEXT_LAYER"
    NO_AUDIO = "NO_AUDIO"
    AUDIO_TOO_LONG = "AUDIO_TOO_LONG"
    IMAGE_TOO_LARGE = "IMAGE_TOO_LARGE"
    MODEL_SEES_NO_IMAGES = "MODEL_SEES_NO_IMAGES"
    WORDS_TOO_SHORT = "WORDS_TOO_SHORT"


# Each code's status, and the sentence it is answered with unless a closer one is given.
_ERRORS: Final[dict[ErrorCode, tuple[int, str]]] = {
    ErrorCode.INVALID_REQUEST: (400, "The request could not be understood."),
    ErrorCode.INVALID_MAX_ROUNDS: (400, "maxRounds must be at least 1."),
    ErrorCode.MAX_ROUNDS_EXCEEDED: (400, "maxRounds is more than MAX_ROUNDS allows."),
    ErrorCode.DIALOG_COMPLETED: (400, "This dialog is complete; start a new session."),
    ErrorCode.MODEL_REJECTED: (400, "The model provider refused the request."),
    ErrorCode.MODEL_NOT_ALLOWED: (400, "The model is not one this server offers (MODELS)."),
    ErrorCode.UNAUTHORIZED: (401, "A valid token is required (Authorization: Bearer ...)."),
    ErrorCode.SESSION_NOT_FOUND: (404, "The session does not exist or has expired."),
    ErrorCode.NOT_FOUND: (404, "There is nothing at this path."),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "This path does not take that method."),
    ErrorCode.SESSION_BUSY: (409, "Another request of this session is in progress."),
    ErrorCode.PAYLOAD_TOO_LARGE: (413, "The request body (or an attachment) is too large."),
    ErrorCode.MESSAGE_TOO_LARGE: (413, "The message or the systemPrompt is too long."),
    ErrorCode.INVALID_ATTACHMENT: (400, "An attachment's data is not valid base64."),
    ErrorCode.UNSUPPORTED_ATTACHMENT: (400, "An attachment is of a type membot does not read."),
    ErrorCode.BROKEN_ATTACHMENT: (400, "An attachment is damaged or not what its type says."),
    ErrorCode.NO_TEXT_LAYER: (400, "A PDF attachment has no text layer (scanned pages)."),
    ErrorCode.NO_AUDIO: (400, "An audio attachment has no sound track."),
    ErrorCode.AUDIO_TOO_LONG: (400, "An audio attachment is longer than MAX_AUDIO_SECONDS."),
    ErrorCode.IMAGE_TOO_LARGE: (400, "An image attachment has more pixels than MEDIA_MAX_PIXELS."),
    ErrorCode.MODEL_SEES_NO_IMAGES: (400, "The session's model takes text only, not images."),
    ErrorCode.WORDS_TOO_SHORT: (
        400,
        "words hold nothing to look for (fewer than 2 letters or digits).",
    ),
    ErrorCode.LLM_RATE_LIMITED: (429, "The model provider is rate-limiting us; try again soon."),
    ErrorCode.INTERNAL_ERROR: (500, "Something went wrong on our side."),
    ErrorCode.LLM_UNAVAILABLE: (502, "The model provider is unavailable right now."),
    ErrorCode.INVALID_OUTPUT: (
        502,
        "The answer did not match the requested output format, even after a repair request.",
    ),
    ErrorCode.SERVICE_UNAVAILABLE: (
        503,
        "The session's memory is unavailable right now; try again soon or start a new session.",
    ),
    ErrorCode.LLM_TIMEOUT: (504, "The model did not answer in time."),
}
ERROR_STATUS: Final = {code: status for code, (status, _) in _ERRORS.items()}
ERROR_SENTENCE: Final = {code: sentence for code, (_, sentence) in _ERRORS.items()}

#: The codes POST /api/chat can answer with; NOT_FOUND and METHOD_NOT_ALLOWED are routing's.
CHAT_ERRORS: Final = tuple(
    c
    for c in ErrorCode
    if c not in (ErrorCode.NOT_FOUND, ErrorCode.METHOD_NOT_ALLOWED, ErrorCode.WORDS_TOO_SHORT)
)


class ApiError(MembotError):
    """An answer other than 200: a code and a sentence for people (never logged: it may
    quote the provider, and through it the request)."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code.value)
        self.code = code
        self.message = message or ERROR_SENTENCE[code]

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.code]

    def body(self) -> dict[str, Any]:
        return ErrorResponse(error=self.message, code=self.code).model_dump(mode="json")


class ErrorResponse(BaseModel):
    model_config = ConfigDict(
        title="ErrorResponse", json_schema_serialization_defaults_required=True
    )

    error: str = Field(description="What went wrong, in a sentence for people.")
    code: ErrorCode


def api_error(exc: MembotError, *, names_session: bool) -> ApiError | None:
    """What a failure of POST /api/chat answers; None for one that is ours to fix (500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ModelNotAllowed):
        allowed = ", ".join(exc.allowed)
        return ApiError(
            ErrorCode.MODEL_NOT_ALLOWED, f"The model {exc.model} is not offered here: {allowed}."
        )
    if isinstance(exc, SessionError):
        code = _SESSION_CODES[type(exc)]
        # The round limits name their bound; the other sentences are fixed.
        return ApiError(code, f"{exc}." if code in _ROUND_LIMITS else None)
    if isinstance(exc, MediaError):
        return media_error(exc)
    if isinstance(exc, LLMError):  # before Unavailable: LLMUnavailable is both
        return llm_error(exc)
    if isinstance(exc, Busy):
        return ApiError(ErrorCode.SESSION_BUSY)
    if isinstance(exc, Unavailable):
        # The storage is down (STORAGE=redis): the request names a session, or nothing can
        # be answered without Redis (QUEUE=redis). Never an internal error.
        return ApiError(ErrorCode.SERVICE_UNAVAILABLE, None if names_session else _NO_STORAGE)
    return None


def media_error(exc: MediaError) -> ApiError:
    """An attachment membot cannot use: its code, and a sentence that says which attachment
    (its index in `attachments` and its name) and nothing of its content."""
    if isinstance(exc, ModelSeesNoImages):
        models = ", ".join(exc.vision_models) or "none of the configured models"
        sentence = f"The model {exc.model} takes text only. Models that see images: {models}."
        return ApiError(ErrorCode.MODEL_SEES_NO_IMAGES, sentence)
    code = next((c for kind, c in _MEDIA_CODES if isinstance(exc, kind)), None)
    code = code or ErrorCode.BROKEN_ATTACHMENT
    sentence = _media_sentence(exc) or ERROR_SENTENCE[code]
    if exc.position is not None:
        name = f", {json.dumps(exc.file_name, ensure_ascii=False)}" if exc.file_name else ""
        sentence = f"{sentence[:-1]} (attachments[{exc.position - 1}]{name})."
    return ApiError(code, sentence)


def invalid_attachment(index: int) -> ApiError:
    """An attachment whose data is not base64 (or is empty), by its index in `attachments`."""
    sentence = f"An attachment's data is not valid base64, or is empty (attachments[{index}])."
    return ApiError(ErrorCode.INVALID_ATTACHMENT, sentence)


def _media_sentence(exc: MediaError) -> str | None:
    """A closer sentence than the code's, for the errors that have one."""
    if isinstance(exc, NotThatKind):
        what = {"image": "an image", "audio": "audio", "text": "a text file"}
        return f"An attachment is not {what.get(exc.kind, exc.kind)}, though its type says so."
    if isinstance(exc, TooComplex):
        return "A PDF attachment is too complex to read (nested too deeply, or too heavy)."
    if isinstance(exc, ImageTooLarge):
        size = f" of {exc.width}x{exc.height} pixels" if exc.width else ""
        return f"An image attachment{size} has more pixels than MEDIA_MAX_PIXELS ({exc.limit})."
    return None


def http_error(exc: web.HTTPException) -> ApiError:
    code = _ROUTING.get(exc.status)
    if code is None:
        code = ErrorCode.INVALID_REQUEST if exc.status < 500 else ErrorCode.INTERNAL_ERROR
    return ApiError(code)


def llm_error(exc: LLMError) -> ApiError:
    if isinstance(exc, LLMRejected) and exc.status not in _OUR_ACCOUNT:
        reason = exc.reason or "no reason given"
        return ApiError(
            ErrorCode.MODEL_REJECTED, f"The model provider refused the request: {reason}"
        )
    # Unavailable, or a refusal of our own credentials: nothing the client can fix.
    code = next((c for kind, c in _LLM_CODES if isinstance(exc, kind)), ErrorCode.LLM_UNAVAILABLE)
    return ApiError(code)


# Provider refusals that are about our own account, not the client's request.
_OUR_ACCOUNT = frozenset({401, 402, 403})
_ROUTING = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
}
_SESSION_CODES: dict[type[SessionError], ErrorCode] = {
    SessionNotFound: ErrorCode.SESSION_NOT_FOUND,
    DialogCompleted: ErrorCode.DIALOG_COMPLETED,
    InvalidMaxRounds: ErrorCode.INVALID_MAX_ROUNDS,
    MaxRoundsExceeded: ErrorCode.MAX_ROUNDS_EXCEEDED,
    ModelNotAllowed: ErrorCode.MODEL_NOT_ALLOWED,
}
_NO_STORAGE = "The storage is unavailable right now; try again soon."
_ROUND_LIMITS = (ErrorCode.INVALID_MAX_ROUNDS, ErrorCode.MAX_ROUNDS_EXCEEDED)
_MEDIA_CODES: tuple[tuple[type[MediaError], ErrorCode], ...] = (
    (FileTooBig, ErrorCode.PAYLOAD_TOO_LARGE),
    (ImageTooLarge, ErrorCode.IMAGE_TOO_LARGE),
    (UnsupportedType, ErrorCode.UNSUPPORTED_ATTACHMENT),
    (BrokenFile, ErrorCode.BROKEN_ATTACHMENT),
    (NoTextLayer, ErrorCode.NO_TEXT_LAYER),
    (NoAudio, ErrorCode.NO_AUDIO),
    (AudioTooLong, ErrorCode.AUDIO_TOO_LONG),
)
_LLM_CODES: tuple[tuple[type[LLMError], ErrorCode], ...] = (
    (LLMRateLimited, ErrorCode.LLM_RATE_LIMITED),
    (LLMTimeout, ErrorCode.LLM_TIMEOUT),
    (LLMInvalidOutput, ErrorCode.INVALID_OUTPUT),
)
