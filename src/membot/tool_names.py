"""The built-in tools' names, in the order they are offered.

TOOLS (a setting) may name only these; config checks it against this list without importing
the tools themselves, which live above it (membot.core.tools.builtin registers exactly these,
a unit test holds the two together)."""

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "search_history",
    "remember",
    "forget",
    "current_datetime",
    "calculate",
    "start_consultation",
)

# Offered in plain chat only: a consultation in progress cannot start another.
CONSULTATION_TOOL = "start_consultation"
