"""/start, /help, /summary, /language, /tools, /reset: each answers in the chat's
language."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandObject, CommandStart
from aiogram.types import Message

from membot.bot import texts
from membot.bot.render import send_markdown, topic_of
from membot.config import ConversationSettings
from membot.core.language import LANGUAGES, SUPPORTED, own_name, parse_code
from membot.core.offers import Toolbox
from membot.core.service import ConversationService
from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.memory.contract.state import ConversationState


def build_router() -> Router:
    router = Router(name="commands")
    router.message.register(start, CommandStart())
    router.message.register(help_, Command("help"))
    router.message.register(reset, Command("reset"))
    router.message.register(language, Command("language"))
    router.message.register(summary, Command("summary"))
    router.message.register(tools, Command("tools"))
    return router


async def start(message: Message, state: ConversationState, words: texts.Texts) -> None:
    await message.answer(words.START + consultation_note(words, state))


async def help_(
    message: Message,
    state: ConversationState,
    words: texts.Texts,
    conversation: ConversationSettings,
) -> None:
    text = words.HELP.format(rounds=conversation.consult_rounds, max_rounds=conversation.max_rounds)
    await message.answer(text + consultation_note(words, state))


async def reset(message: Message, cid: ConversationId, service: ConversationService) -> None:
    before = await service.reset(cid)
    # In the language the chat had: the user reads it; the next message detects anew.
    words = texts.get(before.language)
    ended = " " + words.CONSULT_ENDED_BY_RESET if before.consulting else ""
    await message.answer(words.RESET_DONE + ended)


async def language(
    message: Message,
    command: CommandObject,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
) -> None:
    note = consultation_note(words, state)
    asked = (command.args or "").strip()
    if not asked:
        if state.language not in LANGUAGES:  # None, or "und": tried, not told
            await message.answer(words.LANGUAGE_UNKNOWN + note)
        else:
            current = state.language
            await message.answer(
                words.LANGUAGE_IS.format(name=own_name(current), code=current) + note
            )
        return
    code = parse_code(asked)
    if code is None:
        # One line: what was typed (cut short, on one line) and what would do.
        typed = " ".join(asked.split())[:16]
        supported = ", ".join(SUPPORTED)
        await message.answer(words.LANGUAGE_BAD_CODE.format(code=typed, supported=supported))
        return
    state = await service.set_language(cid, code)
    words = texts.get(code)  # said in the new language: the first thing in it
    await message.answer(
        words.LANGUAGE_SET.format(name=own_name(code), code=code) + consultation_note(words, state)
    )


async def summary(
    message: Message,
    bot: Bot,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    repository: ChatRepository,
    conversation: ConversationSettings,
) -> None:
    note = consultation_note(words, state)
    text = await repository.get_summary(cid)
    if not text:
        await message.answer(no_summary(words, conversation) + note)
        return
    await send_markdown(
        bot, message.chat.id, words.SUMMARY.format(summary=text) + note, thread_id=topic_of(message)
    )


async def tools(
    message: Message,
    cid: ConversationId,
    state: ConversationState,
    words: texts.Texts,
    service: ConversationService,
) -> None:
    """What the model may use in this chat now: for the user who asks (in a group, an
    admin is told which servers only admins' messages get)."""
    agent = service.agent
    user = message.from_user
    admin = agent.offers.admin(cid, user.id if user else None)
    tasks = agent.task_desk is not None and agent.task_desk.book(cid, None) is not None
    box = agent.offers.toolbox(tasks, admin, consulting=state.consulting)
    # Web search is the provider's tool, offered beside these (WEB_SEARCH, /search).
    web = (words.TOOLS_WEB if state.searches else words.TOOLS_WEB_OFF) if agent.web_search else ""
    await message.answer(tools_text(words, box, web) + consultation_note(words, state))


def tools_text(words: texts.Texts, box: Toolbox, web: str = "") -> str:
    lines = [web] if web else []
    if box.builtin:
        lines.append(words.TOOLS_BUILTIN.format(names=", ".join(box.builtin)))
    if box.tasks:
        lines.append(words.TOOLS_TASKS.format(names=", ".join(box.tasks)))
    for server in box.servers:
        if server.up:
            names = ", ".join(server.tools) or "-"
            line = words.TOOLS_SERVER.format(server=server.name, names=names)
        else:
            line = words.TOOLS_SERVER_DOWN.format(server=server.name)
        lines.append(line + ("" if server.public else words.TOOLS_ADMINS_ONLY))
    if not lines:
        return words.TOOLS_NONE
    return "\n".join([words.TOOLS_HEADER, *(f"• {line}" for line in lines)])


def consultation_note(words: texts.Texts, state: ConversationState) -> str:
    """For a command sent in the middle of a consultation: that it goes on, and where."""
    if not state.consulting:
        return ""
    return "\n\n" + words.CONSULT_GOES_ON.format(round=state.round + 1, max_rounds=state.max_rounds)


def no_summary(words: texts.Texts, conversation: ConversationSettings) -> str:
    """When the first summary comes: once the window and one summary's worth are there."""
    window, every = conversation.window_size, conversation.summary_every
    return words.NO_SUMMARY.format(first=window + every, every=every, window=window)
