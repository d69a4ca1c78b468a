"""The settings' fields: every variable membot reads, its type, default and checks, and the
values derived from them. `Settings` (settings.py) adds the groups modules are handed."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from membot.config.mcp import McpServerEntry, check_public, read_mcp_config
from membot.config.sources import EnvSettings
from membot.config.types import (
    ApiTokens,
    BotToken,
    HttpUrl,
    LogLevel,
    ModelId,
    ModelIds,
    Money,
    OptionalInt,
    OptionalPath,
    QueueKind,
    RedisUrl,
    ServerNames,
    Storage,
    TelegramMode,
    TimeZoneName,
    ToolModeKind,
    ToolNames,
    UserIds,
    WebhookSecret,
    WebhookUrl,
)
from membot.tool_names import BUILTIN_TOOL_NAMES

DEFAULT_SYSTEM_PROMPT = (
    "You are membot, a helpful assistant in a Telegram chat. "
    "Answer clearly and concisely, in the language the user writes in. "
    "You may use Markdown: bold, italics, inline code, code blocks and lists."
)


class Fields(EnvSettings):
    """Every knob of membot. Field names map 1:1 to environment variables (upper case),
    read as EnvSettings says (sources.py)."""

    # Required by `membot run` (the bot); `membot api` serves the HTTP API without it.
    telegram_bot_token: BotToken = None
    telegram_api_base: HttpUrl = "https://api.telegram.org"
    openrouter_api_key: SecretStr = Field(min_length=1)
    openrouter_base_url: HttpUrl = "https://openrouter.ai/api/v1"
    # The default model: OPENROUTER_MODEL when set, else the first of MODELS (`default_model`).
    openrouter_model: ModelId = None
    # The models users may choose per chat with /model.
    models: ModelIds = ()
    data_dir: Path = Path("data")
    window_size: int = Field(default=20, ge=1, le=500)
    summary_every: int = Field(default=20, ge=2, le=10_000)
    summary_language: str = ""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    llm_timeout: float = Field(default=60.0, gt=0, le=600)
    enable_retry: bool = False
    allowed_user_ids: UserIds = frozenset()
    # Exempt from budgets and the rate limit; may change a group's model and persona.
    admin_user_ids: UserIds = frozenset()
    # Per user, in the provider's currency (exact decimals); None: no budget. UTC periods.
    user_daily_budget: Money = Field(default=None, ge=0, max_digits=20)
    user_monthly_budget: Money = Field(default=None, ge=0, max_digits=20)
    # Messages to the model per user in any 60 seconds; None: no limit.
    user_rate_limit: OptionalInt = Field(default=None, ge=1, le=100_000)
    log_level: LogLevel = "INFO"
    tool_mode: ToolModeKind = "native"
    tool_max_iterations: int = Field(default=10, ge=1, le=50)
    tool_timeout: float = Field(default=30.0, gt=0, le=600)
    # The most characters of one tool result the model is shown (a note says what was cut).
    tool_result_chars: int = Field(default=8000, ge=500, le=200_000)
    # None means "every built-in tool"; an empty TOOLS= switches tools off.
    tool_names: ToolNames = Field(default=None, validation_alias="tools")
    # What one search_history result may hold, in estimated tokens (search/excerpts.py).
    search_budget_tokens: int = Field(default=2000, ge=500, le=50_000)
    consult_rounds: int = Field(default=3, ge=1, le=100)
    max_rounds: int = Field(default=10, ge=1, le=100)
    api_host: str = "127.0.0.1"
    api_port: int | None = Field(default=None, ge=1, le=65535)
    api_tokens: ApiTokens = ()
    session_ttl: float = Field(default=3600.0, gt=0, le=365 * 86400)
    # The longest `message` an API request may carry, in characters (413 beyond it).
    api_max_message_chars: int = Field(default=100_000, ge=1, le=10_000_000)
    # The model may search the web in every turn (OpenRouter's web search); a chat may say no.
    web_search: bool = True
    # Where conversations live: `files` under DATA_DIR (needs nothing), or `redis`.
    storage_backend: Storage = Field(default="files", validation_alias="storage")
    redis_url: RedisUrl = SecretStr("redis://127.0.0.1:6379/0")
    redis_prefix: str = Field(default="membot:", min_length=1, max_length=100, pattern=r"^\S+$")
    redis_max_messages: int = Field(default=10_000, ge=100, le=10_000_000)
    # Seconds a conversation lives in Redis after its last activity (not a summary); 0 = forever.
    conversation_ttl: int = Field(default=0, ge=0, le=10 * 365 * 86400)
    # Scale-out (intake/): `redis` puts every update in a Redis Stream that workers share.
    queue_backend: QueueKind = Field(default="local", validation_alias="queue")
    telegram_mode: TelegramMode = "polling"
    webhook_url: WebhookUrl = None
    webhook_secret: WebhookSecret = None
    webhook_host: str = "127.0.0.1"
    webhook_port: int = Field(default=8081, ge=1, le=65535)
    # Seconds before another worker takes over the updates of a worker that stopped answering.
    claim_idle: float = Field(default=30.0, ge=0.5, le=3600)
    queue_shards: int = Field(default=16, ge=1, le=1024)
    worker_concurrency: int = Field(default=64, ge=1, le=10_000)
    # Telegram's limits on what the bot sends, shared by every process through Redis with
    # QUEUE=redis: messages per second per chat (with a short burst), per minute per group,
    # per second for the whole bot.
    telegram_chat_rate: float = Field(default=1.0, gt=0, le=1000)
    telegram_chat_burst: int = Field(default=3, ge=1, le=100)
    telegram_group_rate: float = Field(default=20.0, gt=0, le=60_000)
    telegram_bot_rate: float = Field(default=30.0, gt=0, le=10_000)
    # Private chats see the answer while it is written (sendMessageDraft); false: one message.
    streaming: bool = True
    # Guest Mode (Bot API 10.0): seconds after a guest message its answer is cut and sent as
    # written (Telegram waits 30 s for answerGuestQuery).
    guest_deadline: float = Field(default=25.0, gt=0, le=29)
    # /export's ZIP comes in parts of at most this many MiB (Telegram takes uploads of up to
    # 50 MB from a bot; a local Bot API server up to 2,000).
    export_part_mb: int = Field(default=45, ge=1, le=2000)
    # Voice, images and documents (membot.media).
    transcription_model: str = Field(default="openai/whisper-1", min_length=1, pattern=r"^\S+$")
    max_audio_seconds: int = Field(default=600, ge=1, le=24 * 3600)
    max_images_in_prompt: int = Field(default=4, ge=0, le=50)
    document_prompt_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    # A PDF is read in a child process, killed past this many seconds or (Linux) megabytes;
    # at most this many children at once (0: one per CPU).
    media_pdf_timeout: float = Field(default=20.0, gt=0, le=600)
    media_pdf_memory_mb: int = Field(default=1024, ge=128, le=65_536)
    media_pdf_processes: int = Field(default=0, ge=0, le=64)
    media_max_pixels: int = Field(default=25_000_000, ge=1_000_000, le=200_000_000)
    media_image_decodes: int = Field(default=2, ge=1, le=64)
    # /import: the largest export read, as sent and once decompressed, in MB.
    import_max_mb: int = Field(default=200, ge=1, le=10_000)
    # Reminders and scheduled tasks the model sets in Telegram chats (membot.schedule).
    tasks_enabled: bool = Field(default=True, validation_alias="tasks")
    # A chat's time zone until it sets its own (/timezone): an IANA name.
    timezone: TimeZoneName = "UTC"
    # A repeating task fires at most once in this many seconds.
    tasks_min_interval: int = Field(default=900, ge=1, le=366 * 86400)
    tasks_max_per_chat: int = Field(default=50, ge=1, le=10_000)
    # Seconds a task may be late (membot was down) and still run; later it is dropped.
    tasks_grace: int = Field(default=86_400, ge=0, le=366 * 86400)
    # Tools from MCP servers (membot.mcp): the servers' JSON file, those every allowed chat is
    # offered (the others only to ADMIN_USER_IDS), and how long one call may take.
    mcp_config: OptionalPath = None
    mcp_public: ServerNames = ()
    mcp_tool_timeout: float = Field(default=60.0, gt=0, le=3600)

    # MCP_CONFIG's servers, read once when the settings are (a file that does not read is a
    # configuration error like any other).
    _mcp_servers: tuple[McpServerEntry, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _scale_out(self) -> Self:
        if self.queue_backend == "redis" and self.storage_backend != "redis":
            raise ValueError("QUEUE is invalid: QUEUE=redis needs STORAGE=redis")
        if self.telegram_mode == "webhook":
            if self.webhook_url is None:
                raise ValueError("WEBHOOK_URL is required when TELEGRAM_MODE=webhook")
            if self.webhook_secret is None:
                raise ValueError("WEBHOOK_SECRET is required when TELEGRAM_MODE=webhook")
        return self

    @model_validator(mode="after")
    def _rounds(self) -> Self:
        if self.consult_rounds > self.max_rounds:
            raise ValueError(
                f"CONSULT_ROUNDS is invalid: {self.consult_rounds} is more than MAX_ROUNDS "
                f"({self.max_rounds})"
            )
        return self

    @model_validator(mode="after")
    def _mcp(self) -> Self:
        if self.mcp_config is not None:
            self._mcp_servers = read_mcp_config(self.mcp_config)
        check_public(self.mcp_public, self._mcp_servers)
        return self

    @field_validator("system_prompt")
    @classmethod
    def _prompt_default_when_blank(cls, value: str) -> str:
        # `SYSTEM_PROMPT=` in .env means "no opinion", not "no system prompt".
        return value if value.strip() else DEFAULT_SYSTEM_PROMPT

    # -- derived values ---------------------------------------------------------------------

    @property
    def default_model(self) -> str:
        """OPENROUTER_MODEL when set, else the first of MODELS, else openrouter/auto."""
        return self.openrouter_model or (self.models[0] if self.models else "openrouter/auto")

    @property
    def model_choices(self) -> tuple[str, ...]:
        """What /model offers: MODELS, with OPENROUTER_MODEL first when MODELS lacks it."""
        if self.default_model in self.models:
            return self.models
        return (self.default_model, *self.models)

    @property
    def mcp_servers(self) -> tuple[McpServerEntry, ...]:
        """The servers MCP_CONFIG names (none without it)."""
        return self._mcp_servers

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        """TOOLS when set (empty: none), else every built-in tool."""
        return BUILTIN_TOOL_NAMES if self.tool_names is None else self.tool_names
