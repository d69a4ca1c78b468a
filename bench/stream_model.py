"""The fake model of the `stream` section, shared by its API half (bench/stream.py) and its
Telegram half (bench/stream_telegram.py): a 1,500-character answer over 6 s, the first piece
after 0.5 s, the rest in 10-character pieces spread evenly; a plain call gets the whole answer
after the same 6 s."""

from __future__ import annotations

from typing import Any

from tests.fakes import Pacing, Reply

CASE = "1,500 characters over 6 s, first after 0.5 s"
ANSWER_CHARS = 1500
PIECE = 10
FIRST = 0.5
TOTAL = 6.0

_WORDS = "the plan for your week: three sessions of squats, presses and rows, then rest; "


def answer() -> str:
    return (_WORDS * (ANSWER_CHARS // len(_WORDS) + 1))[:ANSWER_CHARS]


def reply(body: dict[str, Any]) -> Reply:
    if body.get("stream"):
        pieces = ANSWER_CHARS // PIECE
        pacing = Pacing(chars=PIECE, first_delay=FIRST, delay=(TOTAL - FIRST) / (pieces - 1))
        return Reply(content=answer(), pacing=pacing)
    return Reply(content=answer(), delay=TOTAL)
