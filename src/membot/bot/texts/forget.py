"""The bot's words for /forget (bot/forgetting.py, bot/handlers/forget.py), per language:
every language fills every field, as in base.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ForgetTexts:
    USAGE: str
    TOO_SHORT: str  # {chars}: fewer letters or digits than that in the words
    HOW: str  # the /memory screen's "Forget…" button
    NONE: str
    FOUND: str  # {messages}, {facts}
    MORE: str  # {more}: found but not listed
    YOU: str
    BOT: str
    BUTTON_YES: str
    BUTTON_NO: str
    CONFIRM_HERE: str  # under the buttons sent privately when the group took no ephemeral
    DONE: str  # {messages}, {facts}
    IN_SUMMARY: str  # listed when the chat's summary says the words
    TASK: str  # before a listed task's time and text
    DONE_TASKS: str  # {tasks}: cancelled, under DONE
    DONE_SUMMARY: str  # under DONE when it did
    CANCELLED: str
    EXPIRED: str
    NOT_YOURS: str
    UNAVAILABLE: str


EN = ForgetTexts(
    USAGE=(
        "Send /forget and the words the messages to erase hold, e.g. /forget my old "
        "password. I show what I found before anything is erased."
    ),
    TOO_SHORT=(
        "Give me at least {chars} letters or digits to look for, e.g. /forget my old "
        "password: fewer would match nearly every message."
    ),
    HOW=(
        "To erase messages for good, send /forget and the words they hold, e.g. "
        "/forget my old address. I show them first, with a button to confirm."
    ),
    NONE="No message or fact of this chat holds those words.",
    FOUND=(
        "Found {messages} message(s) and {facts} fact(s) holding those words. Erase them for "
        "good, with the summaries made from them?"
    ),
    MORE="…and {more} more.",
    YOU="you",
    BOT="me",
    BUTTON_YES="Erase for good",
    BUTTON_NO="Keep",
    CONFIRM_HERE="Erase them for good?",
    DONE=(
        "Erased: {messages} message(s) and {facts} fact(s), with their files, the search "
        "index entries and the summaries made from them. Telegram's own copies of the "
        "messages stay in this chat until you delete them there."
    ),
    IN_SUMMARY=(
        "The chat's summary says them too: it will be made again from what is left, without them."
    ),
    TASK="Task (cancelled if you erase), next",
    DONE_TASKS="Cancelled {tasks} scheduled task(s) that held them (/tasks lists what is left).",
    DONE_SUMMARY=("The summary that said them is gone too; a new one is made from what is left."),
    CANCELLED="Nothing was erased.",
    EXPIRED="This request has expired: send /forget again.",
    NOT_YOURS="Only the one who asked can confirm this.",
    UNAVAILABLE="I cannot erase anything right now; please try again in a minute.",
)

RU = ForgetTexts(
    USAGE=(
        "Отправьте /forget и слова, которые есть в сообщениях, например /forget мой старый "
        "пароль. Прежде чем что-то стереть, я покажу, что нашёл."
    ),
    TOO_SHORT=(
        "Нужно хотя бы {chars} буквы или цифры, например /forget мой старый пароль: "
        "по меньшему подойдёт почти любое сообщение."
    ),
    HOW=(
        "Чтобы стереть сообщения навсегда, отправьте /forget и слова из них, например "
        "/forget мой старый адрес. Сначала я покажу их и попрошу подтвердить кнопкой."
    ),
    NONE="Ни в одном сообщении и факте этого чата нет этих слов.",
    FOUND=(
        "Нашёл сообщений: {messages}, фактов: {facts} с этими словами. Стереть их навсегда "
        "вместе со сводками, сделанными из них?"
    ),
    MORE="…и ещё {more}.",
    YOU="вы",
    BOT="я",
    BUTTON_YES="Стереть навсегда",
    BUTTON_NO="Оставить",
    CONFIRM_HERE="Стереть их навсегда?",
    DONE=(
        "Стёрто: сообщений — {messages}, фактов — {facts}, вместе с их файлами, записями "
        "поискового индекса и сводками, сделанными из них. Копии сообщений в самом Telegram "
        "останутся в чате, пока вы не удалите их там."
    ),
    IN_SUMMARY=(
        "Они есть и в сводке чата: она будет сделана заново из того, что останется, без них."
    ),
    TASK="Задача (будет отменена), в следующий раз",
    DONE_TASKS="Отменено задач с этими словами: {tasks} (оставшиеся — в /tasks).",
    DONE_SUMMARY="Сводка, в которой они были, тоже стёрта; новая делается из того, что осталось.",
    CANCELLED="Ничего не стёрто.",
    EXPIRED="Этот запрос устарел: отправьте /forget ещё раз.",
    NOT_YOURS="Подтвердить может только тот, кто попросил.",
    UNAVAILABLE="Сейчас я не могу ничего стереть; попробуйте через минуту.",
)

BY_LANGUAGE: dict[str, ForgetTexts] = {"en": EN, "ru": RU}


def get(language: str | None) -> ForgetTexts:
    """The /forget words in `language`; English when it is None or not spoken here."""
    return BY_LANGUAGE.get(language or "", EN)
