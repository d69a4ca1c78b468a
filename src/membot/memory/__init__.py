"""Conversation memory: models, the repository contract, and the backends."""

from membot.memory.base import ChatRepository
from membot.memory.files import FileRepository
from membot.memory.inmemory import MemoryRepository
from membot.memory.models import ChatContext, ChatMeta, Message, Summary
from membot.memory.state import ConversationState, SessionConfig

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
