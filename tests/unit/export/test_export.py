"""An export read back and compared with what was stored, on every backend (files, memory,
Redis): messages.jsonl is iter_messages' records, conversation.md has each message's date and
sender, the summary, facts, tasks and files are there; a message appended after the cut is
not; a chat over the part size comes as several ZIPs, each whole and within the size; nothing
is left on disk after the block, and the files were 0600 while there."""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import uuid
import zipfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.export import Exports, part_names
from membot.export.parts import PENDING, PartedZip
from membot.export.watch import ExportWatch
from membot.ids import ConversationId
from membot.memory import ChatRepository, FileRepository, MemoryRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.schedule.inmemory import InMemoryTaskStore
from membot.schedule.models import Task, new_task_id

REDIS_URL = "redis://127.0.0.1:6379/0"
CHAT = ConversationId.telegram(-100777)
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["files", "memory", "redis"])
async def repository(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ChatRepository]:
    repo: ChatRepository
    if request.param == "files":
        repo = FileRepository(tmp_path / "data")
    elif request.param == "memory":
        repo = MemoryRepository()
    else:
        prefix = f"membot-test:{uuid.uuid4().hex}:"
        repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
    try:
        yield repo
    finally:
        if isinstance(repo, RedisRepository):
            keys = [key async for key in repo.client.scan_iter(match=f"{repo.prefix}*")]
            if keys:
                await repo.client.delete(*keys)
        await repo.close()


async def fill(repo: ChatRepository, turns: int, image_size: int = 3000) -> dict[str, bytes]:
    """`turns` turns of two users and the bot, every tenth with an image; the files kept."""
    files: dict[str, bytes] = {}
    for n in range(turns):
        attachments: tuple[Attachment, ...] = ()
        if n % 10 == 0:
            key = new_file_key("jpg")
            files[key] = os.urandom(image_size)
            await repo.put_file(CHAT, key, files[key])
            attachments = (Attachment(kind="image", file=key, name=f"p{n}.jpg"),)
        who = ("Alice", 11) if n % 2 else ("Boris", 12)
        await repo.append(
            CHAT,
            [
                Message(
                    role="user",
                    content=f"question {n}: " + "words " * 20,
                    ts=T0 + timedelta(minutes=n),
                    name=who[0],
                    user_id=who[1],
                    attachments=attachments,
                ),
                Message(role="assistant", content=f"answer {n}", ts=T0 + timedelta(minutes=n)),
            ],
        )
    key = new_file_key("txt")
    files[key] = b"the document's text"
    await repo.put_file(CHAT, key, files[key])
    document = Attachment(kind="document", file=key, name="notes.pdf", chars=19)
    await repo.append(CHAT, [Message(role="user", content="my notes", attachments=(document,))])
    return files


def read_parts(parts: list[Path]) -> dict[str, bytes]:
    """Every part's entries, an entry found in several parts joined in part order."""
    found: dict[str, bytes] = {}
    for path in parts:
        with zipfile.ZipFile(path) as zf:
            assert zf.testzip() is None
            for name in zf.namelist():
                found[name] = found.get(name, b"") + zf.read(name)
    return found


async def test_an_export_is_what_was_stored(repository: ChatRepository, tmp_path: Path) -> None:
    files = await fill(repository, 30)
    await repository.add_fact(CHAT, "Alice lives in Lisbon", 100)
    meta = await repository.get_meta(CHAT)
    await repository.save_summary(CHAT, "They talked about questions.", 1, 20, meta.generation)
    tasks = InMemoryTaskStore()
    task = Task(new_task_id(), CHAT.chat_id, "water the plants", T0 + timedelta(days=9), "UTC")
    await tasks.add(task, 10)
    # A forgotten message (/forget's tombstone, as the archive keeps it) is not exported.
    await repository.append(CHAT, [Message(role="user", content="secret").tombstone()])
    exports = Exports(repository, tasks, tmp_path / "data", default_zone="Europe/Lisbon")
    cut = await exports.cut(CHAT)
    await repository.append(CHAT, [Message(role="user", content="after the cut")])
    async with exports.build(cut, None) as built:
        [part] = built.parts
        assert stat.S_IMODE(part.stat().st_mode) == 0o600
        entries = read_parts(built.parts)
    assert not part.exists()
    assert built.messages == 61 and built.files == len(files) and built.missing_files == 0

    stored = [
        m.to_json()
        async for m in repository.iter_messages(CHAT)
        if m.seq <= cut.upto and not m.forgotten
    ]
    assert entries["messages.jsonl"].decode().splitlines() == stored
    assert '"forgotten"' not in entries["messages.jsonl"].decode()
    transcript = entries["conversation.md"].decode()
    assert "**Alice** · 2026-03-01 09:01" in transcript  # Lisbon is UTC in March
    assert "**Boris** · 2026-03-01 09:00" in transcript and "**membot** ·" in transcript
    assert "after the cut" not in transcript
    assert json.loads(entries["facts.json"]) == ["Alice lives in Lisbon"]
    assert "They talked about questions." in entries["summary.md"].decode()
    assert [t["text"] for t in json.loads(entries["tasks.json"])] == ["water the plants"]
    assert {name: data for name, data in entries.items() if name.startswith("files/")} == {
        f"files/{key}": data for key, data in files.items()
    }
    assert part_names(cut, 1) == [f"membot-export-tg--100777-{cut.taken:%Y-%m-%d}.zip"]


async def test_a_chat_over_the_part_size_comes_in_whole_parts_within_it(
    repository: ChatRepository, tmp_path: Path
) -> None:
    limit = 4 * PENDING + 50_000
    files = await fill(repository, 400, image_size=60_000)
    exports = Exports(repository, None, tmp_path / "data")
    cut = await exports.cut(CHAT)
    async with exports.build(cut, limit) as built:
        assert len(built.parts) > 3
        assert all(path.stat().st_size <= limit for path in built.parts)
        entries = read_parts(built.parts)
        leftovers = list((tmp_path / "data" / ".exports").iterdir())
    assert sorted(leftovers) == sorted(built.parts)  # no side file is left
    assert not any((tmp_path / "data" / ".exports").iterdir())
    stored = [m.to_json() async for m in repository.iter_messages(CHAT)]
    assert entries["messages.jsonl"].decode().splitlines() == stored
    assert entries["conversation.md"].decode().count("**membot** ·") == 400
    assert {n for n in entries if n.startswith("files/")} == {f"files/{k}" for k in files}
    names = part_names(cut, len(built.parts))
    assert names[0].endswith(f"-part1of{len(built.parts)}.zip")


def test_a_part_writer_keeps_every_part_within_its_limit_with_incompressible_text(
    tmp_path: Path,
) -> None:
    limit = 4 * PENDING
    out = PartedZip(tmp_path, limit)
    out.add("small.txt", b"hello")
    out.start("lines.txt")
    lines = [os.urandom(3000).hex().encode() + b"\n" for _ in range(200)]
    for line in lines:
        out.write(line)
    out.end()
    parts = out.close()
    assert len(parts) >= 2 and all(p.stat().st_size <= limit for p in parts)
    joined = b"".join(zipfile.ZipFile(io.BytesIO(p.read_bytes())).read("lines.txt") for p in parts)
    assert joined == b"".join(lines)


async def test_an_export_stopped_by_a_forget_is_made_again_after_the_files_are_deleted(
    tmp_path: Path,
) -> None:
    # A /forget deletes the conversation's export files and stops its export in progress,
    # which is made again at once: had the deletion run on after the stop, the new export's
    # files could be deleted under it (seen: the second upload failed, "couldn't prepare").
    watch = ExportWatch(tmp_path)
    cid = ConversationId.telegram(42)
    watch.directory.mkdir()
    for n in range(2_000):  # left by killed processes: deleting them takes a while
        (watch.directory / f"tg-42-left-{n}.zip").write_bytes(b"old")
    other = watch.directory / "tg-420-0001.zip"
    other.write_bytes(b"another chat's")
    seen_at_stop: list[list[str]] = []
    under_way = asyncio.Event()

    async def exporting() -> None:
        with watch.watching(cid) as stop:
            under_way.set()
            await stop.wait()
            # What an export made again finds (and writes its new part beside).
            seen_at_stop.append(sorted(p.name for p in watch.directory.iterdir()))
            (watch.directory / "tg-42-again.zip").write_bytes(b"new")

    task = asyncio.create_task(exporting())
    await under_way.wait()
    assert await watch.forgotten(cid) == 2_000
    await task
    assert seen_at_stop == [[other.name]]
    assert sorted(p.name for p in watch.directory.iterdir()) == ["tg-42-again.zip", other.name]
