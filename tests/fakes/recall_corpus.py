"""A hard recall set for archive search: a long group chat over fourteen months, and
questions whose answers are known turns, in five kinds (tests/fakes/recall_items.py):

- neighbour:  the question's words are in the turn before the answer (`cue`), none in it;
- multi:      the answer needs two or three turns said on different days;
- person:     said in the first person ("I started painting again"), asked in the third;
- paraphrase: asked in other words than the answer's;
- dated:      asks about a period (`since`/`until`, ISO dates, until exclusive) of a topic the
              same person talked about in four other periods too;
- split:      the question's words are split across two adjacent turns (`cue`, then the
              answer), and the answer's share of them is also in a decoy by the same person.

Everything else is generated filler among the same people (and the bot now and then) on the
same topics, naming each other, so that a question's words match many turns and only
ranking finds the answer. The same seed gives the same chat; seqs are positions + 1, as a
fresh chat's repository assigns them.

`measure` runs the questions through a HistorySearch and reports recall per kind:
`hits@k` is the share of needed turns among the k best hits of `search`; `budget` the share
among the lines of `recall`'s excerpts at the default budget (what search_history shows the
model: the hits with their neighbours); `*_all` the share of questions with every needed
turn found (differs from the turn share for `multi` only); `budget_turns` how many turns
were shown. With another budget of N tokens the keys end in `:N` (`budget:500`).
`uv run python -m tests.fakes.recall_corpus` prints the figures of the search as it is.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from membot.ids import ConversationId
from membot.memory import Message
from membot.memory.contract.repository import ChatRepository
from membot.search import Excerpt, HistorySearch, SearchHit
from membot.search.text import STOPWORDS, stems, words
from tests.fakes.recall_items import (
    MULTI,
    NEIGHBOUR,
    PARAPHRASE,
    PEOPLE,
    PERIODS,
    PERSON,
    SAGAS,
    SPLIT,
)

KINDS = ("neighbour", "multi", "person", "paraphrase", "dated", "split")
SEED = 20261125
FIRST_DAY = date(2025, 1, 8)
LAST_DAY = date(2026, 2, 26)  # no session after it: the chat ends before March 2026
# Days between sessions: mostly a few, sometimes two or three weeks.
_GAPS = (1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 7, 9, 12, 16, 21)

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# What the group chats about besides the planted facts: the questions' topics among others.
_TOPICS = (
    "concert", "interview", "vet", "wedding", "marathon", "flat", "doctor", "pottery",
    "manager", "camping", "book", "present", "dentist", "apartment", "car", "landlord",
    "exam", "ramen", "party", "flight", "loan", "chess", "garden", "bakery", "painting",
    "brother", "language", "shelter", "hospital", "band", "trip", "gym", "dog", "football",
    "garage", "cousin", "bike", "work", "baby", "plane", "kitchen", "rent", "holiday", "job",
    "boiler", "phone", "school", "cat", "beach", "guitar", "dinner", "course", "allotment",
    "festival", "kids", "race", "birthday", "neighbours", "deposit", "diet", "novel",
    "bathroom", "choir", "van", "running club", "roof", "startup", "train", "weekend",
    "coffee", "budget", "tickets", "station", "meeting", "photos", "time",
)  # fmt: skip
_CHAT = (
    "Anyone up for {a} on {day}?",
    "{who}, did you see the thing about the {a}?",
    "I keep meaning to sort out the {a}.",
    "Random question: does anyone know a good {a} place?",
    "lol {who} and the {a} again",
    "We should do the {a} and the {b} sometime.",
    "Not sure about the {a}, maybe next week.",
    "The {a} thing reminded me of the {b}.",
    "Can't talk now, stuck with the {a}.",
    "Who's got the {a} stuff from last time?",
    "That {a} story was so funny 😂",
    "Did anyone book the {a} yet?",
    "Running late, {a} chaos.",
    "Sending pics of the {a} later.",
    "{who}, remind me about the {a} tomorrow.",
    "Honestly the {a} can wait, the {b} can't.",
    "Is the {a} on {day} still happening?",
    "I think {who} said something about the {a}, no idea what.",
    "New {a}, same old problems.",
    "What time is the {a} again?",
    "Going back to the {a} topic, I still think {who} is right.",
    "Let's start planning the {a} after the {b}.",
)
_ASK = (
    "{who}, are you coming to the {a} on {day}?",
    "{who}, how did the {a} go?",
    "{who}, what do you think about the {a}?",
    "{who}, did you say the {a} was on {day}?",
)
_REPLY = (
    "Can't, the {b} is eating my week. Next time!",
    "No idea yet, will tell you later.",
    "Probably, unless the {b} gets in the way.",
    "Fine I guess, nothing special.",
    "Ask me again on {day} 😅",
)
_SHORT = (
    "haha", "true", "same", "ok 👍", "see you then", "nice!", "omg", "fair enough",
    "agreed", "lol", "good night all", "morning!", "😂😂", "wait what", "yes please",
)  # fmt: skip
_BOT_ASK = (
    "@membot give me three ideas for the {a}",
    "@membot what should I pack for the {a}?",
    "@membot how do I explain the {a} to my boss?",
    "@membot write a funny toast about the {a} and the {b}",
)
_BOT_REPLY = (
    "Here are a few ideas for the {a}: keep it simple, plan early, and ask {who} to help.",
    "For the {a}, I'd start with the basics and leave the {b} for later.",
    "Sure! A short take on the {a}: most people overthink it, so start small.",
)
_RU_NAMES = {"Mel": "Мел", "Caroline": "Каролина", "Anna": "Анна", "Boris": "Борис"}
_RU_TOPICS = ("поездка", "концерт", "ремонт", "дача", "машина", "собака", "работа", "отпуск")
_RU_CHAT = (
    "{who_ru}, ты уже решила насчёт {a}?",
    "Давайте обсудим {a} вечером.",
    "Мне кажется, {a} подождёт.",
    "Кто-нибудь знает, что там с {a}?",
)
# Other people naming the person a question is about, with its topic: the question's words
# without its answer.
_NEAR_MISS = (
    "{name}, any news about the {topic}?",
    "Did {name} say anything about the {topic}?",
    "{name} was going on about the {topic} again.",
    "Ask {name} about the {topic}, not me.",
    "I'll talk to {name} about the {topic} later.",
    "Wasn't {name} going to sort out the {topic}?",
)


# Short turns with one of a split question's words (the answer's share of them).
_DECOYS = ("{word}, again 🙄", "Not sure about the {word} yet.", "So, the {word}: long story.")


@dataclass(frozen=True, slots=True)
class Question:
    """A question and the seqs of the turns that answer it (all of them are needed)."""

    kind: str
    text: str
    needed: tuple[int, ...]
    asker: str
    about: str  # the person the answer is by
    cue: int | None = None  # neighbour: the turn before the answer that holds the words
    since: str | None = None  # dated: the period, ISO dates, `until` exclusive
    until: str | None = None


@dataclass(frozen=True, slots=True)
class Session:
    day: date
    first: int  # seqs
    last: int


@dataclass(frozen=True, slots=True)
class RecallSet:
    messages: list[Message]
    questions: list[Question]
    sessions: list[Session]


# A turn as planned: (speaker, or None for the bot; text; marks: what it answers or cues).
_Turn = tuple[str | None, str, tuple[tuple[str, int, int], ...]]


@dataclass(slots=True)
class _Plan:
    days: list[date]
    blocks: list[list[list[_Turn]]] = field(default_factory=list)  # per session
    # Planted after the first five kinds, with a random generator of their own and between
    # pieces of filler, so that adding them left the rest of the chat as it was measured.
    extra: list[list[list[_Turn]]] = field(default_factory=list)

    def put(self, session: int, *turns: _Turn) -> None:
        self.blocks[session].append(list(turns))


def generate(seed: int = SEED) -> RecallSet:
    rng = random.Random(seed)
    days = [FIRST_DAY]
    while (nxt := days[-1] + timedelta(days=rng.choice(_GAPS))) <= LAST_DAY:
        days.append(nxt)
    plan = _Plan(days, [[] for _ in days], [[] for _ in days])
    specs: list[dict[str, Any]] = []
    _plant(rng, plan, specs)
    later = random.Random(seed + 1)
    _plant_split(later, plan, specs)
    messages, marks, sessions = _compose(rng, plan, later)
    questions = [
        Question(
            kind=s["kind"],
            text=s["text"],
            needed=tuple(marks[("need", i, n)] for n in range(s["parts"])),
            asker=rng.choice([p for p in PEOPLE if p != s["about"]]),
            about=s["about"],
            cue=marks.get(("cue", i, 0)),
            since=s.get("since"),
            until=s.get("until"),
        )
        for i, s in enumerate(specs)
    ]
    return RecallSet(messages, questions, sessions)


def _plant(rng: random.Random, plan: _Plan, specs: list[dict[str, Any]]) -> None:
    n = len(plan.days)
    for cue_by, cue, by, answer, text, topic in NEIGHBOUR:
        i = len(specs)
        specs.append({"kind": "neighbour", "text": text, "about": by, "parts": 1, "topic": topic})
        plan.put(rng.randrange(n), (cue_by, cue, (("cue", i, 0),)), (by, answer, (("need", i, 0),)))
    for kind, items in (("person", PERSON), ("paraphrase", PARAPHRASE)):
        for by, answer, text, topic in items:
            i = len(specs)
            specs.append({"kind": kind, "text": text, "about": by, "parts": 1, "topic": topic})
            plan.put(rng.randrange(n), (by, answer, (("need", i, 0),)))
    for text, topic, parts in MULTI:
        i = len(specs)
        by = parts[0][0]
        specs.append(
            {"kind": "multi", "text": text, "about": by, "parts": len(parts), "topic": topic}
        )
        # Each part in a session of its own (so on a day of its own), in the order said.
        for part, session in enumerate(sorted(rng.sample(range(n), len(parts)))):
            plan.put(session, (parts[part][0], parts[part][1], (("need", i, part),)))
    for by, topic, said, asked in SAGAS:
        first = len(specs)
        for period, text in asked:
            since, until, _ = PERIODS[period]
            specs.append(
                {"kind": "dated", "text": text, "about": by, "parts": 1, "topic": topic}
                | {"since": since, "until": until, "period": period}
            )
        for period, statement in enumerate(said):
            since, until, _ = PERIODS[period]
            inside = [
                s
                for s, day in enumerate(plan.days)
                if date.fromisoformat(since) <= day < date.fromisoformat(until)
            ]
            marks = tuple(("need", first + q, 0) for q, (p, _) in enumerate(asked) if p == period)
            plan.put(rng.choice(inside), (by, statement, marks))
    for spec in specs:
        others = [p for p in PEOPLE if p != spec["about"]]
        for template in rng.sample(_NEAR_MISS, 2):
            line = template.format(name=spec["about"], topic=spec["topic"])
            plan.put(rng.randrange(len(plan.days)), (rng.choice(others), line, ()))


def _plant_split(rng: random.Random, plan: _Plan, specs: list[dict[str, Any]]) -> None:
    n = len(plan.days)
    for first_by, first, by, answer, text, topic, decoy in SPLIT:
        i = len(specs)
        specs.append({"kind": "split", "text": text, "about": by, "parts": 1, "topic": topic})
        session, *elsewhere = rng.sample(range(n), 2 + len(_DECOYS))
        turns = ((first_by, first, (("cue", i, 0),)), (by, answer, (("need", i, 0),)))
        plan.extra[session].append(list(turns))
        # The answer's share of the question's words, said by the same person on other days
        # in short turns (which BM25 ranks above a longer answer): only the first turn's
        # words, in the answer's neighbour column, tell the answer apart.
        shared = [w for w in words(text) if w not in STOPWORDS and stems(w)[0] in stems(answer)]
        lines = [decoy] + [t.format(word=rng.choice(shared)) for t in _DECOYS]
        for day, line in zip(elsewhere, lines, strict=True):
            plan.extra[day].append([(by, line, ())])
        others = [p for p in PEOPLE if p != by]
        for template in rng.sample(_NEAR_MISS, 2):
            line = template.format(name=by, topic=topic)
            plan.extra[rng.randrange(n)].append([(rng.choice(others), line, ())])


def _filler(rng: random.Random) -> list[_Turn]:
    """One piece of everyday chat: a line, a question and its reply, or a word with the bot."""
    people = list(PEOPLE)
    speaker = rng.choice(people)
    who = rng.choice([p for p in people if p != speaker])
    a, b = rng.sample(_TOPICS, 2)
    day = rng.choice(_WEEKDAYS)
    roll = rng.random()
    if roll < 0.12:
        return [(speaker, rng.choice(_SHORT), ())]
    if roll < 0.20:
        line = rng.choice(_RU_CHAT).format(who_ru=_RU_NAMES[who], a=rng.choice(_RU_TOPICS))
        return [(speaker, line, ())]
    if roll < 0.40:
        ask = rng.choice(_ASK).format(who=who, a=a, day=day)
        return [(speaker, ask, ()), (who, rng.choice(_REPLY).format(b=b, day=day), ())]
    if roll < 0.50:
        ask = rng.choice(_BOT_ASK).format(a=a, b=b)
        return [(speaker, ask, ()), (None, rng.choice(_BOT_REPLY).format(a=a, b=b, who=who), ())]
    return [(speaker, rng.choice(_CHAT).format(who=who, a=a, b=b, day=day), ())]


def _compose(
    rng: random.Random, plan: _Plan, later: random.Random
) -> tuple[list[Message], dict[tuple[str, int, int], int], list[Session]]:
    messages: list[Message] = []
    marks: dict[tuple[str, int, int], int] = {}
    sessions: list[Session] = []
    for day, blocks, extra in zip(plan.days, plan.blocks, plan.extra, strict=True):
        rng.shuffle(blocks)
        planted = sum(len(block) for block in blocks)
        fillers = [_filler(rng) for _ in range(max(rng.randint(24, 34), len(blocks)))]
        # Distinct gaps: at least one piece of filler between two planted blocks, so that a
        # planted turn's neighbours are the ones it was written with, or filler.
        after = set(rng.sample(range(1, len(fillers) + 1), len(blocks)))
        pieces: list[list[_Turn]] = []
        blocks_left = iter(blocks)
        for position, piece in enumerate(fillers, 1):
            pieces.append(piece)
            if position in after:
                pieces.append(next(blocks_left))
        assert planted == sum(len(p) for p in pieces) - sum(len(f) for f in fillers)
        # The later kinds go between two pieces of filler each (`later` picks where), their
        # times drawn from `later` too: `rng` draws what it drew before they were added.
        kept = {id(p) for p in fillers}
        late: set[int] = set()
        for block in extra:
            free = [
                i
                for i in range(1, len(pieces))
                if id(pieces[i - 1]) in kept and id(pieces[i]) in kept
            ]
            at = later.choice(free)
            pieces.insert(at, block)
            late.add(id(block))
        ts = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(
            hours=rng.randint(7, 15), minutes=rng.randint(0, 59)
        )
        first = len(messages) + 1
        for piece in pieces:
            draw = later if id(piece) in late else rng
            for speaker, text, tags in piece:
                ts += timedelta(seconds=draw.randint(15, 300))
                for tag in tags:
                    marks[tag] = len(messages) + 1
                messages.append(_message(speaker, text, ts))
        sessions.append(Session(day, first, len(messages)))
    return messages, marks, sessions


def _message(speaker: str | None, text: str, ts: datetime) -> Message:
    if speaker is None:
        return Message(role="assistant", content=text, ts=ts)
    return Message(role="user", content=text, ts=ts, user_id=PEOPLE[speaker], name=speaker)


async def build(repository: ChatRepository, cid: ConversationId, recall_set: RecallSet) -> None:
    """Append the chat to a fresh conversation of any repository, in big batches."""
    step = 1000
    for start in range(0, len(recall_set.messages), step):
        await repository.append(cid, recall_set.messages[start : start + step])
    meta = await repository.get_meta(cid)
    if meta.messages_total != len(recall_set.messages):
        raise ValueError(f"{cid} was not empty: the questions' seqs would be wrong")


def period(question: Question) -> dict[str, datetime]:
    """A dated question's period as HistorySearch.search's keywords (aware datetimes)."""
    if question.since is None or question.until is None:
        return {}
    return {
        "since": datetime.fromisoformat(question.since).replace(tzinfo=UTC),
        "until": datetime.fromisoformat(question.until).replace(tzinfo=UTC),
    }


def hit_seqs(hits: Iterable[SearchHit]) -> set[int]:
    """The turns among the hits: a document's piece is its message's; a summary's or a
    fact's own seq is not a turn of the chat."""
    return {hit.seq for hit in hits if hit.kind in ("message", "document")}


def excerpt_seqs(excerpts: Iterable[Excerpt]) -> set[int]:
    """The seqs of every chat turn the excerpts show (hits and their neighbours)."""
    return {line.entry.seq for excerpt in excerpts for line in excerpt.lines}


async def measure(
    search: HistorySearch,
    cid: ConversationId,
    questions: Sequence[Question],
    ks: Sequence[int] = (5, 10),
    *,
    periods: bool = True,
    budgets: Sequence[int | None] = (None,),
) -> dict[str, dict[str, float]]:
    """Recall per kind and over all ("all"): see the module's docstring.

    `periods`: pass dated questions' since/until to the search (False: ask them without).
    `budgets`: measure `recall`'s excerpts at each (tokens; None: the default; () for none).
    Each kind also gets `questions` and `turns` (needed turns)."""
    tally: dict[str, dict[str, float]] = {}

    def add(kinds: Sequence[str], key: str, value: float) -> None:
        for kind in kinds:
            tally[kind][key] = tally[kind].get(key, 0) + value

    for question in questions:
        kinds = (question.kind, "all")
        keywords = period(question) if periods else {}
        for kind in kinds:
            tally.setdefault(kind, {"questions": 0, "turns": 0})
        add(kinds, "questions", 1)
        add(kinds, "turns", len(question.needed))
        for tokens in budgets:
            size: dict[str, Any] = {} if tokens is None else {"budget_tokens": tokens}
            size |= keywords
            shown = excerpt_seqs(await search.recall(cid, question.text, **size))
            have = sum(seq in shown for seq in question.needed)
            tail = "" if tokens is None else f":{tokens}"
            add(kinds, "budget" + tail, have)
            add(kinds, "budget_all" + tail, have == len(question.needed))
            add(kinds, "budget_turns" + tail, len(shown))
        for k in ks:
            found = hit_seqs(await search.search(cid, question.text, k, **keywords))
            have = sum(seq in found for seq in question.needed)
            add(kinds, f"hits@{k}", have)
            add(kinds, f"hits_all@{k}", have == len(question.needed))
    result: dict[str, dict[str, float]] = {}
    for kind in (*[k for k in KINDS if k in tally], "all"):
        row = tally[kind]
        out = {"questions": row["questions"], "turns": row["turns"]}
        for key, value in row.items():
            if key.startswith("budget_turns"):  # turns shown per question
                out[key] = round(value / row["questions"], 1)
            elif "_all" in key:  # questions with every needed turn
                out[key] = round(value / row["questions"], 3)
            elif key not in out:  # needed turns found
                out[key] = round(value / row["turns"], 3)
        result[kind] = out
    return result


def table(result: dict[str, dict[str, float]], ks: Sequence[int] = (5, 10)) -> str:
    """The measurement as a text table, one row per kind."""
    columns = [f"hits@{k}" for k in ks] + [f"hits_all@{k}" for k in ks]
    columns += [c for c in result["all"] if c.startswith("budget")]
    header = f"{'kind':<11}{'q':>4}{'turns':>6}" + "".join(f"{c:>13}" for c in columns)
    lines = [header]
    for kind, row in result.items():
        cells = "".join(f"{row[c]:>13.3f}" for c in columns)
        lines.append(f"{kind:<11}{int(row['questions']):>4}{int(row['turns']):>6}{cells}")
    return "\n".join(lines)


async def _main() -> None:
    import tempfile
    from pathlib import Path

    from membot.memory import FileRepository

    recall_set = generate()
    cid = ConversationId.telegram(-100_777)
    with tempfile.TemporaryDirectory(prefix="membot-recall-") as tmp:
        repo = FileRepository(Path(tmp))
        try:
            await build(repo, cid, recall_set)
            result = await measure(HistorySearch(repo, Path(tmp)), cid, recall_set.questions)
        finally:
            await repo.close()
    print(f"{len(recall_set.messages)} turns, {len(recall_set.questions)} questions")
    print(table(result))


if __name__ == "__main__":
    # `uv run python -m tests.fakes.recall_corpus`: today's figures, for tuning search against.
    import asyncio

    asyncio.run(_main())
