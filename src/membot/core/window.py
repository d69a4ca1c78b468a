"""Where the prompt's window starts: at a summary boundary, so that between two summaries the
prompt only grows at its end and a provider's prefix cache can serve all of it but the new turn.

The summary covers the messages up to `summarized_upto`; the window is every message after it.
A summary is due once the window holds `size + every` messages; it then covers the oldest
`every` of them (a multiple of `every` after a backlog), so the window keeps at least `size`
(the last WINDOW_SIZE messages are always shown) and fewer than `size + every` messages. A
boundary is never placed inside a tool exchange: it moves back until the window's first
message is not a tool result, which lets a window hold a few messages more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from membot.memory.contract.models import Message

# Messages read beyond size + every for a window pushed back over a tool exchange.
TOOL_SLACK = 24


@dataclass(frozen=True, slots=True)
class WindowPolicy:
    """`size`: WINDOW_SIZE (0: a summary covers everything, no window kept out of it);
    `every`: SUMMARY_EVERY."""

    size: int
    every: int

    @property
    def read(self) -> int:
        """How many of the last messages a turn reads to find its window."""
        return self.size + self.every + TOOL_SLACK

    def due(self, messages_total: int, summarized_upto: int) -> bool:
        return messages_total - summarized_upto >= self.size + max(1, self.every)

    def boundary(
        self, upto: int, total: int, known: Iterable[Message], cap: int | None = None
    ) -> int:
        """The seq a summary made now covers through (`upto` when none is due). `known`: the
        messages after `upto` that were read (at least the one after the boundary)."""
        if self.size <= 0:
            end = total
        else:
            step = max(1, self.every)
            end = upto + max(0, (total - upto - self.size) // step) * step
        if cap is not None:
            end = min(end, upto + cap)
        by_seq = {m.seq: m for m in known}
        while end > upto and (first := by_seq.get(end + 1)) is not None and first.role == "tool":
            end -= 1
        return end

    def window(self, summarized_upto: int, history: Sequence[Message]) -> list[Message]:
        """The messages a turn shows: those after the summary. While a due summary is not
        made yet (it runs in the background, or failed), the window starts where that summary
        will end, so it stays bounded and unchanged until the summary lands."""
        after = [m for m in history if m.seq > summarized_upto]
        if not after or not self.due(after[-1].seq, summarized_upto):
            return after
        start = self.boundary(summarized_upto, after[-1].seq, after)
        return [m for m in after if m.seq > start]
