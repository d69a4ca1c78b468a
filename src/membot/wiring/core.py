"""`Core`: everything a front door needs, built once from the settings (model, repository,
agent, conversation service, usage ledger and quota, media parts, the MCP servers' sessions,
the Redis client and its health object) and released once, in order."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from membot.clock import Clock, utc_now
from membot.config import Settings
from membot.core.agent import Agent
from membot.core.importer import Importer
from membot.core.service import ConversationService
from membot.core.window import WindowPolicy
from membot.export import ExportWatch
from membot.llm.model import ChatModel
from membot.memory.contract.repository import ChatRepository, CheckedAtStart
from membot.private import exposed
from membot.redis.health import ALWAYS_UP, Health
from membot.schedule.inmemory import InMemoryTaskStore
from membot.schedule.store import TaskStore
from membot.tasks import TaskSupervisor
from membot.tool_names import BUILTIN_TOOL_NAMES
from membot.usage import MeteredModel, Quota, UsageLedger
from membot.usage.build import build_usage
from membot.wiring.media import MediaParts, build_media
from membot.wiring.model import build_agent, build_model
from membot.wiring.storage import (
    build_redis,
    build_repository,
    build_task_store,
    build_turn_locks,
)

if TYPE_CHECKING:
    from membot.mcp.hub import McpTools
    from membot.redis.client import Redis
    from membot.search import HistorySearch

log = logging.getLogger(__name__)


@dataclass
class Core:
    """Everything a front door needs, and the one place that releases it."""

    settings: Settings
    model: ChatModel
    repository: ChatRepository
    tasks: TaskSupervisor
    agent: Agent
    service: ConversationService
    ledger: UsageLedger
    quota: Quota
    # STORAGE=redis: the process's one client (shared limits, the stream use it too) and its
    # health object (with QUEUE=local the breaker; without Redis, always up).
    redis: Redis | None = None
    health: Health = ALWAYS_UP
    # What the turn reads uploads with: the model catalog, the provider's client, PDF children.
    media: MediaParts | None = None
    # The chats' reminders and scheduled tasks (membot.schedule), beside their memory.
    task_store: TaskStore = field(default_factory=InMemoryTaskStore)
    # The wall clock (a test's own): budgets, tasks' times.
    clock: Clock = utc_now
    # MCP_CONFIG's servers: their sessions, kept open from start to aclose (None: no servers).
    mcp: McpTools | None = None
    # /import: other assistants' exports brought into a chat's memory.
    importer: Importer | None = None
    # The exports being made in this process, which a /forget stops (export/watch.py).
    export_watch: ExportWatch | None = None

    async def start(self) -> None:
        """Check the storage once before serving: front doors await this at start-up. Nothing
        connects before (build_core never does); a backend without a check has nothing to do.
        A DATA_DIR other local users can read is said once, here: every role has one. Then
        the MCP servers' sessions are opened (a few seconds at most: one that is slow or
        away is tried again in the background, and its tools come when it does)."""
        warning = await asyncio.to_thread(exposed, self.settings.storage.data_dir)
        if warning is not None:
            log.warning("%s", warning)
        if isinstance(self.repository, CheckedAtStart):
            await self.repository.check()
        if self.mcp is not None:
            await self.mcp.start()

    async def serving(self) -> None:
        """The process is up (its checks passed): fetch the model list now, then daily. A
        failure is logged once; an image asks again (core/media.py)."""
        if self.media is not None:
            await self.media.start()

    async def aclose(self, hurry: asyncio.Event | None = None) -> None:
        """Stop background work (summaries get their time, unless `hurry` is set: a second
        signal), then release clients. The turns in flight are the front door's to wait for
        first: the process's shutdown does, once (roles/process.py)."""
        await self.tasks.close(hurry=hurry)
        if self.mcp is not None:  # stdio children exit with their sessions
            await self.mcp.aclose()
        if self.media is not None:
            await self.media.aclose()
        await self.model.close()
        await self.ledger.close()
        await self.health.close()  # no probe, no spool written from now on
        await self.repository.close()
        await self.task_store.close()
        if self.redis is not None:
            await self.redis.aclose()  # last: everything above may use it until closed


def build_core(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    repository: ChatRepository | None = None,
    clock: Clock = utc_now,
    answers: bool = True,
) -> Core:
    """Build the core from the settings; `model` and `repository` replace the configured ones
    (a scripted model, the in-memory backend), `clock` the time budgets are counted in.
    Without `answers` (`membot receive`: no turn runs in it) there is no media part and no
    MCP server, and the model is built only if ever called: the process imports no openai."""
    redis, health = (
        build_redis(settings) if settings.storage.backend == "redis" else (None, ALWAYS_UP)
    )
    repository = repository or build_repository(settings, redis, health)
    task_store = build_task_store(settings, redis, health)
    shared = (redis, settings.redis.prefix) if redis is not None else None
    ledger, quota = build_usage(settings.limits, settings.storage.data_dir, shared, clock, health)
    media = build_media(settings.llm, settings.media, ledger, clock) if answers else None
    model = model or build_model(settings.llm, on_first_call=not answers)
    # Every call is charged to the turn's user and chat; a stopped one at the catalog's prices.
    model = MeteredModel(model, ledger, clock, prices=media.catalog if media else None)
    tasks = TaskSupervisor()
    mcp = _build_mcp(settings) if answers else None
    export_watch = ExportWatch(settings.storage.data_dir)
    agent = build_agent(
        settings,
        model,
        repository,
        tasks,
        redis=redis,
        health=health,
        media=media.reader if media else None,
        task_store=task_store,
        clock=clock,
        mcp=mcp,
        export_watch=export_watch,
    )
    service = ConversationService(
        agent,
        repository,
        consult_rounds=settings.conversation.consult_rounds,
        max_rounds=settings.conversation.max_rounds,
        turn_locks=build_turn_locks(settings, redis, health),
        quota=quota,
        task_store=task_store,
    )
    return Core(
        settings,
        model,
        repository,
        tasks,
        agent,
        service,
        ledger,
        quota,
        redis,
        health,
        media,
        task_store,
        clock,
        mcp,
        importer=_build_importer(settings, repository, agent.search),
        export_watch=export_watch,
    )


def _build_importer(
    settings: Settings, repository: ChatRepository, search: HistorySearch | None
) -> Importer:
    """Redis keeps REDIS_MAX_MESSAGES of a chat: an import leaves room for its own window."""
    if settings.storage.backend != "redis":
        return Importer(repository, search=search)
    conversation = settings.conversation
    keep = WindowPolicy(conversation.window_size, conversation.summary_every).read
    return Importer(repository, search=search, max_messages=settings.redis.max_messages, keep=keep)


def _build_mcp(settings: Settings) -> McpTools | None:
    """The MCP servers' sessions (not opened yet: Core.start does), None without servers."""
    if not any(not server.disabled for server in settings.mcp.servers):
        return None
    from membot.mcp.hub import McpTools  # the SDK, only for a process that uses it

    return McpTools(settings.mcp, reserved=BUILTIN_TOOL_NAMES)
