"""The Redis backend beyond the shared contract: its key layout, trimming, TTLs, writers in
two processes, the start-up check, the client's limits, the settings and `membot migrate`.

Against the real Redis at 127.0.0.1:6379 (CI has one too); each test works under a prefix of
its own and deletes every key under it afterwards. Nothing is skipped when Redis is down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from membot.config import ConfigError, Settings, env_names, load_settings
from membot.ids import ConversationId
from membot.memory import ConversationState, FileRepository, Message
from membot.memory.contract.attachment import Attachment, new_file_key
from membot.memory.contract.repository import StorageUnavailable
from membot.memory.migrate import FilesSide, RedisSide, migrate, run_migrate
from membot.memory.outage import ResilientRepository
from membot.memory.redis import RedisRepository
from membot.memory.redis import repository as redis_module
from membot.redis.client import create_client
from membot.redis.health import RedisHealth
from membot.search import HistorySearch
from membot.wiring import build_core
from tests.private_files import open_to_others, usual_umask
from tests.scripted import ScriptedModel

REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parents[3]
CONSULTING = ConversationState(mode="consultation", round=1, max_rounds=3, language="ru")
CID = ConversationId.telegram(42)
SESSION = ConversationId.api(uuid.UUID("3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f"))

MakeRepo = Callable[..., RedisRepository]


def turn(text: str) -> list[Message]:
    return [Message(role="user", content=text), Message(role="assistant", content=f"re: {text}")]


async def all_keys(repo: RedisRepository) -> set[str]:
    return {key async for key in repo.client.scan_iter(match=f"{repo.prefix}*")}


# -- layout ------------------------------------------------------------------------------------


async def test_every_key_lies_under_the_prefix_and_reads_as_json_or_text(
    make_repo: MakeRepo,
) -> None:
    repo = make_repo()
    await repo.append(CID, turn("Привет"), CONSULTING)
    generation = (await repo.get_meta(CID)).generation
    assert await repo.save_summary(CID, "the summary", 1, 2, generation)
    assert await repo.add_fact(CID, "likes tea", 10)
    base = f"{repo.prefix}conv:tg:42:"
    assert await all_keys(repo) == {
        *(base + name for name in ("messages", "meta", "seq", "summary", "summaries", "facts")),
        f"{repo.prefix}conversations:tg",
    }
    client = repo.client
    lines = await client.zrange(base + "messages", 0, -1, withscores=True)
    assert [(json.loads(line)["seq"], score) for line, score in lines] == [(1, 1.0), (2, 2.0)]
    assert json.loads(lines[0][0])["content"] == "Привет"  # readable: not \u-escaped
    assert "Привет" in lines[0][0]
    assert json.loads(lines[1][0])["state"]["language"] == "ru"  # the turn's state rides on it
    meta = await client.hgetall(base + "meta")
    assert meta["generation"] == generation
    assert json.loads(meta["state"]) == CONSULTING.to_dict()
    assert (meta["state_seq"], meta["summarized_upto"], meta["summaries_made"]) == ("2", "2", "1")
    assert await client.get(base + "seq") == "2"
    assert await client.get(base + "summary") == "the summary"
    assert json.loads((await client.lrange(base + "summaries", 0, -1))[0])["covers_to"] == 2
    assert json.loads((await client.lrange(base + "facts", 0, -1))[0])["text"] == "likes tea"
    assert await client.smembers(f"{repo.prefix}conversations:tg") == {"42"}


async def test_reset_deletes_every_key_of_the_conversation(make_repo: MakeRepo) -> None:
    repo = make_repo()
    for cid in (CID, SESSION):
        await repo.append(cid, turn("q"), CONSULTING)
        await repo.add_fact(cid, "a fact", 10)
        assert await repo.save_summary(cid, "s", 1, 2, (await repo.get_meta(cid)).generation)
    await repo.reset(CID)
    left = await all_keys(repo)
    assert not [key for key in left if ":tg:" in key]
    assert await repo.client.exists(f"{repo.prefix}conversations:tg") == 0
    assert len([key for key in left if f":api:{SESSION.key}:" in key]) == 6


async def test_trimming_keeps_the_newest_and_counts_every_message(make_repo: MakeRepo) -> None:
    repo = make_repo(max_messages=100)
    for i in range(65):
        await repo.append(CID, turn(f"q{i}"))
    assert await repo.client.zcard(repo.keys(CID).messages) == 100
    assert (await repo.get_meta(CID)).messages_total == 130
    assert [m.seq async for m in repo.iter_messages(CID)] == list(range(31, 131))
    assert [m.seq async for m in repo.iter_messages(CID, after_seq=120)] == list(range(121, 131))
    assert [m.content for m in await repo.tail(CID, 2)] == ["q64", "re: q64"]
    stored = await repo.append(CID, turn("next"))
    assert [m.seq for m in stored] == [131, 132]


async def test_a_ttl_is_refreshed_by_activity_but_not_by_a_summary(make_repo: MakeRepo) -> None:
    repo = make_repo(ttl=1000)
    keys = repo.keys(CID)
    await repo.append(CID, turn("q"))
    await repo.add_fact(CID, "a fact", 10)
    await repo.put_file(CID, new_file_key("jpg"), b"an image")  # files live as long
    for key in keys.conversation:
        if key not in (keys.summary, keys.summaries):
            assert 990 <= await repo.client.ttl(key) <= 1000, key
    assert await repo.client.ttl(keys.namespace_index) == -1  # shared: never expires
    for key in keys.conversation:
        await repo.client.expire(key, 50)  # time passes
    assert await repo.save_summary(CID, "s", 1, 2, (await repo.get_meta(CID)).generation)
    for key in keys.conversation:  # the summary's keys expire with the rest, no later
        assert 0 < await repo.client.ttl(key) <= 50, key
    await repo.set_state(CID, CONSULTING)
    for key in keys.conversation:
        assert await repo.client.ttl(key) > 990, key


async def test_without_a_ttl_nothing_expires(make_repo: MakeRepo) -> None:
    repo = make_repo()
    await repo.append(CID, turn("q"))
    assert await repo.save_summary(CID, "s", 1, 2, (await repo.get_meta(CID)).generation)
    await repo.add_fact(CID, "a fact", 10)
    for key in await all_keys(repo):
        assert await repo.client.ttl(key) == -1, key


async def test_an_expired_conversation_leaves_the_index(make_repo: MakeRepo) -> None:
    repo = make_repo(ttl=1000)
    await repo.append(CID, turn("q"))
    await repo.append(ConversationId.telegram(7), turn("q"))
    await repo.client.delete(*repo.keys(CID).conversation)  # as the TTL does
    assert await repo.conversations("tg") == [ConversationId.telegram(7)]
    assert await repo.client.smembers(repo.index_key("tg")) == {"7"}


# -- atomicity -------------------------------------------------------------------------------


async def test_the_archive_search_works_over_redis_as_a_local_cache(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    # Redis keeps the archive; the search index is a SQLite cache under DATA_DIR, fed by
    # iter_messages. After a reset (a new generation) the old index is not used.
    repo = make_repo()
    for i in range(30):
        await repo.append(CID, turn(f"small talk {i}"))
    await repo.append(CID, turn("my sister lives in Kazan"))
    search = HistorySearch(repo, tmp_path)
    hits = await search.search(CID, "where does the sister live", limit=3)
    # The bot's echo says it too, with the words before it: either may come first.
    assert {hit.content for hit in hits[:2]} == {
        "my sister lives in Kazan",
        "re: my sister lives in Kazan",
    }
    await repo.append(CID, turn("the cat is called Barsik"))
    hits = await search.search(CID, "cat name", limit=2)
    assert {hit.content for hit in hits} == {
        "the cat is called Barsik",
        "re: the cat is called Barsik",
    }
    await repo.reset(CID)
    await repo.append(CID, turn("a fresh start"))
    assert await search.search(CID, "sister Kazan", limit=3) == []


async def test_ten_writers_in_two_processes_lose_nothing(make_repo: MakeRepo) -> None:
    first, second = make_repo(), make_repo()  # two pools, as two processes

    async def writer(w: int) -> list[list[int]]:
        repo = (first, second)[w % 2]
        seqs = []
        for t in range(10):
            tool = Message(role="tool", content=f"{w}/{t}", tool_call_id=f"c{w}-{t}")
            stored = await repo.append(CID, [*turn(f"{w}/{t}"), tool])
            seqs.append([m.seq for m in stored])
        return seqs

    results = await asyncio.gather(*(writer(w) for w in range(10)))
    stored = [m async for m in second.iter_messages(CID)]
    assert [m.seq for m in stored] == list(range(1, 301))
    assert (await first.get_meta(CID)).messages_total == 300
    for i in range(0, 300, 3):  # every turn contiguous, never interleaved with another
        a, b, c = stored[i : i + 3]
        assert (b.content, c.content) == (f"re: {a.content}", a.content)
    assert len({m.content for m in stored[::3]}) == 100
    for seqs in (s for writer_seqs in results for s in writer_seqs):
        assert seqs == list(range(seqs[0], seqs[0] + 3))


async def test_a_resent_append_is_stored_once(
    make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # redis-py resends a call whose reply was lost; the turn's token makes that harmless.
    repo = make_repo()
    await repo.append(CID, turn("before"))
    monkeypatch.setattr(redis_module, "new_turn_token", lambda: "same-token")
    sent = await repo.append(CID, turn("once"), CONSULTING)
    resent = await repo.append(CID, turn("once"), CONSULTING)
    assert [m.seq for m in sent] == [m.seq for m in resent] == [3, 4]
    contents = [m.content for m in await repo.tail(CID, 10)]
    assert contents == ["before", "re: before", "once", "re: once"]
    assert (await repo.get_meta(CID)).messages_total == 4


async def test_the_duplicate_check_ignores_case_beyond_ascii(make_repo: MakeRepo) -> None:
    repo = make_repo()
    assert await repo.add_fact(CID, "Живу в Кракове", 10) is True
    assert await repo.add_fact(CID, "ЖИВУ В КРАКОВЕ", 10) is False
    assert await repo.add_fact(CID, "Straße", 10) is True
    assert await repo.add_fact(CID, "STRASSE", 10) is False  # casefold, not lower


# -- the client, the start-up check, the wiring ------------------------------------------------


def test_the_client_sets_its_limits_and_connects_nowhere_when_built() -> None:
    client = create_client("redis://127.0.0.1:1/0")  # nothing listens on port 1
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (1.0, 1.0)
    assert kwargs["health_check_interval"] > 0
    assert kwargs["retry"].get_retries() == 2
    assert client.connection_pool.max_connections == 64


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A server that accepts connections and never answers: a hung Redis."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


async def test_a_hung_server_fails_a_call_within_seconds(silent_port: int) -> None:
    repo = RedisRepository(create_client(f"redis://127.0.0.1:{silent_port}/0"))
    started = time.monotonic()
    with pytest.raises(StorageUnavailable) as failed:  # what every layer understands
        await repo.tail(CID, 5)
    assert time.monotonic() - started < 4.0  # CALL_DEADLINE, not redis-py's tens of seconds
    assert isinstance(failed.value.__cause__, (RedisTimeoutError, RedisConnectionError))
    await repo.close()


async def test_build_core_connects_nowhere_and_start_warns_when_unreachable(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    settings = load_settings(
        telegram=False,
        _env_file=None,
        openrouter_api_key="sk-test",
        data_dir=tmp_path,
        storage="redis",
        redis_url="redis://127.0.0.1:1/0",
    )
    core = build_core(settings, model=ScriptedModel())
    # One client and one health object, the repository's and everyone's.
    assert isinstance(core.repository, ResilientRepository) and isinstance(core.health, RedisHealth)
    assert core.repository.health is core.health
    assert isinstance(core.repository.inner, RedisRepository)
    assert core.repository.inner.client is core.redis
    with caplog.at_level(logging.WARNING):
        await core.start()
    assert "Redis is unreachable" in caplog.text
    assert not core.health.available
    await core.aclose()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("config", "warned"),
    [
        ({"appendonly": "no", "save": ""}, True),
        ({"appendonly": "yes", "save": ""}, False),
        ({"appendonly": "no", "save": "3600 1 300 100"}, False),
        (None, False),  # CONFIG disabled, as on managed services
    ],
)
async def test_start_warns_when_redis_persists_nothing(
    make_repo: MakeRepo,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, str] | None,
    warned: bool,
) -> None:
    repo = make_repo()

    async def config_get(name: str) -> dict[str, str]:
        if config is None:
            raise ResponseError("unknown command 'CONFIG'")
        return {name: config[name]}

    monkeypatch.setattr(repo.client, "config_get", config_get)
    with caplog.at_level(logging.INFO):
        assert await repo.check() is True
    assert ("Redis persists nothing" in caplog.text) is warned


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"redis_max_messages": 99}, "REDIS_MAX_MESSAGES is invalid"),
        ({"redis_url": "http://127.0.0.1:6379"}, "REDIS_URL is invalid"),
        ({"conversation_ttl": -1}, "CONVERSATION_TTL is invalid"),
        ({"storage": "sqlite"}, "STORAGE is invalid"),
        ({"redis_prefix": "my prefix"}, "REDIS_PREFIX is invalid"),
    ],
)
def test_bad_storage_settings_name_the_variable(overrides: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_settings(telegram=False, _env_file=None, openrouter_api_key="k", **overrides)


def test_storage_settings_defaults() -> None:
    settings = load_settings(
        telegram=False, _env_file=None, openrouter_api_key="k", storage="Redis"
    )
    assert settings.storage.backend == "redis"
    assert settings.redis_url.get_secret_value() == "redis://127.0.0.1:6379/0"
    assert (settings.redis_prefix, settings.redis_max_messages) == ("membot:", 10_000)
    assert settings.conversation_ttl == 0
    assert Settings.model_fields["storage_backend"].default == "files"


# -- membot migrate ----------------------------------------------------------------------------


async def fill_files(data: Path) -> FileRepository:
    files = FileRepository(data)
    for i in range(75):
        await files.append(CID, turn(f"q{i}"), CONSULTING if i == 74 else None)
    assert await files.save_summary(CID, "one", 1, 40, (await files.get_meta(CID)).generation)
    assert await files.save_summary(CID, "two", 41, 100, (await files.get_meta(CID)).generation)
    await files.add_fact(CID, "likes tea", 10)
    await files.append(SESSION, turn("api words"))
    await files.add_fact(ConversationId.telegram(-100), "only a fact", 10)
    return files


async def snapshot(side: FilesSide | RedisSide, cid: ConversationId) -> tuple[object, ...]:
    repo = side.repository
    meta = await repo.get_meta(cid)
    messages = [m.to_json() async for m in repo.iter_messages(cid)]
    extras = await side.extras(cid)
    facts = [f["text"] for f in extras.facts]
    counters = (meta.messages_total, meta.summarized_upto, meta.summaries_made, meta.state_seq)
    times = (meta.created_at, meta.updated_at, meta.last_summary_at)
    return messages, counters, times, meta.state, extras.summary, extras.summaries, facts


async def test_migrate_copies_everything_both_ways_idempotently(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    files = FilesSide(await fill_files(tmp_path / "data"))
    redis = RedisSide(make_repo(max_messages=100))
    report = await migrate(files, redis)
    assert (report.conversations, report.copied, report.skipped) == (3, 3, 0)
    assert report.messages == 100 + 2  # REDIS_MAX_MESSAGES keeps the newest 100 of 150
    for cid in (CID, SESSION):
        assert (await redis.repository.get_meta(cid)).generation == (
            await files.repository.get_meta(cid)
        ).generation
    old, new = await snapshot(files, CID), await snapshot(redis, CID)
    assert new[0] == old[0][50:] and new[1:] == old[1:]
    assert await snapshot(redis, SESSION) == await snapshot(files, SESSION)
    assert await redis.repository.get_facts(ConversationId.telegram(-100)) == ["only a fact"]
    # A second run finds everything there already.
    again = await migrate(files, redis)
    assert (again.copied, again.skipped, again.messages, again.conflicts) == (0, 3, 0, [])
    # And back, into an empty DATA_DIR, twice.
    back = FilesSide(FileRepository(tmp_path / "back"))
    assert (await migrate(redis, back)).copied == 3
    assert (await migrate(redis, back)).skipped == 3
    for cid in (CID, SESSION, ConversationId.telegram(-100)):
        assert await snapshot(back, cid) == await snapshot(redis, cid)
    # The copy is a working conversation of its backend.
    stored = await back.repository.append(CID, turn("after"))
    assert stored[0].seq == 151
    assert (await back.repository.get_meta(CID)).state == CONSULTING


async def test_migrate_leaves_a_different_copy_alone_unless_told(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    files = FilesSide(await fill_files(tmp_path / "data"))
    redis = RedisSide(make_repo())
    await migrate(files, redis)
    await redis.repository.append(CID, turn("said on redis since"))
    report = await migrate(files, redis)
    assert (report.conflicts, report.skipped, report.copied) == ([CID], 2, 0)
    assert (await redis.repository.get_meta(CID)).messages_total == 152
    report = await migrate(files, redis, overwrite=True)
    assert (report.copied, report.skipped) == (1, 2)
    assert (await redis.repository.get_meta(CID)).messages_total == 150


async def test_an_interrupted_copy_is_made_again(make_repo: MakeRepo, tmp_path: Path) -> None:
    files = FilesSide(await fill_files(tmp_path / "data"))
    redis = RedisSide(make_repo())
    await migrate(files, redis)
    # Killed after the messages, before meta: the conversation does not count as there.
    await redis.client.delete(redis.repository.keys(CID).meta)
    report = await migrate(files, redis)
    assert (report.copied, report.skipped) == (1, 2)
    assert await snapshot(redis, CID) == await snapshot(files, CID)


def migrate_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    names = set(env_names())
    env = {k: v for k, v in os.environ.items() if k.upper() not in names}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, "DATA_DIR": str(tmp_path / "data"), **extra}


async def test_membot_migrate_runs_without_tokens(make_repo: MakeRepo, tmp_path: Path) -> None:
    await fill_files(tmp_path / "data")
    repo = make_repo()
    command = [sys.executable, "-m", "membot", "migrate", "--from", "files", "--to", "redis"]
    env = migrate_env(tmp_path, REDIS_PREFIX=repo.prefix)
    done = await asyncio.to_thread(
        subprocess.run, command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "3 conversations (3 copied, 0 skipped" in done.stdout
    # REDIS_MAX_MESSAGES: 10,000 by default
    assert "152 messages copied with 0 files" in done.stdout
    assert (await repo.get_meta(CID)).messages_total == 150


def test_membot_migrate_config_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REDIS_MAX_MESSAGES", "5")
    assert run_migrate("files", "redis") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "REDIS_MAX_MESSAGES is invalid" in err
    assert run_migrate("files", "files") == 2


def test_membot_migrate_with_redis_unreachable_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in env_names():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    with socket.socket() as unheard:  # bound, not listening: the connection is refused
        unheard.bind(("127.0.0.1", 0))
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{unheard.getsockname()[1]}/0")
        assert run_migrate("redis", "files") == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("membot migrate: Redis failed: "), line


async def test_migrate_copies_the_conversations_files_both_ways(
    make_repo: MakeRepo, tmp_path: Path
) -> None:
    files = FilesSide(FileRepository(tmp_path / "data"))
    image, text = new_file_key("jpg"), new_file_key("txt")
    photo = Attachment(kind="image", file=image, mime="image/jpeg", size=4)
    document = Attachment(kind="document", file=text, name="a.txt", chars=5)
    await files.repository.put_file(SESSION, image, b"\xff\xd8\xff\xe0")
    await files.repository.put_file(SESSION, text, b"notes")
    voice = Attachment(kind="voice", seconds=1.0)
    messages = [
        Message(role="user", content="look", attachments=(photo, voice)),
        Message(role="assistant", content="seen"),
        Message(role="user", content="and read", attachments=(document,)),
    ]
    await files.repository.append(SESSION, messages)
    redis = RedisSide(make_repo(ttl=1000))
    report = await migrate(files, redis)
    assert (report.copied, report.files) == (1, 2)
    assert await redis.repository.get_file(SESSION, image) == b"\xff\xd8\xff\xe0"
    assert await redis.repository.get_file(SESSION, text) == b"notes"
    assert 0 < await redis.repository.client.ttl(redis.repository.keys(SESSION).files) <= 1000
    back = FilesSide(FileRepository(tmp_path / "back"))
    assert (await migrate(redis, back)).files == 2
    assert await back.repository.get_file(SESSION, text) == b"notes"
    [first, _, _] = await back.repository.tail(SESSION, 10)
    assert first.attachments == (photo, voice)


async def test_migrate_into_files_writes_them_private(make_repo: MakeRepo, tmp_path: Path) -> None:
    redis = RedisSide(make_repo(ttl=1000))
    image = new_file_key("jpg")
    await redis.repository.put_file(SESSION, image, b"\xff\xd8\xff\xe0")
    photo = Attachment(kind="image", file=image, mime="image/jpeg", size=4)
    await redis.repository.append(
        SESSION, [Message(role="user", content="look", attachments=(photo,))]
    )
    await redis.repository.append(CID, turn("hello"))
    await redis.repository.add_fact(CID, "likes tea", 10)
    back = tmp_path / "back"
    with usual_umask():
        report = await migrate(redis, FilesSide(FileRepository(back)))
    assert (report.copied, report.files) == (2, 1)
    assert (back / "42" / "facts.json").is_file()
    assert (back / SESSION.relative_path() / "files" / image).is_file()
    assert open_to_others(back) == []


async def test_an_error_answer_from_redis_is_unavailable_too_and_tried_again(
    make_repo: MakeRepo,
) -> None:
    """An answer that is an error (here WRONGTYPE; out of memory, a read-only replica alike)
    reaches the turn translated, as the one family the front doors answer (the API's 503,
    the update tried again), not as redis-py's own error (an internal error, a 500)."""
    from membot.errors import StorageRefused, Unavailable
    from membot.intake.contract import transient

    repo = make_repo()
    cid = ConversationId("tg", "-77")
    await repo.client.set(repo.keys(cid).messages, "not a sorted set")
    with pytest.raises(StorageRefused) as refused:
        await repo.tail(cid, 5)
    assert isinstance(refused.value, Unavailable) and transient(refused.value)
    assert isinstance(refused.value.__cause__, ResponseError)
    assert "WRONGTYPE" not in str(refused.value)  # the server's words stay in the cause
