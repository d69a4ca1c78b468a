"""The layout of a chat's index file: its tables, row ids, FTS5 columns and their weights."""

from __future__ import annotations

# Bumped whenever the schema or the text normalization changes: old files are rebuilt.
# 2: the sender column; 3: documents' text in chunks; 4: the neighbour columns, summaries
# and facts as entries.
SCHEMA_VERSION = 4

# Row ids, one space for all three kinds of row:
#: a message's row is its seq; a document's chunks are -(seq * CHUNK_IDS + n), n >= 1, apart
#: from the messages' rows whatever the archive's length;
CHUNK_IDS = 65_536
#: an entry (a summary, a fact) is ENTRY_IDS + n, n counting from 1: far above any seq.
ENTRY_IDS = 1 << 60

# The FTS5 columns, all space-separated terms made by text.py, each with its BM25 weight.
STEMS_COLUMN = "stems"
STEMS_WEIGHT = 1.0
# Cyrillic words' first letters: a shared prefix only backs a whole-stem match up.
PREFIXES_COLUMN = "prefixes"
PREFIXES_WEIGHT = 0.5
# Who wrote the message (the stems of the sender's name): "what did Anna say" matches Anna's
# own messages here, and only mentions of her in the stems column. A message by the person a
# query names beats one that only addresses them.
SENDER_COLUMN = "sender"
SENDER_WEIGHT = 8.0
# The stems of the messages around it (neighbours.py), a column per offset: the words of a
# question often sit in the turn before the answer ("How was the concert?" / "Amazing, the
# whole first album"). The turn before says what a message answers or takes up; the one
# after only how it was taken, weaker evidence of what it is about; both are weaker than the
# message's own words. Measured on tests/fakes/recall_corpus.py (docs/architecture.md): one turn
# each side; the one before at 0.3 and the one after at 0.1 found the most over all kinds of
# question, more weight crowds out hits of their own with the neighbours of a strong one.
NEIGHBOURS: tuple[tuple[int, float], ...] = ((-1, 0.3), (1, 0.1))
NEIGHBOUR_COLUMNS = tuple(
    f"before{-offset}" if offset < 0 else f"after{offset}" for offset, _ in NEIGHBOURS
)
COLUMNS = (STEMS_COLUMN, PREFIXES_COLUMN, SENDER_COLUMN, *NEIGHBOUR_COLUMNS)
#: What a row without neighbours (a document's chunk, an entry) holds in their columns.
NO_NEIGHBOURS = ("",) * len(NEIGHBOUR_COLUMNS)
WEIGHTS = (STEMS_WEIGHT, PREFIXES_WEIGHT, SENDER_WEIGHT, *(weight for _, weight in NEIGHBOURS))

# `messages` holds what a hit shows: every message's, chunk's and entry's original text.
# kind and upto are NULL for a message or a chunk (told apart by the id's sign); an entry
# covers the messages seq..upto. `terms` is a contentless FTS5 table: the stems are only
# ever matched. remove_diacritics 0: text.py already decided what a word is, and FTS5 must
# not fold "й" into "и" behind its back. summary_upto: the meta.summarized_upto whose
# summary is indexed. ts has no index of its own: a period is applied to what the full-text
# match found (store.py), which measured faster than any plan starting from the dates.
SCHEMA = (
    """CREATE TABLE state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        summary_upto INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        kind TEXT,
        upto INTEGER
    )""",
    f"""CREATE VIRTUAL TABLE terms USING fts5(
        {", ".join(COLUMNS)}, content='', tokenize='unicode61 remove_diacritics 0'
    )""",
    # `rank` (what ORDER BY rank sorts by) is BM25 with the columns' weights.
    f"INSERT INTO terms (terms, rank) VALUES ('rank', 'bm25({', '.join(map(str, WEIGHTS))})')",
)

#: The score of a row's own words and sender alone, as an SQL expression on {table}.
OWN_RANK = f"bm25({{table}}, {', '.join(map(str, (*WEIGHTS[:3], *(0.0 for _ in NEIGHBOURS))))})"

_VALUES = ", ".join("?" for _ in COLUMNS)
INSERT_TERMS = f"INSERT INTO terms (rowid, {', '.join(COLUMNS)}) VALUES (?, {_VALUES})"
# A contentless table forgets a row only when told the exact values it was given.
DELETE_TERMS = (
    f"INSERT INTO terms (terms, rowid, {', '.join(COLUMNS)}) VALUES ('delete', ?, {_VALUES})"
)
