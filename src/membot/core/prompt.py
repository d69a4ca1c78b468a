"""Turns a chat's memory and a new message into the messages the model sees: the one place
the prompt is put together (`PromptBuilder.build`), in a layout a provider's prefix cache can
serve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from membot.llm.cache import mark
from membot.llm.model import ChatMessage
from membot.memory.contract.models import Message, sources_text

SUMMARY_HEADER = (
    "Summary of the earlier conversation (older messages that are no longer shown; "
    "use it as background knowledge):"
)
WITH_HISTORY = (
    "There are earlier messages of this conversation: the most recent ones follow (and what "
    "is older is summarized above, if there is a summary). Use them as context and refer to "
    "them naturally when it helps, without repeating or re-answering them: reply to the last "
    "message only."
)
NO_HISTORY = (
    "There are no earlier messages in this conversation: treat the next message as the first one."
)
FACTS_HEADER = (
    "Facts the user asked you to remember (true until the user says otherwise; "
    "use them without announcing them; where the summary or an earlier message says "
    "otherwise, these are right):"
)
# Before the new message where the chat has a time (Telegram chats with tasks): its date,
# weekday, time and zone (schedule/show.py `now_line`). With the new message, not in the
# system prompt: the head must stay the same bytes from turn to turn for the prefix cache.
NOW_NOTE = "[Now: {now}]"
GROUP_NOTE = (
    "This is a group chat: each user message starts with the sender's name, like "
    '"Name: text". Address people by name when it helps.'
)


class PromptBuilder:
    """system prompt (+ tools, group note, facts) + labelled summary + how to use the history
    + window + new message."""

    def __init__(self, system_prompt: str) -> None:
        self.system_prompt = system_prompt.strip()

    def build(
        self,
        *,
        summary: str,
        history: Sequence[Message],
        new: Message,
        group: bool = False,
        facts: Sequence[str] = (),
        extra_system: Sequence[str] = (),
        system_prompt: str | None = None,
        images: Mapping[int, Sequence[dict[str, Any]]] | None = None,
        new_images: Sequence[dict[str, Any]] = (),
        documents: Sequence[str] = (),
        now: str | None = None,
    ) -> list[ChatMessage]:
        """The prompt: the system message (`build_system`), the window (`window`, `images`
        shown with its messages) and the new message (`new_images` and the `documents`' text
        beside it, and `now`, the chat's date and time, before it). A cache breakpoint
        (llm/cache.py) ends the head, which stays the same from one summary to the next, and
        the window, which only grows until then: what changes every turn, like the time,
        goes with the new message, never in the head."""
        window = self.window(history, group=group, images=images)
        if window:
            window[-1] = mark(window[-1])
        system = self.build_system(
            summary=summary,
            has_history=bool(window),
            group=group,
            facts=facts,
            extra_system=extra_system,
            system_prompt=system_prompt,
        )
        message = to_chat_message(new, group=group, images=new_images, documents=documents, now=now)
        return [mark(system), *window, message]

    def build_system(
        self,
        *,
        summary: str,
        has_history: bool,
        group: bool = False,
        facts: Sequence[str] = (),
        extra_system: Sequence[str] = (),
        system_prompt: str | None = None,
    ) -> ChatMessage:
        """The system message. `system_prompt` replaces SYSTEM_PROMPT (an API session's own
        prompt); the tools, facts, summary and history sections are added all the same."""
        base = system_prompt.strip() if system_prompt and system_prompt.strip() else None
        sections = [base or self.system_prompt, *extra_system]
        if group:
            sections.append(GROUP_NOTE)
        if facts:
            sections.append(FACTS_HEADER + "\n" + "\n".join(f"- {fact}" for fact in facts))
        if summary.strip():
            sections.append(f"{SUMMARY_HEADER}\n{summary.strip()}")
        sections.append(WITH_HISTORY if has_history or summary.strip() else NO_HISTORY)
        return {"role": "system", "content": "\n\n".join(sections)}

    @staticmethod
    def window(
        history: Sequence[Message],
        *,
        group: bool = False,
        images: Mapping[int, Sequence[dict[str, Any]]] | None = None,
    ) -> list[ChatMessage]:
        """The recent messages as the model sees them, without torn tool exchanges.
        `images`: the image parts shown with a message (by seq); others are text markers."""
        shown = images or {}
        # A forgotten message (/forget) is a tombstone: not shown, as if never said; a tool
        # exchange it leaves torn is dropped like any other.
        said = [m for m in history if not m.forgotten]
        return [
            to_chat_message(m, group=group, images=shown.get(m.seq, ()))
            for m in drop_unpaired(said)
        ]


# After an answer the user stopped while it was written (the stored text is what was written).
STOPPED_NOTE = "[stopped here by the user]"


def to_chat_message(
    message: Message,
    *,
    group: bool = False,
    images: Sequence[dict[str, Any]] = (),
    documents: Sequence[str] = (),
    now: str | None = None,
) -> ChatMessage:
    """One stored message in the OpenAI chat format. An answer's sources follow it as a
    numbered note (memory/contract/models.py `sources_text`). A user message's attachments are text
    markers before its words; `images` (image_url parts) and `documents` (their text, for
    the turn that brought them) are shown beside it; `now` (for the new message only: the
    time it is sent at) goes first (NOW_NOTE)."""
    if message.role == "user":
        content = message.content
        if message.attachments:
            markers = "\n".join(a.marker() for a in message.attachments)
            content = f"{markers}\n{content}" if content else markers
        if documents:
            content = "\n\n".join([content, *documents])
        if group and message.name:
            content = f"{message.name}: {content}"
        if now:
            content = NOW_NOTE.format(now=now) + "\n" + content
        if images:
            return {"role": "user", "content": [{"type": "text", "text": content}, *images]}
        return {"role": "user", "content": content}
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    content = message.content
    if message.stopped:  # the model should know it was cut short, not that it said this much
        content = f"{content} {STOPPED_NOTE}" if content else STOPPED_NOTE
    if message.sources:  # which links it gave: asked for one again, it can send it
        note = sources_text(message.sources)
        content = f"{content}\n\n{note}" if content else note
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if message.tool_calls:
        out["tool_calls"] = [dict(tc) for tc in message.tool_calls]
    return out


def drop_unpaired(history: Sequence[Message]) -> list[Message]:
    """The history without tool exchanges a provider would refuse.

    An assistant message with tool calls must be followed by a result for each call, and a
    tool result must follow its call. A window that starts inside an exchange leaves results
    without their call; a crash that tore a turn's write, or a corrupt line, can leave calls
    without results anywhere. Sent as they are, the provider would reject every later turn
    of the chat (nothing would be stored, so the window would never move past them). Such
    results are dropped, and such calls too, keeping the words the model said beside them.
    """
    out: list[Message] = []
    i = 0
    while i < len(history):
        message = history[i]
        i += 1
        if message.role == "tool":
            continue  # its call is not right before it
        if message.role != "assistant" or not message.tool_calls:
            out.append(message)
            continue
        results: dict[str, Message] = {}
        while i < len(history) and history[i].role == "tool":
            result = history[i]
            results.setdefault(result.tool_call_id or "", result)
            i += 1
        ids = [str(call.get("id", "")) for call in message.tool_calls]
        if all(call_id in results for call_id in ids):
            out.append(message)
            out.extend(results[call_id] for call_id in ids)
        elif message.content.strip():
            out.append(replace(message, tool_calls=()))
    return out
