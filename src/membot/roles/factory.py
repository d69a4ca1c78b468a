"""Every part a process role starts, built in one place from the settings.

core        the model, the storage, the turn (membot.wiring): every role
app         the aiogram app, Telegram's front door (not in `api`)
source      polling or webhook: Telegram's updates into the intake (not in `worker`, `api`)
intake      the file journal (QUEUE=local) or the Redis stream (QUEUE=redis) (not in `api`)
runner      takes updates, a lane per chat, feeds the dispatcher (not in `receive`, `api`)
redelivery  sends the answers stored but never sent (where the runner is)
due         the clock: due tasks into the intake (where the intake is, with TASKS)
api         the HTTP API: `api`, and any role when API_PORT is set
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from membot.config import Settings
from membot.roles import ProcessRole
from membot.wiring import Core, build_core

if TYPE_CHECKING:
    from membot.api.server import ApiServer
    from membot.bot.app import MembotApp
    from membot.bot.drafts import DraftPacing
    from membot.bot.outbox import Redelivery
    from membot.intake.contract import Intake
    from membot.intake.due import DueSource
    from membot.intake.polling import PollingSource
    from membot.intake.runner import Runner
    from membot.intake.webhook import WebhookSource


@dataclass
class Parts:
    settings: Settings
    role: ProcessRole
    core: Core
    app: MembotApp | None
    intake: Intake | None
    source: PollingSource | WebhookSource | None
    runner: Runner | None
    api: ApiServer | None
    redelivery: Redelivery | None = None
    due: DueSource | None = None


def build_parts(
    settings: Settings,
    role: ProcessRole = "run",
    core: Core | None = None,
    drafts: DraftPacing | None = None,
) -> Parts:
    if role in ("receive", "worker") and settings.queue.backend != "redis":
        raise ValueError(f"`membot {role}` needs QUEUE=redis")
    # `receive` runs no turn of its own: its core calls no model (and so imports no openai),
    # unless it serves the API beside it (API_PORT), whose turns read files and use MCP tools.
    answers = role != "receive" or settings.api.port is not None
    core = core or build_core(settings, answers=answers)
    tg = None
    if role != "api":  # `membot api` is the HTTP API alone: no Telegram part, no aiogram
        from membot.roles.telegram import build_telegram

        tg = build_telegram(settings, role, core, drafts)
    api = None
    if role == "api" or settings.api.port is not None:
        from membot.api.server import ApiServer  # only when the API is on

        api = ApiServer(settings, core)
    if tg is None:
        return Parts(settings, role, core, None, None, None, None, api)
    return Parts(
        settings, role, core, tg.app, tg.intake, tg.source, tg.runner, api, tg.redelivery, tg.due
    )
