"""The model and the agent, built from the settings: the provider's client (with its retries),
the agent with its prompt, summarizer, tools (the MCP servers' too) and search, and how long
shutdown waits for a turn still waiting on the model."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from membot.clock import Clock, utc_now
from membot.config import LlmSettings, Settings
from membot.core.agent import Agent
from membot.core.forget import Forgetting
from membot.core.media import MediaReader
from membot.core.prompt import PromptBuilder
from membot.core.summarizer import Summarizer
from membot.core.tools.book import TaskDesk
from membot.core.tools.builtin import builtin
from membot.export import ExportWatch
from membot.llm.model import ChatModel, LLMResponse, ModelRequest, StreamItem, StreamNotes
from membot.llm.tools import ToolExecutor, make_mode
from membot.memory.contract.repository import ChatRepository
from membot.redis.health import ALWAYS_UP, Health
from membot.schedule.store import TaskStore
from membot.search import HistorySearch
from membot.tasks import TaskSupervisor

if TYPE_CHECKING:
    from membot.mcp.hub import McpTools
    from membot.redis.client import Redis

# With ENABLE_RETRY, the openai client's own retries (with backoff) after a first failure.
LLM_RETRIES = 2


def shutdown_grace(llm: LlmSettings) -> float:
    """How long shutdown waits for answers in progress. Telegram already counts those updates
    as delivered (and an HTTP client is waiting), so one cut short is a message never
    answered: wait long enough for a turn waiting on the model to get its answer and send it."""
    attempts = 1 + (LLM_RETRIES if llm.enable_retry else 0)
    return attempts * llm.timeout + 10.0


def build_model(llm: LlmSettings, *, on_first_call: bool = False) -> ChatModel:
    """The provider's client as a ChatModel; `on_first_call`: built (and its module, with
    openai, imported) only when first called, for a role that never calls it (`receive`)."""
    if on_first_call:
        return _OnFirstCall(llm)
    # openai and its HTTP stack: 0.3 s or more to import.
    from membot.llm.client import OpenAIChatModel

    return OpenAIChatModel(
        api_key=llm.api_key.get_secret_value(),
        base_url=llm.base_url,
        model=llm.default_model,
        timeout=llm.timeout,
        retries=LLM_RETRIES if llm.enable_retry else 0,
    )


class _OnFirstCall:
    """A ChatModel that builds the real one at its first call. Not for a role that answers:
    that call would pay the import (blocking, in the event loop) in the middle of a turn."""

    def __init__(self, llm: LlmSettings) -> None:
        self._llm = llm
        self._model: ChatModel | None = None

    def _built(self) -> ChatModel:
        if self._model is None:
            self._model = build_model(self._llm)
        return self._model

    @property
    def model_name(self) -> str:
        return self._llm.default_model

    async def complete(self, request: ModelRequest) -> LLMResponse:
        return await self._built().complete(request)

    def stream(
        self, request: ModelRequest, notes: StreamNotes | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        return self._built().stream(request, notes)

    async def close(self) -> None:
        if self._model is not None:
            await self._model.close()


def build_agent(
    settings: Settings,
    model: ChatModel,
    repository: ChatRepository,
    tasks: TaskSupervisor | None = None,
    *,
    redis: Redis | None = None,
    health: Health = ALWAYS_UP,
    media: MediaReader | None = None,
    task_store: TaskStore | None = None,
    clock: Clock = utc_now,
    mcp: McpTools | None = None,
    export_watch: ExportWatch | None = None,
) -> Agent:
    from membot.redis.lease import summary_lease  # imported late: only where used

    tools, conversation = settings.tools, settings.conversation
    registry = builtin.subset(tools.enabled)
    # The MCP servers' tools go through the same executor (each with MCP_TOOL_TIMEOUT).
    executor = (
        ToolExecutor(registry, timeout=tools.timeout, max_result_chars=tools.result_chars)
        if registry or mcp
        else None
    )
    tasks = tasks if tasks is not None else TaskSupervisor()
    # The index lives beside the archive it indexes: DATA_DIR/<conversation>/search.sqlite3.
    search = HistorySearch(repository, settings.storage.data_dir)
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
        tools=executor,
        tool_mode=make_mode(tools.mode),
        max_tool_steps=tools.max_iterations,
        search=search,
        search_budget=tools.search_budget_tokens,
        tasks=tasks,
        consult_rounds=conversation.consult_rounds,
        max_rounds=conversation.max_rounds,
        models=settings.llm.model_choices,
        media=media,
        web_search=settings.llm.web_search,
        # Telegram chats with TASKS on are offered the task tools (core/offers.py).
        task_desk=(
            TaskDesk(task_store, settings.tasks, settings.limits.admin_user_ids, clock)
            if task_store is not None
            else None
        ),
        mcp=mcp,
        # Offered the servers MCP_PUBLIC does not name (core/offers.py).
        admins=settings.limits.admin_user_ids,
        # /forget: what it reaches besides the memory, the chat's tasks and its exports.
        forgetting=Forgetting(
            repository, search, tasks, exports=export_watch, task_store=task_store
        ),
    )
