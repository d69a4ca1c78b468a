"""The Telegram parts of a role, built from the settings: the aiogram app, the intake, the
source, the runner and the redelivery of answers stored but not sent. Imported only by the
roles that have them: `membot api` never imports this module, and so never aiogram. The clock
that fires due tasks (intake/due.py) is a source too, in every role with an intake."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from membot.bot.app import COMMANDS, MembotApp
from membot.bot.drafts import TELEGRAM_PACING, DraftPacing
from membot.bot.outbox import Outbox, Redelivery
from membot.bot.updates import BotUpdates
from membot.config import QueueSettings, Settings
from membot.intake.contract import Entry, Intake, transient
from membot.intake.due import DueSource
from membot.intake.journal import Journal
from membot.intake.polling import PollingSource
from membot.intake.runner import Runner
from membot.intake.webhook import WebhookSource
from membot.roles import ProcessRole
from membot.wiring import Core

if TYPE_CHECKING:
    from membot.redis.client import Redis


@dataclass
class TelegramParts:
    app: MembotApp
    intake: Intake
    source: PollingSource | WebhookSource | None
    runner: Runner | None
    redelivery: Redelivery | None
    due: DueSource | None = None


def build_telegram(
    settings: Settings, role: ProcessRole, core: Core, drafts: DraftPacing | None = None
) -> TelegramParts:
    stream = settings.queue.backend == "redis"
    pacing = drafts or TELEGRAM_PACING
    # With the stream, a failure that passes is left to the runner to try again.
    app = (
        MembotApp(settings, core, passing=transient, drafts=pacing)
        if stream
        else MembotApp(settings, core, drafts=pacing)
    )
    client: Redis | None = None
    intake: Intake
    name = ""
    if stream:
        from membot.intake.redis import consumer_name

        name = consumer_name()
        client, intake = _stream(core, settings.queue, name, takes=role != "receive")
    else:
        intake = Journal(
            settings.storage.data_dir,
            commands=COMMANDS,
            keep=app.worth_keeping,
            readable=app.readable,
            repository=core.repository,
        )
    source = None if role == "worker" else _source(settings, app, intake, client, name)
    runner = None
    if role != "receive":

        async def feed(entry: Entry, /, *parts: Entry) -> None:
            await app.feed(entry.data, *(part.data for part in parts))

        runner = Runner(
            intake,
            feed,
            turns=core.service,
            repository=core.repository,
            # Journal or stream: a burst (a thousand tasks due at once) waits its turn.
            concurrency=settings.queue.worker_concurrency,
            stops=core.service.stops.stop,
        )
    # Where answers are sent (not `receive`): those stored and never sent go out at start.
    redelivery = (
        Redelivery(Outbox(app.bot, core.repository), core.service) if runner is not None else None
    )
    return TelegramParts(
        app, intake, source, runner, redelivery, _due(settings, core, intake, name)
    )


def _due(settings: Settings, core: Core, intake: Intake, name: str) -> DueSource | None:
    """The clock that puts due tasks into the intake (TASKS): in every role that has one;
    with Redis only the holder of its lease fires."""
    if not settings.tasks.enabled:
        return None
    lease = None
    if core.redis is not None and settings.queue.backend == "redis":
        from membot.intake.shards import ReceiverLease

        lease = ReceiverLease(
            core.redis, settings.redis.prefix, name, ttl=settings.queue.claim_idle, name="clock"
        )
    # With a lease, it is renewed at least three times within its time to live.
    poll = min(1.0, settings.queue.claim_idle / 3) if lease is not None else 1.0
    return DueSource(core.task_store, intake, clock=core.clock, lease=lease, poll=poll)


def _stream(core: Core, queue: QueueSettings, name: str, *, takes: bool) -> tuple[Redis, Intake]:
    from membot.intake.redis import StreamIntake
    from membot.intake.shards import ShardLeases
    from membot.intake.stream import UpdateStream

    # The process's one client (membot.wiring: its timeouts fit a read of BLOCK_MS).
    if core.redis is None:
        raise ValueError("QUEUE=redis needs STORAGE=redis")  # the settings say so first
    client, prefix = core.redis, core.settings.redis.prefix
    stream = UpdateStream(client, prefix, queue.shards)
    leases = None
    if takes:
        leases = ShardLeases(client, prefix, name, ttl=queue.claim_idle)
    return client, StreamIntake(stream, leases, claim_idle=queue.claim_idle)


def _source(
    settings: Settings, app: MembotApp, intake: Intake, client: Redis | None, name: str
) -> PollingSource | WebhookSource:
    telegram, claim_idle = settings.telegram, settings.queue.claim_idle
    if telegram.mode == "webhook":
        assert telegram.webhook_url is not None and telegram.webhook_secret is not None
        return WebhookSource(
            BotUpdates(app.bot),
            intake,
            url=telegram.webhook_url,
            host=telegram.webhook_host,
            port=telegram.webhook_port,
            path=telegram.webhook_path,
            secret=telegram.webhook_secret.get_secret_value(),
            allowed_updates=app.allowed_updates(),
        )
    if client is None:  # QUEUE=local, one process: aiogram's own polling timeout
        return PollingSource(
            BotUpdates(app.bot), intake, allowed_updates=app.allowed_updates(), poll_timeout=10
        )
    from membot.intake.shards import ReceiverLease

    # Only one process polls (a second poll gets 409 Conflict): the others stand by.
    lease = ReceiverLease(client, settings.redis.prefix, name, ttl=claim_idle)
    return PollingSource(
        BotUpdates(app.bot),
        intake,
        allowed_updates=app.allowed_updates(),
        # A poll waits at most a third of the lease, so the lease is renewed in time.
        poll_timeout=max(1, min(25, int(claim_idle / 3))),
        lease=lease,
        standby=max(claim_idle / 3, 0.2),
    )
