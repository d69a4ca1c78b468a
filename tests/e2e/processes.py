"""Processes of an end-to-end test: membot's (`Runs`: started, killed, stopped, their stderr
in one file) and a redis-server of the test's own (`PrivateRedis`), and `until`, the one way
a test waits for what it can observe."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tests.api_support import free_port
from tests.fakes.process import spawn_membot


class Runs:
    """The bot's processes, one after another, their stderr in one file."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.stderr_path = tmp_path / "membot.stderr"
        self._files: list[IO[bytes]] = []
        self._processes: list[asyncio.subprocess.Process] = []

    async def spawn(self, *args: str, **extra: str) -> asyncio.subprocess.Process:
        out = open(self.stderr_path, "ab")  # noqa: SIM115 - closed in close()
        self._files.append(out)
        env = {**self.env, **extra}
        process = await spawn_membot(self.tmp_path, env, *args, stdout=out, stderr=out)
        self._processes.append(process)
        return process

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def started(self, role: str) -> int:
        """How many processes of `role` have logged their start."""
        return self.log().count(f"membot {role} started")

    async def wait_started(self, role: str, count: int) -> float:
        """Wait until `count` processes of `role` have started; the time then."""
        await self.until(f"{count} {role} started", lambda: self.started(role) >= count)
        return time.monotonic()

    async def until(self, what: str, check: Callable[[], bool], timeout: float = 120) -> None:
        """Poll `check` (the fakes' records, files on disk) until true, with a deadline."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\nbot stderr:\n{self.log()}")
            await asyncio.sleep(0.05)

    async def kill(self, process: asyncio.subprocess.Process) -> None:
        process.kill()
        await process.wait()
        assert process.returncode == -signal.SIGKILL

    async def stop(self, process: asyncio.subprocess.Process) -> None:
        process.send_signal(signal.SIGTERM)
        await process.wait()
        assert process.returncode == 0, self.log()

    def close(self) -> None:
        """Close the log files; a process a failed test left running is killed, so it cannot
        outlive the test (and keep answering from a deleted directory)."""
        for process in self._processes:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
        for out in self._files:
            out.close()


class PrivateRedis:
    """A redis-server of the test's own, started, stopped, killed, hung and restarted."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.proc = self._spawn()
        await until(self._answers_ping, what="redis-server to answer PING")

    def _spawn(self) -> subprocess.Popen[bytes]:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        args += ["yes", "--appendfsync", "always", "--dir", str(self.directory)]
        return subprocess.Popen(
            ["redis-server", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        await asyncio.to_thread(self.proc.wait, 10)
        self.proc = None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)


async def until(predicate: Callable[[], bool], *, what: str, timeout: float = 30.0) -> float:
    """Wait for an observable condition (polled); how long it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - started
