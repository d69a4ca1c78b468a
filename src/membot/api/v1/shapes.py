"""The /v1 endpoint's responses as OpenAI's clients read them: a `chat.completion`, the
`chat.completion.chunk` events of a stream, the model list and the error object. The
handlers build the answers with these models (chunks by `stream.py`, in the same shape),
and the OpenAPI document describes them from here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from membot.api.models import CitationRef
from membot.memory.contract.citation import Citation
from membot.memory.contract.models import Source


class _Shape(BaseModel):
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class Usage(_Shape):
    """The tokens of the turn's model calls (its tool steps included), as the provider
    reported them; a summary made afterwards is not counted here."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class UrlCitation(_Shape):
    url: str
    title: str
    # Where in the answer: membot knows only that the answer cites the page.
    start_index: int = 0
    end_index: int = 0


class Annotation(_Shape):
    """A page the answer cites (a web search), as OpenRouter returns them."""

    type: Literal["url_citation"] = "url_citation"
    url_citation: UrlCitation


class OutMessage(_Shape):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None
    annotations: list[Annotation] = Field(default_factory=list)
    citations: list[CitationRef] = Field(
        default_factory=list,
        description="membot's own (OpenAI's clients keep it as an extra field): the "
        "messages of the caller's memory the answer rests on, as /api/chat's `citations`.",
    )


class Choice(_Shape):
    index: int = 0
    message: OutMessage
    finish_reason: Literal["stop", "length"] = Field(
        default="stop", description="length: the answer is cut at max_completion_tokens."
    )
    logprobs: None = None


class Completion(_Shape):
    model_config = ConfigDict(title="ChatCompletion")

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = Field(description="The model the provider reports for this answer.")
    choices: list[Choice]
    usage: Usage
    system_fingerprint: None = None


class Delta(_Shape):
    role: Literal["assistant"] | None = None
    content: str | None = None
    annotations: list[Annotation] | None = None
    citations: list[CitationRef] | None = None


class ChunkChoice(_Shape):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class Chunk(_Shape):
    """One `data:` event of a stream; the last is `data: [DONE]`."""

    model_config = ConfigDict(title="ChatCompletionChunk")

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = Field(
        default=None,
        description="With stream_options.include_usage: null, then set on a last chunk "
        "whose choices are empty.",
    )


class ModelCard(_Shape):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "membot"


class ModelList(_Shape):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(_Shape):
    message: str = Field(description="What went wrong, in a sentence for people.")
    type: str = Field(description="OpenAI's kind: invalid_request_error, rate_limit_error, ...")
    param: str | None = Field(description="The request's field at fault, if one is.")
    code: str = Field(description="Stable: invalid_api_key, tools_not_supported, ...")


class V1ErrorResponse(_Shape):
    model_config = ConfigDict(title="OpenAIError")

    error: ErrorDetail


def usage_of(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )


def cited_pages(sources: tuple[Source, ...], content: str) -> list[Annotation]:
    """The answer's sources as url_citation annotations, each over the whole answer."""
    return [
        Annotation(url_citation=UrlCitation(url=s.url, title=s.title, end_index=len(content)))
        for s in sources
    ]


def cited_messages(citations: tuple[Citation, ...]) -> list[CitationRef]:
    return [CitationRef(id=c.id, date=c.ts, author=c.author, quote=c.quote) for c in citations]
