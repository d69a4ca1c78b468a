"""Files over Telegram, end to end: the real bot polling the fake Bot API (getFile and
downloads of real files made in tests/fakes/media_files.py), the real core, the fake LLM's
/models and /audio/transcriptions. Each kind in a private chat, every bad input answered in
one line with nothing stored, and the next message answered as usual."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

import pytest

from membot.bot import texts
from tests.conftest import StartBot
from tests.e2e.helpers import stored
from tests.e2e.test_conversation import say
from tests.fakes import FakeLLM, FakeTelegram, media_files
from tests.fakes.openai_media import Transcription

CHAT = 4242
VISION = "vision/model"
TEXT_ONLY = "test/model"


@pytest.fixture
async def bot(tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot) -> None:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    await start_bot(openrouter_model=VISION, models=f"{VISION},{TEXT_ONLY}")


def image_urls(request: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def images_sent(request: dict[str, Any]) -> list[bytes]:
    return [base64.b64decode(url.split(",", 1)[1]) for url in image_urls(request)]


def last_user_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if p.get("type") == "text")


async def answer_to(tg: FakeTelegram, push: Any, *args: Any, **kw: Any) -> Any:
    """Push one message (tg.push_...) and wait for the bot's first answer to it."""
    before = len(tg.messages_to(CHAT))
    push(CHAT, *args, **kw)
    return (await tg.wait_for_messages(CHAT, before + 1))[before]


@pytest.mark.usefixtures("bot")
async def test_a_voice_is_transcribed_quoted_and_answered(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    voice = media_files.ogg_voice(2.0)
    llm.script_transcription("Remind me to buy milk.")
    answer = await answer_to(tg, tg.push_voice, data=voice, duration=2)
    # The transcript first, quoted; then the answer.
    quote, rest = answer.text.split("\n\n", 1)
    assert quote == "Remind me to buy milk." and rest.startswith("ANSWER: ")
    assert "Remind me to buy milk." in last_user_text(llm.chat_requests[-1])
    assert answer.entities[0] == {"type": "blockquote", "offset": 0, "length": 22}
    [request] = llm.transcription_requests
    assert request["input_audio"]["format"] == "ogg"
    [user, _] = stored(data_dir, CHAT)
    assert user["content"] == "Remind me to buy milk."
    assert user["attachments"][0]["kind"] == "voice"
    assert tg.call_count("getFile") == 1
    # The next message is a plain text turn, with the voice's words in its window.
    assert await say(tg, CHAT, "what did I ask?") == "ANSWER: what did I ask?"


@pytest.mark.usefixtures("bot")
async def test_a_long_transcript_is_shortened_in_the_quote(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    words = "word " * 200
    llm.script_transcription(words)
    answer = await answer_to(tg, tg.push_voice, data=media_files.ogg_voice(2.0), duration=2)
    quote, rest = answer.text.split("\n\n", 1)
    assert len(quote) <= 300 and quote.endswith("…")
    assert rest.startswith("ANSWER: ")
    assert stored(data_dir, CHAT)[0]["content"] == words.strip()  # kept whole


@pytest.mark.usefixtures("bot")
async def test_a_video_note_and_an_audio_file_are_heard(tg: FakeTelegram, llm: FakeLLM) -> None:
    llm.script_transcription("hello from a circle", "hello from a file")
    answer = await answer_to(tg, tg.push_video_note, media_files.video_note(1.0), duration=1)
    assert answer.text.startswith("hello from a circle\n\nANSWER: ")
    answer = await answer_to(tg, tg.push_audio, media_files.ogg_voice(1.0), caption="listen")
    assert answer.text.startswith("hello from a file\n\nANSWER: ")
    assert "listen" in last_user_text(llm.chat_requests[-1])
    assert len(llm.transcription_requests) == 2


@pytest.mark.usefixtures("bot")
async def test_a_photo_goes_to_the_vision_model_with_its_caption(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    photo = media_files.jpeg(320, 240)
    answer = await answer_to(tg, tg.push_photo, data=photo, caption="what is this?")
    assert answer.text.startswith("ANSWER: ")
    request = llm.chat_requests[-1]
    assert request["model"] == VISION
    assert images_sent(request) == [photo]
    [user, _] = stored(data_dir, CHAT)
    assert (user["content"], user["attachments"][0]["kind"]) == ("what is this?", "image")
    # A follow-up still shows the image.
    await say(tg, CHAT, "and how big is it?")
    assert images_sent(llm.chat_requests[-1]) == [photo]


@pytest.mark.usefixtures("bot")
async def test_documents_are_read_and_remembered(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    pdf = media_files.pdf_with_text("The deposit is 500 euros.")
    await answer_to(tg, tg.push_document, pdf, file_name="lease.pdf", mime_type="application/pdf")
    assert "The deposit is 500 euros." in last_user_text(llm.chat_requests[-1])
    await answer_to(tg, tg.push_document, b"a,b\n1,2\n", file_name="t.csv", mime_type="text/csv")
    assert "a,b\n1,2" in last_user_text(llm.chat_requests[-1])
    kinds = [m["attachments"][0]["kind"] for m in stored(data_dir, CHAT) if m["role"] == "user"]
    assert kinds == ["document", "document"]
    # An image sent as a file is an image.
    png = media_files.png(64, 64)
    await answer_to(tg, tg.push_document, png, file_name="shot.png", mime_type="image/png")
    assert images_sent(llm.chat_requests[-1])[-1] == png


def named(name: str, reply: str, words: texts.Texts = texts.EN) -> str:
    """A reply about a file that has a name, naming it."""
    return words.FILE_NAMED.format(name=name, reply=reply)


BAD_INPUTS = {
    "too big": (
        lambda tg: tg.push_document(
            CHAT, b"\0" * (20 * 1024 * 1024 + 1), file_name="big.txt", mime_type="text/plain"
        ),
        named("big.txt", texts.EN.FILE_TOO_BIG.format(limit_mb=20)),
        0,
    ),
    "too big, said only by getFile": (
        lambda tg: tg.push_document(
            CHAT,
            b"\0" * (20 * 1024 * 1024 + 1),
            file_name="big.txt",
            mime_type="text/plain",
            declare_size=False,
        ),
        named("big.txt", texts.EN.FILE_TOO_BIG.format(limit_mb=20)),
        1,
    ),
    "pdf without text": (
        lambda tg: tg.push_document(
            CHAT, media_files.pdf_scanned(), file_name="scan.pdf", mime_type="application/pdf"
        ),
        named("scan.pdf", texts.EN.PDF_NO_TEXT),
        1,
    ),
    "broken pdf": (
        lambda tg: tg.push_document(
            CHAT, media_files.pdf_broken(), file_name="cut.pdf", mime_type="application/pdf"
        ),
        named("cut.pdf", texts.EN.FILE_BROKEN),
        1,
    ),
    "deeply nested pdf": (
        lambda tg: tg.push_document(
            CHAT, media_files.pdf_nested(), file_name="deep.pdf", mime_type="application/pdf"
        ),
        named("deep.pdf", texts.EN.PDF_TOO_COMPLEX),
        1,
    ),
    "png of 62 megapixels": (
        lambda tg: tg.push_document(
            CHAT, media_files.png_uniform(7900), file_name="huge.png", mime_type="image/png"
        ),
        named("huge.png", texts.EN.IMAGE_TOO_LARGE.format(limit_mp="25")),
        1,
    ),
    "pdf named as an image": (
        lambda tg: tg.push_document(
            CHAT, media_files.pdf_with_text("x"), file_name="a.png", mime_type="image/png"
        ),
        named("a.png", texts.EN.NOT_IMAGE),
        1,
    ),
    "random bytes named .txt": (
        lambda tg: tg.push_document(
            CHAT, random.Random(3).randbytes(3000), file_name="notes.txt", mime_type="text/plain"
        ),
        named("notes.txt", texts.EN.NOT_TEXT),
        1,
    ),
    "a .txt with one NUL": (
        lambda tg: tg.push_document(
            CHAT, b"an ordinary line\0 of text", file_name="nul.txt", mime_type="text/plain"
        ),
        named("nul.txt", texts.EN.NOT_TEXT),
        1,
    ),
    "a jpeg sent as audio": (
        lambda tg: tg.push_audio(
            CHAT, media_files.jpeg(64, 48), file_name="cover.mp3", mime_type="audio/mpeg"
        ),
        named("cover.mp3", texts.EN.NOT_AUDIO),
        1,
    ),
    "broken photo": (
        lambda tg: tg.push_photo(CHAT, data=media_files.jpeg(320, 240)[:400]),
        texts.EN.FILE_BROKEN,
        1,
    ),
    "not a photo at all": (
        lambda tg: tg.push_photo(CHAT, data=b"\xff\xd8 not really a jpeg"),
        texts.EN.FILE_BROKEN,
        1,
    ),
    "unknown type": (
        lambda tg: tg.push_document(
            CHAT, b"PK\x03\x04 zip", file_name="a.zip", mime_type="application/zip"
        ),
        named("a.zip", texts.EN.FILE_UNSUPPORTED),
        0,
    ),
    "audio too long": (
        lambda tg: tg.push_voice(CHAT, data=media_files.ogg_voice(2.0), duration=601),
        texts.EN.AUDIO_TOO_LONG.format(minutes=10),
        0,
    ),
    "audio too long, said only by the file": (
        lambda tg: tg.push_voice(CHAT, data=media_files.ogg_voice(2.0), duration=1),
        texts.EN.AUDIO_TOO_LONG.format(minutes=1),
        1,
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
async def test_a_bad_file_gets_one_line_nothing_is_stored_and_the_chat_goes_on(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path, case: str
) -> None:
    llm.models = {VISION: ["text", "image"]}
    limit = "1" if case == "audio too long, said only by the file" else "600"
    await start_bot(openrouter_model=VISION, max_audio_seconds=limit)
    push, reply, fetched = BAD_INPUTS[case]
    before = len(tg.messages_to(CHAT))
    push(tg)
    [answer] = (await tg.wait_for_messages(CHAT, before + 1))[before:]
    assert answer.text == reply
    assert tg.call_count("getFile") == fetched
    assert llm.chat_requests == [] and llm.transcription_requests == []
    assert stored(data_dir, CHAT) == []
    assert not (data_dir / str(CHAT) / "files").exists()
    assert await say(tg, CHAT, "still there?") == "ANSWER: still there?"


@pytest.mark.usefixtures("bot")
async def test_a_failed_transcription_is_one_line_and_nothing_is_stored(
    tg: FakeTelegram, llm: FakeLLM, data_dir: Path
) -> None:
    llm.script_transcription(Transcription(status=500, error_message="whisper is down"))
    answer = await answer_to(tg, tg.push_voice, data=media_files.ogg_voice(1.0), duration=1)
    assert answer.text == texts.EN.LLM_FAILED
    assert llm.chat_requests == [] and stored(data_dir, CHAT) == []
    assert await say(tg, CHAT, "hello?") == "ANSWER: hello?"


@pytest.mark.usefixtures("bot")
async def test_a_russian_chat_is_told_in_russian(tg: FakeTelegram, llm: FakeLLM) -> None:
    assert await say(tg, CHAT, "/language ru") == texts.RU.LANGUAGE_SET.format(
        name="русский", code="ru"
    )
    answer = await answer_to(tg, tg.push_document, media_files.pdf_scanned(), file_name="s.pdf")
    assert answer.text == named("s.pdf", texts.RU.PDF_NO_TEXT, texts.RU)
