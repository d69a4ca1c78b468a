"""The shape of the bot's own words: every language fills every field (a missing text is a
TypeError at import, not an English sentence in a Russian chat)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Texts:
    """Everything the bot says on its own (not the model's words), in one language.

    Fields with {placeholders} are str.format templates. The names are the module constants
    the bot had before it spoke more than English, hence upper case.
    """

    START: str
    HELP: str  # {rounds}, {max_rounds}
    RESET_DONE: str
    NO_SUMMARY: str  # {first}, {every}, {window}
    SUMMARY: str  # {summary}
    NO_FACTS: str
    FACTS: str  # {facts}
    # /memory's buttons, and what a press of Delete is answered (bot/handlers/memory.py).
    FACT_DELETE_BUTTON: str  # {n}: the fact's number in the list
    FACT_DELETED: str  # {fact}
    FACT_CHANGED: str  # the fact is no longer kept as it was listed
    FACTS_ALL_DELETED: str  # every fact a /memory message listed is deleted; others remain
    MEMORY_FORGET_BUTTON: str
    MEMORY_EXPORT_BUTTON: str
    # In a group, what concerns one member goes to them alone (bot/personal.py): the head of
    # the private copy when the group took no ephemeral message, and what the group is
    # shown instead when the member cannot be written to privately either.
    PERSONAL_FROM: str  # {chat}: the group's title
    PERSONAL_START: str  # {name}: the member's first name; {bot}: the bot's @username
    TEXT_ONLY: str
    LLM_BUSY: str
    LLM_FAILED: str
    INTERNAL_ERROR: str
    # A due task that did not run: too late (membot was down), over a budget, the model failed.
    TASK_DROPPED: str  # {text}, {now}: the time it was due, a date_time entity
    TASK_NOT_RUN: str  # {text}, {reason}

    # Consultations. The round labels are Markdown: they follow the model's answer.
    ROUND: str  # {round}, {max_rounds}
    ROUND_FINAL: str  # {round}, {max_rounds}
    STOPPED: str  # Markdown: after an answer the user stopped while it was written
    CONSULT_USAGE: str  # {rounds}
    CONSULT_BAD_ROUNDS: str  # {max_rounds}
    CONSULT_IN_PROGRESS: str  # {round}, {max_rounds}
    NOT_CONSULTING: str
    CONSULT_CANCELLED: str  # {round}, {max_rounds}
    CONSULT_GOES_ON: str  # {round}, {max_rounds}
    CONSULT_ENDED_BY_RESET: str
    # What the user "says" when they ask for the final answer with /finish (stored as such).
    FINISH_REQUEST: str

    # /language. {name} is the language's own name, {code} its ISO 639-1 code.
    LANGUAGE_IS: str  # {name}, {code}
    LANGUAGE_UNKNOWN: str
    LANGUAGE_SET: str  # {name}, {code}
    LANGUAGE_BAD_CODE: str  # {code}, {supported}

    # Limits (USER_DAILY_BUDGET, USER_MONTHLY_BUDGET, USER_RATE_LIMIT): one line each.
    OVER_DAILY: str  # {wait}
    OVER_MONTHLY: str  # {date}, {wait}
    OVER_RATE: str  # {limit}, {wait}
    IN_HOURS: str  # {hours}, {minutes}
    IN_MINUTES: str  # {minutes}
    IN_SECONDS: str  # {seconds}

    # /model and /persona.
    MODEL_IS: str  # {model}
    MODEL_ONLY: str  # {model}: no other model is offered (MODELS is empty)
    MODEL_SET: str  # {model}
    MODEL_UNKNOWN: str  # {model}, {choices}
    MODEL_GONE: str  # {choices}: a /model button from an older MODELS pressed
    MODEL_CHOSEN: str  # {model}: the chat's model among the /model buttons
    ADMINS_ONLY: str
    PERSONA_IS: str  # {persona}
    PERSONA_DEFAULT: str
    PERSONA_SET: str  # {length}
    PERSONA_RESET: str
    PERSONA_TOO_LONG: str  # {limit}, {length}

    # /usage. USAGE_LINE: {tokens}, {prompt}, {completion}, {cached} (the
    # percent of the prompt tokens a provider's cache served), {cost}.
    USAGE_YOURS: str  # {day}, {month}
    USAGE_CHAT: str  # {day}, {month}
    USAGE_LINE: str
    USAGE_NONE: str
    # {cost} in USAGE_LINE when the provider priced none of the calls, or only some.
    USAGE_COST_UNKNOWN: str
    USAGE_COST_PARTIAL: str  # {cost}, {unpriced}

    # /search: whether the model may search the web in this chat; SOURCES heads the links
    # under an answer that cites pages.
    SEARCH_ON: str
    SEARCH_OFF: str
    SEARCH_SET_ON: str
    SEARCH_SET_OFF: str
    SEARCH_BY_OPERATOR: str  # WEB_SEARCH=false: no chat can turn it on
    SEARCH_USAGE: str
    SOURCES: str
    # Above the dated quotes of the earlier messages an answer cites (core/citing.py) and
    # does not reply to; CITED_SELF names the bot as the author of one of its own answers.
    CITED: str
    CITED_SELF: str

    # /timezone. {zone}: an IANA name; {now}: the time there (shown as a date_time entity).
    TIMEZONE_IS: str  # {zone}, {now}
    TIMEZONE_SET: str  # {zone}, {now}
    TIMEZONE_BAD: str  # {zone}

    # /tasks: the chat's reminders and scheduled tasks, each with a Cancel button.
    NO_TASKS: str
    TASKS_HEADER: str  # {count}
    TASKS_MORE: str  # {more}: tasks past what one message shows
    TASK_ONCE: str
    REPEAT_HOURLY: str
    REPEAT_DAILY: str
    REPEAT_WEEKLY: str
    REPEAT_MONTHLY: str
    REPEAT_YEARLY: str
    REPEAT_RULE: str  # {rule}: an RRULE not said in a word
    TASK_SET_BY: str  # {name}: in groups
    TASK_CANCEL_BUTTON: str  # {n}: the task's number in the list
    TASK_CANCELLED: str  # {text}
    TASK_GONE: str
    TASK_NOT_YOURS: str

    # /tools: what the chat may use. {names}: comma-separated tool names.
    TOOLS_HEADER: str
    TOOLS_BUILTIN: str  # {names}
    TOOLS_TASKS: str  # {names}
    TOOLS_SERVER: str  # {server}, {names}: an MCP server's tools
    TOOLS_SERVER_DOWN: str  # {server}: an MCP server not reachable now
    TOOLS_ADMINS_ONLY: str  # after a server's line: offered only when an admin writes
    TOOLS_NONE: str
    TOOLS_WEB: str  # web search is on for the chat
    TOOLS_WEB_OFF: str  # turned off in this chat with /search off

    # Files users send (voice, photos, documents): what went wrong, one line each.
    FILE_TOO_BIG: str  # {limit_mb}
    FILE_UNSUPPORTED: str
    FILE_BROKEN: str
    PDF_NO_TEXT: str
    NO_SOUND: str
    AUDIO_TOO_LONG: str  # {minutes}
    NOT_IMAGE: str
    NOT_AUDIO: str
    NOT_TEXT: str
    PDF_TOO_COMPLEX: str
    IMAGE_TOO_LARGE: str  # {limit_mp}
    FILE_NAMED: str  # {name}, {reply}: one of these about a file that has a name
    NO_IMAGES: str  # {model}, {models}
    NO_IMAGES_AT_ALL: str  # {model}

    # /import: another assistant's export brought in.
    IMPORT_SEND: str  # {minutes}
    IMPORT_DONE: str  # {conversations}, {messages}, {first}, {last}
    IMPORT_NOTHING_NEW: str
    IMPORT_NOT_EXPORT: str
    IMPORT_BROKEN: str
    IMPORT_TOO_BIG: str  # {limit_mb}
    IMPORT_TOO_MANY: str  # {count}, {limit}
    IMPORT_ADMINS_ONLY: str

    # /export (and /memory's Export button): the chat's memory as ZIP documents.
    EXPORT_STARTED: str
    EXPORT_RUNNING: str
    EXPORT_ADMINS_ONLY: str
    EXPORT_CAPTION: str  # {date}, {messages}, {files}
    EXPORT_PART: str  # {part}, {parts}: after EXPORT_CAPTION when there are several
    EXPORT_FAILED: str

    # A user outside ALLOWED_USER_IDS (in their Telegram app's language).
    NOT_ALLOWED: str

    # Guest Mode (bot/guest.py): the one line a guest query gets instead of an answer, and
    # the label after an answer cut at GUEST_DEADLINE (Markdown).
    GUEST_NO_CHAT: str  # {bot}: the bot's @username
    GUEST_TOO_LATE: str
    GUEST_CUT: str

    # The command menu: (command, description).
    COMMANDS: tuple[tuple[str, str], ...]
