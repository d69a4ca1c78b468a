"""Usage accounting (what each model call cost, per user and per chat), budgets and the
per-user rate limit. See ledger.py for how calls are charged and quota.py for the limits."""

from membot.usage.ledger import (
    Charge,
    Row,
    Tally,
    Totals,
    UsageLedger,
    charged_to,
    tallied,
)
from membot.usage.metered import ChargeWriter, MeteredModel
from membot.usage.quota import Limits, OverLimit, Quota

__all__ = [
    "Charge",
    "ChargeWriter",
    "Limits",
    "MeteredModel",
    "OverLimit",
    "Quota",
    "Row",
    "Tally",
    "Totals",
    "UsageLedger",
    "charged_to",
    "tallied",
]
