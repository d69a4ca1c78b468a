"""The media settings: their defaults, their variables and their checks."""

from __future__ import annotations

import pytest

from membot.config import ConfigError, MediaSettings, load_settings

BASE = {"openrouter_api_key": "k", "telegram_bot_token": "1:t"}


def test_defaults_in_the_media_group() -> None:
    settings = load_settings(_env_file=None, **BASE)
    assert settings.media == MediaSettings(
        transcription_model="openai/whisper-1",
        max_audio_seconds=600,
        max_images_in_prompt=4,
        document_prompt_chars=20_000,
        pdf_timeout=20.0,
        pdf_memory_mb=1024,
        pdf_processes=0,
        max_pixels=25_000_000,
        image_decodes=2,
        import_max_mb=200,
    )


def test_variables_set_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRANSCRIPTION_MODEL", "openai/gpt-4o-mini-transcribe")
    monkeypatch.setenv("MAX_AUDIO_SECONDS", "120")
    monkeypatch.setenv("MAX_IMAGES_IN_PROMPT", "0")
    monkeypatch.setenv("DOCUMENT_PROMPT_CHARS", "5000")
    monkeypatch.setenv("MEDIA_PDF_TIMEOUT", "2.5")
    monkeypatch.setenv("MEDIA_PDF_MEMORY_MB", "256")
    monkeypatch.setenv("MEDIA_PDF_PROCESSES", "2")
    monkeypatch.setenv("MEDIA_MAX_PIXELS", "2000000")
    monkeypatch.setenv("MEDIA_IMAGE_DECODES", "3")
    monkeypatch.setenv("IMPORT_MAX_MB", "50")
    media = load_settings(_env_file=None, **BASE).media
    assert media == MediaSettings(
        "openai/gpt-4o-mini-transcribe", 120, 0, 5000, 2.5, 256, 2, 2_000_000, 3, 50
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("transcription_model", ""),
        ("transcription_model", "two words"),
        ("max_audio_seconds", "0"),
        ("max_images_in_prompt", "-1"),
        ("document_prompt_chars", "10"),
        ("media_pdf_timeout", "0"),
        ("media_pdf_memory_mb", "64"),
        ("media_pdf_processes", "-1"),
        ("import_max_mb", "0"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name.upper()):
        load_settings(_env_file=None, **BASE, **{name: value})
