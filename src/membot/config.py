"""Settings: read once from the environment and `.env`, validated, passed down as one object."""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from membot.errors import MembotError

DEFAULT_SYSTEM_PROMPT = (
    "You are membot, a helpful assistant in a Telegram chat. "
    "Answer clearly and concisely, in the language the user writes in. "
    "You may use Markdown: bold, italics, inline code, code blocks and lists."
)


class ConfigError(MembotError):
    """A setting is missing or invalid; the message is one line that names the variable."""


def _lowercase(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _redis_url(value: SecretStr) -> SecretStr:
    # A SecretStr: the URL may carry a password, and `check-config` prints the settings.
    if not value.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("must be a redis://, rediss:// or unix:// URL")
    return value


# The storage settings carry their validators in their types (not as Settings methods), so
# `membot migrate` can build a model of just these fields without the tokens (memory/migrate.py).
Storage = Annotated[Literal["files", "redis"], BeforeValidator(_lowercase)]
RedisUrl = Annotated[SecretStr, AfterValidator(_redis_url)]


class Settings(BaseSettings):
    """Every knob of membot. Field names map 1:1 to environment variables (upper case)."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        # Secrets and prompts are user text: keep them byte-exact.
        str_strip_whitespace=False,
    )

    # Required by `membot run` (the bot); `membot api` serves the HTTP API without it.
    telegram_bot_token: SecretStr | None = None
    telegram_api_base: str = "https://api.telegram.org"
    openrouter_api_key: SecretStr = Field(min_length=1)
    openrouter_base_url: str = "https://openrouter.ai/api/v1"
    # The default model: OPENROUTER_MODEL when set, else the first of MODELS (`default_model`).
    openrouter_model: str | None = None
    # The models users may choose per chat with /model.
    models: Annotated[tuple[str, ...], NoDecode] = ()
    data_dir: Path = Path("data")
    window_size: int = Field(default=20, ge=1, le=500)
    summary_every: int = Field(default=20, ge=2, le=10_000)
    summary_language: str = ""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    llm_timeout: float = Field(default=60.0, gt=0, le=600)
    enable_retry: bool = False
    allowed_user_ids: Annotated[frozenset[int], NoDecode] = frozenset()
    # Exempt from budgets and the rate limit; may change a group's model and persona.
    admin_user_ids: Annotated[frozenset[int], NoDecode] = frozenset()
    # Per user, in the provider's currency (exact decimals); None: no budget. UTC periods.
    user_daily_budget: Decimal | None = Field(default=None, ge=0, max_digits=20)
    user_monthly_budget: Decimal | None = Field(default=None, ge=0, max_digits=20)
    # Messages to the model per user in any 60 seconds; None: no limit.
    user_rate_limit: int | None = Field(default=None, ge=1, le=100_000)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    tool_mode: Literal["native", "hermes"] = "native"
    tool_max_iterations: int = Field(default=10, ge=1, le=50)
    tool_timeout: float = Field(default=30.0, gt=0, le=600)
    # None means "every built-in tool"; an empty TOOLS= switches tools off.
    tools: Annotated[tuple[str, ...] | None, NoDecode] = None
    consult_rounds: int = Field(default=3, ge=1, le=100)
    max_rounds: int = Field(default=10, ge=1, le=100)
    api_host: str = "127.0.0.1"
    api_port: int | None = Field(default=None, ge=1, le=65535)
    api_tokens: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    session_ttl: float = Field(default=3600.0, gt=0, le=365 * 86400)
    web_search: bool = False
    # Where conversations live: `files` under DATA_DIR (needs nothing), or `redis`.
    storage: Storage = "files"
    redis_url: RedisUrl = SecretStr("redis://127.0.0.1:6379/0")
    redis_prefix: str = Field(default="membot:", min_length=1, max_length=100, pattern=r"^\S+$")
    redis_max_messages: int = Field(default=10_000, ge=100, le=10_000_000)
    # Seconds a conversation lives in Redis after its last activity (not a summary); 0 = forever.
    conversation_ttl: int = Field(default=0, ge=0, le=10 * 365 * 86400)
    # Scale-out (queue/): `redis` puts every update in a Redis Stream that workers share.
    queue: Annotated[Literal["local", "redis"], BeforeValidator(_lowercase)] = "local"
    telegram_mode: Annotated[Literal["polling", "webhook"], BeforeValidator(_lowercase)] = "polling"
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
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

    @field_validator("telegram_bot_token")
    @classmethod
    def _token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        # The shape aiogram insists on ("<bot id>:<secret>"); checked here so a pasted-wrong
        # token is a one-line config error, not a traceback from deep inside aiogram.
        if value is None or not value.get_secret_value():
            return None
        bot_id, sep, secret = value.get_secret_value().partition(":")
        if not (sep and bot_id.isdigit() and secret) or any(c.isspace() for c in secret):
            raise ValueError('must look like "123456789:AA..." (the token from @BotFather)')
        return value

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not value.startswith(("https://", "http://")) or " " in value:
            raise ValueError("must be the public https:// URL Telegram posts updates to")
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _webhook_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # Telegram's rule for secret_token: 1-256 characters, A-Z, a-z, 0-9, _ and -.
        if value is None or not value.get_secret_value():
            return None
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()):
            raise ValueError("must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return value

    @field_validator("telegram_api_base", "openrouter_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator(
        "openrouter_model",
        "user_daily_budget",
        "user_monthly_budget",
        "user_rate_limit",
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        # `NAME=` in .env means "not set".
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("openrouter_model")
    @classmethod
    def _model_id(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or " " in value or "," in value):
            raise ValueError("must be one model id without spaces, e.g. openai/gpt-4o-mini")
        return value

    @field_validator("models", mode="before")
    @classmethod
    def _parse_models(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        models = tuple(dict.fromkeys(value))
        if any(not isinstance(m, str) or not m or any(c.isspace() for c in m) for m in models):
            raise ValueError("must be a comma-separated list of model ids")
        return models

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

    @field_validator("allowed_user_ids", "admin_user_ids", mode="before")
    @classmethod
    def _parse_ids(cls, value: Any) -> Any:
        # Comma-separated in the environment ("123, 456"); empty means open to everyone.
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(",") if p.strip()]
            try:
                return frozenset(int(p) for p in parts)
            except ValueError:
                raise ValueError("must be a comma-separated list of integer user ids") from None
        return value

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: Any) -> Any:
        # Comma-separated bearer tokens, trimmed; a token may not contain spaces or commas.
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        tokens = tuple(v.get_secret_value() if isinstance(v, SecretStr) else v for v in value)
        if any(not isinstance(t, str) or any(c.isspace() for c in t) for t in tokens):
            raise ValueError("must be a comma-separated list of tokens without spaces")
        if any(len(t) < 16 for t in tokens):
            raise ValueError("each token must be at least 16 characters long")
        return tuple(SecretStr(t) for t in tokens)

    @model_validator(mode="after")
    def _scale_out(self) -> Settings:
        if self.queue == "redis" and self.storage != "redis":
            raise ValueError("QUEUE is invalid: QUEUE=redis needs STORAGE=redis")
        if self.telegram_mode == "webhook":
            if self.webhook_url is None:
                raise ValueError("WEBHOOK_URL is required when TELEGRAM_MODE=webhook")
            if self.webhook_secret is None:
                raise ValueError("WEBHOOK_SECRET is required when TELEGRAM_MODE=webhook")
        return self

    @property
    def webhook_path(self) -> str:
        """The path the webhook server listens at: WEBHOOK_URL's own (a reverse proxy maps
        the public address to WEBHOOK_HOST:WEBHOOK_PORT)."""
        from urllib.parse import urlsplit

        return urlsplit(self.webhook_url or "").path or "/"

    @model_validator(mode="after")
    def _rounds(self) -> Settings:
        if self.consult_rounds > self.max_rounds:
            raise ValueError(
                f"CONSULT_ROUNDS is invalid: {self.consult_rounds} is more than MAX_ROUNDS "
                f"({self.max_rounds})"
            )
        return self

    @field_validator("tools", mode="before")
    @classmethod
    def _parse_tools(cls, value: Any) -> Any:
        from membot.llm.tools.builtin import BUILTIN_TOOL_NAMES

        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if value is None:
            return None
        names = tuple(dict.fromkeys(value))
        unknown = [n for n in names if n not in BUILTIN_TOOL_NAMES]
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(BUILTIN_TOOL_NAMES)}"
            )
        return names

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        from membot.llm.tools.builtin import BUILTIN_TOOL_NAMES

        return BUILTIN_TOOL_NAMES if self.tools is None else self.tools

    @field_validator("tool_mode", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("system_prompt")
    @classmethod
    def _prompt_default_when_blank(cls, value: str) -> str:
        # `SYSTEM_PROMPT=` in .env means "no opinion", not "no system prompt".
        return value if value.strip() else DEFAULT_SYSTEM_PROMPT

    def masked(self) -> dict[str, str]:
        """The settings as printable strings, secrets masked (for `membot check-config`)."""
        out: dict[str, str] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "tools":
                shown = ",".join(self.enabled_tools) or "(none)"
            elif name == "openrouter_model" and value is None:
                shown = f"(not set: {self.default_model})"
            elif name == "models":
                shown = ",".join(value) or "(none)"
            elif value is None:
                shown = "(not set)"
            elif isinstance(value, SecretStr):
                raw = value.get_secret_value()
                shown = f"{raw[:4]}…({len(raw)} chars)" if len(raw) > 8 else "***"
            elif name == "api_tokens":
                shown = f"({len(value)} token(s))" if value else "(none)"
            elif isinstance(value, frozenset):
                shown = ",".join(str(v) for v in sorted(value)) or "(everyone)"
            else:
                shown = str(value)
            out[name.upper()] = shown
        return out


def load_subset(*names: str, **overrides: Any) -> dict[str, Any]:
    """Just these settings (same names, defaults and checks as Settings) from the environment
    and ./.env, for operator commands that need no tokens (`migrate`, `usage`). Raises
    ConfigError with one line."""
    from pydantic import create_model

    class _Base(BaseSettings):
        model_config = Settings.model_config

    fields: dict[str, Any] = {
        n: (Settings.model_fields[n].annotation, Settings.model_fields[n]) for n in names
    }
    subset = create_model("SettingsSubset", __base__=_Base, **fields)
    try:
        return dict(subset(**overrides))
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def load_settings(*, telegram: bool = True, api: bool | None = None, **overrides: Any) -> Settings:
    """Build the settings or raise ConfigError with one line naming the first bad variable.

    `telegram`: the bot runs, so TELEGRAM_BOT_TOKEN is required. `api`: the HTTP API is
    served, so API_TOKENS is required (None: served when API_PORT is set)."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    if telegram and settings.telegram_bot_token is None:
        raise ConfigError("configuration error: TELEGRAM_BOT_TOKEN is required but not set")
    serving = settings.api_port is not None if api is None else api
    if serving and not settings.api_tokens:
        raise ConfigError(
            "configuration error: API_TOKENS is required when the HTTP API is on "
            "(API_PORT is set, or `membot api`): a comma-separated list of bearer tokens"
        )
    return settings


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        var = str(err["loc"][0]).upper() if err["loc"] else "settings"
        if err["type"] == "missing":
            problems.append(f"{var} is required but not set")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if not err["loc"] and msg.split(" ", 1)[0].isupper():
                problems.append(msg)  # a check across settings names its own variable
            else:
                problems.append(f"{var} is invalid: {msg}")
    return "configuration error: " + "; ".join(problems)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    # aiogram logs every handled update at INFO; keep that out of INFO-level output.
    logging.getLogger("aiogram.event").setLevel(max(logging.getLevelName(level), logging.WARNING))
    # httpx (under openai) logs request URLs at INFO; not secret, but noisy.
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
