"""A long, deterministic group conversation of several people, for archive search by speaker.

In groups people ask the bot "what did Anna say about the trip": the answer is a message *by*
Anna, among many that only *mention* her ("Anna, did you book it?") and many of the others'
about the same things. Some facts are also the second half of a question and its answer
("Boris: when does the museum open?" / "Carla: at nine"): the words of the question find
the question, and only its neighbour holds the fact.

Each probe names the message that answers it; recall@k is the share of probes whose message
is among the first k hits, or their neighbourhood (the message before or after a hit that
the search returns with it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from membot.memory import Message

PEOPLE = {"Anna": 11, "Boris": 12, "Carla": 13, "Dmitri": 14, "Elena": 15}

# (speaker, what they said, the question asked later, in other words and by speaker)
BY_SPEAKER: tuple[tuple[str, str, str], ...] = (
    (
        "Anna",
        "For the trip I'd rather take the night train to Vienna.",
        "what did Anna say about the trip",
    ),
    ("Boris", "I can bring my big tent and two sleeping bags.", "Boris tents"),
    ("Carla", "My budget for the whole trip is 600 euros at most.", "Carla trip budget"),
    ("Dmitri", "I'm vegetarian, so no barbecue ribs for me please.", "is Dmitri a vegetarian"),
    ("Elena", "I will drive, my car has seven seats.", "Elena car seats"),
    ("Anna", "My flight lands at 18:40 on Friday.", "Anna flight landing"),
    ("Boris", "I lost my keys at the cafe on Monday.", "where Boris lost the keys"),
    ("Carla", "The new office is on the fifth floor, room 512.", "Carla office room"),
    ("Dmitri", "My birthday party is on the 21st at the bowling alley.", "Dmitri birthday party"),
    ("Elena", "I switched to the night shift at the hospital.", "Elena works nights"),
    ("Anna", "Я записалась на курсы испанского по вторникам.", "что Anna говорила про курсы"),
    ("Boris", "Мой новый номер телефона заканчивается на 3310.", "номер телефона Boris"),
    ("Carla", "Я переезжаю в Тбилиси в марте.", "куда переезжает Carla"),
    ("Dmitri", "Машину я продал соседу за 4000.", "кому Dmitri продал машину"),
    ("Elena", "У меня аллергия на кошек, в гости с котом не приходите.", "аллергия Elena"),
)

# (asker, question, answerer, answer, the probe): the fact is in the answer.
PAIRS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "Boris",
        "Carla, what time does the museum open on Sunday?",
        "Carla",
        "At nine, and it's free before ten.",
        "museum opening time",
    ),
    (
        "Anna",
        "Dmitri, which hotel did you book for us?",
        "Dmitri",
        "The Blue Lagoon, near the station.",
        "which hotel was booked",
    ),
    (
        "Elena",
        "Anna, what's the wifi password at your place?",
        "Anna",
        "sunflower-42, all lowercase.",
        "wifi password at Anna's",
    ),
    (
        "Carla",
        "Елена, во сколько встречаемся у вокзала?",
        "Elena",
        "В 7:15 у главного входа.",
        "время встречи у вокзала",
    ),
    (
        "Dmitri",
        "Boris, how much do I owe you for the tickets?",
        "Boris",
        "35 each, so 70 for both.",
        "how much for the tickets",
    ),
)

_TOPICS_EN = (
    "trip",
    "train",
    "budget",
    "car",
    "hotel",
    "tickets",
    "museum",
    "party",
    "office",
    "keys",
    "flight",
    "tent",
    "dinner",
    "weekend",
    "station",
    "phone",
)
_TOPICS_RU = (
    "поездка",
    "поезд",
    "машина",
    "гостиница",
    "билеты",
    "музей",
    "вечеринка",
    "офис",
    "ключи",
    "телефон",
    "курсы",
    "вокзал",
)
_CHATTER_EN = (
    "{who}, did you sort out the {a} yet?",
    "{who}, what do you think about the {a}?",
    "I talked to {who} about the {a} and the {b}.",
    "Has anyone heard from {who} about the {a}?",
    "The {a} again? We discussed the {b} with {who} already.",
    "Let's decide on the {a} tonight, {who} too.",
    "I'm not sure the {a} works for me, maybe the {b}.",
    "Who is in charge of the {a}? Maybe {who}?",
)
_CHATTER_RU = (
    "{who_ru}, ты уже решила насчёт {a}?",
    "Кто-нибудь говорил с {who_ru} про {a}?",
    "Давайте обсудим {a} и {b} вечером.",
    "Мне кажется, {a} важнее, чем {b}.",
)
_RU_NAMES = {
    "Anna": "Анна",
    "Boris": "Борис",
    "Carla": "Карла",
    "Dmitri": "Дмитрий",
    "Elena": "Елена",
}
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# The topics of each speaker's planted facts, as the chatter names them.
_BANNED: dict[str, frozenset[str]] = {
    name: frozenset(
        t
        for speaker, text, query in BY_SPEAKER
        if speaker == name
        for t in (*_TOPICS_EN, *_TOPICS_RU)
        if t in f"{text} {query}".lower()
    )
    for name in PEOPLE
}


@dataclass(frozen=True, slots=True)
class Probe:
    query: str
    seq: int  # the message that holds the answer
    kind: str  # "speaker" or "pair"


@dataclass(frozen=True, slots=True)
class GroupConversation:
    messages: list[Message]
    probes: list[Probe]


def _said(name: str, text: str, ts: datetime) -> Message:
    return Message(role="user", content=text, ts=ts, user_id=PEOPLE[name], name=name)


def generate_group(n_messages: int = 3000, seed: int = 20261125) -> GroupConversation:
    """People chatting (mostly about the same few things, naming each other), the bot
    answering now and then, and the facts above planted across the whole archive."""
    rng = random.Random(seed)
    plants: list[list[tuple[str, str]]] = [[(s, t)] for s, t, _ in BY_SPEAKER]
    plants += [[(a, q), (b, ans)] for a, q, b, ans, _ in PAIRS]
    queries = [p for _, _, p in BY_SPEAKER] + [p for *_, p in PAIRS]
    kinds = ["speaker"] * len(BY_SPEAKER) + ["pair"] * len(PAIRS)
    order = list(range(len(plants)))
    rng.shuffle(order)
    slots = sorted(rng.sample(range(10, n_messages - 10), len(plants)))
    pending = list(zip(slots, order, strict=True))
    messages: list[Message] = []
    probes: list[Probe] = []
    ts = START
    names = list(PEOPLE)
    while len(messages) < n_messages:
        ts += timedelta(seconds=rng.randint(5, 900))
        if pending and len(messages) >= pending[0][0]:
            index = pending.pop(0)[1]
            for name, text in plants[index]:
                messages.append(_said(name, text, ts))
                ts += timedelta(seconds=rng.randint(5, 120))
            # A speaker's fact is the first planted message; a pair's is the answer.
            probes.append(Probe(queries[index], len(messages), kinds[index]))
            continue
        if rng.random() < 0.15:
            messages.append(
                Message(role="assistant", content="Sure, here is what I found about that.", ts=ts)
            )
            continue
        speaker = rng.choice(names)
        banned = _BANNED.get(speaker, frozenset())
        # Others name the people the probes ask about, and talk about the same things.
        who = rng.choice([n for n in names if n != speaker])
        # Never about their own facts' topics: "what did Anna say about the trip" asks for
        # the one thing Anna said about it, among what the others said to her about it.
        if rng.random() < 0.3:
            a, b = rng.sample([t for t in _TOPICS_RU if t not in banned], 2)
            text = rng.choice(_CHATTER_RU).format(who_ru=_RU_NAMES[who], a=a, b=b)
        else:
            a, b = rng.sample([t for t in _TOPICS_EN if t not in banned], 2)
            text = rng.choice(_CHATTER_EN).format(who=who, a=a, b=b)
        messages.append(_said(speaker, text, ts))
    return GroupConversation(messages=messages[:n_messages], probes=probes)
