"""Ranked search over a chat's whole message archive (the `search_history` tool, the CLI)."""

from membot.search.index import HistorySearch, SearchHit, format_hits

__all__ = ["HistorySearch", "SearchHit", "format_hits"]
