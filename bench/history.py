"""History growth: does an answer get slower as a chat's archive grows?

Three chats are pre-filled on disk (messages.txt, meta.json, summary.txt, summaries.log written
in membot's own formats) with 10, 10,000 and 100,000 messages, then one membot instance answers
them in rounds: each round sends one message to each chat in turn (rotating the order), waiting
for every answer, so machine drift hits all cases alike. Zero-latency LLM, so the memory's
cost is not hidden behind the model's. Summaries are switched off (SUMMARY_EVERY=10000) to
isolate reading and writing the history; the summarizer only ever reads the unsummarized tail.

The Redis backend (STORAGE=redis) gets the same measurement at 10 and 10,000 stored messages
(10,000 is REDIS_MAX_MESSAGES's default, the most a conversation keeps there): two chats
pre-filled through RedisRepository.append in batches (fully summarized, as above), under a
prefix of this run's own on the local Redis, deleted afterwards, and answered in rounds by a
second membot instance on STORAGE=redis. Its "archive size" is Redis's MEMORY USAGE of the
chat's messages key.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.core import (
    REDIS_URL,
    BotApp,
    Row,
    TimedTelegram,
    fakes,
    make_membot,
    median,
    percentile,
    redis_scratch,
    redis_settings,
    row,
    running,
)
from membot.ids import ConversationId
from membot.memory.contract.models import ChatMeta, Message, Summary, new_generation
from membot.memory.files.layout import MESSAGES, META, SUMMARIES_LOG, SUMMARY
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client

BENCH = "history"
TARGET_RATIO = 1.15
SIZES = (10, 10_000, 100_000)
REDIS_SIZES = (10, 10_000)
BASE_CHAT = 2000
REDIS_BASE_CHAT = 2100
REDIS_BATCH = 1_000  # messages per append while pre-filling
START = datetime(2025, 1, 1, tzinfo=UTC)
SUMMARY_TEXT = (
    "Alice is planning a trip to Lisbon in May with her sister; she prefers trains to planes, "
    "is vegetarian, and asked for museum suggestions. The assistant suggested the Gulbenkian "
    "and promised a day-by-day plan. She also has a grey cat called Pixel and works as a "
    "translator from Portuguese."
)
_TOPICS = (
    "the weather in Lisbon",
    "a recipe for lentil soup",
    "how to keep a cat off the keyboard",
    "train times from Porto",
    "a birthday present for my sister",
    "what FTS5 is in SQLite",
)


def _message(seq: int, chat_id: int, ts: datetime) -> Message:
    topic = _TOPICS[seq % len(_TOPICS)]
    if seq % 2 == 1:
        return Message(
            role="user",
            content=f"Question {seq}: could you tell me about {topic}? " * (1 + seq % 3),
            ts=ts,
            seq=seq,
            user_id=chat_id,
            name="Alice",
            tg_message_id=seq,
        )
    return Message(
        role="assistant",
        content=f"Answer {seq}: here is what I know about {topic}. " * (2 + seq % 5),
        ts=ts,
        seq=seq,
    )


def prefill(data_dir: Path, chat_id: int, count: int) -> None:
    """Write a chat of ``count`` messages, fully summarized, as membot would have left it."""
    directory = data_dir / str(chat_id)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    last = START + timedelta(seconds=30 * count)
    with open(directory / MESSAGES, "w", encoding="utf-8") as fh:
        batch: list[str] = []
        for seq in range(1, count + 1):
            batch.append(_message(seq, chat_id, START + timedelta(seconds=30 * seq)).to_json())
            if len(batch) >= 10_000:
                fh.write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            fh.write("\n".join(batch) + "\n")
    (directory / SUMMARY).write_text(SUMMARY_TEXT, encoding="utf-8")
    summary = Summary(text=SUMMARY_TEXT, covers_from=1, covers_to=count, ts=last)
    (directory / SUMMARIES_LOG).write_text(summary.to_json() + "\n", encoding="utf-8")
    meta = ChatMeta(
        conversation=ConversationId.telegram(chat_id),
        generation=new_generation(),
        messages_total=count,
        summarized_upto=count,
        summaries_made=max(1, count // 20),
        created_at=START,
        updated_at=last,
        last_summary_at=last,
    )
    (directory / META).write_text(
        json.dumps(meta.to_dict(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )


async def prefill_redis(repo: RedisRepository, chat_id: int, count: int) -> int:
    """The same chat in Redis, appended in batches, fully summarized; its messages' bytes."""
    cid = ConversationId.telegram(chat_id)
    for first in range(1, count + 1, REDIS_BATCH):
        last = min(first + REDIS_BATCH - 1, count)
        await repo.append(
            cid,
            [
                _message(seq, chat_id, START + timedelta(seconds=30 * seq))
                for seq in range(first, last + 1)
            ],
        )
    meta = await repo.get_meta(cid)
    if meta.messages_total != count:
        raise RuntimeError(f"Redis kept {meta.messages_total} of {count} messages")
    await repo.save_summary(cid, SUMMARY_TEXT, 1, count, meta.generation)
    return int(await repo.client.memory_usage(repo.keys(cid).messages) or 0)


async def _measure(
    app: BotApp,
    tg: TimedTelegram,
    chats: dict[int, int],
    rounds: int,
    warmup: int,
) -> dict[int, list[float]]:
    """Answer latencies per size: one message to each chat per round, the order rotating."""
    sizes = tuple(chats)
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    async with running(app, tg):
        for round_no in range(warmup + rounds):
            shift = round_no % len(sizes)
            for size in sizes[shift:] + sizes[:shift]:
                latency = await tg.ask(
                    chats[size], f"round {round_no}: and what about the museums?"
                )
                if round_no >= warmup:
                    samples[size].append(latency)
    return samples


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    rounds, warmup = (12, 2) if quick else (100, 5)
    chats = {size: BASE_CHAT + i for i, size in enumerate(SIZES)}
    archive_bytes: dict[int, int] = {}
    raw: dict[str, Any] = {"rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="membot-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        for size, chat_id in chats.items():
            prefill(data_dir, chat_id, size)
            archive_bytes[size] = os.path.getsize(data_dir / str(chat_id) / MESSAGES)
        async with fakes() as (tg, llm):
            app = make_membot(tg, llm, data_dir, summary_every=10_000)
            samples = await _measure(app, tg, chats, rounds, warmup)
            if llm.summary_requests:
                raise RuntimeError("a summary ran during the history benchmark")
        rows = _rows(samples, archive_bytes, rounds)
        raw["latencies_ms"] = _ms(samples)
        raw["archive_bytes"] = {str(s): b for s, b in archive_bytes.items()}

        async with redis_scratch() as prefix:
            if prefix is None:
                raw["redis"] = {"skipped": f"Redis at {REDIS_URL} unreachable"}
                return rows, raw
            redis_chats = {size: REDIS_BASE_CHAT + i for i, size in enumerate(REDIS_SIZES)}
            redis_bytes: dict[int, int] = {}
            repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
            try:
                for size, chat_id in redis_chats.items():
                    redis_bytes[size] = await prefill_redis(repo, chat_id, size)
            finally:
                await repo.close()
            async with fakes() as (tg, llm):
                app = make_membot(
                    tg,
                    llm,
                    Path(tmp) / "redis-data",
                    summary_every=10_000,
                    **redis_settings(prefix),
                )
                redis_samples = await _measure(app, tg, redis_chats, rounds, warmup)
                if llm.summary_requests:
                    raise RuntimeError("a summary ran during the history benchmark")
        rows += _rows(redis_samples, redis_bytes, rounds, backend="redis")
        raw["redis"] = {"latencies_ms": _ms(redis_samples), "memory_bytes": redis_bytes}
    return rows, raw


def _ms(samples: dict[int, list[float]]) -> dict[str, list[float]]:
    return {str(s): [round(x * 1000, 3) for x in v] for s, v in samples.items()}


def _rows(
    samples: dict[int, list[float]], sizes: dict[int, int], rounds: int, backend: str = ""
) -> list[Row]:
    rows: list[Row] = []
    cases = tuple(samples)
    base = median(samples[cases[0]])
    label = f"{backend}: " if backend else ""
    note = (
        f"{rounds} answers per case, one round-robin over the cases at a time; "
        "zero-latency LLM; summaries off"
        + (f"; STORAGE={backend}, pre-filled through RedisRepository.append" if backend else "")
    )
    size_metric = "Redis memory" if backend == "redis" else "archive size"
    for size in cases:
        case = f"{label}{size:,} stored"
        p50 = median(samples[size])
        rows.append(row(BENCH, case, size_metric, sizes[size] / 1e6, "MB", note=note))
        rows.append(row(BENCH, case, "latency p50", p50 * 1000, "ms", note=note))
        rows.append(row(BENCH, case, "latency p90", percentile(samples[size], 90) * 1000, "ms"))
        if size != cases[0]:
            ratio = p50 / base
            rows.append(
                row(
                    BENCH,
                    f"{label}{size:,} vs {cases[0]}",
                    "p50 ratio",
                    ratio,
                    "x",
                    target=f"<= {TARGET_RATIO}",
                    ok=ratio <= TARGET_RATIO,
                    note=note,
                )
            )
    return rows
