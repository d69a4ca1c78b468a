"""Consultations: a short dialog in which the assistant asks what it needs, then answers once.

A consultation has at most `max_rounds` rounds. Round 1 answers the user's request with
clarifying questions; each later user message is one round; the last round (or the one the
user ends early with /finish) answers the initial request in full. Every round's system
prompt says "Round k of N"; the final one adds the instruction below, with the initial
request quoted verbatim (so the answer is to what was asked, not to the last round).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from membot.ids import ConversationId
from membot.memory.contract.repository import ChatRepository
from membot.memory.contract.state import ConversationState

log = logging.getLogger(__name__)

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
    """The round a turn answers. `initial_seq`: where the initial request is stored (the
    archive position of its user message; 0: in the state itself)."""

    round: int
    max_rounds: int
    initial_request: str
    final: bool
    initial_seq: int = 0

    @classmethod
    def start(cls, request: str, max_rounds: int, *, seq: int = 0) -> RoundPlan:
        return cls(1, max_rounds, request, final=max_rounds <= 1, initial_seq=seq)

    @classmethod
    def next_for(
        cls, state: ConversationState, *, finish: bool = False, request: str | None = None
    ) -> RoundPlan | None:
        """The next round of the state's consultation; None outside one. `request`: the
        initial request read from the archive (`initial_request_of`) when the state refers
        to it."""
        if not state.consulting:
            return None
        k = state.round + 1
        final = finish or k >= state.max_rounds
        text = state.initial_request if request is None else request
        return cls(k, state.max_rounds, text, final, state.initial_seq)

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
            initial_request="" if self.initial_seq else self.initial_request,
            initial_seq=self.initial_seq,
            complete=self.final,
        )


async def initial_request_of(
    repository: ChatRepository, cid: ConversationId, state: ConversationState
) -> str | None:
    """The initial request of the state's consultation when it is kept in the archive (its
    user message, `initial_seq`); None when the state holds it itself."""
    if not state.consulting or not state.initial_seq:
        return None
    messages = repository.iter_messages(cid, state.initial_seq - 1)
    try:
        async for message in messages:
            if message.seq == state.initial_seq:
                return message.content
            break
    finally:
        await messages.aclose()
    log.warning("%s: the consultation's initial request is missing from the archive", cid)
    return ""


def clamp_rounds(rounds: int | None, default: int, maximum: int) -> int:
    """A requested number of rounds made valid: the default when absent, else 1..maximum."""
    if rounds is None:
        return default
    return max(1, min(int(rounds), maximum))
