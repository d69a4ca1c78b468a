"""Per-key asyncio locks that do not pile up: one lock per chat only while it is in use."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Hashable


class KeyedLocks:
    """`locks(key)` is the lock for `key`; an entry vanishes once no coroutine holds or
    awaits it (the dictionary keeps weak references), so no per-chat state accumulates."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def __call__(self, key: Hashable) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock
