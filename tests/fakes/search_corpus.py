"""A long, deterministic bilingual conversation with planted facts, for archive search.

Shared by tests/unit/search/test_history_search.py and bench/search.py. Each planted fact
comes with the question a user (or the model, through `search_history`) would ask about it
much later, in other word forms than the fact was written in: "сестра живёт в Казани" is
looked up as "где живет сестру", "parked" as "parking". Recall@k is the share of facts whose
message is among the first k hits for its question.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from membot.memory import Message

# (the fact as the user wrote it, the question asked about it later)
FACTS: tuple[tuple[str, str], ...] = (
    ("My sister Olga lives in Kazan, she moved there in 2019.", "sisters living in Kazan"),
    ("I parked the car on level 3 of the airport garage.", "car parking level"),
    ("My dentist appointment is on Thursday at 4 pm with Dr. Patel.", "dentists appointments"),
    ("Our wedding anniversary is on June 14th, don't let me forget.", "anniversaries wedding"),
    ("My passport number ends with 4471.", "passports number"),
    ("I'm allergic to peanuts and shellfish.", "peanut allergy"),
    ("The spare key is hidden under the blue flowerpot.", "hiding spare keys"),
    ("My boss Martin wants the quarterly report by Friday.", "quarterly reports boss"),
    ("We adopted a cat named Biscuit last spring.", "adopting cats"),
    ("The gym membership costs 45 euros per month.", "gym memberships cost"),
    ("My favourite book is The Master and Margarita.", "favourite books"),
    ("I switched my phone plan to Vodafone unlimited.", "switching phone plans"),
    ("The plumber is coming to fix the leaking kitchen sink on Monday.", "plumbers fixing sinks"),
    ("My daughter's school play is on the 12th, she plays a tree.", "daughters school plays"),
    ("I booked flights to Lisbon for the 3rd of October.", "booking flight Lisbon"),
    ("Моя сестра живёт в Казани, переехала туда в 2019.", "где живет сестру"),
    ("Мой пароль от вайфая — синий кит.", "пароль вайфай"),
    ("Машину я оставил на третьем уровне парковки.", "парковка машины"),
    ("У меня аллергия на орехи и клубнику.", "аллергии орех клубника"),
    ("Запись к стоматологу в четверг в 16:00.", "записи стоматолог"),
    ("Ключ от дачи лежит под синим горшком.", "ключи дача"),
    ("Годовщина свадьбы у нас 14 июня.", "годовщину свадьбы"),
    ("Мой начальник Сергей просит отчёт к пятнице.", "начальника отчеты"),
    ("Мы взяли котёнка и назвали его Пирожок.", "котенок пирожок"),
    ("Абонемент в бассейн стоит 3000 рублей в месяц.", "абонементы бассейна"),
    ("Моя любимая книга — «Мастер и Маргарита».", "любимые книги"),
    ("Сантехник придёт в понедельник чинить кран на кухне.", "сантехника кран кухня"),
    ("Я забронировал билеты в Лиссабон на 3 октября.", "билет Лиссабона"),
    ("Номер паспорта заканчивается на 4471.", "номера паспортов"),
    ("Дочка играет дерево в школьном спектакле.", "спектакль дочки"),
)

# Filler shares everyday vocabulary with the questions (car, level, book, school, ключ,
# машина, отчёт...) so that a fact has to be found by ranking, not by a unique word.
_EN_TEMPLATES = (
    "Can you remind me what we said about the {a} yesterday?",
    "I think the {a} is more important than the {b} right now.",
    "Thanks, that {a} tip was really useful.",
    "Let's talk about the {a} and the {b} tomorrow morning.",
    "My friend told me a funny story about a {a}.",
    "How long does it usually take to fix a {a}?",
    "I read an article about the {a} market this week.",
    "Could you write a short poem about a {a} and a {b}?",
    "The weather is terrible today, I'll stay home with the {a}.",
    "What's the best way to clean a {a}?",
    "We need to buy a new {a} before the weekend.",
    "I was thinking about moving to another city with a better {a}.",
    "Is it normal that my {a} makes a strange noise at night?",
    "Please translate 'the {a} is next to the {b}' into Spanish.",
    "I spent the whole evening on the {a} again.",
)
_EN_REPLIES = (
    "Sure! Here is a short overview of the {a} and some practical tips.",
    "That sounds like a good plan. Start with the {a}, then think about the {b}.",
    "Usually a {a} needs regular care; check it once a month.",
    "I don't have the latest news on the {a}, but here is what I know.",
    "Good question. The {a} and the {b} are related in a few ways.",
    "Here's a summary: the {a} matters most, the {b} can wait.",
)
_EN_WORDS = (
    "car", "level", "book", "school", "report", "flight", "key", "phone", "plan", "garden",
    "kitchen", "project", "meeting", "weekend", "budget", "bicycle", "laptop", "coffee",
    "movie", "holiday", "dog", "apartment", "train", "job", "park", "doctor", "number",
    "game", "museum", "concert", "recipe", "printer", "window", "office", "party", "team",
)  # fmt: skip
_RU_TEMPLATES = (
    "Напомни, что мы вчера решили насчёт {a}?",
    "Кажется, {a} сейчас важнее, чем {b}.",
    "Спасибо, совет про {a} очень помог.",
    "Давай завтра обсудим {a} и {b}.",
    "Друг рассказал смешную историю про {a}.",
    "Сколько обычно стоит починить {a}?",
    "Прочитал статью про {a}, довольно интересно.",
    "Напиши короткое стихотворение про {a} и {b}.",
    "Погода ужасная, сижу дома, думаю про {a}.",
    "Как лучше всего почистить {a}?",
    "Нужно купить новый {a} до выходных.",
    "Думаю переехать в другой город, где лучше {a}.",
    "Переведи на английский: {a} рядом с {b}.",
    "Весь вечер опять занимался {a}.",
)
_RU_REPLIES = (
    "Конечно! Вот краткий обзор про {a} и несколько советов.",
    "Хороший план. Начни с {a}, потом подумай про {b}.",
    "Обычно за {a} нужно регулярно следить, раз в месяц достаточно.",
    "Свежих новостей про {a} у меня нет, но вот что я знаю.",
    "Хороший вопрос. {a} и {b} связаны несколькими способами.",
)
_RU_WORDS = (
    "машина", "уровень", "книга", "школа", "отчёт", "билет", "ключ", "телефон", "дача",
    "кухня", "проект", "встреча", "бюджет", "велосипед", "ноутбук", "кофе", "фильм",
    "отпуск", "собака", "квартира", "поезд", "работа", "парк", "врач", "номер", "игра",
    "музей", "концерт", "рецепт", "принтер", "окно", "офис", "праздник", "команда",
)  # fmt: skip

# Near misses: everyday lines that share a word or two with a fact but do not state it, so
# a question has to rank its fact above them, not merely match it.
_DISTRACTORS = (
    "My sister called me this morning, we talked for an hour.",
    "The airport was crowded, the parking lot was full.",
    "I need to renew my passport next year.",
    "The report for the boss is almost done.",
    "Our cat knocked a flowerpot off the window again.",
    "The phone keeps losing the signal in the kitchen.",
    "I finished the book you recommended, what a plot!",
    "The school called about the trip on the 12th.",
    "Flights are so expensive this month.",
    "I finally went to the gym after a long break.",
    "Сестра звонила вчера, у них всё хорошо.",
    "Опять забыл пароль от почты, пришлось восстанавливать.",
    "На парковке у дома вечно нет мест.",
    "Отчёт почти готов, осталось проверить цифры.",
    "Ключи от машины опять куда-то пропали.",
    "В школе у дочки завтра собрание.",
    "Купил билеты в кино на вечер.",
    "Кран на даче тоже надо бы поменять.",
    "Стоматолог сказал, что всё в порядке.",
    "В бассейне сегодня было много народу.",
)

START = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Probe:
    """A question and the seq of the message that answers it (seqs start at 1)."""

    query: str
    seq: int


@dataclass(frozen=True, slots=True)
class Conversation:
    messages: list[Message]
    probes: list[Probe]


def generate_conversation(
    n_messages: int = 5000, seed: int = 20250301, facts: Sequence[tuple[str, str]] = FACTS
) -> Conversation:
    """`n_messages` alternating user/assistant messages with `facts` planted by the user.

    The same seed gives the same conversation. Seqs are positions + 1, as a fresh chat's
    repository assigns them.
    """
    if n_messages < 2 * len(facts):
        raise ValueError("too few messages to plant the facts in")
    rng = random.Random(seed)
    # Planted in user turns (even positions), spread over the whole archive.
    slots = sorted(rng.sample(range(0, n_messages, 2), len(facts)))
    planted = dict(zip(slots, facts, strict=True))
    messages: list[Message] = []
    probes: list[Probe] = []
    ts = START
    for position in range(n_messages):
        ts += timedelta(seconds=rng.randint(5, 600))
        if position in planted:
            text, query = planted[position]
            probes.append(Probe(query=query, seq=position + 1))
            messages.append(Message(role="user", content=text, ts=ts, user_id=7, name="Anna"))
            continue
        if position % 2 == 0 and rng.random() < 0.1:
            text = rng.choice(_DISTRACTORS)
            messages.append(Message(role="user", content=text, ts=ts, user_id=7, name="Anna"))
            continue
        russian = rng.random() < 0.5
        templates: tuple[str, ...]
        if position % 2 == 0:
            templates = _RU_TEMPLATES if russian else _EN_TEMPLATES
        else:
            templates = _RU_REPLIES if russian else _EN_REPLIES
        vocabulary = _RU_WORDS if russian else _EN_WORDS
        a, b = rng.sample(vocabulary, 2)
        text = rng.choice(templates).format(a=a, b=b)
        if position % 2 == 0:
            messages.append(Message(role="user", content=text, ts=ts, user_id=7, name="Anna"))
        else:
            messages.append(Message(role="assistant", content=text, ts=ts))
    return Conversation(messages=messages, probes=probes)


async def recall_at_k(
    search: Callable[[str, int], Awaitable[Sequence[int]]], probes: Sequence[Probe], k: int = 5
) -> tuple[float, list[Probe]]:
    """The share of probes whose message is in the first `k` results, and the misses.

    `search(query, k)` returns the seqs of the hits, best first.
    """
    misses = [p for p in probes if p.seq not in list(await search(p.query, k))[:k]]
    return 1 - len(misses) / len(probes), misses
