"""DATA_DIR holds every conversation in clear text: what membot creates there is for its own
user only (directories 0700, files 0600), whatever the umask, and a DATA_DIR that others
can read is warned about at start-up. Checked on disk after the real bot, the real API and
a real `membot search` process have written there."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from membot.ids import ConversationId
from membot.memory import FileRepository, Message
from tests import api_support
from tests.api_support import StartApi
from tests.conftest import StartBot
from tests.e2e.test_tools import native_call
from tests.fakes import FakeLLM, FakeTelegram, Reply, media_files
from tests.fakes.process import membot_env
from tests.private_files import mode, open_to_others, usual_umask

start_api = api_support.start_api

CHAT = 5151
VISION = "vision/model"


@pytest.fixture(autouse=True)
def umask() -> Iterator[None]:
    with usual_umask():
        yield


async def answer(
    tg: FakeTelegram, push: Callable[..., object], *args: object, **kw: object
) -> None:
    before = len(tg.messages_to(CHAT))
    push(CHAT, *args, **kw)
    await tg.wait_for_messages(CHAT, before + 1)


async def test_a_chat_that_began_with_a_photo_is_private_on_disk(
    tg: FakeTelegram, llm: FakeLLM, start_bot: StartBot, data_dir: Path
) -> None:
    llm.models = {VISION: ["text", "image"]}
    bot = await start_bot(openrouter_model=VISION, summary_every=1000)
    # The chat's first message brings a file: its directory is made for the file.
    await answer(tg, tg.push_photo, data=media_files.jpeg(320, 240), caption="what is this?")
    pdf = media_files.pdf_with_text("The deposit is 500 euros.")
    await answer(tg, tg.push_document, pdf, file_name="lease.pdf", mime_type="application/pdf")
    llm.script(
        Reply(
            content="Searching.", tool_calls=[native_call("search_history", {"query": "deposit"})]
        ),
        Reply(content="500 euros."),
    )
    before = len(tg.messages_to(CHAT))
    tg.push_text(CHAT, "what was the deposit?")
    await tg.wait_for_messages(CHAT, before + 2)
    await bot.stop()

    chat = data_dir / str(CHAT)
    # What must be there, so that the check below is about something: the image and the
    # document's text, the archive, the search index, the journal and the usage file.
    assert len(list((chat / "files").iterdir())) == 2
    for path in (chat / "messages.txt", chat / "search.sqlite3"):
        assert path.is_file(), path
    for path in (data_dir / "inbox.jsonl", data_dir / "usage.jsonl"):
        assert path.is_file(), path
    assert open_to_others(data_dir) == []


async def test_an_api_session_is_private_on_disk(llm: FakeLLM, start_api: StartApi) -> None:
    llm.models = {VISION: ["text", "image"]}
    api = await start_api(openrouter_model=VISION)
    image = {
        "type": "image",
        "mimeType": "image/jpeg",
        "name": "receipt.jpg",
        "data": base64.b64encode(media_files.jpeg(320, 240)).decode(),
    }
    reply = await api.client.chat({"message": "What is on this receipt?", "attachments": [image]})
    assert reply.status == 200, reply.body
    session = api.session_dir(reply.body["sessionId"])
    assert (session / "messages.txt").is_file()
    assert len(list((session / "files").iterdir())) == 1
    await api.stop()
    assert open_to_others(api.settings.data_dir) == []


def store(data_dir: Path, chat: int, *texts: str) -> None:
    async def write() -> None:
        repo = FileRepository(data_dir)
        await repo.append(ConversationId.telegram(chat), [Message("user", t) for t in texts])
        await repo.close()

    asyncio.run(write())


def search(
    tmp_path: Path, data_dir: Path, chat: int, query: str
) -> subprocess.CompletedProcess[str]:
    """`membot search` as an operator runs it: a real process, in a directory of its own."""
    return subprocess.run(
        [sys.executable, "-m", "membot", "search", str(chat), query, "--data-dir", str(data_dir)],
        cwd=tmp_path,
        env=membot_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_membot_search_makes_a_private_index(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store(data_dir, 77, "My sister Olga lives in Kazan", "filler about coffee")
    first = search(tmp_path, data_dir, 77, "Kazan")
    assert first.returncode == 0 and "Kazan" in first.stdout, first.stderr
    index = data_dir / "77" / "search.sqlite3"
    assert mode(index) == 0o600
    # While a reader (the bot, say) has the index open, its WAL and shared memory stay
    # beside it; a second search writes the new messages into the WAL.
    reader = sqlite3.connect(index)
    try:
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        store(data_dir, 77, "Olga moved from Kazan to Perm")
        second = search(tmp_path, data_dir, 77, "Perm")
        assert second.returncode == 0 and "Perm" in second.stdout, second.stderr
        side = sorted(p.name for p in index.parent.glob("search.sqlite3-*"))
        assert side == ["search.sqlite3-shm", "search.sqlite3-wal"]
        modes = {p.name: f"{mode(p):04o}" for p in index.parent.glob("search.sqlite3*")}
        assert set(modes.values()) == {"0600"}, modes
    finally:
        reader.close()
    assert "DATA_DIR" not in first.stderr + second.stderr  # membot made it private


def test_membot_search_warns_about_an_open_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    os.chmod(data_dir, 0o755)
    store(data_dir, 77, "My sister Olga lives in Kazan")
    found = search(tmp_path, data_dir, 77, "Kazan")
    assert found.returncode == 0 and "Kazan" in found.stdout
    assert found.stderr.splitlines() == [
        f"membot search: warning: DATA_DIR {data_dir} is open to other users (mode 0755) "
        f"and holds every conversation in clear text: chmod 700 {data_dir}"
    ]


async def test_an_open_data_dir_is_warned_about_at_start(
    start_bot: StartBot, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir.mkdir()
    os.chmod(data_dir, 0o750)
    caplog.set_level(logging.WARNING, logger="membot")
    bot = await start_bot()
    [warning] = [r.getMessage() for r in caplog.records if "DATA_DIR" in r.getMessage()]
    assert warning == (
        f"DATA_DIR {data_dir} is open to other users (mode 0750) and holds every "
        f"conversation in clear text: chmod 700 {data_dir}"
    )
    await bot.stop()
    # Once the operator did as told, nothing is said.
    os.chmod(data_dir, 0o700)
    caplog.clear()
    await start_bot()
    assert not [r for r in caplog.records if "DATA_DIR" in r.getMessage()]
