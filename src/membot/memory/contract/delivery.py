"""Which stored answers reached their chat: the records every backend keeps for it.

A Telegram answer is stored before it is sent (core/agent.py), so a process killed between
the two (a kill -9 during a flood-wait, an OOM, a deploy) must find it again. The answer's
archive line carries its `Delivery` (where and how it is sent); the append that stores such
a line also leaves the conversation a `DeliveryMark` when it has none: "answers after
`after` may not have been delivered". Sending clears the mark (`mark_delivered`), so a
conversation with a mark is one with work left, and start-up lists those alone
(`undelivered`), never reading every archive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from membot.memory.contract.state import opt_int


@dataclass(frozen=True, slots=True)
class Delivery:
    """How a stored answer is sent, besides its text: the message it replies to (in groups),
    the forum topic, the quotation above it (what was heard in a voice message), the words
    after it (a stopped answer's label, a consultation round's) and the heading of its
    sources (the message's own `sources`), in the chat's language. An answer that cites an
    earlier message may reply to it (`reply_to`) quoting the cited part (`reply_quote`); the
    other messages it cites are shown under it as dated quotes, under `cited_head`, the bot's
    own answers named `cited_self` (the message's own `citations`, bot/citations.py)."""

    reply_to: int | None = None
    thread: int | None = None
    quote: str = ""
    suffix: str = ""
    sources_head: str = ""
    reply_quote: str = ""
    cited_head: str = ""
    cited_self: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.reply_to is not None:
            data["reply_to"] = self.reply_to
        if self.thread is not None:
            data["thread"] = self.thread
        if self.quote:
            data["quote"] = self.quote
        if self.suffix:
            data["suffix"] = self.suffix
        if self.sources_head:
            data["sources_head"] = self.sources_head
        for key in ("reply_quote", "cited_head", "cited_self"):
            if value := getattr(self, key):
                data[key] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Delivery:
        return cls(
            reply_to=opt_int(data.get("reply_to")),
            thread=opt_int(data.get("thread")),
            quote=str(data.get("quote", "")),
            suffix=str(data.get("suffix", "")),
            sources_head=str(data.get("sources_head", "")),
            reply_quote=str(data.get("reply_quote", "")),
            cited_head=str(data.get("cited_head", "")),
            cited_self=str(data.get("cited_self", "")),
        )


@dataclass(frozen=True, slots=True)
class DeliveryMark:
    """A conversation's answers with seq > `after` may not have reached their chat. Of the
    one at `seq` (when set), the first `parts` messages did; `sending`: the next one's request
    was out (Telegram may have it), so it counts as sent, never sent twice."""

    after: int
    seq: int = 0
    parts: int = 0
    sending: bool = False

    def sent(self, seq: int) -> int:
        """How many of the answer at `seq`'s messages are not to be sent again."""
        return self.parts + self.sending if seq == self.seq else 0

    def to_json(self) -> str:
        data: dict[str, Any] = {"after": self.after}
        if self.seq:
            data.update(seq=self.seq, parts=self.parts)
        if self.sending:
            data["sending"] = True
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeliveryMark:
        """ValueError when it is not a mark."""
        try:
            data = json.loads(raw)
            return cls(
                after=int(data["after"]),
                seq=int(data.get("seq", 0)),
                parts=int(data.get("parts", 0)),
                sending=data.get("sending") is True,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a delivery mark ({exc})") from None


def progress(
    mark: DeliveryMark | None, upto: int, parts: int | None, sending: bool, last: int
) -> DeliveryMark | None:
    """The mark once the answer at `upto` has had `parts` messages accepted (and, `sending`,
    the next one's request is out), or (`parts` None) is done: then None, nothing left, when
    it is the archive's `last` message. Without a mark every answer was delivered already:
    there is none to keep."""
    if mark is None:
        return None
    if parts is not None:
        after = min(mark.after, upto - 1)
        return DeliveryMark(after=after, seq=upto, parts=parts, sending=sending)
    if upto >= last:
        return None
    return DeliveryMark(after=max(mark.after, upto))
