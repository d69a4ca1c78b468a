"""The settings in groups, one per concern: what a module is handed instead of everything.

`Settings` (settings.py) stays one flat model read from one `.env`, with the variable names
operators know; each group is a frozen view of some of its fields, named for the part that
uses them (`settings.telegram`, `settings.llm`, ...). Names drop the group's own prefix:
TELEGRAM_CHAT_RATE is `settings.telegram.chat_rate`. Every setting is in exactly one group,
and outside config/ only the groups are read (tests/unit/test_layout.py)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import SecretStr

from membot.config.mcp import McpServerEntry


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """The Bot API, how updates arrive, and Telegram's limits on what the bot sends."""

    token: SecretStr | None
    api_base: str
    mode: Literal["polling", "webhook"]
    webhook_url: str | None
    webhook_secret: SecretStr | None
    webhook_host: str
    webhook_port: int
    chat_rate: float
    chat_burst: int
    group_rate: float
    bot_rate: float
    streaming: bool  # answers in private chats shown as drafts while they are written
    guest_deadline: float  # seconds after a guest message: its answer is cut and sent
    export_part_mb: int  # /export's parts, at most this many MiB each

    @property
    def webhook_path(self) -> str:
        """The path the webhook server listens at: WEBHOOK_URL's own (a reverse proxy maps
        the public address to WEBHOOK_HOST:WEBHOOK_PORT)."""
        return urlsplit(self.webhook_url or "").path or "/"


@dataclass(frozen=True, slots=True)
class LlmSettings:
    """The model provider (OpenRouter) and the models a chat may use."""

    api_key: SecretStr
    base_url: str
    default_model: str
    models: tuple[str, ...]  # MODELS as set; empty: any model may be asked for
    model_choices: tuple[str, ...]  # what /model offers: MODELS with the default
    timeout: float
    enable_retry: bool
    web_search: bool


@dataclass(frozen=True, slots=True)
class StorageSettings:
    backend: Literal["files", "redis"]
    data_dir: Path


@dataclass(frozen=True, slots=True)
class RedisSettings:
    url: SecretStr
    prefix: str
    max_messages: int
    conversation_ttl: int


@dataclass(frozen=True, slots=True)
class ApiSettings:
    host: str
    port: int | None
    tokens: tuple[SecretStr, ...]
    session_ttl: float
    max_message_chars: int


@dataclass(frozen=True, slots=True)
class QueueSettings:
    backend: Literal["local", "redis"]
    claim_idle: float
    shards: int
    worker_concurrency: int


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """Who may talk to the bot, who is exempt, and what each user may spend."""

    allowed_user_ids: frozenset[int]
    admin_user_ids: frozenset[int]
    user_daily_budget: Decimal | None
    user_monthly_budget: Decimal | None
    user_rate_limit: int | None


@dataclass(frozen=True, slots=True)
class ToolSettings:
    mode: Literal["native", "hermes"]
    max_iterations: int
    timeout: float
    enabled: tuple[str, ...]
    search_budget_tokens: int  # the most one search_history result shows
    result_chars: int  # the most of one tool result the model is shown


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    """How a conversation is remembered and prompted, and how long a consultation may run."""

    window_size: int
    summary_every: int
    summary_language: str
    system_prompt: str
    consult_rounds: int
    max_rounds: int


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """Voice, images and documents: the transcription model and the limits of each."""

    transcription_model: str
    max_audio_seconds: int
    max_images_in_prompt: int
    document_prompt_chars: int
    pdf_timeout: float  # seconds a PDF's child process may read it
    pdf_memory_mb: int  # its address space (Linux only)
    pdf_processes: int  # PDF children at once; 0: one per CPU
    max_pixels: int  # the most pixels an image is decoded with
    image_decodes: int  # images decoded at once
    import_max_mb: int  # the largest export /import reads, sent and decompressed


@dataclass(frozen=True, slots=True)
class TaskSettings:
    """Reminders and scheduled tasks (membot.schedule): whether the model may set them, the
    chats' default time zone, and their limits."""

    enabled: bool
    timezone: str  # an IANA name, checked
    min_interval: int  # seconds between two runs of a repeating task, at least
    max_per_chat: int
    grace: float  # seconds late a task may still run


@dataclass(frozen=True, slots=True)
class McpSettings:
    """Tools from MCP servers (membot.mcp): the servers MCP_CONFIG names, those offered in
    every allowed chat (the others only where an ADMIN_USER_IDS user is talking), a call's
    time limit."""

    config: Path | None
    servers: tuple[McpServerEntry, ...]
    public: frozenset[str]
    tool_timeout: float


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    level: str
