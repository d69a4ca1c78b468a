"""Audio for transcription: a voice goes as it is, a video note's sound is taken out, and the
length limit is kept before anything is sent anywhere. Real files made by PyAV."""

from __future__ import annotations

import io

import av
import pytest

from membot.media.audio import AudioClip, prepare_audio
from membot.media.errors import AudioTooLong, BrokenFile, MediaError, NoAudio, NotThatKind
from tests.fakes import media_files


def _codec_and_seconds(data: bytes) -> tuple[str, str, float]:
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        assert container.duration is not None
        return container.format.name, stream.codec_context.name, container.duration / av.time_base


async def test_a_voice_message_goes_as_it_is_with_its_length() -> None:
    voice = media_files.ogg_voice(2.0)
    clip = await prepare_audio(voice, max_seconds=600)
    assert clip == AudioClip(data=voice, seconds=pytest.approx(2.0, abs=0.05), format="ogg")


async def test_a_video_notes_sound_becomes_ogg_opus_of_the_same_length() -> None:
    note = media_files.video_note(2.0)
    clip = await prepare_audio(note, max_seconds=600)
    assert clip.format == "ogg" and clip.seconds == pytest.approx(2.0, abs=0.1)
    fmt, codec, seconds = _codec_and_seconds(clip.data)
    assert (fmt, codec) == ("ogg", "opus") and seconds == pytest.approx(2.0, abs=0.1)
    # Smaller than the video it came from: only the sound travels to the provider.
    assert len(clip.data) < len(note)


@pytest.mark.parametrize("make", [media_files.ogg_voice, media_files.video_note])
async def test_audio_over_the_limit_is_refused_saying_how_long(make: object) -> None:
    data = make(3.0)  # type: ignore[operator]
    with pytest.raises(AudioTooLong) as refused:
        await prepare_audio(data, max_seconds=2)
    assert refused.value.limit == 2 and refused.value.seconds == pytest.approx(3.0, abs=0.1)
    assert str(refused.value) == f"audio of {refused.value.seconds:.1f} s is over the limit of 2 s"


async def test_a_voice_whose_header_lies_about_its_length_is_measured_by_its_packets() -> None:
    # 30 s of sound whose pages say 2 s: sent as it is, it would be transcribed (and paid
    # for) whole; the length counted from its packets refuses it before anything is sent.
    lying = media_files.ogg_voice_claiming(30.0, claimed=2.0)
    with av.open(io.BytesIO(lying)) as container:
        assert container.duration is not None and container.duration / av.time_base < 3
    with pytest.raises(AudioTooLong) as refused:
        await prepare_audio(lying, max_seconds=10)
    assert refused.value.seconds > 10
    clip = await prepare_audio(lying, max_seconds=600)
    assert clip.data == lying and clip.seconds == pytest.approx(30.0, abs=0.05)


async def test_a_video_without_sound_is_no_audio() -> None:
    with pytest.raises(NoAudio):
        await prepare_audio(media_files.video_note(1.0, sound=False), max_seconds=600)


@pytest.mark.parametrize("data", [media_files.jpeg(64, 48), media_files.png(64, 48)])
async def test_a_picture_sent_as_audio_is_not_audio_rather_than_silent(data: bytes) -> None:
    # FFmpeg opens a JPEG as a one-frame video: that is a picture, not a silent recording.
    with pytest.raises(NotThatKind) as refused:
        await prepare_audio(data, max_seconds=600)
    assert refused.value.kind == "audio" and not isinstance(refused.value, NoAudio)


@pytest.mark.parametrize(
    "data",
    [b"", b"not audio at all, just some words", media_files.ogg_voice(1.0)[:200] + b"\0" * 50],
    ids=["empty", "text", "cut-off"],
)
async def test_broken_audio_is_a_media_error_not_a_crash(data: bytes) -> None:
    with pytest.raises(MediaError) as failed:
        await prepare_audio(data, max_seconds=600)
    assert isinstance(failed.value, BrokenFile | NoAudio)
    assert "words" not in str(failed.value)
