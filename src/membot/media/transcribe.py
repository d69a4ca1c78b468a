"""Speech to text through OpenRouter: `POST {OPENROUTER_BASE_URL}/audio/transcriptions`.

The body is OpenRouter's JSON form, `{"model", "input_audio": {"data": <base64>, "format"}}`;
the answer is `{"text", "usage": {"cost", "seconds" | "input_tokens", "output_tokens",
"total_tokens"}}`, where a provider priced by duration reports seconds and one priced by
tokens reports tokens (either may be missing). The usage comes back as llm.model.Usage so
a transcription is charged like a model call (purpose "transcription").

Logs carry sizes, durations and cost, never the transcript."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import openai
from openai import AsyncOpenAI

from membot.llm.errors import LLMUnavailable
from membot.llm.model import Usage
from membot.media.audio import AudioClip
from membot.media.provider import provider_failure

log = logging.getLogger(__name__)

PURPOSE = "transcription"


@dataclass(frozen=True, slots=True)
class Transcript:
    """What was heard. ``seconds`` is the audio's length: the provider's figure when it
    reports one, else the clip's own. ``usage`` as the provider reported it."""

    text: str
    seconds: float
    model: str
    usage: Usage = field(default_factory=Usage)


class Transcriber:
    """Turns an OGG/Opus clip (audio.prepare_audio) into text with TRANSCRIPTION_MODEL."""

    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self._client = client
        self.model = model

    async def transcribe(self, clip: AudioClip, *, language: str | None = None) -> Transcript:
        """The clip's words. Raises an LLMError (llm/errors.py) when the provider fails."""
        body: dict[str, Any] = {
            "model": self.model,
            "input_audio": {
                "data": base64.b64encode(clip.data).decode("ascii"),
                "format": clip.format,
            },
        }
        if language:
            body["language"] = language
        started = time.perf_counter()
        try:
            reply = await self._client.post("/audio/transcriptions", body=body, cast_to=object)
        except openai.OpenAIError as exc:
            error, status = provider_failure(exc)
            self._log_failure(clip, started, status)
            raise error from None
        if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
            self._log_failure(clip, started, "no text")
            raise LLMUnavailable("the provider returned no transcript")
        raw = reply.get("usage")
        usage = raw if isinstance(raw, dict) else {}
        seconds = _number(usage.get("seconds"))
        transcript = Transcript(
            text=reply["text"].strip(),
            seconds=float(seconds) if seconds is not None else clip.seconds,
            model=self.model,
            usage=Usage(
                prompt_tokens=int(_number(usage.get("input_tokens")) or 0),
                completion_tokens=int(_number(usage.get("output_tokens")) or 0),
                cost=_number(usage.get("cost")),
            ),
        )
        log.info(
            "llm %s: model=%s status=ok duration=%.3fs bytes=%d audio=%.1fs chars=%d cost=%s",
            PURPOSE,
            self.model,
            time.perf_counter() - started,
            len(clip.data),
            transcript.seconds,
            len(transcript.text),
            transcript.usage.cost,
        )
        return transcript

    def _log_failure(self, clip: AudioClip, started: float, status: str) -> None:
        log.error(
            "llm %s: model=%s status=%s duration=%.3fs bytes=%d audio=%.1fs",
            PURPOSE,
            self.model,
            status,
            time.perf_counter() - started,
            len(clip.data),
            clip.seconds,
        )


def _number(value: object) -> Decimal | None:
    """A non-negative JSON number exactly as written (a float's shortest repr is that)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() and number >= 0 else None
