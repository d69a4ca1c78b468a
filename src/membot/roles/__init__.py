"""Process roles, built in one place: a role is which parts it starts (factory.py).

    membot run       source + intake + runner (+ the HTTP API when API_PORT is set)
    membot receive   source + intake                     (QUEUE=redis)
    membot worker    runner, taking from the intake      (QUEUE=redis)
    membot api       the HTTP API alone

Every role has the one lifecycle of `Process` (process.py), `api` too. Start-up: the core,
the command menu, the intake (a crashed run's updates first), the runner, then the source, then
the API. Shutdown: receiving stops first; the turns in progress finish within shutdown_grace;
then the API's requests, the summaries, and everything is released.
"""

from __future__ import annotations

from typing import Literal

# What a process does: `run` receives and answers; with QUEUE=redis, `receive` only puts
# updates in the stream and `worker` only answers from it; `api` serves the HTTP API alone.
ProcessRole = Literal["run", "receive", "worker", "api"]
