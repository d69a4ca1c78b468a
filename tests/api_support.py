"""Helpers for the HTTP API's tests: the real server (ApiServer over the real core) on a free
port of 127.0.0.1, an HTTP client for it, and a clock the tests can move.

Test modules take the fixture with `start_api = api_support.start_api`.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from membot.api.server import ApiServer
from membot.clock import utc_now
from membot.config import Settings
from membot.ids import ConversationId
from membot.wiring import Core, build_core

API_TOKEN = "test-api-token-0123456789"
OTHER_TOKEN = "other-api-token-9876543210"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


def free_port() -> int:
    """A port nothing listens on right now (bound to 0, noted, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ManualClock:
    """The sessions' clock: real time shifted by `offset`, which a test moves instead of
    waiting for a TTL to pass."""

    offset: timedelta = field(default_factory=timedelta)

    def __call__(self) -> datetime:
        return utc_now() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)

    def set(self, seconds: float) -> None:
        self.offset = timedelta(seconds=seconds)


@dataclass
class Answer:
    """A response. A stream's (text/event-stream) `events` are (event, data) in order, and
    its `body` is the last event's data (`done`'s response object, or `error`'s)."""

    status: int
    body: Any
    headers: dict[str, str]
    events: list[tuple[str, Any]] = field(default_factory=list)
    raw: bytes = b""  # the body as it came (a ZIP's bytes)

    @property
    def code(self) -> str | None:
        return self.body.get("code") if isinstance(self.body, dict) else None


def parse_events(raw: bytes) -> list[tuple[str, Any]]:
    """Server-sent events as (event, data as JSON), in order."""
    events: list[tuple[str, Any]] = []
    for block in raw.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields.get("data", "null"))))
    return events


class ApiClient:
    """A plain HTTP client of the API (aiohttp's), one connection pool per server."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = aiohttp.ClientSession()

    async def request(
        self,
        method: str,
        path: str,
        *,
        data: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        async with self.http.request(
            method, self.base_url + path, data=data, headers=headers
        ) as response:
            raw = await response.read()
            if response.content_type == "text/event-stream":
                events = parse_events(raw)
                body = events[-1][1] if events else None
                return Answer(response.status, body, dict(response.headers), events, raw)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            return Answer(response.status, body, dict(response.headers), raw=raw)

    async def chat(self, body: Any, *, token: str | None = API_TOKEN) -> Answer:
        """POST /api/chat with `body` as JSON (bytes are sent as they are)."""
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.request("POST", "/api/chat", data=data, headers=headers)

    async def close(self) -> None:
        await self.http.close()


@dataclass
class RunningApi:
    settings: Settings
    core: Core
    server: ApiServer
    client: ApiClient
    clock: ManualClock
    stopped: bool = False

    async def stop(self) -> None:
        """What a graceful shutdown does: no new requests, in-flight turns finish, close."""
        if self.stopped:
            return
        self.stopped = True
        await self.client.close()
        await self.server.stop_accepting()
        await self.core.service.wait_idle(5.0)
        await self.server.close()
        await self.core.aclose()

    def session_dir(self, session_id: str) -> Path:
        return self.settings.data_dir / ConversationId.api(session_id).relative_path()

    def stored(self, session_id: str) -> list[dict[str, Any]]:
        path = self.session_dir(session_id) / "messages.txt"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def sessions_on_disk(self) -> list[str]:
        base = self.settings.data_dir / "api"
        return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


StartApi = Callable[..., Awaitable[RunningApi]]


@pytest.fixture
async def start_api(make_settings: Callable[..., Settings]) -> AsyncIterator[StartApi]:
    """Start ApiServer over a freshly built core (settings overridable); all are stopped at
    teardown. `clock=` shares a ManualClock across restarts."""
    running: list[RunningApi] = []

    async def start(*, clock: ManualClock | None = None, **overrides: Any) -> RunningApi:
        values: dict[str, Any] = {"api_port": free_port(), "api_tokens": API_TOKEN}
        values.update(overrides)
        settings = make_settings(**values)
        core = build_core(settings)
        clock = clock or ManualClock()
        server = ApiServer(settings, core, clock=clock)
        await server.start()
        api = RunningApi(settings, core, server, ApiClient(server.url), clock)
        running.append(api)
        return api

    yield start
    for api in reversed(running):
        await api.stop()
