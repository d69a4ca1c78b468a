"""Speech to text against the fake OpenRouter: what is sent, what comes back and what it
cost, how failures read, and that logs never carry what was said."""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from pydantic import SecretStr

from membot.llm.errors import LLMError, LLMRateLimited, LLMRejected, LLMUnavailable
from membot.llm.model import Usage
from membot.media.audio import AudioClip, prepare_audio
from membot.media.provider import provider_client
from membot.media.transcribe import Transcriber, Transcript
from tests.fakes import FakeLLM, Transcription, media_files
from tests.unit.conftest import llm_settings

KEY = "sk-media-test"
WORDS = "remember that the deposit is 1500 euros"


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(api_key=KEY) as server:
        yield server


@pytest.fixture
async def transcriber(llm: FakeLLM) -> AsyncIterator[Transcriber]:
    client = provider_client(llm_settings(llm.base_url, KEY))
    yield Transcriber(client, "openai/whisper-1")
    await client.close()


@pytest.fixture
async def clip() -> AudioClip:
    return await prepare_audio(media_files.ogg_voice(2.0), max_seconds=600)


async def test_a_voice_is_sent_as_openrouter_documents_it(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip
) -> None:
    llm.script_transcription(Transcription(text=f"  {WORDS}\n", cost=0.00012, seconds=2.0))
    transcript = await transcriber.transcribe(clip, language="en")
    assert transcript == Transcript(
        text=WORDS, seconds=2.0, model="openai/whisper-1", usage=Usage(cost=Decimal("0.00012"))
    )
    (body,) = llm.transcription_requests
    assert body["model"] == "openai/whisper-1" and body["language"] == "en"
    assert body["input_audio"]["format"] == "ogg"
    assert base64.b64decode(body["input_audio"]["data"]) == media_files.ogg_voice(2.0)


async def test_token_priced_usage_is_charged_like_a_model_call(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip
) -> None:
    llm.script_transcription(
        Transcription(text=WORDS, cost=0.000508, input_tokens=83, output_tokens=30)
    )
    transcript = await transcriber.transcribe(clip)
    assert transcript.usage == Usage(
        prompt_tokens=83, completion_tokens=30, cost=Decimal("0.000508")
    )
    # No duration reported: the clip's own.
    assert transcript.seconds == clip.seconds


async def test_a_provider_without_cost_reports_none(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip
) -> None:
    llm.script_transcription(Transcription(text="ok"))
    assert (await transcriber.transcribe(clip)).usage == Usage()


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Transcription(status=429, error_message="Rate limit exceeded"), LLMRateLimited),
        (Transcription(status=502, error_message="upstream failed"), LLMUnavailable),
        (Transcription(raw_body={"usage": {"cost": 0}}), LLMUnavailable),
        (Transcription(raw_body={"error": {"message": "x"}}, status=200), LLMUnavailable),
    ],
    ids=["429", "502", "no-text", "error-in-200"],
)
async def test_failures_are_llm_errors(
    llm: FakeLLM,
    transcriber: Transcriber,
    clip: AudioClip,
    reply: Transcription,
    error: type[LLMError],
) -> None:
    llm.script_transcription(reply)
    with pytest.raises(error):
        await transcriber.transcribe(clip)


async def test_a_refusal_keeps_the_providers_reason(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip
) -> None:
    llm.script_transcription(Transcription(status=400, error_message="Model not found: x/y"))
    with pytest.raises(LLMRejected) as refused:
        await transcriber.transcribe(clip)
    assert refused.value.status == 400 and refused.value.reason == "Model not found: x/y"
    assert "Model not found" not in str(refused.value)


async def test_an_unreachable_provider_is_unavailable(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip
) -> None:
    await llm.stop()
    with pytest.raises(LLMUnavailable):
        await transcriber.transcribe(clip)


async def test_the_wrong_key_is_a_refusal(llm: FakeLLM, clip: AudioClip) -> None:
    wrong = dataclasses.replace(llm_settings(llm.base_url, KEY), api_key=SecretStr("sk-wrong"))
    client = provider_client(wrong)
    try:
        with pytest.raises(LLMRejected) as refused:
            await Transcriber(client, "openai/whisper-1").transcribe(clip)
    finally:
        await client.close()
    assert refused.value.status == 401 and llm.transcription_requests == []


async def test_logs_say_sizes_and_durations_never_the_words(
    llm: FakeLLM, transcriber: Transcriber, clip: AudioClip, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script_transcription(
        Transcription(text=WORDS, cost=0.0001, seconds=2.0),
        Transcription(status=400, error_message=f"cannot transcribe '{WORDS}'"),
    )
    with caplog.at_level(logging.DEBUG):
        await transcriber.transcribe(clip)
        with pytest.raises(LLMRejected):
            await transcriber.transcribe(clip)
    ours = [r for r in caplog.records if r.name.startswith("membot")]
    ok, failed = (r.getMessage() for r in ours)
    assert f"bytes={len(clip.data)}" in ok and "audio=2.0s" in ok and "cost=0.0001" in ok
    assert "status=http 400" in failed and f"bytes={len(clip.data)}" in failed
    logged = " ".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "deposit" not in logged and KEY not in logged
