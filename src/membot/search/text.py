"""Turning text into search terms: the same normalization for indexed messages and queries.

SQLite's FTS5 has no Russian stemmer and Python's sqlite3 cannot register a tokenizer, so
we stem in Python and hand FTS5 text that is already space-separated stems (and prefixes).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

# snowballstemmer ships no type information; every use goes through the typed _stem(). With
# PyStemmer installed (a dependency) it hands out PyStemmer's C stemmers: ~150x faster.
import snowballstemmer  # type: ignore[import-untyped]

from membot.search.schema import (
    NEIGHBOUR_COLUMNS,
    PREFIXES_COLUMN,
    SENDER_COLUMN,
    STEMS_COLUMN,
)

# Letters and digits only: FTS5's unicode61 tokenizer also splits on "_" and punctuation, so
# anything wider here would be split again inside FTS5 and index and query could disagree.
_WORD = re.compile(r"[^\W_]+")
_CYRILLIC = re.compile(r"[а-я]")
_LATIN = re.compile(r"[a-z]")

# How many first letters make a Cyrillic prefix term: five keeps most Russian roots whole
# while ignoring the endings that inflection changes.
PREFIX_LENGTH = 5

# Function words that match most of a long archive: they cost query time and add nothing to
# the ranking. Only queries drop them (see query_terms); indexed text keeps every word.
STOPWORDS: frozenset[str] = frozenset(
    """
    a an and are as at be been but by can could did do does for from had has have he her his
    how i if in into is it its me my no not of on or our she so than that the their them then
    there these they this to us was we were what when where which who whom why will with would
    you your about after again all am any because before being both doing each few
    just more most now off once only other out over own same should some such too under until
    up very
    а без бы был была были было быть в вам вас весь во вот все всё всех вы где да даже для до
    его ее её если есть еще ещё же за здесь и из или им их к как какая какой когда кто ли либо
    мне мной мы на над не нет ни них но ну о об однако он она они оно от очень по под при с
    со так также там те тем то того тоже той только том ты у уже хотя чего чей чем что чтобы
    чья эта эти это этот я мой моя моё мое мои меня себя свой своя свои
    """.replace("ё", "е").split()
)


class _Stemmers(threading.local):
    """Snowball stemmers keep per-call state: one pair per worker thread, never shared."""

    def __init__(self) -> None:
        self.russian = snowballstemmer.stemmer("russian")
        self.english = snowballstemmer.stemmer("english")


_stemmers = _Stemmers()


def normalize(text: str) -> str:
    # NFC first: a decomposed "й" (и + combining breve) would otherwise split the word in two.
    # "ё" is written as "е" half the time; folding it keeps "живёт" and "живет" one word.
    return unicodedata.normalize("NFC", text).lower().replace("ё", "е")


@lru_cache(maxsize=50_000)
def _stem(word: str) -> str:
    # A conversation reuses a small vocabulary; the cache makes stemming an archive cheap.
    if _CYRILLIC.search(word):
        stem: str = _stemmers.russian.stemWord(word)
    elif _LATIN.search(word):
        stem = _stemmers.english.stemWord(word)
    else:
        # Numbers and other scripts are matched as written.
        stem = word
    return stem or word


def _prefix(word: str) -> str | None:
    # Russian Snowball misses some forms of one word ("запись" -> "зап", "записи" ->
    # "запис"; "котёнок"/"котёнка"), so Cyrillic words are also indexed by their first
    # letters, a second, weaker signal. Latin words are not: English prefixes collide far
    # more ("inter", "compu") and its stemmer has fewer such gaps.
    # Only true truncations: a whole short word here would reward repeating the query's
    # exact form, which is what the stems column is for.
    if len(word) > PREFIX_LENGTH and _CYRILLIC.search(word):
        return word[:PREFIX_LENGTH]
    return None


def words(text: str) -> list[str]:
    """The normalized word tokens of `text`, unstemmed, in order."""
    return _WORD.findall(normalize(text))


def stems(text: str) -> list[str]:
    """The stems of every word of `text`, in order."""
    return [_stem(word) for word in words(text)]


def index_fields(text: str) -> tuple[str, str]:
    """What the index stores for a message: (stems, prefixes), each space-separated."""
    tokens = words(text)
    prefixes = (_prefix(word) for word in tokens)
    return (
        " ".join(_stem(word) for word in tokens),
        " ".join(prefix for prefix in prefixes if prefix),
    )


def sender_field(name: str | None) -> str:
    """What the index stores of a message's sender: the stems of the name's words."""
    return " ".join(stems(name)) if name else ""


def query_terms(query: str) -> list[str]:
    """The words to look for, without stopwords unless the query has nothing else."""
    tokens = words(query)
    content = [word for word in tokens if word not in STOPWORDS]
    # "Who are you?" is all stopwords, and still a fair thing to look up.
    return list(dict.fromkeys(content or tokens))


def match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression for a user's query, or None when it has no words.

    Every term is a quoted string, so whatever the user typed (quotes, *, NEAR, AND, -, :,
    parentheses) is data, never FTS5 syntax; terms are OR'ed and BM25 rewards matching more.
    """
    parts: list[str] = []
    for word in query_terms(query):
        stem = _quote(_stem(word))
        parts.append(f"{STEMS_COLUMN} : {stem}")
        parts.append(f"{SENDER_COLUMN} : {stem}")
        parts += [f"{column} : {stem}" for column in NEIGHBOUR_COLUMNS]
        prefix = _prefix(word)
        if prefix:
            parts.append(f"{PREFIXES_COLUMN} : {_quote(prefix)}")
    return " OR ".join(dict.fromkeys(parts)) or None


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'
