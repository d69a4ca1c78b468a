"""The pages an answer cites (a web search's `url_citation` annotations) become its sources,
plain and streamed, against the real FakeLLM server through the real openai client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from membot.llm.client import OpenAIChatModel
from membot.llm.model import MAX_SOURCES, CallOptions, LLMResponse, ModelRequest, Source
from membot.llm.wire import sources_of
from tests.conftest import API_KEY
from tests.fakes import FakeLLM, Reply

PAGES = [
    ("https://weather.example/berlin", "Berlin weather today"),
    ("https://news.example/release", "The release notes"),
    ("https://weather.example/berlin", "Berlin weather (again)"),
    ("https://museum.example/hours", ""),
]
CITED = (
    Source("https://weather.example/berlin", "Berlin weather today"),
    Source("https://news.example/release", "The release notes"),
    Source("https://museum.example/hours", ""),
)


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[OpenAIChatModel]:
    chat_model = OpenAIChatModel(
        api_key=API_KEY, base_url=llm.base_url, model="test/model", timeout=5.0
    )
    yield chat_model
    await chat_model.close()


def ask(text: str, *, search: bool = False) -> ModelRequest:
    return ModelRequest([{"role": "user", "content": text}], options=CallOptions(web_search=search))


async def streamed(model: OpenAIChatModel, request: ModelRequest) -> LLMResponse:
    async for item in model.stream(request):
        if isinstance(item, LLMResponse):
            return item
    raise AssertionError("the stream ended without a response")


async def test_a_plain_answer_cites_each_page_once_in_order(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.script(Reply(content="It is sunny.", sources=PAGES))
    answer = await model.complete(ask("weather?"))
    assert answer.content == "It is sunny." and answer.sources == CITED


async def test_a_streamed_answer_collects_its_sources_from_every_chunk(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    text = "It is sunny in Berlin, the release came out on Tuesday, the museum opens at ten."
    llm.cached_tokens = 0  # the two calls alike
    llm.script(Reply(content=text, sources=PAGES), Reply(content=text, sources=PAGES))
    plain = await model.complete(ask("weather?"))
    answer = await streamed(model, ask("weather?"))
    assert answer.sources == CITED and answer == plain


async def test_sources_come_when_the_request_offers_web_search(
    llm: FakeLLM, model: OpenAIChatModel
) -> None:
    llm.search_sources = PAGES[:2]
    assert (await model.complete(ask("news?", search=True))).sources == CITED[:2]
    assert (await streamed(model, ask("news?", search=True))).sources == CITED[:2]
    assert (await model.complete(ask("news?"))).sources == ()
    assert (await streamed(model, ask("news?"))).sources == ()


async def test_the_plugins_answer_cites_too(model: OpenAIChatModel) -> None:
    async with FakeLLM(api_key=API_KEY, refuse_server_tools=True) as refusing:
        refusing.search_sources = PAGES[1:2]
        plugin = OpenAIChatModel(
            api_key=API_KEY, base_url=refusing.base_url, model="test/model", timeout=5.0
        )
        try:
            answer = await plugin.complete(ask("news?", search=True))
        finally:
            await plugin.close()
    assert answer.sources == CITED[1:2]
    assert refusing.requests[-1]["plugins"] == [{"id": "web"}]


def test_what_is_not_a_cited_page_is_no_source() -> None:
    def cite(**citation: object) -> dict[str, object]:
        return {"type": "url_citation", "url_citation": citation}

    annotations = [
        {"type": "file", "file": {"name": "report.pdf"}},
        cite(title="no url"),
        cite(url="   ", title="a blank url"),
        cite(url=" https://a.example/ ", title="  A\n title  "),
        {"type": "url_citation", "url_citation": "https://b.example/"},
        "not an object",
    ]
    assert sources_of(annotations) == (Source("https://a.example/", "A title"),)


def test_an_answer_keeps_the_first_pages_it_cites_up_to_the_limit() -> None:
    annotations = [
        {"type": "url_citation", "url_citation": {"url": f"https://p.example/{n}"}}
        for n in range(MAX_SOURCES + 5)
    ]
    # A later citation of a kept page still gives it its title.
    annotations.append(
        {"type": "url_citation", "url_citation": {"url": "https://p.example/0", "title": "Zero"}}
    )
    sources = sources_of(annotations)
    assert len(sources) == MAX_SOURCES
    assert sources[0] == Source("https://p.example/0", "Zero")
    assert sources[-1].url == f"https://p.example/{MAX_SOURCES - 1}"
