"""Helpers for the /v1 endpoint's tests: the official `openai` client pointed at the test's
API server, and where a /v1 caller's conversation is kept."""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncOpenAI

from membot.ids import ConversationId
from tests.api_support import API_TOKEN, RunningApi


def openai_client(api: RunningApi, token: str = API_TOKEN) -> AsyncOpenAI:
    """AsyncOpenAI with base_url at the server's /v1, no retries (each answer is seen)."""
    return AsyncOpenAI(api_key=token, base_url=f"{api.server.url}/v1", max_retries=0)


def archive(api: RunningApi, cid: ConversationId) -> list[dict[str, Any]]:
    """A /v1 conversation's messages as stored (DATA_DIR/v1/<digest>/messages.txt)."""
    path = api.settings.data_dir / cid.relative_path() / "messages.txt"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def v1_conversations(api: RunningApi) -> list[str]:
    base = api.settings.data_dir / "v1"
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []
