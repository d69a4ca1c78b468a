"""Wiring for any front door: the model, the repository, the agent, the conversation service
and the background work, built once from the settings, closed once. No aiogram here."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from membot.clock import Clock, utc_now
from membot.config import Settings
from membot.core.agent import Agent
from membot.core.lease import summary_lease
from membot.core.prompt import PromptBuilder
from membot.core.service import ConversationService
from membot.core.summarizer import Summarizer
from membot.core.tools.builtin import builtin
from membot.core.turnlock import RedisTurnLocks, TurnLocks
from membot.llm.client import OpenAIChatModel
from membot.llm.model import ChatModel
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory.base import ChatRepository, Degradable
from membot.memory.files import FileRepository
from membot.search import HistorySearch
from membot.tasks import TaskSupervisor
from membot.usage import MeteredModel, Quota, UsageLedger
from membot.usage.build import build_usage

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

# Behind the breaker a dead Redis must cost an answer about half a second at most.
REDIS_CONNECT_TIMEOUT = 0.25
REDIS_SOCKET_TIMEOUT = 0.5
# With QUEUE=redis there is no breaker: a failed call leaves the update in the queue, to be
# tried again, so calls get the client's usual timeouts and retries.
QUEUE_CONNECT_TIMEOUT = 1.0
QUEUE_SOCKET_TIMEOUT = 3.0

# With ENABLE_RETRY, the openai client's own retries (with backoff) after a first failure.
LLM_RETRIES = 2


def shutdown_grace(settings: Settings) -> float:
    """How long shutdown waits for answers in progress. Telegram already counts those updates
    as delivered (and an HTTP client is waiting), so one cut short is a message never
    answered: wait long enough for a turn waiting on the model to get its answer and send it."""
    attempts = 1 + (LLM_RETRIES if settings.enable_retry else 0)
    return attempts * settings.llm_timeout + 10.0


def build_model(settings: Settings) -> ChatModel:
    return OpenAIChatModel(
        api_key=settings.openrouter_api_key.get_secret_value(),
        base_url=settings.openrouter_base_url,
        model=settings.default_model,
        timeout=settings.llm_timeout,
        retries=LLM_RETRIES if settings.enable_retry else 0,
    )


def build_agent(
    settings: Settings,
    model: ChatModel,
    repository: ChatRepository,
    tasks: TaskSupervisor | None = None,
) -> Agent:
    registry = builtin.subset(settings.enabled_tools)
    return Agent(
        model=model,
        repository=repository,
        prompts=PromptBuilder(settings.system_prompt),
        summarizer=Summarizer(
            model,
            repository,
            every=settings.summary_every,
            language=settings.summary_language,
            # With Redis, one summary per conversation across all processes.
            lease=summary_lease(settings, repository),
        ),
        window_size=settings.window_size,
        tools=ToolExecutor(registry, timeout=settings.tool_timeout) if registry else None,
        tool_mode=make_mode(settings.tool_mode),
        max_tool_rounds=settings.tool_max_iterations,
        # The index lives beside the archive it indexes: DATA_DIR/<conversation>/search.sqlite3.
        search=HistorySearch(repository, settings.data_dir),
        tasks=tasks,
        consult_rounds=settings.consult_rounds,
        max_rounds=settings.max_rounds,
        models=settings.model_choices,
    )


@runtime_checkable
class CheckedAtStart(Protocol):
    """A backend with something to check at start-up (the Redis one: reachable, persisting)."""

    async def check(self) -> bool: ...


def build_repository(settings: Settings) -> ChatRepository:
    """The backend STORAGE names. Building it connects nowhere: Redis is reached on first use.

    Redis comes behind a circuit breaker and a spool under DATA_DIR (memory/resilient.py), so
    the bot answers while it is down; its client gets short timeouts and one retry, as the
    breaker, not a retry, is what rides out an outage. With QUEUE=redis, Redis is the queue
    too: while it is down nothing is answered (updates wait in Telegram or in the stream),
    so the repository is the plain one and its errors leave the update to be tried again."""
    if settings.storage.backend == "redis":
        # imported late: only where used
        from membot.memory.redis import RedisRepository, create_client
        from membot.memory.resilient import ResilientRedisRepository

        if settings.queue.backend == "redis":
            return RedisRepository(
                create_client(
                    settings.redis_url.get_secret_value(),
                    connect_timeout=QUEUE_CONNECT_TIMEOUT,
                    socket_timeout=QUEUE_SOCKET_TIMEOUT,
                ),
                prefix=settings.redis_prefix,
                max_messages=settings.redis_max_messages,
                ttl=settings.conversation_ttl,
            )
        client = create_client(
            settings.redis_url.get_secret_value(),
            connect_timeout=REDIS_CONNECT_TIMEOUT,
            socket_timeout=REDIS_SOCKET_TIMEOUT,
            retries=1,
        )
        redis = RedisRepository(
            client,
            prefix=settings.redis_prefix,
            max_messages=settings.redis_max_messages,
            ttl=settings.conversation_ttl,
        )
        return ResilientRedisRepository(redis, settings.data_dir)
    return FileRepository(settings.data_dir)


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
    # The repository's Redis client when the storage is Redis (shared limits, the queue).
    redis: Redis | None = None

    async def start(self) -> None:
        """Check the storage once before serving: front doors await this at start-up. Nothing
        connects before (build_core never does); a backend without a check has nothing to do."""
        if isinstance(self.repository, CheckedAtStart):
            await self.repository.check()

    async def aclose(self) -> None:
        """Let turns in flight finish, then stop background work and release clients."""
        await self.service.wait_idle(shutdown_grace(self.settings))
        await self.tasks.close()
        await self.model.close()
        await self.ledger.close()
        await self.repository.close()


def build_core(
    settings: Settings,
    *,
    model: ChatModel | None = None,
    repository: ChatRepository | None = None,
    clock: Clock = utc_now,
) -> Core:
    """Build the core from the settings; `model` and `repository` replace the configured ones
    (a scripted model, the in-memory backend), `clock` the time budgets are counted in."""
    repository = repository or build_repository(settings)
    redis = _redis_client(repository)
    health = repository if isinstance(repository, Degradable) else None
    ledger, quota = build_usage(settings, redis, clock, health)
    # Every call, summaries and tool rounds included, is charged to the turn's user and chat.
    model = MeteredModel(model or build_model(settings), ledger, clock)
    tasks = TaskSupervisor()
    agent = build_agent(settings, model, repository, tasks)
    service = ConversationService(
        agent,
        repository,
        consult_rounds=settings.consult_rounds,
        max_rounds=settings.max_rounds,
        turn_locks=_turn_locks(settings, repository),
        quota=quota,
    )
    return Core(settings, model, repository, tasks, agent, service, ledger, quota, redis)


def _redis_client(repository: ChatRepository) -> Redis | None:
    client = getattr(repository, "client", None)
    if client is None:
        return None
    from redis.asyncio import Redis  # only when the repository has a client

    return client if isinstance(client, Redis) else None


def _turn_locks(settings: Settings, repository: ChatRepository) -> TurnLocks | None:
    """With Redis, several processes may share conversations: a conversation's turn is then
    also held across them (core/turnlock.py), on the repository's own client."""
    if settings.storage.backend != "redis":
        return None
    from membot.memory.redis import RedisRepository  # imported late: only where used

    if not isinstance(repository, RedisRepository):
        return None  # a test's own repository
    # While Redis is down (the breaker is open) the turn is held in this process only.
    health = repository if isinstance(repository, Degradable) else None
    # The lease outlasts a model call that is retried: a killed process blocks its
    # conversations for at most this long. With QUEUE=redis another worker takes a dead one's
    # updates after CLAIM_IDLE, and the lock must not hold it up longer than that.
    timeout = settings.claim_idle if settings.queue.backend == "redis" else 30.0
    return RedisTurnLocks(repository.client, settings.redis_prefix, timeout=timeout, health=health)
