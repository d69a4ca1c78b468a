"""`membot run` / `worker` / `receive` / `api` / `check-config` / `search` / `mcp` /
`migrate` / `usage` / `--version` (also `python -m membot`)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from membot.config import Settings
    from membot.roles import ProcessRole

# Every command imports what it needs when it runs: `membot --help` imports nothing of ours,
# the operator commands neither aiogram nor the model client (docs/benchmarks.md, Start-up).


def main(argv: list[str] | None = None) -> int:
    """The command line. Output piped into a reader that stops early (`membot usage | head`)
    ends quietly with status 1, as Python's docs advise for SIGPIPE: the rest is not written,
    and stdout points at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # what is still buffered fails here, not at exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


class _Version(argparse.Action):
    """`membot --version`: the installed package's version, looked up only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import version

        print(f"membot {version('membot')}")
        parser.exit()


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="membot", description="An LLM assistant that remembers: Telegram and HTTP."
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the installed version and exit"
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="start the bot (long polling), and the HTTP API if API_PORT is set")
    sub.add_parser(
        "worker", help="QUEUE=redis: answer updates from the Redis stream (run any number)"
    )
    sub.add_parser(
        "receive", help="QUEUE=redis: only take updates from Telegram into the Redis stream"
    )
    sub.add_parser("api", help="serve the HTTP chat API alone (no Telegram token needed)")
    sub.add_parser("check-config", help="validate the settings and print them, secrets masked")
    search = sub.add_parser(
        "search", help="search a chat's whole archive (reads the storage, needs no tokens)"
    )
    # A string, checked by the command: argparse would answer a bad id with a usage dump.
    # "-100123" (a group) still parses as a value, not an option: no option looks like one.
    search.add_argument(
        "chat_id", metavar="CHAT_ID", help="the chat id (negative for groups) or api:<session>"
    )
    search.add_argument("query", metavar="QUERY", help="words to look for")
    search.add_argument(
        "--budget", type=int, help="tokens to show, 500-50000 (default: SEARCH_BUDGET_TOKENS)"
    )
    search.add_argument("--since", metavar="DATE", help="only from this day on (2025-06-01)")
    search.add_argument("--until", metavar="DATE", help="only up to this day, inclusive")
    search.add_argument("--json", action="store_true", help="print the excerpts as JSON")
    search.add_argument(
        "--data-dir",
        type=Path,
        help="the archive (STORAGE=files) and the index cache; default: DATA_DIR, else data",
    )
    mcp = sub.add_parser(
        "mcp", help="serve one conversation's memory over MCP (stdio; --http for HTTP)"
    )
    which = mcp.add_mutually_exclusive_group(required=True)
    which.add_argument("--chat", metavar="CHAT_ID", help="a Telegram chat's memory")
    which.add_argument("--session", metavar="SESSION_ID", help="an HTTP API session's memory")
    which.add_argument("--user", metavar="ID", help="the memory of a /v1 caller with this user")
    mcp.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp (bearer: one of API_TOKENS)",
    )
    mcp.add_argument("--data-dir", type=Path, default=None, help="instead of DATA_DIR")
    migrate = sub.add_parser(
        "migrate",
        help="copy conversations and tasks between the file and Redis backends (needs no tokens)",
    )
    migrate.add_argument("--from", dest="source", choices=("files", "redis"), required=True)
    migrate.add_argument("--to", dest="target", choices=("files", "redis"), required=True)
    migrate.add_argument(
        "--overwrite", action="store_true", help="replace conversations the target holds otherwise"
    )
    usage = sub.add_parser(
        "usage", help="tokens and cost per user and per chat (reads the storage, needs no tokens)"
    )
    usage.add_argument("--since", metavar="DATE", help="first UTC day, default: this month's 1st")
    usage.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    command = args.command or "run"

    if command == "migrate":
        from membot.memory.migrate import run_migrate  # redis-py only where it is used
        from membot.schedule.migrate import task_copy

        # The chats' tasks after their conversations (membot/schedule/migrate.py).
        tasks = task_copy(args.source, args.target, overwrite=args.overwrite)
        return run_migrate(args.source, args.target, overwrite=args.overwrite, also=[tasks])

    if command == "usage":
        from membot.usage.cli import run_usage

        return run_usage(args.since, as_json=args.json)

    if command == "mcp":
        # Before load_settings: serving memory needs no Telegram or OpenRouter tokens.
        from membot.serve.cli import run_mcp

        return run_mcp(
            chat=args.chat,
            session=args.session,
            user=args.user,
            http=args.http,
            data_dir=args.data_dir,
        )

    if command == "search":
        # Before load_settings: searching needs no Telegram or OpenRouter tokens.
        from membot.search.cli import run_search

        return run_search(
            args.chat_id,
            args.query,
            budget=args.budget,
            since=args.since,
            until=args.until,
            as_json=args.json,
            data_dir=args.data_dir,
        )

    from membot.config import ConfigError, load_settings, masked, setup_logging

    try:
        settings = load_settings(telegram=command != "api", api=True if command == "api" else None)
    except ConfigError as exc:
        print(f"membot: {exc}", file=sys.stderr)
        return 2

    if command == "check-config":
        for name, value in masked(settings).items():
            print(f"{name}={value}")
        print("configuration OK")
        return 0

    if command in ("worker", "receive") and settings.queue.backend != "redis":
        print(f"membot: QUEUE is invalid: `membot {command}` needs QUEUE=redis", file=sys.stderr)
        return 2
    setup_logging(settings.logging.level)
    return _run(settings, cast("ProcessRole", command))


def _freeze_heap() -> None:
    """Everything imported and built before serving lives as long as the process: move it
    out of the collector's sight. aiogram, pydantic and openai leave ~10^6 long-lived
    objects, and walking them made each full collection a 200 ms pause in mid-answer.
    A process-wide effect, so it belongs here, not to the objects tests build. The
    collector was off until now (_collect_later): it is turned back on."""
    gc.collect()
    gc.freeze()
    gc.enable()


def _collect_later() -> None:
    """No cyclic collection while the server imports and builds what lives as long as it:
    walking those objects again and again is ~8% of importing aiogram, and none of them is
    garbage. _freeze_heap collects once and turns the collector back on."""
    gc.disable()


def _run(settings: Settings, role: ProcessRole) -> int:
    """Every role, `membot api` too: built, started, served until a signal, shut down
    (roles/process.py). A failure at start-up is one line on stderr, no traceback."""
    _collect_later()
    import asyncio

    from membot.roles.process import Process  # imported late: heavy for check-config

    async def run() -> None:
        app = Process(settings, role)
        # Built, not yet serving: the one full collection pauses nothing. Run as a start-up
        # handler it came after the worker or the webhook had begun, and a 0.3-0.5 s pause
        # there could let a short lease lapse in mid-answer.
        _freeze_heap()
        await app.run()

    # SIGINT/SIGTERM are a graceful stop once the process is built (roles/signals.py); a
    # Ctrl-C before that, while importing and building, ends it here, quietly.
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run())
    except Exception as exc:
        failure = _start_up_failure(exc, settings)
        if failure is None:
            raise
        line, status = failure
        print(f"membot: {line}", file=sys.stderr)
        return status
    return 0


def _start_up_failure(exc: Exception, settings: Settings) -> tuple[str, int] | None:
    """What an operator reads, and the exit status, for a failure at start-up; None for one
    that is a bug (its traceback is shown). Configuration: 2; what may pass (a network, a
    port, Redis): 1."""
    from membot.config import ConfigError
    from membot.errors import StorageUnavailable

    if isinstance(exc, ConfigError):  # found at start-up (the stream's shard count, say)
        return str(exc), 2
    telegram = _telegram_failure(exc, settings)
    if telegram is not None:
        return telegram
    if isinstance(exc, OSError):
        # A port taken (API_PORT, WEBHOOK_PORT), say: one line, not a traceback.
        return f"cannot start: {exc.strerror or exc}", 1
    if isinstance(exc, StorageUnavailable):  # Redis's errors are translated where made
        return f"cannot reach Redis at start-up (REDIS_URL): {exc.__cause__ or exc}", 1
    return None


def _telegram_failure(exc: Exception, settings: Settings) -> tuple[str, int] | None:
    # aiogram not imported (`membot api`): nothing can have raised its errors, and importing
    # it now would cost seconds for nothing.
    if "aiogram.exceptions" not in sys.modules:
        return None
    from aiogram.exceptions import TelegramNetworkError, TelegramUnauthorizedError

    if isinstance(exc, TelegramUnauthorizedError):
        return "TELEGRAM_BOT_TOKEN is invalid: the Bot API refused it (401 Unauthorized)", 2
    if isinstance(exc, TelegramNetworkError):
        # Only at start-up: once polling runs, the source retries network errors with backoff.
        return (
            f"cannot reach the Telegram Bot API at {settings.telegram.api_base} "
            f"(TELEGRAM_API_BASE): {exc.message}",
            1,
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
