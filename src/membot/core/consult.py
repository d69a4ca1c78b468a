"""Consultations: a short dialog in which the assistant asks what it needs, then answers once.

A consultation has at most `max_rounds` rounds. Round 1 answers the user's request with
clarifying questions; each later user message is one round; the last round (or the one the
user ends early with /finish) answers the initial request in full. Every round's system
prompt says "Round k of N"; the final one adds the instruction below, with the initial
request quoted verbatim (seed 000).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from membot.memory.state import ConversationState

ROUND_NOTE = (
    "This conversation is a consultation: Round {round} of {max_rounds}. Ask the user the "
    "clarifying questions you need to give a complete answer to their initial request, "
    "briefly and a few at a time; do not give the final answer yet."
)
FINAL_NOTE = (
    "IMPORTANT: This is the final round of the dialog (Round {round} of {max_rounds}).\n"
    'The user\'s initial request was: "{initial_request}"\n\n'
    "Your task:\n"
    "1. Gather all the information obtained in the earlier rounds of this dialog.\n"
    "2. Analyse all of the user's answers to your questions.\n"
    "3. Give a full, thorough and structured answer to the user's initial request.\n"
    "4. Ask no new questions: this is the final answer.\n\n"
    "The answer must be as complete and useful as possible, using everything gathered."
)


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """The round a turn answers."""

    round: int
    max_rounds: int
    initial_request: str
    final: bool

    @classmethod
    def start(cls, request: str, max_rounds: int) -> RoundPlan:
        return cls(1, max_rounds, request, final=max_rounds <= 1)

    @classmethod
    def next_for(cls, state: ConversationState, *, finish: bool = False) -> RoundPlan | None:
        """The next round of the state's consultation; None outside one."""
        if not state.consulting:
            return None
        k = state.round + 1
        final = finish or k >= state.max_rounds
        return cls(k, state.max_rounds, state.initial_request, final)

    def system_note(self) -> str:
        template = FINAL_NOTE if self.final else ROUND_NOTE
        return template.format(
            round=self.round, max_rounds=self.max_rounds, initial_request=self.initial_request
        )

    def state_after(self, before: ConversationState) -> ConversationState:
        """The state once this round is answered: back to chat after the final one."""
        return replace(
            before,
            mode="chat" if self.final else "consultation",
            round=self.round,
            max_rounds=self.max_rounds,
            initial_request=self.initial_request,
            complete=self.final,
        )


def clamp_rounds(rounds: int | None, default: int, maximum: int) -> int:
    """A requested number of rounds made valid: the default when absent, else 1..maximum."""
    if rounds is None:
        return default
    return max(1, min(int(rounds), maximum))
