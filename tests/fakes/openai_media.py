"""OpenRouter's endpoints beside chat, for the fake LLM: the model list with each model's
input modalities (`GET /v1/models`) and speech-to-text (`POST /v1/audio/transcriptions`,
OpenRouter's JSON form: `{"model", "input_audio": {"data": <base64>, "format"}}`).

FakeLLM mixes this in; a test sets `models` ({id: input modalities}), `prices` ({id:
(prompt, completion)}, per token as OpenRouter's decimal strings; an id not in it is listed
at PRICE), `models_status` (answer the list with that error instead), and scripts
transcripts (`script_transcription`) or lets the default answer name what it heard
("TRANSCRIPT: <n> bytes of <format>")."""

from __future__ import annotations

import base64
import binascii
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

#: The formats OpenRouter's speech-to-text documents.
AUDIO_FORMATS = frozenset({"wav", "mp3", "flac", "m4a", "ogg", "webm", "aac", "mp4", "mpeg"})
#: What a listed model costs per token unless `prices` says otherwise (prompt, completion).
PRICE = ("0.000001", "0.000002")


@dataclass(slots=True)
class Transcription:
    """One scripted answer of /audio/transcriptions. ``status`` != 200 answers an error;
    ``seconds`` and tokens are reported only when set (providers report one or the other)."""

    text: str = ""
    cost: float | None = None
    seconds: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    status: int = 200
    error_message: str = ""
    raw_body: Any = None


class MediaEndpoints:
    """The model list and transcriptions. Needs FakeLLM's api_key, _reject, _error, _notify."""

    api_key: str
    # FakeLLM's own: its waiting, error answers and notification of waiters.
    wait_until: Any
    _reject: Any
    _error: Any
    _notify: Any

    def _init_media(self) -> None:
        self.models: dict[str, list[str]] = {}
        self.prices: dict[str, tuple[str, str]] = {}
        self.models_status = 200
        self.model_list_requests = 0
        self.transcription_requests: list[dict[str, Any]] = []
        self.cost_per_transcription: float | None = 0.0001
        self._transcriptions: deque[Transcription] = deque()

    def add_media_routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/models", self._model_list)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions_endpoint)

    def script_transcription(self, *replies: Transcription | str) -> None:
        """Queue answers of /audio/transcriptions, one per request; then the default."""
        self._transcriptions.extend(
            Transcription(text=r, cost=self.cost_per_transcription) if isinstance(r, str) else r
            for r in replies
        )

    async def wait_for_transcriptions(self, count: int, timeout: float = 30.0) -> None:
        await self.wait_until(
            lambda: len(self.transcription_requests) >= count,
            timeout,
            what=f"{count} transcription(s)",
        )

    async def _model_list(self, request: web.Request) -> web.Response:
        self.model_list_requests += 1
        await self._notify()
        if self.models_status != 200:
            return self._error(self.models_status, "model list unavailable")
        data = [
            {
                "id": model,
                "name": model,
                "context_length": 128_000,
                "architecture": {
                    "modality": "+".join(modalities) + "->text",
                    "input_modalities": list(modalities),
                    "output_modalities": ["text"],
                },
                "pricing": dict(
                    zip(("prompt", "completion"), self.prices.get(model, PRICE), strict=True)
                ),
            }
            for model, modalities in self.models.items()
        ]
        return web.json_response({"data": data})

    async def _transcriptions_endpoint(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return await self._reject(401, "No auth credentials found")
        try:
            body = await request.json()
        except ValueError:
            return await self._reject(400, "Invalid JSON body")
        problem = _invalid(body)
        if problem is not None:
            return await self._reject(400, problem)
        self.transcription_requests.append(body)
        await self._notify()
        reply = self._transcriptions.popleft() if self._transcriptions else None
        if reply is None:
            audio = body["input_audio"]
            size = len(base64.b64decode(audio["data"]))
            reply = Transcription(
                text=f"TRANSCRIPT: {size} bytes of {audio['format']}",
                cost=self.cost_per_transcription,
            )
        if reply.raw_body is not None:
            return web.json_response(reply.raw_body, status=reply.status)
        if reply.status != 200:
            return self._error(reply.status, reply.error_message or "transcription failed")
        usage: dict[str, Any] = {}
        for key in ("cost", "seconds", "input_tokens", "output_tokens"):
            value = getattr(reply, key)
            if value is not None:
                usage[key] = value
        if reply.input_tokens is not None or reply.output_tokens is not None:
            usage["total_tokens"] = (reply.input_tokens or 0) + (reply.output_tokens or 0)
        return web.json_response({"text": reply.text, "usage": usage})


def _invalid(body: Any) -> str | None:
    """What OpenRouter would answer 400 about in a transcription request, or None."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Required"
    audio = body.get("input_audio")
    if not isinstance(audio, dict):
        return "input_audio: Required"
    data, fmt = audio.get("data"), audio.get("format")
    if not isinstance(data, str) or not data:
        return "input_audio.data: Required"
    if data.startswith("data:"):
        return "input_audio.data must be raw base64, not a data URI"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "input_audio.data is not valid base64"
    if fmt not in AUDIO_FORMATS:
        return f"input_audio.format must be one of {sorted(AUDIO_FORMATS)}"
    return None
