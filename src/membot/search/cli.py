"""`membot search CHAT_ID "QUERY"`: the archive search for operators.

It reads only the data directory, never Telegram or OpenRouter, so it needs no tokens and
works on a copy of DATA_DIR as well as next to a running bot.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from dotenv import dotenv_values

from membot.clock import Clock, utc_now
from membot.config import Settings
from membot.ids import TELEGRAM, ConversationId, InvalidConversationId
from membot.memory import FileRepository
from membot.search.excerpts import Excerpt
from membot.search.index import HistorySearch
from membot.search.period import BadPeriod, parse_period
from membot.search.present import excerpts_json, format_excerpts

# The bot's own default, so `membot search` and `membot run` agree without a DATA_DIR.
DEFAULT_DATA_DIR: Path = Settings.model_fields["data_dir"].default
DEFAULT_BUDGET: int = Settings.model_fields["search_budget_tokens"].default


def _setting(name: str) -> str | None:
    """$NAME, else NAME in ./.env (as the bot reads its settings, the key's case ignored)."""
    if value := os.environ.get(name):
        return value
    for key, value in dotenv_values(".env").items():
        if key.upper() == name and value:
            return value
    return None


def resolve_data_dir(explicit: Path | None) -> Path:
    """--data-dir, else $DATA_DIR, else DATA_DIR in ./.env, else "data" (as `membot run`)."""
    if explicit is not None:
        return explicit
    value = _setting("DATA_DIR")
    return Path(value) if value else DEFAULT_DATA_DIR


def resolve_budget(explicit: int | None) -> int:
    """--budget, else SEARCH_BUDGET_TOKENS as the bot would read it, else its default: the
    excerpts the model would be shown."""
    if explicit is not None:
        return explicit
    value = _setting("SEARCH_BUDGET_TOKENS")
    return int(value) if value and value.strip().isdigit() else DEFAULT_BUDGET


def run_search(
    chat_id: str,
    query: str,
    *,
    as_json: bool,
    data_dir: Path | None,
    budget: int | None = None,
    since: str | None = None,
    until: str | None = None,
    clock: Clock = utc_now,
) -> int:
    """Print what `search_history` would show the model for `query` in the chat (--json:
    the same excerpts as data); the exit status for the shell."""
    # Parsed here, not by argparse, so that a bad id is one line on stderr, not a usage dump.
    try:
        chat = ConversationId.parse(chat_id)
    except InvalidConversationId:
        print(
            "membot search: CHAT_ID must be a Telegram chat id (an integer) or api:<session "
            f"uuid>, not {chat_id!r}",
            file=sys.stderr,
        )
        return 2
    try:
        period = parse_period(since, until)
    except BadPeriod as exc:
        print(f"membot search: {exc}", file=sys.stderr)
        return 2
    root = resolve_data_dir(data_dir)
    repository = FileRepository(root)
    if not repository.conversation_dir(chat).is_dir():
        shown = chat.key if chat.namespace == TELEGRAM else str(chat)
        print(f"membot search: no chat {shown} in {root}", file=sys.stderr)
        return 2
    found = asyncio.run(_recall(repository, root, chat, query, period, resolve_budget(budget)))
    if as_json:
        print(json.dumps(excerpts_json(found), ensure_ascii=False, indent=2))
    else:
        print(format_excerpts(found, clock()))
    return 0


async def _recall(
    repository: FileRepository,
    root: Path,
    chat_id: ConversationId,
    query: str,
    period: tuple[datetime | None, datetime | None],
    budget: int,
) -> list[Excerpt]:
    since, until = period
    search = HistorySearch(repository, root)
    try:
        return await search.recall(chat_id, query, since=since, until=until, budget_tokens=budget)
    finally:
        await repository.close()
