"""The settings' value types: each carries its own parsing and checks (pydantic's Annotated
validators), so the Settings class reads as a plain list of knobs, and a subset of them
(`load_subset`, for operator commands that need no tokens) is checked exactly the same way.

Lists come comma-separated from the environment ("123, 456"); `NAME=` means "not set"."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, SecretStr
from pydantic_settings import NoDecode

from membot.tool_names import BUILTIN_TOOL_NAMES


def _lowercase(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _uppercase(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _empty_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _split(value: Any) -> Any:
    return [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else value


def _redis_url(value: SecretStr) -> SecretStr:
    # A SecretStr: the URL may carry a password, and `check-config` prints the settings.
    if not value.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("must be a redis://, rediss:// or unix:// URL")
    return value


def _bot_token(value: SecretStr | None) -> SecretStr | None:
    # The shape aiogram insists on ("<bot id>:<secret>"); checked here so a pasted-wrong
    # token is a one-line config error, not a traceback from deep inside aiogram.
    if value is None or not value.get_secret_value():
        return None
    bot_id, sep, secret = value.get_secret_value().partition(":")
    if not (sep and bot_id.isdigit() and secret) or any(c.isspace() for c in secret):
        raise ValueError('must look like "123456789:AA..." (the token from @BotFather)')
    return value


def _time_zone(value: str) -> str:
    # An IANA name the zone database knows ("Europe/Berlin", "UTC"), as /timezone checks it.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = value.strip()
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("must be an IANA time zone name such as Europe/Berlin or UTC") from None
    return name


def _webhook_url(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not value.startswith(("https://", "http://")) or " " in value:
        raise ValueError("must be the public https:// URL Telegram posts updates to")
    return value


def _webhook_secret(value: SecretStr | None) -> SecretStr | None:
    # Telegram's rule for secret_token: 1-256 characters, A-Z, a-z, 0-9, _ and -.
    if value is None or not value.get_secret_value():
        return None
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()):
        raise ValueError("must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
    return value


def _http_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _model_id(value: str | None) -> str | None:
    if value is not None and (value != value.strip() or " " in value or "," in value):
        raise ValueError("must be one model id without spaces, e.g. openai/gpt-4o-mini")
    return value


def _models(value: Any) -> Any:
    models = tuple(dict.fromkeys(_split(value)))
    if any(not isinstance(m, str) or not m or any(c.isspace() for c in m) for m in models):
        raise ValueError("must be a comma-separated list of model ids")
    return models


def _user_ids(value: Any) -> Any:
    # Empty means open to everyone (the allowlist) or nobody (the admins).
    if isinstance(value, str):
        try:
            return frozenset(int(p) for p in _split(value))
        except ValueError:
            raise ValueError("must be a comma-separated list of integer user ids") from None
    return value


def _api_tokens(value: Any) -> Any:
    # Bearer tokens, trimmed; a token may not contain spaces or commas.
    value = _split(value)
    tokens = tuple(v.get_secret_value() if isinstance(v, SecretStr) else v for v in value)
    if any(not isinstance(t, str) or any(c.isspace() for c in t) for t in tokens):
        raise ValueError("must be a comma-separated list of tokens without spaces")
    if any(len(t) < 16 for t in tokens):
        raise ValueError("each token must be at least 16 characters long")
    return tuple(SecretStr(t) for t in tokens)


def _tool_names(value: Any) -> Any:
    if value is None:
        return None
    names = tuple(dict.fromkeys(_split(value)))
    unknown = [n for n in names if n not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise ValueError(
            f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    return names


def _server_names(value: Any) -> Any:
    # MCP_PUBLIC: server names of MCP_CONFIG (checked against the file in fields.py).
    return tuple(dict.fromkeys(_split(value))) if isinstance(value, str) else value


# The storage settings carry their validators in their types, so `membot migrate` can build a
# model of just these fields without the tokens (memory/migrate/run.py).
Storage = Annotated[Literal["files", "redis"], BeforeValidator(_lowercase)]
RedisUrl = Annotated[SecretStr, AfterValidator(_redis_url)]
QueueKind = Annotated[Literal["local", "redis"], BeforeValidator(_lowercase)]
TelegramMode = Annotated[Literal["polling", "webhook"], BeforeValidator(_lowercase)]
ToolModeKind = Annotated[Literal["native", "hermes"], BeforeValidator(_lowercase)]
TimeZoneName = Annotated[str, AfterValidator(_time_zone)]
LogLevel = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_uppercase)
]
BotToken = Annotated[SecretStr | None, AfterValidator(_bot_token)]
WebhookUrl = Annotated[str | None, AfterValidator(_webhook_url)]
WebhookSecret = Annotated[SecretStr | None, AfterValidator(_webhook_secret)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
ModelId = Annotated[str | None, BeforeValidator(_empty_is_none), AfterValidator(_model_id)]
ModelIds = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_models)]
UserIds = Annotated[frozenset[int], NoDecode, BeforeValidator(_user_ids)]
ApiTokens = Annotated[tuple[SecretStr, ...], NoDecode, BeforeValidator(_api_tokens)]
ToolNames = Annotated[tuple[str, ...] | None, NoDecode, BeforeValidator(_tool_names)]
Money = Annotated[Decimal | None, BeforeValidator(_empty_is_none)]
OptionalInt = Annotated[int | None, BeforeValidator(_empty_is_none)]
OptionalPath = Annotated[Path | None, BeforeValidator(_empty_is_none)]
ServerNames = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_server_names)]
