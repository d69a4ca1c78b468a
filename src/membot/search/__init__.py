"""Ranked search over a chat's whole message archive (the `search_history` tool, the CLI)."""

from membot.search.excerpts import Excerpt
from membot.search.hits import SearchHit
from membot.search.index import HistorySearch
from membot.search.present import excerpts_json, format_excerpts

__all__ = ["Excerpt", "HistorySearch", "SearchHit", "excerpts_json", "format_excerpts"]
