"""The fake model of the `stream` section, shared by its API half (bench/stream.py) and its
Telegram half (bench/stream_telegram.py): a 1,500-character answer over 6 s, the first piece
after 0.5 s, the rest spread evenly, in 150 chunks of 10 characters (a model that sends a few
tokens a chunk) or 375 of 4 (one that sends a token a chunk); a plain call gets the whole
answer after the same 6 s. A question that says "warm-up" is answered at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes import Pacing, Reply

ANSWER_CHARS = 1500
FIRST = 0.5
TOTAL = 6.0
WARM_UP = "warm-up"

_WORDS = "the plan for your week: three sessions of squats, presses and rows, then rest; "


@dataclass(frozen=True, slots=True)
class Case:
    piece: int  # characters a chunk

    @property
    def chunks(self) -> int:
        return ANSWER_CHARS // self.piece

    @property
    def name(self) -> str:
        return f"1,500 characters in {self.chunks} chunks over 6 s"


CASES = (Case(10), Case(4))


def answer() -> str:
    return (_WORDS * (ANSWER_CHARS // len(_WORDS) + 1))[:ANSWER_CHARS]


def responder(case: Case) -> Callable[[dict[str, Any]], Reply]:
    def reply(body: dict[str, Any]) -> Reply:
        if WARM_UP in str(body.get("messages", [])[-1:]):
            return Reply(content=answer(), pacing=Pacing(chars=case.piece))
        if body.get("stream"):
            delay = (TOTAL - FIRST) / (case.chunks - 1)
            return Reply(
                content=answer(), pacing=Pacing(chars=case.piece, first_delay=FIRST, delay=delay)
            )
        return Reply(content=answer(), delay=TOTAL)

    return reply
