"""Small readers of what a user (or an operator looking at DATA_DIR) would see."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from membot.bot import texts

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
    """(role, content) of every message the model was shown, system prompt excluded."""
    return [(m["role"], m.get("content") or "") for m in request["messages"][1:]]


def system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def membot_env(**settings: str) -> dict[str, str]:
    """The environment for `python -m membot` in a subprocess: this process's environment
    without any membot setting (so the caller's shell cannot leak in), plus `settings`
    (given as lower-case field names, e.g. data_dir="...")."""
    from membot.config import env_names

    names = set(env_names())
    env = {k: v for k, v in os.environ.items() if k.upper() not in names}
    # Let the first subprocess cache bytecode in .venv: without it every `python -m membot`
    # recompiles aiogram and pydantic (seconds each), which dominates these tests' runtime.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k.upper(): v for k, v in settings.items()})
    return env


async def spawn_membot(
    cwd: Path, env: dict[str, str], *args: str, stdout: Any, stderr: Any
) -> asyncio.subprocess.Process:
    """`python -m membot ARGS` as a real process, run from `cwd` (so no stray .env is read)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "membot", *args, cwd=cwd, env=env, stdout=stdout, stderr=stderr
    )
