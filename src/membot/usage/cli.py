"""`membot usage [--since DATE] [--json]`: what each user and each chat cost, for the
operator. It reads only the storage (DATA_DIR or Redis), so it needs no tokens."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import date
from typing import Any

from membot.clock import utc_now
from membot.config import ConfigError, load_subset
from membot.errors import StorageUnavailable
from membot.usage.ledger import Row, UsageLedger, day_key

_FIELDS = ("storage", "data_dir", "redis_url", "redis_prefix")


def _open(values: dict[str, Any]) -> tuple[UsageLedger, Any]:
    if values["storage"] == "redis":
        from membot.redis.client import create_client
        from membot.usage.redis import RedisLedger

        client = create_client(values["redis_url"].get_secret_value())
        return RedisLedger(client, values["redis_prefix"]), client
    from membot.usage.files import FileLedger

    return FileLedger(values["data_dir"]), None


async def _report(values: dict[str, Any], since: str, until: str) -> list[Row]:
    ledger, client = _open(values)
    try:
        return await ledger.report(since, until)
    finally:
        await ledger.close()
        if client is not None:
            await client.aclose()


def run_usage(since: str | None, *, as_json: bool) -> int:
    """The command; the exit status for the shell."""
    today = utc_now()
    if since is None:
        since = today.strftime("%Y-%m-01")  # this month
    try:
        date.fromisoformat(since)
    except ValueError:
        print(
            f"membot usage: --since must be a date like 2026-11-01, not {since!r}", file=sys.stderr
        )
        return 2
    try:
        values = load_subset(*_FIELDS)
    except ConfigError as exc:
        print(f"membot usage: {exc}", file=sys.stderr)
        return 2
    try:
        rows = asyncio.run(_report(values, since, day_key(today)))
    except StorageUnavailable as exc:
        print(f"membot usage: Redis failed: {exc.__cause__ or exc}", file=sys.stderr)
        return 1
    if as_json:
        out = [{"kind": r.kind, "id": r.subject, **r.totals.to_dict()} for r in rows]
        print(json.dumps({"since": since, "until": day_key(today), "rows": out}, indent=2))
        return 0
    print(f"usage from {since} to {day_key(today)} (UTC days)")
    header = (
        "kind",
        "id",
        "calls",
        "prompt",
        "completion",
        "cached",
        "cached%",
        "cost",
        "unpriced",
        "estimated",
    )
    table = [header] + [
        (
            r.kind,
            r.subject,
            str(r.totals.calls),
            str(r.totals.prompt_tokens),
            str(r.totals.completion_tokens),
            str(r.totals.cached_tokens),
            f"{r.totals.cached_percent}%",
            format(r.totals.cost.normalize(), "f"),
            str(r.totals.unpriced),
            str(r.totals.estimated),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    if not rows:
        print("(no model calls in this period)")
    return 0
