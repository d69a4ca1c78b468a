"""Everything the bot says on its own (not the model's words), per language.

`texts.get(language).HELP`: the conversation's language is ConversationState.language (an
ISO 639-1 code, detected from the first message or set with /language); a language the bot
does not speak, and no language at all, get English.
"""

from __future__ import annotations

from membot.bot.texts.base import Texts
from membot.bot.texts.en import EN
from membot.bot.texts.ru import RU

__all__ = ["BY_LANGUAGE", "EN", "RU", "Texts", "get"]

# The languages the bot speaks. A new one is a module like ru.py and a line here.
BY_LANGUAGE: dict[str, Texts] = {"en": EN, "ru": RU}


def get(language: str | None) -> Texts:
    """The bot's words in `language`; English when it is None or not spoken here."""
    return BY_LANGUAGE.get(language or "", EN)


# The English words under the module-level names they had when the bot spoke only English:
# what needs no language (the command menu, the journal's list of commands) and tests read.
START = EN.START
HELP = EN.HELP
RESET_DONE = EN.RESET_DONE
NO_SUMMARY = EN.NO_SUMMARY
SUMMARY = EN.SUMMARY
NO_FACTS = EN.NO_FACTS
FACTS = EN.FACTS
TEXT_ONLY = EN.TEXT_ONLY
LLM_BUSY = EN.LLM_BUSY
LLM_FAILED = EN.LLM_FAILED
INTERNAL_ERROR = EN.INTERNAL_ERROR
ROUND = EN.ROUND
ROUND_FINAL = EN.ROUND_FINAL
STOPPED = EN.STOPPED
CONSULT_USAGE = EN.CONSULT_USAGE
CONSULT_BAD_ROUNDS = EN.CONSULT_BAD_ROUNDS
CONSULT_IN_PROGRESS = EN.CONSULT_IN_PROGRESS
NOT_CONSULTING = EN.NOT_CONSULTING
CONSULT_CANCELLED = EN.CONSULT_CANCELLED
CONSULT_GOES_ON = EN.CONSULT_GOES_ON
CONSULT_ENDED_BY_RESET = EN.CONSULT_ENDED_BY_RESET
FINISH_REQUEST = EN.FINISH_REQUEST
COMMANDS = EN.COMMANDS
