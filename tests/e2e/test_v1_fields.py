"""End to end: the fields of an OpenAI request beside its messages, with the official
`openai` client against the real /v1 door, the real core and real files, the fake LLM
showing what reached the provider: `response_format` (an answer held to JSON, to a schema,
through `client.chat.completions.parse`), the sampling fields passed through, the fields
refused, one model by id, and audio and files in the last message."""

from __future__ import annotations

import base64
import io
import json
import math
import struct
import wave
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from membot.api import base64s
from membot.ids import ConversationId
from tests import api_support
from tests.api_support import RunningApi, StartApi
from tests.e2e.helpers import prompt_texts
from tests.e2e.test_v1_errors import error_of
from tests.fakes import FakeLLM, Reply, media_files
from tests.v1_support import archive, openai_client, v1_conversations

start_api = api_support.start_api

HELLO = [{"role": "user", "content": "hello"}]
SEARCH = {"function": {"name": "search_history", "arguments": '{"query": "cat"}'}}


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api(openrouter_model="vendor/default", models="vendor/a")


@pytest.fixture
async def client(api: RunningApi) -> AsyncIterator[AsyncOpenAI]:
    async with openai_client(api) as client:
        yield client


class Pet(BaseModel):
    name: str
    kind: str


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or [] if "function" in t}


async def test_json_object_reaches_the_provider_and_the_answer_is_the_json(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    completion = await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "My cat is Pixel; answer in JSON"}],
        response_format={"type": "json_object"},
        user="ann",
    )
    sent = llm.chat_requests[-1]
    assert sent["response_format"] == {"type": "json_object"}
    assert "search_history" in tool_names(sent)  # memory's tools are still offered
    content = completion.choices[0].message.content
    assert json.loads(content or "") == {"answer": "ANSWER: My cat is Pixel; answer in JSON"}
    # Kept in memory like any answer: the next turn sees it.
    stored = archive(api, ConversationId.v1_user("ann"))
    assert [m["content"] for m in stored][-1] == content
    await client.chat.completions.create(model="membot", messages=HELLO, user="ann")
    assert ("assistant", content) in prompt_texts(llm.chat_requests[-1])
    assert "response_format" not in llm.chat_requests[-1]  # that request's only


async def test_parse_with_a_pydantic_model_after_a_tool_step(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """The client's json_schema goes to the provider as written (name, strict), on the
    tool step too; the answer comes back as the JSON the model wrote (its code fence off),
    which `parse` reads into the model."""
    llm.script(Reply(tool_calls=[SEARCH]), '```json\n{"name": "Pixel", "kind": "cat"}\n```')
    completion = await client.chat.completions.parse(
        model="membot",
        messages=[{"role": "user", "content": "Which pet do I have?"}],
        response_format=Pet,
        user="bea",
    )
    assert completion.choices[0].message.parsed == Pet(name="Pixel", kind="cat")
    assert completion.choices[0].message.content == '{"name": "Pixel", "kind": "cat"}'
    step, answer = llm.chat_requests[-2:]
    for sent in (step, answer):
        form = sent["response_format"]
        assert form["type"] == "json_schema"
        assert (form["json_schema"]["name"], form["json_schema"]["strict"]) == ("Pet", True)
        assert form["json_schema"]["schema"]["required"] == ["name", "kind"]
        # Routed only to providers that honour response_format.
        assert sent["provider"] == {"require_parameters": True}
        assert "search_history" in tool_names(sent)


async def test_an_answer_off_the_schema_is_repaired_once_and_streams_whole(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    llm.script('{"name": "Pixel"}', '{"name": "Pixel", "kind": "cat"}')
    schema = Pet.model_json_schema()
    stream = await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "My pet?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "pet", "schema": schema}},
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(text) == {"name": "Pixel", "kind": "cat"}
    repair = llm.chat_requests[-1]["messages"][-1]["content"]
    assert "'kind' is a required property" in repair


async def test_a_reply_never_in_json_is_502_invalid_output(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    llm.script("Sure! Pixel is a cat.", "Still not JSON.")
    with pytest.raises(openai.InternalServerError) as raised:
        await client.chat.completions.create(
            model="membot", messages=HELLO, response_format={"type": "json_object"}, user="cid"
        )
    assert (raised.value.status_code, error_of(raised.value)["code"]) == (502, "invalid_output")
    assert archive(api, ConversationId.v1_user("cid")) == []


async def test_the_sampling_fields_reach_the_provider_on_every_call(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    llm.script(Reply(tool_calls=[SEARCH]), "Pixel.")
    await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "My cat?"}],
        temperature=0.2,
        top_p=0.9,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        seed=7,
        stop=["END"],
        logit_bias={"50256": -100},
        reasoning_effort="low",
        verbosity="low",
        extra_body={"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1},
        max_completion_tokens=300,
        response_format={"type": "text"},
        tool_choice="auto",
        parallel_tool_calls=False,
        n=1,
        store=True,
        metadata={"app": "x"},
        user="dan",
    )
    for sent in llm.chat_requests[-2:]:
        assert {k: sent.get(k) for k in ("temperature", "top_p", "seed", "stop")} == {
            "temperature": 0.2,
            "top_p": 0.9,
            "seed": 7,
            "stop": ["END"],
        }
        assert (sent["frequency_penalty"], sent["presence_penalty"]) == (0.5, -0.5)
        assert (sent["logit_bias"], sent["reasoning_effort"]) == ({"50256": -100}, "low")
        assert (sent["verbosity"], sent["top_k"], sent["min_p"]) == ("low", 40, 0.05)
        assert sent["repetition_penalty"] == 1.1
        assert sent["max_tokens"] == 300
        # Neither the caller's name nor what only OpenAI's own service keeps.
        assert not {"user", "store", "metadata", "response_format", "n"} & set(sent)


async def test_an_answer_cut_at_max_tokens_says_length(client: AsyncOpenAI, llm: FakeLLM) -> None:
    llm.script(Reply("The first half of", finish_reason="length"))
    completion = await client.chat.completions.create(
        model="membot", messages=HELLO, max_completion_tokens=5
    )
    [choice] = completion.choices
    assert (choice.message.content, choice.finish_reason) == ("The first half of", "length")
    llm.script(Reply("The first half of", finish_reason="length"))
    stream = await client.chat.completions.create(
        model="membot", messages=HELLO, max_tokens=5, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert [c.choices[0].finish_reason for c in chunks][-1] == "length"
    completion = await client.chat.completions.create(model="membot", messages=HELLO)
    assert completion.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        ({"logprobs": True}, "logprobs_not_supported", "logprobs"),
        ({"top_logprobs": 3}, "logprobs_not_supported", "top_logprobs"),
        ({"tool_choice": "required"}, "tools_not_supported", "tool_choice"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "f"}}},
            "tools_not_supported",
            "tool_choice",
        ),
        ({"modalities": ["text", "audio"]}, "modalities_not_supported", "modalities"),
        ({"temperature": 3}, "invalid_request", "temperature"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "invalid_request", "stop"),
        ({"response_format": {"type": "xml"}}, "invalid_response_format", "response_format"),
        (
            {"response_format": {"type": "json_schema"}},
            "invalid_response_format",
            "response_format",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "a b"}}},
            "invalid_response_format",
            "response_format",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "s", "schema": {"type": "string"}},
                }
            },
            "invalid_response_format",
            "response_format",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "s", "schema": {"$ref": "http://169.254.169.254/"}},
                }
            },
            "invalid_response_format",
            "response_format",
        ),
    ],
)
async def test_a_field_membot_cannot_honour_is_400(
    api: RunningApi,
    client: AsyncOpenAI,
    llm: FakeLLM,
    fields: dict[str, Any],
    code: str,
    param: str,
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="membot", messages=HELLO, **fields)
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"], error["param"]) == (400, code, param)
    assert error["type"] == "invalid_request_error" and error["message"]
    assert llm.requests == [] and v1_conversations(api) == []


async def test_one_model_by_id(api: RunningApi, client: AsyncOpenAI, llm: FakeLLM) -> None:
    for name in ("membot", "vendor/default", "vendor/a"):  # the client sends vendor%2Fa
        model = await client.models.retrieve(name)
        assert (model.id, model.object, model.owned_by) == (name, "model", "membot")
    with pytest.raises(openai.NotFoundError) as raised:
        await client.models.retrieve("vendor/other")
    error = error_of(raised.value)
    assert (error["code"], error["type"]) == ("model_not_found", "invalid_request_error")
    assert "membot, vendor/default, vendor/a" in error["message"]
    async with openai_client(api, "not-a-token-of-ours") as stranger:
        with pytest.raises(openai.AuthenticationError):
            await stranger.models.retrieve("membot")
    assert llm.requests == []


def wav_tone(seconds: float = 1.0, rate: int = 16000) -> bytes:
    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return out.getvalue()


async def test_audio_and_a_file_in_the_last_message(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """input_audio is transcribed and a file read, as /api/chat's attachments are."""
    llm.script_transcription("the deposit is due on Friday")
    llm.script("500 euros, due Friday.")
    clip = wav_tone()
    pdf = media_files.pdf_with_text("The deposit is 500 euros.")
    completion = await client.chat.completions.create(
        model="membot",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Sum it up"},
                    {
                        "type": "input_audio",
                        "input_audio": {"data": base64.b64encode(clip).decode(), "format": "wav"},
                    },
                    {
                        "type": "file",
                        "file": {
                            "filename": "lease.pdf",
                            "file_data": "data:application/pdf;base64,"
                            + base64.b64encode(pdf).decode(),
                        },
                    },
                ],
            }
        ],
        user="eve",
    )
    assert completion.choices[0].message.content == "500 euros, due Friday."
    [heard] = llm.transcription_requests
    assert heard["input_audio"]["data"]
    shown = str(llm.chat_requests[-1]["messages"][-1]["content"])
    assert "the deposit is due on Friday" in shown and "The deposit is 500 euros." in shown
    [stored, _] = archive(api, ConversationId.v1_user("eve"))
    assert [a["kind"] for a in stored["attachments"]] == ["audio", "document"]


@pytest.mark.parametrize(
    ("part", "status", "code"),
    [
        (
            {"type": "file", "file": {"filename": "scan.pdf", "file_data": "SCANNED"}},
            400,
            "no_text_layer",
        ),
        ({"type": "file", "file": {"file_id": "file-abc"}}, 400, "unsupported_content"),
        (
            {"type": "input_audio", "input_audio": {"data": "%%", "format": "wav"}},
            400,
            "invalid_file",
        ),
    ],
    ids=["scanned-pdf", "file-id", "audio-not-base64"],
)
async def test_a_file_that_cannot_be_used_is_400_naming_its_part(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM, part: dict[str, Any], status: int, code: str
) -> None:
    if part.get("file", {}).get("file_data") == "SCANNED":
        data = base64.b64encode(media_files.pdf_scanned()).decode()
        part = {"type": "file", "file": {"filename": "scan.pdf", "file_data": data}}
    content = [{"type": "text", "text": "Read this"}, part]
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(
            model="membot", messages=[{"role": "user", "content": content}], user="fay"
        )
    error = error_of(raised.value)
    assert (raised.value.status_code, error["code"]) == (status, code)
    assert error["param"] == "messages.0.content.1"
    if code == "no_text_layer":
        assert '(messages.0.content.1, "scan.pdf")' in error["message"]
    assert llm.chat_requests == [] and archive(api, ConversationId.v1_user("fay")) == []


async def test_a_large_file_part_is_decoded_off_the_loop_and_bad_base64_still_named(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """A file part of several of the chunks its base64 is decoded in (in a worker thread) is
    read whole; one whose base64 goes wrong past its first chunk is 400 invalid_file naming
    the part, as a short one is, and nothing is stored."""
    text = "".join(f"line {i} of the ledger\n" for i in range(60_000)) + "total: 500 euros"
    data = base64.b64encode(text.encode()).decode()
    assert len(data) > 4 * base64s.CHUNK
    llm.script("500 euros.")
    file = {"type": "file", "file": {"filename": "ledger.txt", "file_data": data}}
    completion = await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Total?"}, file]}],
        user="gus",
    )
    assert completion.choices[0].message.content == "500 euros."
    shown = str(llm.chat_requests[-1]["messages"][-1]["content"])
    assert "line 0 of the ledger" in shown
    [stored, _] = archive(api, ConversationId.v1_user("gus"))
    assert stored["attachments"][0]["size"] == len(text.encode())

    broken = data[: 3 * base64s.CHUNK] + "*" + data[3 * base64s.CHUNK + 1 :]
    file = {"type": "file", "file": {"filename": "ledger.txt", "file_data": broken}}
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(
            model="membot",
            messages=[{"role": "user", "content": [{"type": "text", "text": "Again?"}, file]}],
            user="hal",
        )
    error = error_of(raised.value)
    assert (error["code"], error["param"]) == ("invalid_file", "messages.0.content.1")
    assert error["message"] == "A file's data is not valid base64, or is empty."
    assert archive(api, ConversationId.v1_user("hal")) == []
