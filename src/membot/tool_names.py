"""The built-in tools' names, in the order they are offered.

TOOLS (a setting) may name only these; config checks it against this list without importing
the tools themselves, which live above it (membot.core.tools.builtin registers exactly these,
a unit test holds the two together)."""

# Reminders and scheduled tasks (membot.core.tools.tasks): offered in Telegram chats only,
# with TASKS on; an HTTP API session has no way to be reached later.
TASK_TOOLS: tuple[str, ...] = ("schedule_task", "list_tasks", "cancel_task", "set_timezone")

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "search_history",
    "remember",
    "forget",
    "forget_messages",
    "current_datetime",
    "calculate",
    "start_consultation",
    *TASK_TOOLS,
)

# Offered in plain chat only: a consultation in progress cannot start another.
CONSULTATION_TOOL = "start_consultation"
