"""Files over the HTTP API, end to end: POST /api/chat with `attachments`, against the real
HTTP API, the real core, real files (and real Redis), and the fake LLM as a real HTTP
server; media made in the tests (tests/fakes/media_files.py)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from membot.api import base64s
from membot.api.models import MAX_BODY_BYTES
from membot.config import Settings
from membot.ids import ConversationId
from membot.memory.redis import RedisRepository
from membot.roles.process import Process
from tests import api_support
from tests.api_support import ApiClient, RunningApi, StartApi
from tests.e2e.conftest import REDIS_URL
from tests.e2e.test_redis_e2e import on_redis
from tests.fakes import FakeLLM, FakeTelegram, media_files

start_api = api_support.start_api

VISION = "vision/model"
TEXT_ONLY = "test/model"


@pytest.fixture
async def api(start_api: StartApi, llm: FakeLLM) -> RunningApi:
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    return await start_api(openrouter_model=VISION, models=f"{VISION},{TEXT_ONLY}")


def attachment(kind: str, data: bytes, mime: str | None = None, name: str | None = None) -> Any:
    out: dict[str, Any] = {"type": kind, "data": base64.b64encode(data).decode()}
    if mime is not None:
        out["mimeType"] = mime
    if name is not None:
        out["name"] = name
    return out


def image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[0]["text"]


async def test_an_image_goes_to_a_vision_model_and_is_kept(api: RunningApi, llm: FakeLLM) -> None:
    photo = media_files.jpeg(200, 100)
    llm.script("A grey gradient.")
    answer = await api.client.chat(
        {"message": "What is this?", "attachments": [attachment("image", photo, "image/jpeg")]}
    )
    assert (answer.status, answer.body["content"]) == (200, "A grey gradient.")
    [url] = image_urls(llm.chat_requests[-1])
    assert base64.b64decode(url.removeprefix("data:image/jpeg;base64,")) == photo
    assert last_user_text(llm.chat_requests[-1]) == "[image]\nWhat is this?"
    [stored, _] = api.stored(answer.body["sessionId"])
    [kept] = stored["attachments"]
    assert (kept["kind"], kept["size"], stored["content"]) == ("image", len(photo), "What is this?")
    files = api.session_dir(answer.body["sessionId"]) / "files"
    assert (files / kept["file"]).read_bytes() == photo
    raw = (api.session_dir(answer.body["sessionId"]) / "messages.txt").read_text()
    assert attachment("image", photo)["data"][:40] not in raw  # never base64 in the archive


async def test_an_image_for_a_text_only_model_is_400(api: RunningApi, llm: FakeLLM) -> None:
    body = {
        "message": "What is this?",
        "model": TEXT_ONLY,
        "attachments": [attachment("image", media_files.png(32, 32), "image/png")],
    }
    answer = await api.client.chat(body)
    assert (answer.status, answer.code) == (400, "MODEL_SEES_NO_IMAGES")
    assert VISION in answer.body["error"] and TEXT_ONLY in answer.body["error"]
    assert llm.chat_requests == [] and api.sessions_on_disk() == []


async def test_a_voice_note_is_transcribed_answered_kept_and_searchable(
    api: RunningApi, llm: FakeLLM
) -> None:
    llm.script_transcription("the parking spot is number forty two")
    llm.script("Got it: spot 42.")
    voice = media_files.ogg_voice(1.5)
    answer = await api.client.chat(
        {"message": "Remember this", "attachments": [attachment("audio", voice, "audio/ogg")]}
    )
    assert answer.status == 200
    [request] = llm.transcription_requests
    assert base64.b64decode(request["input_audio"]["data"]) == voice
    assert "the parking spot is number forty two" in last_user_text(llm.chat_requests[-1])
    [stored, _] = api.stored(answer.body["sessionId"])
    assert stored["content"] == "Remember this\n\nthe parking spot is number forty two"
    assert stored["attachments"][0]["kind"] == "audio"
    cid = ConversationId.api(answer.body["sessionId"])
    assert api.core.agent.search is not None
    hits = await api.core.agent.search.search(cid, "parking spot")
    assert hits and "forty two" in hits[0].content


async def test_a_pdf_with_text_is_read_for_the_turn(api: RunningApi, llm: FakeLLM) -> None:
    pdf = media_files.pdf_with_text("The deposit is 500 euros.")
    llm.script("500 euros.")
    body = {
        "message": "What is the deposit?",
        "attachments": [attachment("document", pdf, "application/pdf", "lease.pdf")],
    }
    answer = await api.client.chat(body)
    assert answer.status == 200
    text = last_user_text(llm.chat_requests[-1])
    assert text.startswith("[document lease.pdf (1 page, ")
    assert "The deposit is 500 euros." in text


@pytest.mark.parametrize(
    ("item", "code"),
    [
        (attachment("document", media_files.pdf_scanned(), "application/pdf"), "NO_TEXT_LAYER"),
        (attachment("document", media_files.pdf_broken(), "application/pdf"), "BROKEN_ATTACHMENT"),
        (attachment("image", media_files.jpeg()[:300], "image/jpeg"), "BROKEN_ATTACHMENT"),
        (attachment("audio", b"definitely not audio", "audio/ogg"), "BROKEN_ATTACHMENT"),
        (attachment("document", b"PK\x03\x04", "application/zip"), "UNSUPPORTED_ATTACHMENT"),
        ({"type": "image", "data": "not base64 !!"}, "INVALID_ATTACHMENT"),
    ],
    ids=["scanned-pdf", "broken-pdf", "cut-jpeg", "not-audio", "zip", "not-base64"],
)
async def test_an_attachment_that_cannot_be_used_is_400_and_stores_nothing(
    api: RunningApi, llm: FakeLLM, item: dict[str, Any], code: str
) -> None:
    answer = await api.client.chat({"message": "read this", "attachments": [item]})
    assert (answer.status, answer.code) == (400, code)
    assert llm.chat_requests == [] and llm.transcription_requests == []
    assert api.sessions_on_disk() == []


ONE_PAGE = media_files.pdf_with_text("One page.")
LONG_BAD = "QUFB" * (base64s.CHUNK // 2) + "*QUF" + "QUFB" * 100


@pytest.mark.parametrize(
    ("items", "code", "sentence"),
    [
        (
            [attachment("image", ONE_PAGE, "image/png", "a.png")],
            "BROKEN_ATTACHMENT",
            'An attachment is not an image, though its type says so (attachments[0], "a.png").',
        ),
        (
            [attachment("audio", media_files.jpeg(64, 48), "audio/mpeg", "cover.mp3")],
            "BROKEN_ATTACHMENT",
            'An attachment is not audio, though its type says so (attachments[0], "cover.mp3").',
        ),
        (
            [attachment("document", random.Random(3).randbytes(3000), "text/plain", "n.txt")],
            "BROKEN_ATTACHMENT",
            'An attachment is not a text file, though its type says so (attachments[0], "n.txt").',
        ),
        (
            [attachment("document", media_files.pdf_nested(), "application/pdf", "deep.pdf")],
            "BROKEN_ATTACHMENT",
            "A PDF attachment is too complex to read (nested too deeply, or too heavy) "
            '(attachments[0], "deep.pdf").',
        ),
        (
            [
                attachment("document", ONE_PAGE, "application/pdf", "fine.pdf"),
                attachment("document", media_files.pdf_scanned(), "application/pdf", "scan.pdf"),
            ],
            "NO_TEXT_LAYER",
            'A PDF attachment has no text layer (scanned pages) (attachments[1], "scan.pdf").',
        ),
        (
            [attachment("image", media_files.jpeg()), {"type": "image", "data": "not base64"}],
            "INVALID_ATTACHMENT",
            "An attachment's data is not valid base64, or is empty (attachments[1]).",
        ),
        (
            # Decoded in chunks (api/base64s.py): wrong past its first, refused all the same.
            [attachment("image", media_files.jpeg()), {"type": "document", "data": LONG_BAD}],
            "INVALID_ATTACHMENT",
            "An attachment's data is not valid base64, or is empty (attachments[1]).",
        ),
    ],
    ids=[
        "pdf-as-image",
        "jpeg-as-audio",
        "random-txt",
        "nested-pdf",
        "second-of-two",
        "base64",
        "long-base64",
    ],
)
async def test_an_attachment_error_says_what_is_wrong_and_which_attachment(
    api: RunningApi, llm: FakeLLM, items: list[Any], code: str, sentence: str
) -> None:
    answer = await api.client.chat({"message": "read these", "attachments": items})
    assert (answer.status, answer.code, answer.body["error"]) == (400, code, sentence)
    assert llm.chat_requests == [] and api.sessions_on_disk() == []


async def test_a_malformed_attachment_is_invalid_request(api: RunningApi, llm: FakeLLM) -> None:
    for item in ({"type": "video", "data": "AAAA"}, {"type": "image"}, "AAAA"):
        answer = await api.client.chat({"message": "hi", "attachments": [item]})
        assert (answer.status, answer.code) == (400, "INVALID_REQUEST")
    assert llm.requests == []


async def test_a_body_over_25_mb_is_413(api: RunningApi, llm: FakeLLM) -> None:
    head = b'{"message": "hi", "attachments": [{"type": "document", "mimeType": "text/plain", '
    head += b'"data": "'
    tail = b'"}]}'
    fits = media_files_text(MAX_BODY_BYTES - len(head) - len(tail))
    llm.script("A lot of a's.")
    assert (await api.client.chat(head + fits + tail)).status == 200
    too_big = await api.client.chat(head + fits + b"AAAA" + tail)
    assert (too_big.status, too_big.code) == (413, "PAYLOAD_TOO_LARGE")
    assert len(llm.chat_requests) == 1


def media_files_text(size: int) -> bytes:
    """Base64 of plain text, exactly `size` characters (a multiple of 4 below it)."""
    raw = b"a" * ((size // 4) * 3)
    return base64.b64encode(raw)


async def test_a_follow_up_about_an_image_is_answered_by_another_process_from_redis(
    start_api: StartApi, llm: FakeLLM, redis_repo: RedisRepository, tmp_path: Path
) -> None:
    llm.models = {VISION: ["text", "image"]}
    shared = {
        "storage": "redis",
        "redis_url": REDIS_URL,
        "redis_prefix": redis_repo.prefix,
        "openrouter_model": VISION,
    }
    first = await start_api(data_dir=tmp_path / "first", **shared)
    second = await start_api(data_dir=tmp_path / "second", **shared)
    photo = media_files.jpeg(120, 90)
    llm.script("A receipt, I think.", "About 12 cm wide.")
    opened = await first.client.chat(
        {
            "message": "Keep this receipt",
            "maxRounds": 2,
            "attachments": [attachment("image", photo, "image/jpeg")],
        }
    )
    assert opened.status == 200
    follow = await second.client.chat(
        {"message": "and how big is it?", "sessionId": opened.body["sessionId"]}
    )
    assert follow.status == 200
    [url] = image_urls(llm.chat_requests[-1])  # read back from Redis by the second process
    assert base64.b64decode(url.removeprefix("data:image/jpeg;base64,")) == photo
    assert not (tmp_path / "second" / "api").exists()
    cid = ConversationId.api(opened.body["sessionId"])
    assert json.loads(await redis_repo.client.hget(redis_repo.keys(cid).meta, "state") or "{}")
    assert await redis_repo.client.ttl(redis_repo.keys(cid).files) == await redis_repo.client.ttl(
        redis_repo.keys(cid).meta
    )


async def test_membot_receive_with_the_api_reads_an_image(
    tg: FakeTelegram,  # the receiver polls it
    llm: FakeLLM,
    make_settings: Callable[..., Settings],
    redis_repo: RedisRepository,
) -> None:
    """`membot receive` runs no Telegram turn, but with API_PORT set it serves the API, whose
    turns read files as any role's do."""
    llm.models = {VISION: ["text", "image"], TEXT_ONLY: ["text"]}
    port = api_support.free_port()
    settings = make_settings(
        **on_redis(redis_repo, queue="redis"),
        api_port=port,
        api_tokens=api_support.API_TOKEN,
        openrouter_model=VISION,
        models=f"{VISION},{TEXT_ONLY}",
    )
    receive = Process(settings, "receive")
    await receive.start()  # started: polling Telegram, the API listening
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        photo = media_files.jpeg(200, 100)
        llm.script("A grey gradient.")
        answer = await client.chat(
            {"message": "What is this?", "attachments": [attachment("image", photo, "image/jpeg")]}
        )
        assert (answer.status, answer.body.get("content")) == (200, "A grey gradient.")
        [url] = image_urls(llm.chat_requests[-1])
        assert base64.b64decode(url.removeprefix("data:image/jpeg;base64,")) == photo
    finally:
        await client.close()
        await receive.shutdown()
