"""Wiring for any front door: the model, the repository, the agent, the conversation service
and the background work, built once from the settings, closed once. No aiogram here.

With STORAGE=redis this is where the process's one Redis client is made, and its one health
object (membot/redis/health.py: with QUEUE=local the circuit breaker, else the null object
that is always up); both are handed explicitly to every user of Redis and kept on `Core`
(`core.redis`, `core.health`) for the front doors' own users (Telegram's shared limits, the
stream, the API's sessions)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from membot.clock import Clock, utc_now
from membot.config import LlmSettings, Settings
from membot.core.agent import Agent
from membot.core.media import MediaReader
from membot.core.prompt import PromptBuilder
from membot.core.service import ConversationService
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turnlock import TurnLocks
from membot.llm.client import OpenAIChatModel
from membot.llm.model import ChatModel
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory.contract.repository import ChatRepository, CheckedAtStart
from membot.memory.files import FileRepository
from membot.private import exposed
from membot.redis.health import ALWAYS_UP, Health
from membot.search import HistorySearch
from membot.tasks import TaskSupervisor
from membot.usage import MeteredModel, Quota, UsageLedger
from membot.usage.build import build_usage
from membot.wiring_media import LLM_RETRIES, MediaParts, build_media

if TYPE_CHECKING:
    from membot.redis.client import Redis

log = logging.getLogger(__name__)

# Behind the breaker a dead Redis must cost an answer about half a second at most.
REDIS_CONNECT_TIMEOUT = 0.25
REDIS_SOCKET_TIMEOUT = 0.5
# With QUEUE=redis there is no breaker: a failed call leaves the update in the stream, to be
# tried again, so calls get the client's usual timeouts and retries. The same client reads
# the stream, whose reads block for up to 1 s (intake/redis.py BLOCK_MS): that fits within
# the socket timeout, with the 3 s any other call gets on top.
QUEUE_CONNECT_TIMEOUT = 1.0
QUEUE_SOCKET_TIMEOUT = 4.0


def shutdown_grace(llm: LlmSettings) -> float:
    """How long shutdown waits for answers in progress. Telegram already counts those updates
    as delivered (and an HTTP client is waiting), so one cut short is a message never
    answered: wait long enough for a turn waiting on the model to get its answer and send it."""
    attempts = 1 + (LLM_RETRIES if llm.enable_retry else 0)
    return attempts * llm.timeout + 10.0


def build_model(llm: LlmSettings) -> ChatModel:
    return OpenAIChatModel(
        api_key=llm.api_key.get_secret_value(),
        base_url=llm.base_url,
        model=llm.default_model,
        timeout=llm.timeout,
        retries=LLM_RETRIES if llm.enable_retry else 0,
    )


def build_agent(
    settings: Settings,
    model: ChatModel,
    repository: ChatRepository,
    tasks: TaskSupervisor | None = None,
    *,
    redis: Redis | None = None,
    health: Health = ALWAYS_UP,
    media: MediaReader | None = None,
) -> Agent:
    from membot.redis.lease import summary_lease  # imported late: only where used

    tools, conversation = settings.tools, settings.conversation
    registry = builtin.subset(tools.enabled)
    return Agent(
        model=model,
        repository=repository,
        prompts=PromptBuilder(conversation.system_prompt),
        summarizer=Summarizer(
            model,
            repository,
            every=conversation.summary_every,
            window=conversation.window_size,  # kept out of the summary (core/window.py)
            language=conversation.summary_language,
            lease=summary_lease(
                redis, settings.redis.prefix, llm_timeout=settings.llm.timeout, health=health
            ),
        ),
        window_size=conversation.window_size,
        tools=ToolExecutor(registry, timeout=tools.timeout) if registry else None,
        tool_mode=make_mode(tools.mode),
        max_tool_steps=tools.max_iterations,
        # The index lives beside the archive it indexes: DATA_DIR/<conversation>/search.sqlite3.
        search=HistorySearch(repository, settings.storage.data_dir),
        search_budget=tools.search_budget_tokens,
        tasks=tasks,
        consult_rounds=conversation.consult_rounds,
        max_rounds=conversation.max_rounds,
        models=settings.llm.model_choices,
        media=media,
    )


def build_redis(settings: Settings) -> tuple[Redis, Health]:
    """The process's one Redis client and its health object: with QUEUE=local the breaker.
    Connects nowhere: Redis is reached on first use.

    With QUEUE=local the bot answers while Redis is down (memory/outage/repository.py): the client
    gets short timeouts and one retry, as the breaker, not a retry, rides out an outage. With
    QUEUE=redis, Redis is the queue too, and an update is not answered without it: it waits
    in the stream (or in Telegram), as an answer given from a local spool could be given
    again, or out of order, by another worker once Redis is back (the handled marks, the
    acknowledgements and the turn locks are all in Redis). So there is no breaker then (the
    health object is always up), and a call Redis does not answer raises StorageUnavailable:
    the update is tried again, and an HTTP request is answered 503 SERVICE_UNAVAILABLE."""
    from membot.redis.client import create_client  # imported late: only where used
    from membot.redis.health import RedisHealth

    url = settings.redis.url.get_secret_value()
    if settings.queue.backend == "redis":
        client = create_client(
            url, connect_timeout=QUEUE_CONNECT_TIMEOUT, socket_timeout=QUEUE_SOCKET_TIMEOUT
        )
        return client, ALWAYS_UP
    client = create_client(
        url, connect_timeout=REDIS_CONNECT_TIMEOUT, socket_timeout=REDIS_SOCKET_TIMEOUT, retries=1
    )
    return client, RedisHealth(client.ping)


def build_repository(
    settings: Settings, redis: Redis | None = None, health: Health = ALWAYS_UP
) -> ChatRepository:
    """The backend STORAGE names: for STORAGE=redis on the process's client, and with the
    breaker as its health object, behind it and a spool under DATA_DIR (memory/outage/)."""
    storage, shared = settings.storage, settings.redis
    if storage.backend != "redis":
        return FileRepository(storage.data_dir)
    if redis is None:
        raise ValueError("STORAGE=redis: the repository needs the client (build_redis)")
    from membot.memory.outage import SPOOL_NAME, ResilientRepository
    from membot.memory.redis import RedisRepository  # imported late: only where used
    from membot.redis.health import RedisHealth

    repository = RedisRepository(
        redis,
        prefix=shared.prefix,
        max_messages=shared.max_messages,
        ttl=shared.conversation_ttl,
    )
    if not isinstance(health, RedisHealth):
        return repository  # no breaker: nothing is answered without Redis
    return ResilientRepository(repository, health, storage.data_dir / SPOOL_NAME)


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

    async def start(self) -> None:
        """Check the storage once before serving: front doors await this at start-up. Nothing
        connects before (build_core never does); a backend without a check has nothing to do.
        A DATA_DIR other local users can read is said once, here: every role has one."""
        warning = await asyncio.to_thread(exposed, self.settings.storage.data_dir)
        if warning is not None:
            log.warning("%s", warning)
        if isinstance(self.repository, CheckedAtStart):
            await self.repository.check()

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
        if self.media is not None:
            await self.media.aclose()
        await self.model.close()
        await self.ledger.close()
        await self.health.close()  # no probe, no spool written from now on
        await self.repository.close()
        if self.redis is not None:
            await self.redis.aclose()  # last: everything above may use it until closed


def build_core(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    repository: ChatRepository | None = None,
    clock: Clock = utc_now,
) -> Core:
    """Build the core from the settings; `model` and `repository` replace the configured ones
    (a scripted model, the in-memory backend), `clock` the time budgets are counted in."""
    redis, health = (
        build_redis(settings) if settings.storage.backend == "redis" else (None, ALWAYS_UP)
    )
    repository = repository or build_repository(settings, redis, health)
    shared = (redis, settings.redis.prefix) if redis is not None else None
    ledger, quota = build_usage(settings.limits, settings.storage.data_dir, shared, clock, health)
    media = build_media(settings.llm, settings.media, ledger, clock)
    # Every call is charged to the turn's user and chat; a stopped one at the catalog's prices.
    model = MeteredModel(model or build_model(settings.llm), ledger, clock, prices=media.catalog)
    tasks = TaskSupervisor()
    agent = build_agent(
        settings, model, repository, tasks, redis=redis, health=health, media=media.reader
    )
    service = ConversationService(
        agent,
        repository,
        consult_rounds=settings.conversation.consult_rounds,
        max_rounds=settings.conversation.max_rounds,
        turn_locks=_turn_locks(settings, redis, health),
        quota=quota,
    )
    return Core(
        settings, model, repository, tasks, agent, service, ledger, quota, redis, health, media
    )


def _turn_locks(settings: Settings, redis: Redis | None, health: Health) -> TurnLocks | None:
    """With Redis, several processes may share conversations: a conversation's turn is then
    also held across them (membot/redis/turnlock.py). While the breaker is open (QUEUE=local)
    the turn is held in this process only."""
    if redis is None:
        return None
    from membot.redis.turnlock import RedisTurnLocks  # imported late: only where used

    # The lease outlasts a model call that is retried: a killed process blocks its
    # conversations for at most this long. With QUEUE=redis another worker takes a dead one's
    # updates after CLAIM_IDLE, and the lock must not hold it up longer than that.
    queue, prefix = settings.queue, settings.redis.prefix
    timeout = queue.claim_idle if queue.backend == "redis" else 30.0
    return RedisTurnLocks(redis, prefix, timeout=timeout, health=health)
