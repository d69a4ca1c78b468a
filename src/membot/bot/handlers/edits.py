"""Edited text messages: the user changed what they had written. The new text is a new turn
that tells the model it is an edit (the earlier text and its answer stay in the history),
through the same filters as any message (the allowlist, a group's addressing rules) and in
the chat's lane, in order with its other updates. An edited command is not run again, and an
edited caption (of a photo, a document) is not acted on: the file was understood already."""

from __future__ import annotations

from dataclasses import replace

from aiogram import Bot, F, Router
from aiogram.types import Message

from membot.bot.drafts import DraftPacing
from membot.bot.filters import AddressedToBot, Inline
from membot.bot.turns import run_turn, to_incoming
from membot.core.service import ConversationService

# What the model reads as the user's words (the archive keeps the same): the model's, not
# the user's, so in English whatever the chat's language, like the prompt's own notes.
EDIT_NOTE = "[The user edited an earlier message of theirs; its new text follows.]\n{text}"


def build_router() -> Router:
    router = Router(name="edits")
    router.edited_message.register(on_edit, Inline(F.text), AddressedToBot())
    return router


async def on_edit(
    message: Message, bot: Bot, service: ConversationService, streaming: DraftPacing | None
) -> None:
    if (message.text or "").startswith("/"):
        return
    said = await to_incoming(message, bot)
    incoming = replace(said, text=EDIT_NOTE.format(text=said.text))
    await run_turn(
        message,
        bot,
        service,
        incoming,
        lambda sink: service.say(incoming, sink),
        streaming=streaming,
    )
