"""Reading the settings: every problem named in one line (ConfigError), a subset for operator
commands that need no tokens, and the logging set-up the settings ask for."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import SecretStr, ValidationError, create_model
from pydantic.fields import FieldInfo

from membot.config.settings import Settings
from membot.config.sources import EnvSettings
from membot.errors import MembotError


class ConfigError(MembotError):
    """A setting is missing or invalid; the message is one line that names every variable."""


def env_names() -> list[str]:
    """Every variable the settings read, as operators write them (upper case)."""
    return [_env_name(name, info) for name, info in Settings.model_fields.items()]


def load_settings(*, telegram: bool = True, api: bool | None = None, **overrides: Any) -> Settings:
    """Build the settings or raise ConfigError with one line naming every bad variable.

    `telegram`: the bot runs, so TELEGRAM_BOT_TOKEN is required. `api`: the HTTP API is
    served, so API_TOKENS is required (None: served when API_PORT is set). What a role
    requires is named beside the other problems, so one try shows everything to fix."""
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        role = _role_problems(_readable(_ROLE_FIELDS, overrides), telegram=telegram, api=api)
        raise ConfigError(_line(role + _problems(exc))) from None
    values = {name: getattr(settings, name) for name in _ROLE_FIELDS}
    role = _role_problems(values, telegram=telegram, api=api)
    if role:
        raise ConfigError(_line(role))
    return settings


def load_subset(*names: str, **overrides: Any) -> dict[str, Any]:
    """Just these variables (lower-case names; same defaults and checks as Settings) from the
    environment and ./.env, for operator commands that need no tokens (`migrate`, `usage`).
    Raises ConfigError with one line."""

    fields: dict[str, Any] = {}
    for name in names:
        info = _field(name)
        fields[name] = (info.annotation, info)
    subset = create_model("SettingsSubset", __base__=EnvSettings, **fields)
    try:
        return dict(subset(**overrides))
    except ValidationError as exc:
        raise ConfigError(_line(_problems(exc))) from None


def masked(settings: Settings) -> dict[str, str]:
    """The settings as printable strings, secrets masked (for `membot check-config`)."""
    out: dict[str, str] = {}
    for name, info in type(settings).model_fields.items():
        value = getattr(settings, name)
        if name == "tool_names":
            shown = ",".join(settings.enabled_tools) or "(none)"
        elif name == "openrouter_model" and value is None:
            shown = f"(not set: {settings.default_model})"
        elif name in ("models", "mcp_public"):
            shown = ",".join(value) or "(none)"
        elif value is None:
            shown = "(not set)"
        elif isinstance(value, SecretStr):
            raw = value.get_secret_value()
            shown = f"{raw[:4]}…({len(raw)} chars)" if len(raw) > 8 else "***"
        elif name == "api_tokens":
            shown = f"({len(value)} token(s))" if value else "(none)"
        elif isinstance(value, frozenset):
            shown = ",".join(str(v) for v in sorted(value)) or _EMPTY_USERS[name]
        else:
            shown = str(value)
        out[_env_name(name, info)] = shown
    return out


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


# -- helpers -----------------------------------------------------------------------------------

# What a process role may require beyond the model's own checks.
_ROLE_FIELDS = ("telegram_bot_token", "api_port", "api_tokens")

_NOT_SET = " is required but not set"

# Who an empty list of user ids means (docs/operating.md): the allowlist lets everyone in,
# and no one is an admin.
_EMPTY_USERS = {"allowed_user_ids": "(everyone)", "admin_user_ids": "(nobody)"}


def _env_name(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    return (alias if isinstance(alias, str) else name).upper()


def _field(name: str) -> FieldInfo:
    """The field read from variable `name` (its own name, or its alias)."""
    for field_name, info in Settings.model_fields.items():
        if _env_name(field_name, info) == name.upper():
            return info
    raise KeyError(name)


def _readable(names: tuple[str, ...], overrides: dict[str, Any]) -> dict[str, Any]:
    """These variables, each read on its own: a bad one is left out (it is named already)."""
    values: dict[str, Any] = {}
    for name in names:
        try:
            values.update(load_subset(name, **{k: v for k, v in overrides.items() if k == name}))
        except ConfigError:
            continue
    return values


def _role_problems(values: dict[str, Any], *, telegram: bool, api: bool | None) -> list[str]:
    problems = []
    if telegram and "telegram_bot_token" in values and values["telegram_bot_token"] is None:
        problems.append("TELEGRAM_BOT_TOKEN" + _NOT_SET)
    serving = values.get("api_port") is not None if api is None else api
    if serving and "api_tokens" in values and not values["api_tokens"]:
        problems.append(
            "API_TOKENS is required when the HTTP API is on (API_PORT is set, or `membot api`): "
            "a comma-separated list of bearer tokens"
        )
    return problems


def _problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        var = str(err["loc"][0]).upper() if err["loc"] else "settings"
        if err["type"] == "missing":
            problems.append(var + _NOT_SET)
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if not err["loc"] and msg.split(" ", 1)[0].isupper():
                problems.append(msg)  # a check across settings names its own variable
            else:
                problems.append(f"{var} is invalid: {msg}")
    return problems


def _line(problems: list[str]) -> str:
    """One line; the variables missing are named together ("A and B are required but not
    set"), where the first of them was."""
    missing = [p.removesuffix(_NOT_SET) for p in problems if p.endswith(_NOT_SET)]
    if len(missing) > 1:
        names = ", ".join(missing[:-1]) + " and " + missing[-1]
        at = next(i for i, p in enumerate(problems) if p.endswith(_NOT_SET))
        rest = [p for p in problems if not p.endswith(_NOT_SET)]
        problems = [*rest[:at], f"{names} are required but not set", *rest[at:]]
    return "configuration error: " + "; ".join(problems)
