"""Conversation memory: the contract (memory/contract), the backends (files, redis, inmemory),
answering through a Redis outage (outage) and copying between backends (migrate)."""

from membot.memory.contract.models import ChatContext, ChatMeta, Message, Summary
from membot.memory.contract.repository import ChatRepository
from membot.memory.contract.state import ConversationState, SessionConfig
from membot.memory.files.repository import FileRepository
from membot.memory.inmemory import MemoryRepository

__all__ = [
    "ChatContext",
    "ChatMeta",
    "ChatRepository",
    "ConversationState",
    "FileRepository",
    "MemoryRepository",
    "Message",
    "SessionConfig",
    "Summary",
]
