"""Small readers of what a user (or an operator looking at DATA_DIR) would see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from membot.bot import texts
from tests.fakes import without_now

# /help as the bot sends it with the default CONSULT_ROUNDS and MAX_ROUNDS.
HELP_TEXT = texts.HELP.format(rounds=3, max_rounds=10)
# /summary before the first one, with the default WINDOW_SIZE and SUMMARY_EVERY.
NO_SUMMARY_YET = texts.NO_SUMMARY.format(first=40, every=20, window=20)


def stored(data_dir: Path, chat_id: int) -> list[dict[str, Any]]:
    path = data_dir / str(chat_id) / "messages.txt"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def roles_and_texts(data_dir: Path, chat_id: int) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in stored(data_dir, chat_id)]


def meta(data_dir: Path, chat_id: int) -> dict[str, Any]:
    return json.loads((data_dir / str(chat_id) / "meta.json").read_text())


def prompt_texts(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, content) of every message the model was shown, system prompt excluded (and
    the time note before the new message: tests/fakes/openai_server.py `without_now`)."""
    shown = [(m["role"], m.get("content") or "") for m in request["messages"][1:]]
    return [(role, without_now(c) if isinstance(c, str) else c) for role, c in shown]


def system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])
