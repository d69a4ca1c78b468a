"""Scale-out as it runs in production: `membot receive` and three `membot worker` processes
on one Redis (a private redis-server with an append-only file), a fake Telegram (polling and
webhook) and a fake model. Several chats send bursts; in the middle a worker that is inside a
model call is killed with SIGKILL, or Redis itself is killed and restarted. Afterwards every
message is answered exactly once, each chat's answers come in the order of its messages, and
each chat's stored history alternates question and answer with nothing lost or repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
import uuid
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from membot.intake.stream import UpdateStream
from tests.api_support import free_port
from tests.conftest import API_KEY, TOKEN
from tests.e2e.processes import PrivateRedis
from tests.e2e.test_redis_outage import redis_server
from tests.fakes import FakeLLM, FakeTelegram
from tests.fakes.process import membot_env, spawn_membot

__all__ = ["redis_server"]  # a fixture, used by name

CHATS = [8101, 8102, 8103, 8104, 8105, 8106]
BURST = 4
SHARDS = 8
SECRET = "scale-out-secret"
# Lines of each process's log shown at the end of a failure's description.
LAST_LINES = 80


class Cluster:
    """The receiver and the workers, as processes. Their stderr is read as it comes (kept
    for failure messages), so a test can wait for a line one of them logs."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, list[str]] = {}
        self._readers: list[asyncio.Task[None]] = []
        self._changed = asyncio.Condition()

    async def spawn(self, name: str, command: str, **extra: str) -> None:
        data_dir = self.tmp_path / f"data-{name}"  # each process its own, as on its own host
        env = {**self.env, "DATA_DIR": str(data_dir), **extra}
        process = await spawn_membot(
            self.tmp_path, env, command, stdout=asyncio.subprocess.DEVNULL, stderr=PIPE
        )
        self.processes[name] = process
        self.output[name] = []
        self._readers.append(asyncio.create_task(self._read(name, process)))

    async def _read(self, name: str, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            self.output[name].append(line.decode(errors="replace"))
            async with self._changed:
                self._changed.notify_all()

    async def wait_for_line(self, name: str, text: str, timeout: float = 120) -> None:
        def logged() -> bool:
            return any(text in line for line in self.output[name])

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(logged)
        except TimeoutError:
            raise AssertionError(f"{name} never logged {text!r}\n{self.describe()}") from None

    def kill(self, name: str) -> None:
        self.processes[name].kill()

    def pid_of(self, name: str) -> int:
        return self.processes[name].pid

    def log(self, name: str) -> str:
        return "".join(self.output[name])

    def describe(self) -> str:
        """Each process's warnings and intake events in full (what explains a failure), then
        the end of its log: enough of it to show what each process did last (a chat's turns,
        the model calls, the tasks), not only how it started."""

        def notable(line: str) -> bool:
            return " WARNING " in line or " ERROR " in line or "membot.intake" in line

        parts = []
        for name, lines in self.output.items():
            events = "".join(line for line in lines if notable(line))
            last = "".join(lines[-LAST_LINES:])
            parts.append(f"--- {name} (exit {self.processes[name].returncode}):\n{events}")
            parts.append(f"... last {min(len(lines), LAST_LINES)} of {len(lines)} lines:\n{last}")
        return "\n".join(parts)

    async def explain(self, llm: FakeLLM | None = None) -> str:
        """`describe`, and where the updates are in Redis: each shard's lease holder, its
        entries and which consumer holds them pending, the chats' turn locks held; and the
        model's requests still open. Says whether a stalled chat waits in the stream, in a
        worker's hands, behind a turn lock, or on the model."""
        lines = [self.describe(), "--- redis:"]
        prefix = self.env["REDIS_PREFIX"]
        try:
            async with asyncio.timeout(10):
                client = Redis.from_url(self.env["REDIS_URL"], decode_responses=True)
                try:
                    for shard in range(SHARDS):
                        key = f"{prefix}q:s:{shard}"
                        holder = await client.get(f"{prefix}q:lease:{shard}")
                        pending = await client.xpending_range(key, "workers", "-", "+", 100)
                        held = [
                            (p["message_id"], p["consumer"], p["time_since_delivered"])
                            for p in pending
                        ]
                        lines.append(
                            f"shard {shard}: lease={holder} entries={await client.xlen(key)} "
                            f"pending(id, consumer, ms)={held}"
                        )
                    async for name in client.scan_iter(f"{prefix}lock:*"):
                        lines.append(f"turn lock {name}: {await client.pttl(name)} ms left")
                    workers = await client.zrange(f"{prefix}q:workers", 0, -1, withscores=True)
                    lines.append(f"workers' heartbeats: {workers}")
                finally:
                    await client.aclose()
        except Exception as exc:  # the explanation must not hide the failure it explains
            lines.append(f"(Redis not read: {exc!r})")
        if llm is not None:
            lines.append(f"--- model: {llm.in_flight} request(s) in flight; asked, in order:")
            for body in llm.chat_requests:
                last = str(body["messages"][-1]["content"])[-60:]
                lines.append(f"  {'streamed' if body.get('stream') else 'plain'}: {last!r}")
        return "\n".join(lines)

    async def stop(self) -> None:
        for process in self.processes.values():
            if process.returncode is None:
                process.terminate()
        for process in self.processes.values():
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)


@pytest.fixture
async def cluster(
    tmp_path: Path, tg: FakeTelegram, llm: FakeLLM, redis_server: PrivateRedis
) -> AsyncIterator[Cluster]:
    await redis_server.start()
    env = membot_env(
        telegram_bot_token=TOKEN,
        telegram_api_base=tg.base_url,
        openrouter_api_key=API_KEY,
        openrouter_base_url=llm.base_url,
        openrouter_model="test/model",
        storage="redis",
        queue="redis",
        redis_url=redis_server.url,
        redis_prefix=f"membot-scale:{uuid.uuid4().hex}:",
        claim_idle="1",
        queue_shards=str(SHARDS),
        summary_every="1000",
        log_level="INFO",
        # Telegram's real pace would stretch the bursts over seconds; pacing has its own test.
        telegram_chat_rate="1000",
        telegram_chat_burst="100",
    )
    made = Cluster(tmp_path, env)
    try:
        yield made
    finally:
        await made.stop()


async def start(cluster: Cluster, tg: FakeTelegram, *, webhook: bool = False) -> None:
    """A receiver and three workers; ready once the receiver receives and every worker has
    joined (each logs its start once it holds its share of the shards)."""
    receive: dict[str, str] = {}
    if webhook:
        port = free_port()
        receive = {
            "TELEGRAM_MODE": "webhook",
            "WEBHOOK_URL": f"http://127.0.0.1:{port}/tg/hook",
            "WEBHOOK_PORT": str(port),
            "WEBHOOK_SECRET": SECRET,
        }
    await asyncio.gather(
        cluster.spawn("receiver", "receive", **receive),
        *(cluster.spawn(f"worker{n}", "worker") for n in range(3)),
    )
    ready = "setWebhook" if webhook else "getUpdates"
    try:
        await tg.wait_for_call(ready, timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.describe()}") from None
    for n in range(3):
        await cluster.wait_for_line(f"worker{n}", "stream: worker")


def push_bursts(tg: FakeTelegram) -> dict[int, list[str]]:
    pushed: dict[int, list[str]] = {chat: [] for chat in CHATS}
    for i in range(BURST):
        for chat in CHATS:
            text = f"m{i} from {chat}"
            tg.push_text(chat, text)
            pushed[chat].append(text)
    return pushed


async def worker_in_a_model_call(llm: FakeLLM, redis: Redis, prefix: str, cluster: Cluster) -> str:
    """The name of a worker that holds a model request open right now: the chat of an
    answered-to-be request, its shard, the shard's lease holder (host:pid:nonce), its pid."""
    await llm.wait_for_in_flight(3, timeout=30)
    request = llm.chat_requests[0]
    text = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
    chat = text.rsplit(" ", 1)[1]
    shard = UpdateStream(redis, prefix, SHARDS).shard_of(chat, 0)
    # CLAIM_IDLE=1 here: on a loaded machine the holder may renew its lease a moment late
    # and take it back (the shard stays assigned to it). Wait for that, not a first look.
    deadline = time.monotonic() + 10
    while (holder := await redis.get(f"{prefix}q:lease:{shard}")) is None:
        assert time.monotonic() < deadline, f"shard {shard} has no holder"
        await asyncio.sleep(0.05)
    pid = int(holder.split(":")[1])
    return next(n for n in cluster.processes if cluster.pid_of(n) == pid)


async def all_answered_once_in_order(
    tg: FakeTelegram,
    llm: FakeLLM,
    cluster: Cluster,
    redis: Redis,
    prefix: str,
    pushed: dict[int, list[str]],
) -> None:
    try:
        for chat in CHATS:
            await tg.wait_for_messages(chat, BURST, timeout=60)
        # One more message per chat: a chat's updates are handled in order, so a repeat of an
        # earlier one would have been answered before this one is.
        for chat in CHATS:
            tg.push_text(chat, "last")
            pushed[chat].append("last")
        for chat in CHATS:
            await tg.wait_for_messages(chat, BURST + 1, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{await cluster.explain(llm)}") from None
    for chat in CHATS:
        answers = [m.text for m in tg.messages_to(chat)]
        assert answers == [f"ANSWER: {q}" for q in pushed[chat]], (chat, cluster.describe())
        stored = [
            json.loads(line)
            for line in await redis.zrange(f"{prefix}conv:tg:{chat}:messages", 0, -1)
        ]
        roles = [m["role"] for m in stored]
        assert roles == ["user", "assistant"] * len(pushed[chat]), chat
        assert [m["content"] for m in stored if m["role"] == "user"] == pushed[chat]
    for name in cluster.output:
        assert "Traceback" not in cluster.log(name), cluster.describe()


@contextlib.asynccontextmanager
async def client_of(server: PrivateRedis) -> AsyncIterator[Redis]:
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.parametrize("webhook", [False, True], ids=["polling", "webhook"])
async def test_a_worker_killed_mid_answer_loses_nothing_and_repeats_nothing(
    tg: FakeTelegram,
    llm: FakeLLM,
    cluster: Cluster,
    redis_server: PrivateRedis,
    webhook: bool,
) -> None:
    prefix = cluster.env["REDIS_PREFIX"]
    await start(cluster, tg, webhook=webhook)
    llm.gate = asyncio.Event()  # the model holds every answer until the kill
    pushed = push_bursts(tg)
    async with client_of(redis_server) as redis:
        victim = await worker_in_a_model_call(llm, redis, prefix, cluster)
        cluster.kill(victim)
        await cluster.processes[victim].wait()
        llm.gate.set()
        await all_answered_once_in_order(tg, llm, cluster, redis, prefix, pushed)
    assert cluster.processes[victim].returncode == -signal.SIGKILL
    # The dead worker's updates were taken over by the others, not answered by a ghost.
    survivors = [n for n in cluster.output if n.startswith("worker") and n != victim]
    assert any("took over" in cluster.log(n) for n in survivors), cluster.describe()


async def test_a_redis_restart_mid_load_loses_nothing_and_repeats_nothing(
    tg: FakeTelegram, llm: FakeLLM, cluster: Cluster, redis_server: PrivateRedis
) -> None:
    prefix = cluster.env["REDIS_PREFIX"]
    # Leases and turn locks outlive the restart, as they do with the default CLAIM_IDLE
    # (30 s). With the 1 s the other tests use to make take-overs quick, a restart on a busy
    # machine can outlast a lease: then a worker may finish a turn it began while the new
    # holder moves on, and one chat may see an answer out of order (docs/operating.md, Scale-out).
    cluster.env["CLAIM_IDLE"] = "5"
    await start(cluster, tg)
    llm.gate = asyncio.Event()
    pushed = push_bursts(tg)
    await llm.wait_for_in_flight(3, timeout=30)
    await redis_server.stop(signal.SIGKILL)  # with answers in the model's hands
    llm.gate.set()
    await redis_server.start()  # the same port and append-only file
    async with client_of(redis_server) as redis:
        await all_answered_once_in_order(tg, llm, cluster, redis, prefix, pushed)
