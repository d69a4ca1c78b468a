"""Recall on the hard recall set (tests/fakes/recall_corpus.py), per kind of question.

Rows of the `search` section (bench/search.py calls rows()): for each kind and over all,
recall@5 and @10 of the hits, and of what search_history shows the model: the excerpts of
`recall` within the default budget, and within SMALL_BUDGET tokens (about as many turns as
10 hits with a neighbour each); the share of multi-turn questions with every turn shown, and
how many turns are shown. Dated questions are asked with their period, and once more
without it (the `no period` rows).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.fakes.recall_corpus import KINDS, build, generate, measure

from bench.core import Row
from membot.ids import ConversationId
from membot.memory import FileRepository
from membot.search import HistorySearch

CASE = "recall set"
CHAT_ID = ConversationId.telegram(-100_502)
KS = (5, 10)
SMALL_BUDGET = 500

MakeRow = Callable[[str, str, float, str, str], Row]


async def rows(root: Path, make_row: MakeRow) -> list[Row]:
    recall_set = generate()
    repo = FileRepository(root)
    out: list[Row] = []
    try:
        await build(repo, CHAT_ID, recall_set)
        search = HistorySearch(repo, root)
        budgets = (None, SMALL_BUDGET)
        result = await measure(search, CHAT_ID, recall_set.questions, KS, budgets=budgets)
        for kind in (*KINDS, "all"):
            for k in KS:
                metric = f"{kind} recall@{k} hits"
                out.append(make_row(CASE, metric, result[kind][f"hits@{k}"], "ratio", "-"))
        for tokens in budgets:
            tail, label = (
                ("", "default budget")
                if tokens is None
                else (f":{tokens}", f"budget {tokens} tokens")
            )
            for kind in (*KINDS, "all"):
                value = result[kind]["budget" + tail]
                out.append(make_row(CASE, f"{kind} recall, {label}", value, "ratio", "-"))
            every = result["multi"]["budget_all" + tail]
            out.append(make_row(CASE, f"multi all turns shown, {label}", every, "ratio", "-"))
            shown = result["all"]["budget_turns" + tail]
            out.append(make_row(CASE, f"turns shown per question, {label}", shown, "turns", "-"))
        dated = [q for q in recall_set.questions if q.kind == "dated"]
        plain = await measure(search, CHAT_ID, dated, KS, periods=False, budgets=())
        for k in KS:
            value = plain["dated"][f"hits@{k}"]
            out.append(make_row(CASE, f"dated recall@{k} hits, no period", value, "ratio", "-"))
        turns, questions = len(recall_set.messages), len(recall_set.questions)
        note = (
            f"recall set: {turns:,} turns of 4 people and the bot in {len(recall_set.sessions)} "
            f"sessions over 14 months, {questions} questions"
        )
        for row in out:
            row["note"] = note
    finally:
        await repo.close()
    return out
