"""A turn that brings files: the real core (build_core: files backend, ledger, catalog,
transcriber) against the fake LLM as a real HTTP server, with real media made in the tests.
What the model is shown, what the archive and the conversation files keep, what is charged,
and that a failure stores nothing."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from membot.clock import utc_now
from membot.config import Settings
from membot.core.media import ModelSeesNoImages, Upload
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMUnavailable
from membot.media.errors import BrokenFile, NoTextLayer, NotThatKind, UnsupportedType
from membot.usage.ledger import day_key
from membot.wiring import Core, build_core
from tests.fakes import FakeLLM, media_files, without_now
from tests.fakes.openai_media import Transcription

CHAT = ConversationId.telegram(501)
USER = 77
VISION = "vision/model"
TEXT_ONLY = "test/model"


class Sink:
    def __init__(self) -> None:
        self.answers: list[TurnResult] = []

    async def progress(self, text: str) -> None:
        return None

    async def answer(self, result: TurnResult) -> None:
        self.answers.append(result)


@pytest.fixture
async def start_core(
    make_settings: Callable[..., Settings], llm: FakeLLM
) -> AsyncIterator[Callable[..., Any]]:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    cores: list[Core] = []

    async def start(**overrides: Any) -> Core:
        values: dict[str, Any] = {"openrouter_model": VISION, "tools": "search_history"}
        values.update(overrides)
        core = build_core(make_settings(**values))
        await core.start()
        cores.append(core)
        return core

    yield start
    for core in cores:
        await core.aclose()


async def say(core: Core, text: str, *uploads: Upload, cid: ConversationId = CHAT) -> TurnResult:
    incoming = Incoming(cid, text, user_id=USER, uploads=tuple(uploads))
    return await core.service.say(incoming, Sink())


def user_content(body: dict[str, Any]) -> Any:
    """The new message as the model got it, without the chat's time before it."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return without_now(content)
    return [
        {**part, "text": without_now(part["text"])} if part.get("type") == "text" else part
        for part in content
    ]


def image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def test_a_photo_is_shown_to_a_vision_model_kept_and_seen_in_follow_ups(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core(max_images_in_prompt=1)
    photo = media_files.jpeg(320, 240)
    llm.script("A gradient.", "Still a gradient.", "The second one.", "Fine.")
    await say(core, "", Upload("photo", photo, mime="image/jpeg", caption="what is this?"))
    first = llm.chat_requests[-1]
    content = user_content(first)
    assert content[0] == {"type": "text", "text": "[image]\nwhat is this?"}
    [url] = image_urls(first)
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == photo  # small JPEG: sent as it is
    [stored_user, _] = await core.repository.tail(CHAT, 10)
    [attachment] = stored_user.attachments
    assert (stored_user.content, attachment.kind, attachment.size) == (
        "what is this?",
        "image",
        len(photo),
    )
    assert await core.repository.get_file(CHAT, attachment.file or "") == photo

    await say(core, "and how big is it?")  # the image is still in view
    assert image_urls(llm.chat_requests[-1]) == [url]

    # A second image takes the only place in view; the first stays as its marker.
    await say(core, "and this?", Upload("photo", media_files.png(64, 64), mime="image/png"))
    await say(core, "compare them")
    last = llm.chat_requests[-1]
    [shown] = image_urls(last)
    assert shown.startswith("data:image/png;base64,")
    assert last["messages"][1] == {"role": "user", "content": "[image]\nwhat is this?"}


async def test_an_image_sent_as_a_file_of_no_useful_type_is_shown_by_its_name(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    # "binary/octet-stream" says nothing, as "application/octet-stream" does: the Telegram
    # door lets scan.png through as an image (media.documents.is_image), and the turn
    # must take it as one too, not refuse it as an unknown document.
    core = await start_core()
    image = media_files.png(32, 32)
    llm.script("A square.")
    await say(core, "", Upload("document", image, mime="binary/octet-stream", name="scan.png"))
    [url] = image_urls(llm.chat_requests[-1])
    assert base64.b64decode(url.split(",", 1)[1]) == image


async def test_an_image_for_a_text_only_model_is_refused_and_nothing_is_stored(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core(openrouter_model=TEXT_ONLY, models=f"{TEXT_ONLY},{VISION}")
    with pytest.raises(ModelSeesNoImages) as caught:
        await say(core, "look", Upload("photo", media_files.jpeg(), mime="image/jpeg"))
    assert caught.value.vision_models == (VISION,)
    assert caught.value.model == TEXT_ONLY
    assert llm.chat_requests == []
    assert await core.repository.tail(CHAT, 10) == []
    assert not (core.settings.data_dir / "501").exists()


async def test_a_voice_is_transcribed_charged_answered_and_searchable(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core()
    llm.script_transcription("Remind me that the dentist is on Friday at nine")
    llm.script("Noted: the dentist, Friday at nine.")
    result = await say(core, "", Upload("voice", media_files.ogg_voice(2.0), mime="audio/ogg"))
    assert result.heard == "Remind me that the dentist is on Friday at nine"
    [request] = llm.transcription_requests
    assert request["input_audio"]["format"] == "ogg"
    assert request["model"] == core.settings.transcription_model
    content = user_content(llm.chat_requests[-1])
    assert content.endswith("Remind me that the dentist is on Friday at nine")
    assert content.startswith("[voice message, 2 s")
    [stored, _] = await core.repository.tail(CHAT, 10)
    assert stored.content == "Remind me that the dentist is on Friday at nine"
    assert [(a.kind, a.seconds, a.file) for a in stored.attachments] == [("voice", 2.0, None)]
    # Charged like a model call: to the user and to the chat, beside the chat call.
    today = day_key(utc_now())
    totals = await core.ledger.totals("user", str(USER), today)
    assert totals.calls == 2
    chat = await core.ledger.totals("chat", str(CHAT), today)
    assert chat.calls == 2 and chat.cost > 0
    assert core.agent.search is not None
    hits = await core.agent.search.search(CHAT, "dentist")
    assert hits and "dentist" in hits[0].content


async def test_a_pdf_is_read_given_to_the_model_cut_and_searchable(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core(document_prompt_chars=1000)
    filler = " ".join(f"Clause {n} says nothing in particular." for n in range(60))
    pdf = media_files.pdf_with_text("The deposit is 500 euros.", filler + " The cat is Murzik.")
    llm.script("Read it.")
    await say(core, "my contract", Upload("document", pdf, mime="application/pdf", name="c.pdf"))
    content = user_content(llm.chat_requests[-1])
    assert content.startswith("[document c.pdf (2 pages, ")
    assert "The deposit is 500 euros." in content
    assert "Murzik" not in content  # beyond DOCUMENT_PROMPT_CHARS
    assert "The document continues" in content
    [stored, _] = await core.repository.tail(CHAT, 10)
    assert stored.content == "my contract"
    [attachment] = stored.attachments
    text = await core.repository.get_file(CHAT, attachment.file or "")
    assert text is not None and "Murzik" in text.decode()
    assert core.agent.search is not None
    hits = await core.agent.search.search(CHAT, "Murzik")
    assert hits and "Murzik" in hits[0].content
    archive = (core.settings.data_dir / "501" / "messages.txt").read_text()
    assert "Murzik" not in archive and "deposit" not in archive  # text only by reference


@pytest.mark.parametrize(
    ("upload", "error"),
    [
        (Upload("document", media_files.pdf_scanned(), mime="application/pdf"), NoTextLayer),
        (Upload("document", media_files.pdf_broken(), mime="application/pdf"), BrokenFile),
        (Upload("photo", b"not an image at all", mime="image/jpeg"), NotThatKind),
        (Upload("voice", b"OggS broken", mime="audio/ogg"), BrokenFile),
        (Upload("document", b"\x00\x01", mime="application/zip", name="a.zip"), UnsupportedType),
    ],
    ids=["scanned-pdf", "broken-pdf", "not-an-image", "broken-voice", "zip"],
)
async def test_a_file_that_cannot_be_read_stores_nothing(
    start_core: Callable[..., Any], llm: FakeLLM, upload: Upload, error: type[Exception]
) -> None:
    core = await start_core()
    with pytest.raises(error):
        await say(core, "here", upload)
    assert llm.chat_requests == [] and llm.transcription_requests == []
    assert not (core.settings.data_dir / "501").exists()
    llm.script("Still here.")
    assert (await say(core, "hello")).reply == "Still here."  # the chat goes on


async def test_a_pdf_too_slow_to_read_is_refused_as_broken_and_the_next_one_is_read(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    # pdf_slow() would cost pypdf over a minute; MEDIA_PDF_TIMEOUT kills its reader. The
    # timeout covers the next reader's start too, so it leaves room for a loaded machine.
    core = await start_core(media_pdf_timeout=5.0)
    slow = Upload("document", media_files.pdf_slow(100), mime="application/pdf", name="s.pdf")
    with pytest.raises(BrokenFile):
        await say(core, "read this", slow)
    assert llm.chat_requests == [] and not (core.settings.data_dir / "501").exists()
    llm.script("Got it.")
    pdf = media_files.pdf_with_text("The rent is due on the 5th.")
    await say(core, "and this", Upload("document", pdf, mime="application/pdf", name="r.pdf"))
    assert "The rent is due on the 5th." in str(user_content(llm.chat_requests[-1]))


async def test_reset_forgets_the_files(start_core: Callable[..., Any], llm: FakeLLM) -> None:
    core = await start_core()
    llm.script("Ok.")
    await say(core, "", Upload("document", b"notes: buy milk", mime="text/plain", name="n.txt"))
    [stored, _] = await core.repository.tail(CHAT, 10)
    key = stored.attachments[0].file or ""
    assert await core.repository.get_file(CHAT, key) == b"notes: buy milk"
    await core.service.reset(CHAT)
    assert await core.repository.get_file(CHAT, key) is None


async def test_a_video_note_is_heard_through_its_sound_track(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core()
    llm.script_transcription("hello from the round video")
    llm.script("Hello!")
    note = Upload("video_note", media_files.video_note(1.0), mime="video/mp4")
    result = await say(core, "", note)
    assert result.heard == "hello from the round video"
    [request] = llm.transcription_requests
    assert request["input_audio"]["format"] == "ogg"  # the AAC track, as OGG/Opus
    [stored, _] = await core.repository.tail(CHAT, 10)
    assert [a.kind for a in stored.attachments] == ["video_note"]
    assert stored.content == "hello from the round video"


async def test_a_failed_transcription_stores_nothing(
    start_core: Callable[..., Any], llm: FakeLLM
) -> None:
    core = await start_core()
    llm.script_transcription(Transcription(status=503, error_message="overloaded"))
    with pytest.raises(LLMUnavailable):
        await say(core, "", Upload("voice", media_files.ogg_voice(1.0), mime="audio/ogg"))
    assert llm.chat_requests == []
    assert await core.repository.tail(CHAT, 10) == []
    totals = await core.ledger.totals("user", str(USER), day_key(utc_now()))
    assert totals.calls == 0
