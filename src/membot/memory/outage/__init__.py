"""Answering while Redis is down (`STORAGE=redis` with `QUEUE=local`): the resilient
repository in front of the Redis one, the writes kept for later (changes) and the spool file
that holds them until Redis answers again."""

from membot.memory.outage.repository import SPOOL_NAME, ResilientRepository

__all__ = ["SPOOL_NAME", "ResilientRepository"]
