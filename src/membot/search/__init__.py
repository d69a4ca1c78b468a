"""Ranked search over a chat's whole message archive (the `search_history` tool, the CLI)."""

from membot.search.hits import SearchHit, format_hits
from membot.search.index import HistorySearch

__all__ = ["HistorySearch", "SearchHit", "format_hits"]
