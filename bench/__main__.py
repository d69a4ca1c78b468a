"""`make bench` / `python -m bench [--quick] [--only NAME ...]`.

Prints one table and writes bench/results.json (rows + raw runs + machine info).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.core import Row, format_notes, format_table, normalize_row

RESULTS = Path(__file__).with_name("results.json")
SECTIONS = (
    "overhead",
    "parts",
    "api",
    "history",
    "summary",
    "search",
    "queue",
    "startup",
    "scale",
    "stored",
    "media",
    "stream",
    "cache",
    "tasks",
    "mcp",
    "forget",
    "v1",
    "imports",
    "export",
)

Section = Callable[[bool], Coroutine[Any, Any, tuple[list[Row], dict[str, Any]]]]


def _quiet_logs() -> None:
    from membot.config import setup_logging

    # Logging at INFO would cost membot (and not the floor) a formatted line per update.
    setup_logging("WARNING")
    for name in ("aiogram", "aiohttp.access", "tests.fakes"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Every bench bot is open to everyone on purpose; the startup warning says so each time.
    logging.getLogger("membot.roles.process").addFilter(
        lambda record: "ALLOWED_USER_IDS is empty" not in record.getMessage()
    )


def _own_section(name: str) -> Section:
    module = importlib.import_module(f"bench.{name}")
    run: Section = module.run
    return run


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _machine() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for package in ("aiogram", "openai", "pydantic", "aiohttp"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "tmpdir": tempfile.gettempdir(),  # where DATA_DIR lives during the run (fsyncs hit it)
        "packages": versions,
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _section_of(row: dict[str, Any]) -> str:
    benchmark = str(row.get("benchmark", ""))
    return "search" if benchmark.startswith("search") else benchmark


def _merged(report: dict[str, Any], out: Path, ran: list[str]) -> dict[str, Any]:
    """A run of some sections replaces those in the results file and keeps the others, so
    `--only stored` does not throw away the last full run. Each section kept from before
    says when and how it was measured (`earlier`)."""
    try:
        before = json.loads(out.read_text())
        old_rows = [r for r in before["rows"] if _section_of(r) not in ran]
    except (OSError, ValueError, KeyError, TypeError):
        return report
    earlier = dict(before.get("earlier", {}))
    for name in {_section_of(r) for r in old_rows} - earlier.keys():
        earlier[name] = {"mode": before.get("mode"), "machine": before.get("machine")}
    for name in ran:
        earlier.pop(name, None)
    return {
        **report,
        "seconds": {**before.get("seconds", {}), **report["seconds"]},
        "rows": old_rows + report["rows"],
        "raw": {
            **{k: v for k, v in before.get("raw", {}).items() if k not in ran},
            **report["raw"],
        },
        "earlier": earlier,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fast smoke run (few samples)")
    parser.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="sections to run"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args(argv)
    _quiet_logs()

    rows: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    durations: dict[str, float] = {}
    for name in args.only:
        started = time.perf_counter()
        print(f"running {name}...", file=sys.stderr, flush=True)
        section_rows, section_raw = asyncio.run(_own_section(name)(args.quick))
        rows.extend(normalize_row(dict(r), name) for r in section_rows)
        raw[name] = section_raw
        durations[name] = round(time.perf_counter() - started, 1)

    print(format_table(rows))
    print(format_notes(rows))
    failed = [r for r in rows if r.get("ok") is False]
    print(
        f"\n{len(rows)} rows, {len(failed)} below target; "
        f"mode={'quick' if args.quick else 'full'}; seconds per section: {durations}"
    )
    report = {
        "machine": _machine(),
        "mode": "quick" if args.quick else "full",
        "seconds": durations,
        "rows": rows,
        "raw": raw,
    }
    if set(args.only) != set(SECTIONS):
        report = _merged(report, args.out, args.only)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
