"""Where a conversation stands (chat, or a consultation and its round; its language, model,
persona, time zone and whether it searches the web) and what an HTTP API session's first
request fixed. Stored with the turn that changes it (memory/contract/repository.py
`append`), in every backend alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


Mode = Literal["chat", "consultation"]

#: The longest system prompt of a conversation's own, in characters: a chat's /persona, an API
#: session's systemPrompt. It rides in every prompt of the conversation.
MAX_PERSONA = 4000


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What an HTTP API session's first request fixed for all its rounds."""

    model: str | None = None
    system_prompt: str | None = None
    # Where the system prompt is kept instead, once: the key of a conversation file (written
    # with the session's first turn). The state rides on every turn that changes it, and a
    # copy of the prompt on each of those lines would multiply it.
    system_prompt_file: str | None = None
    max_tokens: int | None = None
    output_format: Literal["text", "json"] = "text"
    output_schema: dict[str, Any] | None = None
    disable_search: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "model": self.model,
            "system_prompt": self.system_prompt,
            "max_tokens": self.max_tokens,
            "output_format": self.output_format,
            "output_schema": self.output_schema,
            "disable_search": self.disable_search,
        }
        if self.system_prompt_file is not None:
            data["system_prompt_file"] = self.system_prompt_file
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionConfig:
        output_format: Literal["text", "json"] = (
            "json" if data.get("output_format") == "json" else "text"
        )
        schema = data.get("output_schema")
        return cls(
            model=opt_str(data.get("model")),
            system_prompt=opt_str(data.get("system_prompt")),
            system_prompt_file=opt_str(data.get("system_prompt_file")),
            max_tokens=opt_int(data.get("max_tokens")),
            output_format=output_format,
            output_schema=dict(schema) if schema is not None else None,
            disable_search=bool(data.get("disable_search", False)),
        )


@dataclass(frozen=True, slots=True)
class ConversationState:
    """Where the conversation stands: plain chat, or a consultation of `max_rounds` rounds.

    `round` counts the answered rounds of the current (or, in chat mode, the last)
    consultation; `complete` says the last one ended with its final answer. `session` is set
    for HTTP API sessions only. `initial_seq`, when set, is the archive position of the user
    message that is the consultation's initial request: its text is read from there, and
    `initial_request` is empty (kept once, in the archive, however many rounds carry the
    state).
    """

    mode: Mode = "chat"
    round: int = 0
    max_rounds: int = 0
    initial_request: str = ""
    initial_seq: int = 0
    complete: bool = False
    session: SessionConfig | None = None
    # The conversation's language (an ISO 639-1 code), detected once from its first user
    # message or set with /language; None until then.
    language: str | None = None
    # The chat's own model (/model) and system prompt (/persona); None: the defaults.
    model: str | None = None
    persona: str | None = None
    # The chat's time zone (an IANA name: /timezone, or the model's set_timezone); None: the
    # TIMEZONE setting. Tasks are read and shown in it (membot.schedule).
    timezone: str | None = None
    # The chat turned web search off (/search off); the model may search (WEB_SEARCH) unless.
    search_off: bool = False
    # The archive's stretches (first seq, last seq) that /import brought in, each one append:
    # the window and the summary pass over them without reading them (core/imported.py).
    imported: tuple[tuple[int, int], ...] = ()
    # /import was sent without a file: the next document of this user (a Telegram user id)
    # before this time (ISO 8601) is the export.
    import_by: int | None = None
    import_until: str | None = None

    @property
    def consulting(self) -> bool:
        return self.mode == "consultation"

    @property
    def searches(self) -> bool:
        """Whether the conversation lets the model search the web: not turned off by the
        chat (/search off) nor by an API session's first request (disableSearch). WEB_SEARCH
        decides above it."""
        return not self.search_off and not (self.session and self.session.disable_search)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mode": self.mode,
            "round": self.round,
            "max_rounds": self.max_rounds,
            "initial_request": self.initial_request,
            "complete": self.complete,
        }
        if self.initial_seq:
            data["initial_seq"] = self.initial_seq
        if self.session is not None:
            data["session"] = self.session.to_dict()
        if self.language is not None:
            data["language"] = self.language
        if self.model is not None:
            data["model"] = self.model
        if self.persona is not None:
            data["persona"] = self.persona
        if self.timezone is not None:
            data["timezone"] = self.timezone
        if self.search_off:
            data["search_off"] = True
        if self.imported:
            data["imported"] = [list(span) for span in self.imported]
        if self.import_by is not None and self.import_until is not None:
            data["import_by"], data["import_until"] = self.import_by, self.import_until
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationState:
        mode = data.get("mode", "chat")
        if mode not in ("chat", "consultation"):
            raise ValueError("bad conversation mode")
        session = data.get("session")
        return cls(
            mode=mode,
            round=int(data.get("round", 0)),
            max_rounds=int(data.get("max_rounds", 0)),
            initial_request=str(data.get("initial_request", "")),
            initial_seq=int(data.get("initial_seq", 0)),
            complete=bool(data.get("complete", False)),
            session=SessionConfig.from_dict(session) if session is not None else None,
            language=opt_str(data.get("language")),
            model=opt_str(data.get("model")),
            persona=opt_str(data.get("persona")),
            timezone=opt_str(data.get("timezone")),
            search_off=data.get("search_off") is True,
            imported=tuple((int(a), int(b)) for a, b in data.get("imported") or ()),
            import_by=opt_int(data.get("import_by")),
            import_until=opt_str(data.get("import_until")),
        )
