"""Faults a test injects into the fake Bot API: failing calls, Telegram's flood control,
refused formatting. A mixin of FakeTelegram: its state is set up by ``_init_faults``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.telegram.protocol import (
    ApiError,
    chat_id_of,
)

# Methods that count against Telegram's flood control (see FakeTelegram.flood_control).
_PACED = frozenset({"sendmessage", "editmessagetext", "sendphoto", "senddocument"})


@dataclass(slots=True)
class _Fault:
    method: str
    status: int
    description: str
    remaining: int
    chat_id: int | None
    retry_after: int | None
    passes: int = 0  # matching calls let through before the fault starts


class Faults:
    def _init_faults(self) -> None:
        self._faults: list[_Fault] = []
        self._reject_entities: Callable[[dict[str, Any]], bool] | None = None
        # Flood control: key -> (interval, tolerance) and each key's theoretical arrival time.
        self._flood_rules: dict[str, tuple[float, float]] = {}
        self._flood_tat: dict[str, float] = {}
        self.flood_refusals = 0

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        times: int = 1,
        *,
        chat_id: int | None = None,
        retry_after: int | None = None,
        after: int = 0,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (optionally only for ``chat_id``) fail,
        once ``after`` such calls have succeeded (the second part of a long answer, say).

        For 429 the response carries ``parameters.retry_after`` (aiogram raises
        TelegramRetryAfter only then); it defaults to the number in "retry after N" or 1.
        """
        if status == 429 and retry_after is None:
            match = re.search(r"retry after (\d+)", description)
            retry_after = int(match.group(1)) if match else 1
        self._faults.append(
            _Fault(method.lower(), status, description, times, chat_id, retry_after, after)
        )

    def flood_control(
        self,
        *,
        chat_rate: float = 1.0,
        chat_burst: int = 3,
        group_per_minute: float = 20.0,
        bot_rate: float = 30.0,
        slack: float = 0.05,
    ) -> None:
        """Answer 429 with ``retry_after`` to sends beyond these limits, as Telegram does:
        ``chat_rate`` messages per second per chat after a burst of ``chat_burst``, also
        ``group_per_minute`` per group and ``bot_rate`` per second in all. ``slack`` seconds
        of tolerance absorb the clock of whoever paces the bot."""
        self._flood_rules = {
            "chat": (1.0 / chat_rate, (chat_burst - 1) / chat_rate + slack),
            "group": (60.0 / group_per_minute, (chat_burst - 1) * 60.0 / group_per_minute + slack),
            "bot": (1.0 / bot_rate, (bot_rate - 1) / bot_rate + slack),
        }
        self._flood_tat.clear()

    def _flood(self, method: str, params: dict[str, Any]) -> None:
        """GCRA over each limit that applies; all must allow the send, or none is counted."""
        if not self._flood_rules or method.lower() not in _PACED:
            return
        chat_id = chat_id_of(params)
        keys = [("chat", f"chat:{chat_id}"), ("bot", "bot")]
        if chat_id < 0:
            keys.append(("group", f"group:{chat_id}"))
        now = time.monotonic()
        wait = 0.0
        for rule, key in keys:
            interval, tolerance = self._flood_rules[rule]
            tat = max(self._flood_tat.get(key, now), now)
            wait = max(wait, tat - now - tolerance)
        if wait > 0:
            self.flood_refusals += 1
            raise ApiError(
                429,
                f"Too Many Requests: retry after {max(1, round(wait + 0.5))}",
                retry_after=max(1, round(wait + 0.5)),
            )
        for rule, key in keys:
            interval, _ = self._flood_rules[rule]
            self._flood_tat[key] = max(self._flood_tat.get(key, now), now) + interval

    def reject_entities_when(self, predicate: Callable[[dict[str, Any]], bool] | None) -> None:
        """Answer 400 "can't parse entities" to formatted sendMessage calls matching predicate.

        Only messages that carry formatting (``entities`` or ``parse_mode``) are affected, so a
        plain-text retry goes through. The predicate gets the decoded request parameters.
        Pass None to stop rejecting.
        """
        self._reject_entities = predicate

    def _take_fault(self, method: str, params: dict[str, Any]) -> _Fault | None:
        for fault in self._faults:
            if fault.method != method.lower():
                continue
            if fault.chat_id is not None and params.get("chat_id") not in (
                fault.chat_id,
                str(fault.chat_id),
            ):
                continue
            if fault.passes > 0:
                fault.passes -= 1
                return None
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)
            return fault
        return None
