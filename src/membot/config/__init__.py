"""membot's settings: `load_settings()` reads them (settings.py, one flat model and one
`.env`), and modules take the group they need (groups.py)."""

from membot.config.groups import (
    ApiSettings,
    ConversationSettings,
    LimitSettings,
    LlmSettings,
    LoggingSettings,
    McpSettings,
    MediaSettings,
    QueueSettings,
    RedisSettings,
    StorageSettings,
    TaskSettings,
    TelegramSettings,
    ToolSettings,
)
from membot.config.load import (
    ConfigError,
    env_names,
    load_settings,
    load_subset,
    masked,
    setup_logging,
)
from membot.config.mcp import McpServerEntry
from membot.config.settings import DEFAULT_SYSTEM_PROMPT, Settings
from membot.config.types import RedisUrl, Storage

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ApiSettings",
    "ConfigError",
    "ConversationSettings",
    "LimitSettings",
    "LlmSettings",
    "LoggingSettings",
    "McpServerEntry",
    "McpSettings",
    "MediaSettings",
    "QueueSettings",
    "RedisSettings",
    "RedisUrl",
    "Settings",
    "Storage",
    "StorageSettings",
    "TaskSettings",
    "TelegramSettings",
    "ToolSettings",
    "env_names",
    "load_settings",
    "load_subset",
    "masked",
    "setup_logging",
]
