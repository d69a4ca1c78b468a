"""What a sink can do, told by its class (core/turn.py): as isinstance() against each
protocol tells it, asked again and again."""

from __future__ import annotations

from membot.core.turn import (
    DeliveringSink,
    HearingSink,
    PacedSink,
    StoppableSink,
    StreamingSink,
    is_delivering,
    is_hearing,
    is_paced,
    is_stoppable,
    is_streaming,
)
from tests import scripted


class Paced(scripted.StreamingSink):
    hold = 0.5

    def written(self) -> None:
        return None


def test_each_kind_is_what_isinstance_says_every_time() -> None:
    kinds = (
        (is_delivering, DeliveringSink),
        (is_streaming, StreamingSink),
        (is_paced, PacedSink),
        (is_hearing, HearingSink),
        (is_stoppable, StoppableSink),
    )
    sinks = (scripted.RecordingSink(), scripted.StreamingSink(), scripted.StoppableSink(), Paced())
    for _ in range(3):
        for sink in sinks:
            assert [told(sink) for told, _ in kinds] == [isinstance(sink, k) for _, k in kinds]
    assert is_streaming(scripted.StreamingSink()) and not is_streaming(scripted.RecordingSink())
    assert is_stoppable(scripted.StoppableSink()) and is_paced(Paced())
