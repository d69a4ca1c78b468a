"""`membot run` / `membot check-config` (also `python -m membot`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from membot.config import ConfigError, load_settings, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="membot", description="A Telegram assistant that remembers."
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="start the bot (long polling)")
    sub.add_parser("check-config", help="validate the settings and print them, secrets masked")
    args = parser.parse_args(argv)
    command = args.command or "run"

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"membot: {exc}", file=sys.stderr)
        return 2

    if command == "check-config":
        for name, value in settings.masked().items():
            print(f"{name}={value}")
        print("configuration OK")
        return 0

    setup_logging(settings.log_level)
    from membot.bot.app import MembotApp  # imported late: aiogram is heavy for check-config

    # aiogram turns SIGINT/SIGTERM into a graceful stop; a second Ctrl-C lands here.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(MembotApp(settings).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
