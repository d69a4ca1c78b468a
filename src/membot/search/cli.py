"""`membot search CHAT_ID "QUERY"`: the archive search for operators.

It reads only the data directory, never Telegram or OpenRouter, so it needs no tokens and
works on a copy of DATA_DIR as well as next to a running bot.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC
from pathlib import Path

from dotenv import dotenv_values

from membot.config import Settings
from membot.ids import TELEGRAM, ConversationId, InvalidConversationId
from membot.memory import FileRepository
from membot.memory.models import iso
from membot.search.hits import SearchHit
from membot.search.index import HistorySearch

# The bot's own default, so `membot search` and `membot run` agree without a DATA_DIR.
DEFAULT_DATA_DIR: Path = Settings.model_fields["data_dir"].default


def resolve_data_dir(explicit: Path | None) -> Path:
    """--data-dir, else $DATA_DIR, else DATA_DIR in ./.env, else "data" (as `membot run`)."""
    if explicit is not None:
        return explicit
    if value := os.environ.get("DATA_DIR"):
        return Path(value)
    # The bot's settings ignore the case of keys in .env; so does this lookup.
    for key, value in dotenv_values(".env").items():
        if key.upper() == "DATA_DIR" and value:
            return Path(value)
    return DEFAULT_DATA_DIR


def run_search(
    chat_id: str, query: str, *, limit: int, as_json: bool, data_dir: Path | None
) -> int:
    """Print the best hits for `query` in the chat; the exit status for the shell."""
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
    root = resolve_data_dir(data_dir)
    repository = FileRepository(root)
    if not repository.conversation_dir(chat).is_dir():
        shown = chat.key if chat.namespace == TELEGRAM else str(chat)
        print(f"membot search: no chat {shown} in {root}", file=sys.stderr)
        return 2
    hits = asyncio.run(_search(repository, root, chat, query, limit))
    if as_json:
        print(json.dumps([_as_dict(hit) for hit in hits], ensure_ascii=False, indent=2))
    elif not hits:
        print("no matching messages")
    else:
        for hit in hits:
            print(_as_line(hit))
    return 0


async def _search(
    repository: FileRepository, root: Path, chat_id: ConversationId, query: str, limit: int
) -> list[SearchHit]:
    try:
        return await HistorySearch(repository, root).search(chat_id, query, limit=limit)
    finally:
        await repository.close()


def _as_dict(hit: SearchHit) -> dict[str, object]:
    return {
        "seq": hit.seq,
        "ts": iso(hit.ts),
        "role": hit.role,
        "name": hit.name,
        "content": hit.content,
        "score": round(hit.score, 4),
        # The other half of a question and its answer, when the hit is one half.
        "context": [
            {"seq": c.seq, "ts": iso(c.ts), "role": c.role, "name": c.name, "content": c.content}
            for c in hit.context
        ],
    }


def _as_line(hit: SearchHit) -> str:
    when = hit.ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    who = f"{hit.role} ({hit.name})" if hit.name else hit.role
    # One line per hit, so the output stays greppable; --json keeps the text exact.
    text = " ".join(hit.content.split())
    line = f"#{hit.seq}  {when}  {who}  score={hit.score:.2f}  {text}"
    for near in hit.context:
        near_who = f"{near.role} ({near.name})" if near.name else near.role
        line += f"\n    #{near.seq}  {near_who}  {' '.join(near.content.split())}"
    return line
