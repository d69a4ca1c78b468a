"""Forgetting for API callers: POST /api/sessions/{sessionId}/forget and POST
/v1/memory/forget. The same search and erasing /forget does in Telegram (core/forget.py),
without a pending request: `confirm: false` lists what the words match, `confirm: true`
erases it (looked for again) inside the conversation's turn (`service.ordered`), so it never
races a chat call. A conversation is reached only as its chat calls reach it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from membot.core.forget import Found
from membot.core.forget_words import MIN_CHARS, enough
from membot.core.service import ConversationService
from membot.errors import MembotError
from membot.ids import ConversationId

SHOWN = 10  # previews of each kind, as the Telegram list shows
SHOWN_TEXT = 120
MAX_WORDS = 500


class ForgetRequest(BaseModel):
    model_config = ConfigDict(title="ForgetRequest", extra="forbid")

    words: str = Field(
        max_length=MAX_WORDS,
        description="What to forget: every message holding all these words (or the phrase).",
    )
    confirm: bool = Field(
        default=False, description="false: list what matches; true: erase it for good."
    )
    user: str | None = Field(
        default=None, description="/v1 only: the `user` the chat calls send, if any."
    )


class ShownMessage(BaseModel):
    model_config = ConfigDict(title="ShownMessage")

    date: str = Field(description="When it was said (ISO 8601).")
    role: str = Field(description="user or assistant.")
    text: str = Field(description="Its first 120 characters.")


class ForgetResponse(BaseModel):
    model_config = ConfigDict(
        title="ForgetResponse", json_schema_serialization_defaults_required=True
    )

    confirmed: bool = Field(description="true: the counts are what was erased.")
    messages: int = Field(description="Messages holding the words (tool plumbing counted).")
    facts: int = Field(description="Remembered facts holding the words.")
    summary: bool = Field(description="The summary says the words (it is made again).")
    tasks: int = Field(description="Reminders and scheduled tasks holding the words.")
    shownMessages: list[ShownMessage] = Field(description="Up to 10, oldest first.")
    shownFacts: list[str] = Field(description="Up to 10.")
    shownTasks: list[str] = Field(description="Up to 10.")


class BadForget(MembotError):
    """The body is not a forget request, or its words name nothing to look for."""

    def __init__(self, message: str, *, words: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.words = words  # the words are what is wrong (WORDS_TOO_SHORT)


def parse_forget(body: bytes) -> ForgetRequest:
    try:
        parsed = ForgetRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in error["loc"]) or "body"
        raise BadForget(f"{where}: {error['msg']}") from None
    if not enough(parsed.words):
        raise BadForget(
            f"words must hold something to look for: at least {MIN_CHARS} letters or digits.",
            words=True,
        )
    return parsed


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_TEXT else flat[: SHOWN_TEXT - 1].rstrip() + "…"


def _listing(found: Found) -> dict[str, Any]:
    shown = [
        ShownMessage(
            date=m.ts.isoformat(),
            role="user" if m.role == "user" else "assistant",
            text=_cut(m.content or " ".join(a.name or a.kind for a in m.attachments)),
        ).model_dump(mode="json")
        for m in found.shown[:SHOWN]
    ]
    return {
        "messages": len(found.seqs),
        "facts": len(found.facts),
        "summary": found.summary,
        "tasks": len(found.tasks),
        "shownMessages": shown,
        "shownFacts": [_cut(f) for f in found.facts[:SHOWN]],
        "shownTasks": [_cut(t.text) for t in found.tasks[:SHOWN]],
    }


async def forget(
    service: ConversationService, cid: ConversationId, request: ForgetRequest
) -> dict[str, Any]:
    """What the words match (`confirmed: false`), or what was erased (`confirmed: true`)."""
    answer = ForgetResponse.model_validate(await _forget(service, cid, request))
    return answer.model_dump(mode="json")


async def _forget(
    service: ConversationService, cid: ConversationId, request: ForgetRequest
) -> dict[str, Any]:
    forgetting = service.agent.forgetting
    if not request.confirm:
        return {"confirmed": False, **_listing(await forgetting.find(cid, request.words))}
    async with service.ordered(cid):
        found = await forgetting.find(cid, request.words)
        asked = forgetting.ask(cid, request.words, found, None)
        done = await forgetting.confirm(asked)  # looks again itself, and drops the request
    return {
        "confirmed": True,
        **_listing(found),
        "messages": done.messages,
        "facts": done.facts,
        "summary": done.summary,
        "tasks": done.tasks,
    }
