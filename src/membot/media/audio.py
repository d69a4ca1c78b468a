"""Audio for the transcription endpoint: OGG/Opus bytes and their duration, made in-process
with PyAV (the `av` wheel carries FFmpeg's libraries; no system ffmpeg).

A Telegram voice message is OGG/Opus already and goes as it is; a round video note (MP4,
H.264 + AAC), an audio file (MP3, M4A, ...) or a video has its first audio track decoded
and encoded again as mono 48 kHz Opus in an OGG container. The duration is checked against
MAX_AUDIO_SECONDS before anything is decoded where the container says it, and again while
decoding (or, for OGG/Opus sent as it is, demuxing) since a header may lie, so an hour of
audio costs neither CPU nor a transcription.

FFmpeg's work is CPU-bound and blocking: the async functions run it in a worker thread."""

from __future__ import annotations

import asyncio
import io
import logging
import time
from dataclasses import dataclass

import av
import av.error
from av.audio.stream import AudioStream
from av.container import InputContainer

from membot.media.errors import AudioTooLong, BrokenFile, NoAudio, NotThatKind

log = logging.getLogger(__name__)

#: Opus works at 48 kHz; one channel is what speech recognition needs.
_RATE = 48_000
_LAYOUT = "mono"
#: A speech bitrate: 20 minutes of it stay well under any upload limit.
_BITRATE = 32_000


@dataclass(frozen=True, slots=True)
class AudioClip:
    """OGG/Opus bytes ready for transcription, and how long they play."""

    data: bytes
    seconds: float
    format: str = "ogg"


async def prepare_audio(data: bytes, *, max_seconds: float) -> AudioClip:
    """``data`` (a voice, an audio file, a video note) as OGG/Opus of at most ``max_seconds``.

    Raises BrokenFile (not audio/video FFmpeg can read), NotThatKind (a picture: no audio
    nor video in it), NoAudio (a video without an audio track) or AudioTooLong."""
    started = time.perf_counter()
    clip = await asyncio.to_thread(_prepare, data, max_seconds)
    log.info(
        "audio prepared: in=%d bytes out=%d bytes audio=%.1fs took=%.3fs",
        len(data),
        len(clip.data),
        clip.seconds,
        time.perf_counter() - started,
    )
    return clip


def _prepare(data: bytes, max_seconds: float) -> AudioClip:
    with _open(data) as container:
        stream = _audio_stream(container)
        seconds = _duration(container, stream)
        if seconds > max_seconds:
            raise AudioTooLong(seconds, max_seconds)
        if container.format.name == "ogg" and stream.codec_context.name == "opus":
            # Sent as it is, so its length must be what the provider will hear: an OGG's
            # duration is read from its last page's granule position, which a crafted file
            # sets at will; the packets' own durations are counted (demuxing only).
            played = _demuxed_seconds(container, stream, stop_after=max_seconds)
            if played > max_seconds:
                raise AudioTooLong(played, max_seconds)
            return AudioClip(data=data, seconds=played or seconds)
        return _transcode(container, stream, max_seconds)


def _open(data: bytes) -> InputContainer:
    try:
        return av.open(io.BytesIO(data), mode="r")
    except (av.error.FFmpegError, ValueError, UnicodeDecodeError):
        raise BrokenFile("audio") from None


#: FFmpeg's demuxers of still pictures: a JPEG opens as a one-frame "video" of them.
_PICTURES = frozenset({"image2", "gif", "apng"})


def _audio_stream(container: InputContainer) -> AudioStream:
    if not container.streams.audio:
        name = container.format.name
        if not container.streams.video or name.endswith("_pipe") or name in _PICTURES:
            raise NotThatKind("audio")
        raise NoAudio()  # a video with no sound track
    return container.streams.audio[0]


def _duration(container: InputContainer, stream: AudioStream) -> float:
    """Seconds as the container says, else as the stream says, else by reading the packets
    (demuxing only: no decoding)."""
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    return _demuxed_seconds(container, stream)


def _demuxed_seconds(
    container: InputContainer, stream: AudioStream, *, stop_after: float | None = None
) -> float:
    """Seconds as the packets say, counted without decoding (0 when they say nothing);
    counting stops once past ``stop_after``. The container is left at its start."""
    if stream.time_base is None:
        raise BrokenFile("audio")
    ticks = 0
    limit = None if stop_after is None else stop_after / stream.time_base
    try:
        for packet in container.demux(stream):
            ticks += packet.duration or 0
            if limit is not None and ticks > limit:
                break
        container.seek(0)
    except av.error.FFmpegError:
        raise BrokenFile("audio") from None
    return float(ticks * stream.time_base)


def _transcode(container: InputContainer, stream: AudioStream, max_seconds: float) -> AudioClip:
    out = io.BytesIO()
    resampler = av.AudioResampler(format="s16", layout=_LAYOUT, rate=_RATE)
    samples = 0
    limit = int(max_seconds * _RATE)
    try:
        with av.open(out, mode="w", format="ogg") as target:
            opus = target.add_stream("libopus", rate=_RATE, layout=_LAYOUT)
            opus.bit_rate = _BITRATE
            for frame in container.decode(stream):
                for chunk in resampler.resample(frame):
                    chunk.pts = samples
                    samples += chunk.samples
                    if samples > limit:
                        # The container lied about its length; stop before wasting more.
                        raise AudioTooLong(samples / _RATE, max_seconds)
                    target.mux(opus.encode(chunk))
            for chunk in resampler.resample(None):
                chunk.pts = samples
                samples += chunk.samples
                target.mux(opus.encode(chunk))
            target.mux(opus.encode(None))
    except av.error.FFmpegError:
        raise BrokenFile("audio") from None
    if samples == 0:
        raise NoAudio()
    return AudioClip(data=out.getvalue(), seconds=samples / _RATE)
