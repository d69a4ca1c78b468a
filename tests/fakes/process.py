"""A membot process started by a test or the bench (`python -m membot`): its environment, and
the process itself."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any


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
