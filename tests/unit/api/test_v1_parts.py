"""Files as base64 in a request (api/base64s.py): /v1's content parts (api/v1/parts.py) and
/api/chat's attachments (api/models.py). A file's size is known from its base64's length
and refused before it is decoded, with the error the media layer gives a file over its
limit; long base64 is decoded in chunks (off the event loop) exactly as at once."""

from __future__ import annotations

import base64
import binascii
import os

import pytest

from membot.api.base64s import CHUNK, decode_in_chunks, decoded_size
from membot.api.errors import ApiError, ErrorCode
from membot.api.models import ChatRequest
from membot.api.v1.errors import V1Error
from membot.api.v1.parts import ContentPart, content_of

WHERE = "messages.0.content"


def parts(*files: tuple[str, str]) -> list[ContentPart]:
    """A text part, then a file part per (name, base64)."""
    content = [ContentPart(type="text", text="read these")]
    for name, data in files:
        content.append(
            ContentPart.model_validate(
                {"type": "file", "file": {"filename": name, "file_data": data}}
            )
        )
    return content


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 1000, 1001, 1002, CHUNK, CHUNK + 1])
def test_the_decoded_size_is_known_from_the_length(size: int) -> None:
    assert decoded_size(base64.b64encode(os.urandom(size)).decode()) == size


async def test_a_file_over_the_limit_is_refused_by_its_length_before_it_is_decoded() -> None:
    limit = 1000
    fits = base64.b64encode(b"a" * limit).decode()
    text, uploads, places = await content_of(parts(("a.txt", fits)), WHERE, limit)
    assert text == "read these"
    assert [u.data for u in uploads] == [b"a" * limit] and places == (f"{WHERE}.1",)
    for over in (base64.b64encode(b"a" * (limit + 1)).decode(), "!!!!" * 400):
        with pytest.raises(V1Error) as raised:
            await content_of(parts(("a.txt", fits), ("b.txt", over)), WHERE, limit)
        # What a file over the media limit gets (api/v1/door.py's media errors): OpenAI's
        # shape, the part named; bad base64 of that length too, never decoded.
        assert raised.value.status == 413
        assert raised.value.body() == {
            "error": {
                "message": "The request body (or an attachment) is too large "
                f'({WHERE}.2, "b.txt").',
                "type": "invalid_request_error",
                "param": f"{WHERE}.2",
                "code": "payload_too_large",
            }
        }


async def test_an_attachment_over_the_limit_is_refused_by_its_length_before_it_is_decoded() -> None:
    limit = 1000
    fits = {"type": "document", "name": "a.txt", "data": base64.b64encode(b"a" * limit).decode()}
    over = base64.b64encode(b"a" * (limit + 1)).decode()
    request = ChatRequest.model_validate({"message": "read", "attachments": [fits]})
    [upload] = (await request.to_session_request(limit)).uploads
    assert upload.data == b"a" * limit
    for data in (over, "!!!!" * 400):
        too_big = {"type": "document", "name": "b.txt", "data": data}
        request = ChatRequest.model_validate({"message": "read", "attachments": [fits, too_big]})
        with pytest.raises(ApiError) as raised:
            await request.to_session_request(limit)
        # The error a file over the media limit gets there (api/errors.py media_error).
        assert raised.value.code == ErrorCode.PAYLOAD_TOO_LARGE
        assert raised.value.message == (
            'The request body (or an attachment) is too large (attachments[1], "b.txt").'
        )


def test_decoding_in_chunks_is_decoding_at_once() -> None:
    for size in (CHUNK // 4 * 3 * 3, CHUNK // 4 * 3 * 3 + 1, CHUNK // 4 * 3 * 3 + 2, 1_000_003):
        data = base64.b64encode(os.urandom(size)).decode()
        assert decode_in_chunks(data) == base64.b64decode(data, validate=True)
    good = base64.b64encode(os.urandom(CHUNK)).decode()
    padded = base64.b64encode(b"x").decode()  # "eA=="
    bad = [
        good[:-1],  # a length not a multiple of 4
        good[: CHUNK - 4] + padded + good,  # padding where a chunk ends, inside the data
        good[:CHUNK] + "*" + good[CHUNK + 1 :],  # a character not of base64, in a later chunk
        good[:-4] + "=AAA",
    ]
    for data in bad:
        with pytest.raises(binascii.Error):
            base64.b64decode(data, validate=True)
        with pytest.raises(binascii.Error):
            decode_in_chunks(data)
