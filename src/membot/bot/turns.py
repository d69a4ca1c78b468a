"""A turn through Telegram, as every handler that asks the model runs one: the message as
the core sees it (`to_incoming`), the turn with its sink, typing indicator or drafts
(`run_turn`), and a turn that brings files (`answer_files`: voice, audio, video notes,
photos, albums, documents).

The order for files: the allowlist (AccessMiddleware) and the budgets and rate limit
(`service.admit`, in run_turn) before anything is downloaded; then what the message itself
says is refused without a download (bot/files.py `check`); then the download and the turn.
A file that cannot be used is one short line in the chat's language, and nothing of the turn
is stored (the turn stores only once it has its answer)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from aiogram import Bot
from aiogram.types import Message
from aiogram.utils.chat_action import ChatActionSender

from membot.bot import texts
from membot.bot.drafts import DraftPacing, Drafts
from membot.bot.files import SentFile, check, download, sent_file
from membot.bot.filters import strip_mention
from membot.bot.forgetting import show_model_request
from membot.bot.personal import answer_personal
from membot.bot.refusals import over_limit, unusable_file
from membot.bot.render import topic_of
from membot.bot.sinks import DraftSink, TelegramSink
from membot.config.groups import MediaSettings
from membot.core.service import ConversationService
from membot.core.turn import Incoming, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMError, LLMRateLimited
from membot.media.errors import BrokenFile, MediaError, NotThatKind
from membot.usage import OverLimit

log = logging.getLogger(__name__)

Turn = Callable[[TelegramSink], Awaitable[TurnResult | None]]


async def to_incoming(message: Message, bot: Bot, text: str | None = None) -> Incoming:
    """The message as the core sees it; `text` replaces the message's own (a command's
    argument)."""
    group = message.chat.type != "private"
    if text is None:
        text = message.text or ""
        if group:
            text = strip_mention(text, (await bot.me()).username)
    user = message.from_user
    return Incoming(
        conversation=ConversationId.telegram(message.chat.id),
        text=text,
        user_id=user.id if user else None,
        name=user.full_name if user else None,
        message_id=message.message_id,
        group=group,
        thread=topic_of(message),  # a task set in a forum topic fires there
    )


async def run_turn(
    message: Message,
    bot: Bot,
    service: ConversationService,
    incoming: Incoming,
    turn: Turn,
    *,
    streaming: DraftPacing | None = None,
) -> TurnResult | None:
    """Run a turn with the typing indicator on; a model failure becomes a short apology, in
    the conversation's language (English if the failed turn was the one to detect it: a
    failed turn stores nothing). First the user's budgets and rate limit: a user over one
    gets one line saying which and when it resets, and nothing is sent or stored.
    `streaming` (STREAMING): the drafts' pacing, or None. With it, in a private chat the
    answer is shown as drafts while it is written (DraftSink), the typing indicator on until
    the first; groups and forum topics get one message."""
    try:
        await service.admit(incoming)
    except OverLimit as refused:
        words = await _words(service, incoming.conversation)
        # In a group, to the member alone: it is about their budget (bot/personal.py).
        await answer_personal(bot, message, words, over_limit(words, refused, service.quota))
        return None
    try:
        private = message.chat.type == "private" and topic_of(message) is None
        if streaming is not None and private:
            async with Drafts(bot, message.chat.id, streaming) as drafts:
                # Stop on the draft reaches the turn through the runner (intake/runner.py).
                with service.stops.register(message.chat.id, drafts.draft_id) as stop:
                    sink = DraftSink(bot, message, service.repository, drafts, stop)
                    result = await turn(sink)
        else:
            async with ChatActionSender.typing(
                bot=bot, chat_id=message.chat.id, message_thread_id=topic_of(message)
            ):
                result = await turn(TelegramSink(bot, message, service.repository))
    except LLMError as exc:
        log.error("chat %s: no answer: %s: %s", message.chat.id, type(exc).__name__, exc)
        words = await _words(service, incoming.conversation)
        await message.answer(
            words.LLM_BUSY if isinstance(exc, LLMRateLimited) else words.LLM_FAILED
        )
        return None
    # The model asked to forget (forget_messages): the confirmation follows its answer.
    await show_model_request(bot, message, service, incoming.conversation)
    return result


async def answer_files(
    message: Message,
    bot: Bot,
    service: ConversationService,
    media: MediaSettings,
    album: Sequence[Message] = (),
    *,
    streaming: DraftPacing | None = None,
) -> None:
    """One turn for `message`'s file, or an album's (`album`: every part's message, in
    order, the first being `message`). `streaming` as for text (run_turn): in a private chat
    the answer grows in a draft, headed by the transcript once a voice is heard."""
    parts = list(album) or [message]
    username = (await bot.me()).username if message.chat.type != "private" else None
    sent = [
        s
        for m in parts
        if (s := sent_file(m, strip_mention(m.caption or "", username))) is not None
    ]
    incoming = await to_incoming(message, bot, text="")

    async def turn(sink: TelegramSink) -> TurnResult:
        for position, file in enumerate(sent, 1):
            with _about(position, file):
                check(file, max_audio_seconds=media.max_audio_seconds)
        uploads = []
        for position, file in enumerate(sent, 1):
            with _about(position, file):
                uploads.append(await download(bot, file))
        return await service.say(replace(incoming, uploads=tuple(uploads)), sink)

    try:
        await run_turn(message, bot, service, incoming, turn, streaming=streaming)
    except MediaError as refused:
        log.info("chat %s: %s not used: %s", message.chat.id, _kinds(sent), type(refused).__name__)
        which = sent[refused.position - 1] if refused.position else None
        if isinstance(refused, NotThatKind) and which is not None and which.kind == "photo":
            # Telegram makes every photo a JPEG: one that is no image was damaged on the way.
            refused = BrokenFile("image").about(refused.position, refused.file_name)
        words = await _words(service, incoming.conversation)
        await message.answer(unusable_file(words, refused))


async def _words(service: ConversationService, cid: ConversationId) -> texts.Texts:
    """The chat's words for a turn that ends without an answer: read only then (a turn that
    answers never needs them; ChatContext gives them to handlers that always do)."""
    return texts.get((await service.state(cid)).language)


@contextmanager
def _about(position: int, file: SentFile) -> Iterator[None]:
    """A MediaError raised inside says which of the message's files it is about."""
    try:
        yield
    except MediaError as exc:
        exc.about(position, file.name)
        raise


def _kinds(sent: Sequence[SentFile]) -> str:
    return ",".join(file.kind for file in sent) or "nothing"
