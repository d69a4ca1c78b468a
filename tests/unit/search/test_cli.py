"""`membot search CHAT_ID "QUERY"`: an operator searching a chat's archive from the shell."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membot.__main__ import main
from membot.config import env_names
from membot.core.tools.builtin import builtin
from membot.core.tools.context import TurnContext
from membot.ids import TELEGRAM, ConversationId
from membot.llm.tools import ToolCall, ToolExecutor
from membot.memory import FileRepository, Message
from membot.memory.contract.attachment import Attachment
from membot.memory.contract.delivery import Delivery
from membot.memory.redis import RedisRepository
from membot.redis.client import create_client
from membot.search import HistorySearch
from membot.search.cli import run_search
from membot.search.present import INTRO
from tests.unit.conftest import REDIS_URL

WHEN = datetime(2025, 3, 1, 14, 2, tzinfo=UTC)
NOW = datetime(2025, 6, 5, 12, 0, tzinfo=UTC)
SESSION = "0f8fad5b-d9cb-469f-a165-70867728950e"


def conversation(filler: int = 30) -> list[Message]:
    return [
        Message(role="user", content="My sister Olga lives in Kazan", ts=WHEN, name="Anna"),
        Message(role="assistant", content="Kazan is a lovely city!", ts=WHEN),
        *(Message(role="user", content=f"filler {i} about coffee", ts=WHEN) for i in range(filler)),
    ]


def store(data_dir: Path, chat_id: int | str, filler: int = 30) -> None:
    cid = (
        ConversationId.telegram(chat_id)
        if isinstance(chat_id, int)
        else ConversationId.parse(chat_id)
    )

    async def write() -> None:
        repo = FileRepository(data_dir)
        await repo.append(cid, conversation(filler))
        await repo.close()

    asyncio.run(write())


@pytest.fixture(autouse=True)
def no_bot_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No tokens anywhere and no stray .env: searching must not need the bot's settings.
    for name in (
        "TELEGRAM_BOT_TOKEN",
        "OPENROUTER_API_KEY",
        "DATA_DIR",
        "STORAGE",
        "REDIS_URL",
        "REDIS_PREFIX",
        "SEARCH_BUDGET_TOKENS",
    ):
        monkeypatch.delenv(name, raising=False)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)


def hits(output: str, word: str = "Kazan") -> list[int]:
    """The seqs of the hits in `--json` output that say `word` (others are found through
    their neighbours' words)."""
    return [
        m["seq"]
        for excerpt in json.loads(output)
        for m in excerpt["messages"]
        if m["hit"] and word in m["content"]
    ]


def test_human_output_with_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "data", 42)
    code = main(
        ["search", "42", "where does the sister live", "--data-dir", str(tmp_path / "data")]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0] == INTRO
    assert re.fullmatch(r"--- 2025-03-01 \(\d+ (months|years) ago\) ---", lines[2]), lines
    assert lines[3] == "[#1] [2025-03-01 14:02] user (Anna): My sister Olga lives in Kazan"


async def test_it_prints_what_the_model_sees(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await asyncio.to_thread(store, data, 42)
    repo = FileRepository(data)
    ctx = TurnContext(
        conversation=ConversationId.telegram(42),
        repository=repo,
        search=HistorySearch(repo, data),
        clock=lambda: NOW,
    )
    [seen] = await ToolExecutor(builtin, timeout=5).run(
        [ToolCall(id="1", name="search_history", arguments='{"query": "Kazan coffee"}')], ctx
    )
    await repo.close()
    printed = await asyncio.to_thread(cli_output, data, "Kazan coffee")
    assert printed == seen.content + "\n"
    assert "My sister Olga lives in Kazan" in printed and "filler 29 about coffee" in printed


async def test_storage_redis_is_searched_and_the_bots_index_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # The bot with STORAGE=redis: the archive in Redis, the index cache under DATA_DIR.
    data = tmp_path / "data"
    repo = RedisRepository(create_client(REDIS_URL), prefix=prefix)
    await repo.append(ConversationId.telegram(42), conversation())
    ctx = TurnContext(
        conversation=ConversationId.telegram(42),
        repository=repo,
        search=HistorySearch(repo, data),
        clock=lambda: NOW,
    )
    [seen] = await ToolExecutor(builtin, timeout=5).run(
        [ToolCall(id="1", name="search_history", arguments='{"query": "Kazan coffee"}')], ctx
    )
    await repo.close()
    index = data / "42" / "search.sqlite3"
    assert index.is_file()
    for name, value in {"STORAGE": "redis", "REDIS_URL": REDIS_URL, "REDIS_PREFIX": prefix}.items():
        monkeypatch.setenv(name, value)
    printed = await asyncio.to_thread(cli_output, data, "Kazan coffee")
    assert printed == seen.content + "\n"
    assert "My sister Olga lives in Kazan" in printed
    assert index.is_file()
    # A chat Redis does not hold is named as missing, and its index cache is left alone too.
    (data / "43").mkdir()
    (data / "43" / "search.sqlite3").write_bytes(index.read_bytes())
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = await asyncio.to_thread(run_search, "43", "Kazan", as_json=False, data_dir=data)
    assert code == 2
    assert err.getvalue().splitlines() == [
        f"membot search: no chat 43 in Redis (REDIS_PREFIX {prefix})"
    ]
    assert (data / "43" / "search.sqlite3").is_file()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port nobody listens on (bound, so nothing else takes it meanwhile)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_redis_unreachable_is_one_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    refused_port: int,
) -> None:
    monkeypatch.setenv("STORAGE", "redis")
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{refused_port}/0")
    code = main(["search", "42", "Kazan", "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert line.startswith("membot search: Redis did not answer at REDIS_URL"), line


def cli_output(data: Path, query: str, as_json: bool = False) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run_search("42", query, as_json=as_json, data_dir=data, clock=lambda: NOW) == 0
    return out.getvalue()


def test_json_output_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", "42", "Kazan", "--json", "--data-dir", str(tmp_path / "data")])
    assert code == 0
    [excerpt] = json.loads(capsys.readouterr().out)
    first, second, *rest = excerpt["messages"]
    assert [first["content"], second["content"]] == [
        "My sister Olga lives in Kazan",
        "Kazan is a lovely city!",
    ]
    assert first["ts"] == "2025-03-01T14:02:00.000Z" and first["seq"] == 1
    assert (first["role"], first["name"]) == ("user", "Anna")
    assert first["hit"] and isinstance(first["score"], float) and first["score"] > 0
    # The message after the last hit comes along, not a hit itself.
    assert rest[-1]["hit"] is False and rest[-1]["score"] is None
    assert excerpt["hits"] == [m["seq"] for m in excerpt["messages"] if m["hit"]]
    assert excerpt["neighbours"] == [rest[-1]["seq"]]
    assert excerpt["score"] == max(m["score"] for m in excerpt["messages"] if m["hit"])
    assert excerpt["notes"] == []


def test_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "data", 42, filler=200)
    args = ["search", "42", "coffee", "--json", "--data-dir", str(tmp_path / "data")]

    def shown(*extra: str) -> int:
        assert main([*args, *extra]) == 0
        return sum(len(e["messages"]) for e in json.loads(capsys.readouterr().out))

    default = shown()
    assert shown("--budget", "500") < default
    # As the bot would read it: SEARCH_BUDGET_TOKENS.
    monkeypatch.setenv("SEARCH_BUDGET_TOKENS", "500")
    assert shown() == shown("--budget", "500") < default


@pytest.mark.parametrize("budget", ["0", "-100", "499", "50001"])
def test_a_budget_out_of_range_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budget: str
) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", "42", "Kazan", "--budget", budget, "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.strip().splitlines() == [
        "membot search: --budget must be 500 to 50000 tokens (as SEARCH_BUDGET_TOKENS), "
        f"not {budget}"
    ]


def test_data_dir_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "env-data", 42)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "env-data"))
    assert main(["search", "42", "Kazan", "--json"]) == 0
    assert hits(capsys.readouterr().out) == [1, 2]


def test_data_dir_from_dotenv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "dotenv-data", 42)
    Path(".env").write_text(f"TELEGRAM_BOT_TOKEN=\nDATA_DIR={tmp_path / 'dotenv-data'}\n")
    assert main(["search", "42", "Kazan", "--json"]) == 0
    assert hits(capsys.readouterr().out) == [1, 2]


def test_default_data_dir_is_data_in_the_working_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store(Path("data"), 42)
    assert main(["search", "42", "Olga", "--json"]) == 0
    assert hits(capsys.readouterr().out, "Olga") == [1]


def test_a_negative_group_chat_id_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "data", -100123)
    code = main(["search", "-100123", "Kazan", "--json", "--data-dir", str(tmp_path / "data")])
    assert code == 0
    assert hits(capsys.readouterr().out) == [1, 2]


@pytest.mark.parametrize("session", [SESSION, SESSION.upper()])
def test_an_api_session_is_searched_by_its_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], session: str
) -> None:
    store(tmp_path / "data", f"api:{SESSION}")
    store(tmp_path / "data", 42)
    code = main(
        ["search", f"api:{session}", "Kazan", "--json", "--data-dir", str(tmp_path / "data")]
    )
    assert code == 0
    assert hits(capsys.readouterr().out) == [1, 2]


@pytest.mark.parametrize(
    "chat_id", ["abc", "12.5", "../42", "", "api:not-a-uuid", "api:../42", "x:1", "tg:../42"]
)
def test_a_bad_chat_id_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chat_id: str
) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", chat_id, "Kazan", "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "CHAT_ID" in captured.err


def test_a_missing_chat_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", "43", "Kazan", "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        f"membot search: no chat 43 in {tmp_path / 'data'}"
    ]
    # Looking did not create the chat.
    assert not (tmp_path / "data" / "43").exists()


def test_a_missing_api_session_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", f"api:{SESSION}", "Kazan", "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        f"membot search: no chat api:{SESSION} in {tmp_path / 'data'}"
    ]
    assert not (tmp_path / "data" / "api").exists()


def test_no_matches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "data", 42)
    assert main(["search", "42", "zebra", "--data-dir", str(tmp_path / "data")]) == 0
    assert capsys.readouterr().out.strip() == "No matching messages found."
    assert main(["search", "42", "zebra", "--json", "--data-dir", str(tmp_path / "data")]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_period(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "data", 42)  # all on 2025-03-01
    args = ["search", "42", "Kazan coffee", "--json", "--data-dir", str(tmp_path / "data")]
    assert main([*args, "--until", "2025-03-01"]) == 0
    assert hits(capsys.readouterr().out) == [1, 2]
    assert main([*args, "--since", "2025-03-02"]) == 0
    assert hits(capsys.readouterr().out) == []


def test_a_bad_date_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "data", 42)
    code = main(["search", "42", "Kazan", "--since", "March", "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.strip().splitlines() == [
        "membot search: since must be an ISO date like 2025-06-01 (or a time like "
        "2025-06-01T18:30, UTC unless given), not 'March'"
    ]


async def test_a_document_is_indexed_in_the_pieces_the_bot_uses(tmp_path: Path) -> None:
    # `membot search` may be the first to index a chat: its rows must be the bot's, a long
    # document in pieces (a hit shows the piece that matched, not the document's head).
    data = tmp_path / "data"
    repo = FileRepository(data)
    chat = ConversationId.telegram(42)
    key = "0123456789abcdef0123456789abcdef.txt"
    text = "\n\n".join(f"Paragraph {n} is about the garden and its hedges." for n in range(60))
    await repo.put_file(
        chat, key, (text + "\n\nThe boathouse key is under the blue stone.").encode()
    )
    lease = Attachment(kind="document", file=key, name="notes.txt")
    await repo.append(chat, [Message(role="user", content="my notes", attachments=(lease,))])
    await repo.close()
    printed = await asyncio.to_thread(cli_output, data, "boathouse", True)
    [piece] = [
        m["content"]
        for excerpt in json.loads(printed)
        for m in excerpt["messages"]
        if m["hit"] and "boathouse" in m["content"]
    ]
    assert len(piece) <= 600 and "Paragraph 0 " not in piece


# What a hostile message may carry to an operator's terminal: ESC sequences (clear the screen,
# retitle the window, OSC 52 writes the clipboard), BEL, NUL, a carriage return that rewrites
# the line, DEL, C1 controls (CSI 0x9b, NEL 0x85) and bidirectional overrides.
HOSTILE = (
    "Kazan \x1b[2J\x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 nul\x00 cr\rfake "
    "del\x7f csi\x9b31m nel\x85 rlo\u202eevil\u202c ls\u2028ps\u2029end"
)
# Control characters, lone surrogates, line and paragraph separators.
CONTROLS = {"Cc", "Cs", "Zl", "Zp"}
HOSTILE_NAME = "Eve\r\n[2025-03-01 14:03] assistant (Bob): trust me\x1b[8m"


def membot_search(data: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in set(env_names())}
    return subprocess.run(
        [sys.executable, "-m", "membot", "search", "42", "Kazan", "--data-dir", str(data), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=60,
    )


def store_hostile(data: Path) -> None:
    async def write() -> None:
        repo = FileRepository(data)
        message = Message(role="user", content=HOSTILE, ts=WHEN, name=HOSTILE_NAME)
        await repo.append(ConversationId.telegram(42), [message])
        await repo.close()

    asyncio.run(write())


def test_control_characters_from_messages_never_reach_the_terminal(tmp_path: Path) -> None:
    store_hostile(tmp_path / "data")
    for args in ((), ("--json",)):
        result = membot_search(tmp_path / "data", tmp_path, *args)
        assert result.returncode == 0, result.stderr
        out = result.stdout.decode()
        # Line breaks only where the output lays itself out; no other control character.
        unsafe = [c for c in out if c != "\n" and (unicodedata.category(c) in CONTROLS)]
        assert unsafe == [], args
        assert not set(out) & {"\u202e", "\u202c", "\u2028", "\u2029"}, args
        if args:
            # The JSON still holds the message exactly as it was said.
            [excerpt] = json.loads(out)
            [message] = excerpt["messages"]
            assert (message["content"], message["name"]) == (HOSTILE, HOSTILE_NAME)
        else:
            # The text shows what was there, escaped, on the message's one line.
            [line] = [t for t in out.splitlines() if "Kazan" in t]
            assert r"Kazan \x1b[2J\x1b]0;pwned\x07" in line and r"nul\x00" in line
            assert r"csi\u009b31m" in line and r"rlo\u202eevil\u202c" in line
            assert "trust me" in line  # the name's line break did not start a fake message


def files_of(data: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `data` but the search index it writes by design (search.sqlite3
    and SQLite's journal beside it): its bytes and modification time."""
    return {
        str(path.relative_to(data)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(data.rglob("*"))
        if path.is_file() and not path.name.startswith("search.sqlite3")
    }


async def test_searching_beside_the_bot_writes_no_delivery_record_and_changes_no_file(
    tmp_path: Path,
) -> None:
    # DATA_DIR as a running bot leaves it: in chat 42 an answer stored and half sent (its
    # first message accepted, the second's request out), chat 43 with an answer unsent.
    # The bot keeps these records in memory (one writer of DATA_DIR); a search is another
    # process, and must leave them as they are, or the bot would resend or skip an answer.
    data = tmp_path / "data"
    await asyncio.to_thread(store, data, 42)
    await asyncio.to_thread(store, data, 43)
    repo = FileRepository(data)
    answer = Message(role="assistant", content="Olga's Kazan", ts=WHEN, delivery=Delivery())
    chat, other = ConversationId.telegram(42), ConversationId.telegram(43)
    [stored] = await repo.append(chat, [answer])
    await repo.mark_delivered(chat, stored.seq, parts=1, sending=True)
    await repo.append(other, [answer])
    marks = {cid: await repo.delivery_mark(cid) for cid in (chat, other)}
    await repo.close()
    before = files_of(data)
    assert "42/undelivered.json" in before and "43/undelivered.json" in before

    env = {k: v for k, v in os.environ.items() if k.upper() not in set(env_names())}
    for chat_id in ("42", "43", "42"):
        searched = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "membot", "search", chat_id, "Kazan", "--data-dir", str(data)],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert searched.returncode == 0, searched.stderr
        assert b"Olga lives in Kazan" in searched.stdout

    assert files_of(data) == before
    assert (data / "42" / "search.sqlite3").is_file()  # it did search (its index cache)
    repo = FileRepository(data)
    assert {cid: await repo.delivery_mark(cid) for cid in (chat, other)} == marks
    assert set(await repo.undelivered(TELEGRAM)) == set(marks)
    await repo.close()
