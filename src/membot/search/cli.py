"""`membot search CHAT_ID "QUERY"`: the archive search for operators.

It reads the storage the bot uses (STORAGE: DATA_DIR's files or Redis), never Telegram or
OpenRouter, so it needs no tokens and works on a copy of DATA_DIR as well as next to a
running bot. The chat's index cache is DATA_DIR/<chat>/search.sqlite3 with either storage.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from membot.clock import Clock, utc_now
from membot.config import ConfigError, Settings, load_subset
from membot.errors import StorageRefused, StorageUnavailable
from membot.ids import TELEGRAM, ConversationId, InvalidConversationId
from membot.memory import ChatRepository, FileRepository
from membot.private import exposed
from membot.search.excerpts import Excerpt
from membot.search.index import HistorySearch
from membot.search.period import BadPeriod, parse_period
from membot.search.present import excerpts_json, format_excerpts

# What the bot reads to find the archive and size the result; nothing else (no tokens).
_FIELDS = ("storage", "data_dir", "redis_url", "redis_prefix", "search_budget_tokens")


def _budget_range() -> tuple[int, int]:
    """SEARCH_BUDGET_TOKENS's bounds: --budget takes what the bot would accept."""
    metadata = Settings.model_fields["search_budget_tokens"].metadata
    low = next(int(m.ge) for m in metadata if hasattr(m, "ge"))
    high = next(int(m.le) for m in metadata if hasattr(m, "le"))
    return low, high


BUDGET_MIN, BUDGET_MAX = _budget_range()


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
        return _fail(
            "CHAT_ID must be a Telegram chat id (an integer) or api:<session uuid>, "
            f"not {chat_id!r}"
        )
    try:
        period = parse_period(since, until)
    except BadPeriod as exc:
        return _fail(str(exc))
    if budget is not None and not BUDGET_MIN <= budget <= BUDGET_MAX:
        # Below the minimum not even one message fits: "no matches" would be a lie.
        return _fail(
            f"--budget must be {BUDGET_MIN} to {BUDGET_MAX} tokens (as SEARCH_BUDGET_TOKENS), "
            f"not {budget}"
        )
    try:
        values = load_subset(*_FIELDS)
    except ConfigError as exc:
        return _fail(str(exc))
    root = data_dir if data_dir is not None else values["data_dir"]
    warning = exposed(root)  # the index it writes there holds the chat in full
    if warning is not None:
        print(f"membot search: warning: {warning}", file=sys.stderr)
    tokens = budget if budget is not None else values["search_budget_tokens"]
    redis = values["storage"] == "redis"
    where = f"Redis (REDIS_PREFIX {values['redis_prefix']})" if redis else str(root)
    try:
        found = asyncio.run(
            _recall(open_repository(values, root), root, chat, query, period, tokens)
        )
    except (StorageUnavailable, OSError) as exc:
        if not redis:
            raise
        if isinstance(exc, StorageRefused):  # an answer that is an error (a refusal)
            return _fail(f"Redis failed: {exc.__cause__ or exc}")
        return _fail(f"Redis did not answer at REDIS_URL ({type(exc.__cause__ or exc).__name__})")
    if found is None:
        shown = chat.key if chat.namespace == TELEGRAM else str(chat)
        return _fail(f"no chat {shown} in {where}")
    if as_json:
        print(
            _escaped(json.dumps(excerpts_json(found), ensure_ascii=False, indent=2), for_json=True)
        )
    else:
        print(_escaped(format_excerpts(found, clock()), for_json=False))
    return 0


# What users' messages may carry to the operator's terminal that a terminal acts on instead of
# showing: C0 controls but the layout's line breaks and tabs (ESC starts sequences that move
# the cursor, retitle the window or write the clipboard; CR rewrites the line), DEL, C1
# controls (0x9b is a CSI of its own), line and paragraph separators, the bidirectional
# controls that reorder what follows, and lone surrogates (not encodable at all).
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escaped(text: str, *, for_json: bool) -> str:
    """`text` with each unsafe character written as its escape: \\x1b, \\u009b (JSON: \\u001b,
    which JSON decodes back to the character, so --json still gives the text as it was)."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x80 and not for_json else f"\\u{code:04x}"

    return _UNSAFE.sub(escape, text)


def _fail(line: str) -> int:
    print(f"membot search: {line}", file=sys.stderr)
    return 2


def open_repository(values: dict[str, Any], root: Path) -> ChatRepository:
    """The storage as the bot uses it: DATA_DIR's files or Redis."""
    if values["storage"] != "redis":
        return FileRepository(root)
    from membot.memory.redis import RedisRepository
    from membot.redis.client import create_client

    client = create_client(values["redis_url"].get_secret_value())
    return RedisRepository(client, prefix=values["redis_prefix"])


async def _recall(
    repository: ChatRepository,
    root: Path,
    chat_id: ConversationId,
    query: str,
    period: tuple[datetime | None, datetime | None],
    budget: int,
) -> list[Excerpt] | None:
    """The excerpts; None when the storage holds no messages of the chat."""
    since, until = period
    try:
        # Checked before HistorySearch sees the chat: it drops the index of an empty archive,
        # and a search with the wrong storage (or DATA_DIR) must not delete the bot's index.
        if (
            isinstance(repository, FileRepository)
            and not repository.conversation_dir(chat_id).is_dir()
        ):
            return None
        if (await repository.get_meta(chat_id)).messages_total == 0:
            return None
        search = HistorySearch(repository, root)
        return await search.recall(chat_id, query, since=since, until=until, budget_tokens=budget)
    finally:
        await repository.close()
