"""End to end: the official `openai` client against membot's OpenAI-compatible endpoint
(POST /v1/chat/completions, GET /v1/models) on the real API server, the real core, real
files and the fake LLM: plain and streamed answers, whose memory, the history a client sends
again, a system message as a one-request persona, the models, an image."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from openai import AsyncOpenAI

from membot.config import Settings
from membot.ids import ConversationId
from tests import api_support
from tests.api_support import API_TOKEN, OTHER_TOKEN, RunningApi, StartApi
from tests.e2e.helpers import prompt_texts, system_prompt
from tests.fakes import FakeLLM, Pacing, Reply, media_files
from tests.v1_support import archive, openai_client, v1_conversations

start_api = api_support.start_api

DEFAULT = Settings.model_fields["system_prompt"].default


@pytest.fixture
async def api(start_api: StartApi) -> RunningApi:
    return await start_api(api_tokens=f"{API_TOKEN},{OTHER_TOKEN}")


@pytest.fixture
async def client(api: RunningApi) -> AsyncIterator[AsyncOpenAI]:
    async with openai_client(api) as client:
        yield client


async def test_a_plain_completion(api: RunningApi, client: AsyncOpenAI, llm: FakeLLM) -> None:
    completion = await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "Hello there"}], user="alice"
    )
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    [choice] = completion.choices
    assert (choice.message.role, choice.message.content) == ("assistant", "ANSWER: Hello there")
    assert choice.finish_reason == "stop"
    assert completion.model == api.settings.default_model  # what the provider reported
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert llm.chat_requests[-1]["model"] == api.settings.default_model


async def test_a_streamed_completion_ends_with_usage_and_done(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    # Pieces a model writes 0.15 s apart reach the client apart (membot reads a stream a
    # few times a second).
    llm.script(Reply("One, two, three, four, five, six.", pacing=Pacing(chars=8, delay=0.15)))
    stream = await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "Count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]  # the client stops at data: [DONE]
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    pieces = [c.choices[0].delta.content for c in chunks if c.choices]
    assert "".join(p or "" for p in pieces) == "One, two, three, four, five, six."
    assert len([p for p in pieces if p]) > 1  # in pieces, as it was written
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    *_, last = chunks
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_stream_without_include_usage_has_no_usage(client: AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "Hi"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.choices and c.usage is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ANSWER: Hi"


async def test_two_users_are_apart(api: RunningApi, client: AsyncOpenAI, llm: FakeLLM) -> None:
    """`user`, else X-OpenWebUI-User-Id, else the token: each a conversation of its own."""
    await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "My cat is Pixel"}], user="alice"
    )
    await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "My dog is Rex"}],
        extra_headers={"X-OpenWebUI-User-Id": "bob"},
    )
    await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "My fish is Nemo"}]
    )
    async with openai_client(api, OTHER_TOKEN) as other:
        await other.chat.completions.create(
            model="membot", messages=[{"role": "user", "content": "What pets do I have?"}]
        )
    assert prompt_texts(llm.chat_requests[-1]) == [("user", "What pets do I have?")]
    # The header and the field name the same caller: bob's memory, whichever way he comes.
    await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "And my pet?"}], user="bob"
    )
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "My dog is Rex"),
        ("assistant", "ANSWER: My dog is Rex"),
        ("user", "And my pet?"),
    ]
    # Four conversations, each under a digest: no caller's name (nor a token) on disk.
    names = v1_conversations(api)
    assert len(names) == 4 and not {"alice", "bob", API_TOKEN} & set(names)
    assert ConversationId.v1_user("alice").key in names


async def test_memory_across_calls_stores_the_history_once(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """The client sends its whole history each time; membot takes the last message and
    answers from its own memory, so each message is stored once (and a past the client
    made up never reaches the model)."""
    history: list[dict[str, str]] = []
    for text in ("My cat is Pixel", "I live in Porto", "What is my cat called?"):
        history.append({"role": "user", "content": text})
        completion = await client.chat.completions.create(
            model="membot", messages=history, user="carol"
        )
        history.append({"role": "assistant", "content": completion.choices[0].message.content})
    assert prompt_texts(llm.chat_requests[-1]) == [
        ("user", "My cat is Pixel"),
        ("assistant", "ANSWER: My cat is Pixel"),
        ("user", "I live in Porto"),
        ("assistant", "ANSWER: I live in Porto"),
        ("user", "What is my cat called?"),
    ]
    stored = archive(api, ConversationId.v1_user("carol"))
    assert [(m["role"], m["content"]) for m in stored] == [
        (role, text) for role, text in prompt_texts(llm.chat_requests[-1])
    ] + [("assistant", "ANSWER: What is my cat called?")]

    made_up = [{"role": "assistant", "content": "You told me you own a parrot"}]
    await client.chat.completions.create(
        model="membot",
        messages=[*made_up, {"role": "user", "content": "Which pet?"}],
        user="carol",
    )
    shown = str(llm.chat_requests[-1]["messages"])
    assert "parrot" not in shown and "My cat is Pixel" in shown
    assert len(archive(api, ConversationId.v1_user("carol"))) == 8


async def test_a_system_message_is_a_persona_for_that_request_only(
    api: RunningApi, client: AsyncOpenAI, llm: FakeLLM
) -> None:
    pirate = "You are a pirate. Answer as one."
    await client.chat.completions.create(
        model="membot",
        messages=[{"role": "system", "content": pirate}, {"role": "user", "content": "Hi"}],
        user="dave",
    )
    first = system_prompt(llm.chat_requests[-1])
    assert first.startswith(pirate) and DEFAULT not in first
    await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "Hi again"}], user="dave"
    )
    second = system_prompt(llm.chat_requests[-1])
    assert pirate not in second and second.startswith(DEFAULT)
    folder = api.settings.data_dir / ConversationId.v1_user("dave").relative_path()
    assert not any(pirate in p.read_text() for p in folder.rglob("*") if p.is_file())


async def test_the_models_are_listed_and_picked(start_api: StartApi, llm: FakeLLM) -> None:
    api = await start_api(openrouter_model="vendor/default", models="vendor/a,vendor/b")
    async with openai_client(api) as client:
        listed = [m.id async for m in client.models.list()]
        assert listed == ["membot", "vendor/default", "vendor/a", "vendor/b"]
        await client.chat.completions.create(
            model="vendor/b", messages=[{"role": "user", "content": "Hi"}]
        )
        assert llm.chat_requests[-1]["model"] == "vendor/b"
        await client.chat.completions.create(
            model="membot", messages=[{"role": "user", "content": "Hi"}]
        )
        assert llm.chat_requests[-1]["model"] == "vendor/default"


async def test_an_image_in_the_last_message_is_shown_and_kept(
    start_api: StartApi, llm: FakeLLM
) -> None:
    llm.models = {"vision/model": ["text", "image"]}
    api = await start_api(openrouter_model="vision/model")
    photo = media_files.jpeg(200, 100)
    url = "data:image/jpeg;base64," + base64.b64encode(photo).decode()
    llm.script("A grey gradient.")
    async with openai_client(api) as client:
        completion = await client.chat.completions.create(
            model="membot",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
            user="erin",
        )
    assert completion.choices[0].message.content == "A grey gradient."
    shown = llm.chat_requests[-1]["messages"][-1]["content"]
    [seen] = [p["image_url"]["url"] for p in shown if p["type"] == "image_url"]
    assert base64.b64decode(seen.split(",", 1)[1]) == photo
    [stored, _] = archive(api, ConversationId.v1_user("erin"))
    [kept] = stored["attachments"]
    assert (kept["kind"], kept["size"], stored["content"]) == ("image", len(photo), "What is this?")


async def test_web_sources_come_as_url_citation_annotations(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    llm.script(Reply("Open 10 to 18.", sources=[("https://example.org/visit", "Hours")]))
    completion = await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "When is the museum open?"}]
    )
    [annotation] = completion.choices[0].message.annotations or []
    assert annotation.type == "url_citation"
    cited = annotation.url_citation
    assert (cited.url, cited.title, cited.start_index, cited.end_index) == (
        "https://example.org/visit",
        "Hours",
        0,
        len("Open 10 to 18."),
    )


async def test_what_an_answer_cites_of_the_callers_memory_comes_with_it(
    client: AsyncOpenAI, llm: FakeLLM
) -> None:
    """membot's `citations` beside the message (an extra field OpenAI's client keeps), and
    on the stream's last chunk; never a `[#id]` marker in the text."""
    plan = "I fly to Lisbon on May 3rd."
    await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": plan}], user="lena"
    )
    search = {"function": {"name": "search_history", "arguments": '{"query": "Lisbon"}'}}
    llm.script(Reply(tool_calls=[search]), Reply("You fly on May 3rd [#1]."))
    completion = await client.chat.completions.create(
        model="membot", messages=[{"role": "user", "content": "When do I fly?"}], user="lena"
    )
    message = completion.choices[0].message
    assert message.content == "You fly on May 3rd."
    [cited] = (message.model_extra or {})["citations"]
    assert (cited["id"], cited["author"], cited["quote"]) == (1, "user", plan)

    llm.script(Reply(tool_calls=[search]), Reply("On May 3rd [#1]."))
    stream = await client.chat.completions.create(
        model="membot",
        messages=[{"role": "user", "content": "Remind me when?"}],
        user="lena",
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "On May 3rd." and "[#" not in text
    [cited] = (chunks[-1].choices[0].delta.model_extra or {})["citations"]
    assert cited["quote"] == plan
