"""The turn plan: what one turn starts from, which round it answers, what it may write.

The agent settles it before the model is called, from the conversation's stored state and
what the front door asked for, and applies it when the turn is stored. A consultation starts
in one way only, `TurnPlan.consult`, whoever asks for it: a front door before the turn
(/consult, an API session with maxRounds: `TurnOptions.start`) or the model within it
(`start_consultation`, through the ConsultSwitch below). Nothing is stored before the turn is:
a turn that fails leaves the conversation as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from membot.core.consult import RoundPlan, clamp_rounds
from membot.memory.contract.state import ConversationState


@dataclass(frozen=True, slots=True)
class PlanMark:
    """What a plan changes in a turn, as it stood at one moment: `TurnPlan.undo` goes back
    to it."""

    start: ConversationState
    round: RoundPlan | None
    unsaved: bool


class TurnPlan:
    """`start` is the state the turn starts from: the stored one, or the settings a new API
    session was given, with the conversation's language once it is known. `round` is the
    consultation round the turn answers (None: plain chat). `keep` says whether the turn may
    store the state it leaves: not when `start` was read while the storage was down (then it
    is a stand-in, not the conversation's), unless a front door set the state itself.
    `unsaved`: `start` differs from what is stored (a language just detected, a new session's
    settings), so it is stored with the turn even in plain chat. `offer`: the model is offered
    `start_consultation` while the turn is in plain chat.

    The fields are read-only; the plan changes only as a turn may change it: it learns the
    conversation's language (`learn_language`), is given a time zone (`set_timezone`: the
    model's set_timezone tool), switches into a consultation (`consult`), or
    goes back to a `mark` (`undo`: a tool step the user stopped changes nothing)."""

    __slots__ = ("_keep", "_now", "_offer")

    def __init__(
        self,
        start: ConversationState,
        *,
        round: RoundPlan | None = None,
        keep: bool = True,
        unsaved: bool = False,
        offer: bool = False,
    ) -> None:
        self._now = PlanMark(start, round, unsaved)
        self._keep = keep
        self._offer = offer

    @property
    def start(self) -> ConversationState:
        return self._now.start

    @property
    def round(self) -> RoundPlan | None:
        return self._now.round

    @property
    def keep(self) -> bool:
        return self._keep

    @property
    def unsaved(self) -> bool:
        return self._now.unsaved

    @property
    def offer(self) -> bool:
        return self._offer

    def learn_language(self, language: str) -> None:
        """The conversation's language, just detected: the turn starts from it, and the
        state is stored with the turn."""
        self._now = replace(
            self._now, start=replace(self._now.start, language=language), unsaved=True
        )

    def set_timezone(self, zone: str) -> bool:
        """The chat's time zone, set within the turn: stored with the turn's state (a
        write of its own would be overwritten by the state the turn stores). False: the
        turn stores no state (`keep`), so it is this turn's only."""
        self._now = replace(self._now, start=replace(self._now.start, timezone=zone), unsaved=True)
        return self._keep

    def consult(self, request: str, rounds: int, *, seq: int = 0) -> RoundPlan:
        """Start a consultation of `rounds` on `request`: this turn answers its round 1.
        `seq`: the archive position the request will have (its user message), when known."""
        round_ = RoundPlan.start(request, rounds, seq=seq)
        self._now = replace(self._now, round=round_)
        return round_

    def mark(self) -> PlanMark:
        """The plan as it stands, for `undo`."""
        return self._now

    def undo(self, mark: PlanMark) -> None:
        """Back to the plan as it stood at `mark`: what changed since is forgotten."""
        self._now = mark

    @property
    def offers_consultation(self) -> bool:
        return self._offer and self.round is None

    @property
    def completes(self) -> bool:
        """Whether the turn's answer completes the dialog (held to the requested format)."""
        return self.round is None or self.round.final

    def state_after(self) -> ConversationState | None:
        """The state stored with the turn; None: the stored one stays as it is."""
        if not self._keep:
            return None
        if self.round is not None:
            return self.round.state_after(self.start)
        return self.start if self.unsaved else None


@dataclass(slots=True)
class ConsultSwitch:
    """`start_consultation`'s handle on one turn's plan: the consultation starts in the plan,
    and is stored with the turn, never before."""

    plan: TurnPlan
    default_rounds: int
    max_rounds: int

    def start(self, request: str, rounds: int | None) -> str:
        """Start it; the text is the tool's result for the model."""
        if self.plan.round is not None:
            return "A consultation was already started in this turn."
        n = clamp_rounds(rounds, self.default_rounds, self.max_rounds)
        if self.plan.consult(request, n).final:
            return "Consultation started with 1 round: give your complete answer now."
        return (
            f"Consultation started: {n} rounds. Now ask the user your clarifying questions "
            "for round 1; do not give the final answer yet."
        )
