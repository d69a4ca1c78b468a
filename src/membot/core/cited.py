"""The web pages a turn's model calls cited (OpenRouter's web search): the answer's sources."""

from __future__ import annotations

from membot.llm.model import MAX_SOURCES, LLMResponse
from membot.memory.contract.models import Source


class Cited:
    """The sources a turn's model calls cited, in the order first cited, each page once."""

    __slots__ = ("_by_url",)

    def __init__(self) -> None:
        self._by_url: dict[str, Source] = {}

    def add(self, response: LLMResponse) -> None:
        for source in response.sources:
            known = self._by_url.get(source.url)
            if known is None and len(self._by_url) >= MAX_SOURCES:
                continue
            if known is None or (not known.title and source.title):  # a title if any gave one
                self._by_url[source.url] = Source(source.url, source.title)

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(self._by_url.values())
