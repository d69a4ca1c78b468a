"""The turn plan: what a turn stores with itself, and the one way into a consultation."""

from __future__ import annotations

import pytest

from membot.core.plan import ConsultSwitch, TurnPlan
from membot.memory import ConversationState

REQUEST = "Plan a trip to Rome"


def test_a_plain_turn_stores_no_state_unless_its_start_is_unsaved() -> None:
    plan = TurnPlan(ConversationState())
    assert plan.round is None and plan.completes
    assert plan.state_after() is None
    plan.learn_language("ru")  # a language just detected: kept with the turn
    assert plan.state_after() == ConversationState(language="ru")


def test_consult_starts_round_one_from_the_start_state() -> None:
    plan = TurnPlan(ConversationState(language="en"))
    round_ = plan.consult(REQUEST, 3)
    assert (round_.round, round_.max_rounds, round_.final) == (1, 3, False)
    assert plan.round is round_ and not plan.completes
    assert plan.state_after() == ConversationState(
        mode="consultation", round=1, max_rounds=3, initial_request=REQUEST, language="en"
    )


def test_a_plan_that_may_not_keep_writes_nothing() -> None:
    # A stand-in state read while the storage was down: neither a language nor a round.
    plan = TurnPlan(ConversationState(), keep=False, unsaved=True)
    plan.consult(REQUEST, 2)
    assert plan.state_after() is None


def test_the_switch_starts_the_plans_consultation_once() -> None:
    plan = TurnPlan(ConversationState(), offer=True)
    assert plan.offers_consultation
    switch = ConsultSwitch(plan, default_rounds=3, max_rounds=6)
    assert switch.start(REQUEST, 50).startswith("Consultation started: 6 rounds.")
    assert plan.round is not None and plan.round.max_rounds == 6
    assert not plan.offers_consultation  # no consultation within a consultation
    assert switch.start("another", None) == "A consultation was already started in this turn."
    assert plan.round.initial_request == REQUEST


def test_the_switch_with_one_round_asks_for_the_answer_now() -> None:
    plan = TurnPlan(ConversationState(), offer=True)
    text = ConsultSwitch(plan, default_rounds=3, max_rounds=6).start(REQUEST, 0)
    assert text == "Consultation started with 1 round: give your complete answer now."
    assert plan.completes
    assert plan.state_after() == ConversationState(
        round=1, max_rounds=1, initial_request=REQUEST, complete=True
    )


def test_undo_goes_back_to_the_plan_as_it_was_at_the_mark() -> None:
    # A tool step the user stopped: the consultation its call started is not kept.
    plan = TurnPlan(ConversationState(language="en"), offer=True)
    before = plan.mark()
    plan.consult(REQUEST, 3)
    assert plan.state_after() is not None and not plan.offers_consultation
    plan.undo(before)
    assert plan.round is None and plan.offers_consultation and plan.completes
    assert plan.state_after() is None


def test_the_plan_changes_only_through_its_methods() -> None:
    plan = TurnPlan(ConversationState())
    for name in ("start", "round", "keep", "unsaved", "offer"):
        with pytest.raises(AttributeError):
            setattr(plan, name, None)
    assert plan.start == ConversationState() and plan.keep and not plan.unsaved
