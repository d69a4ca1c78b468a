"""Chat memory: models, the repository contract, and the backends."""

from membot.memory.base import ChatRepository
from membot.memory.files import FileRepository
from membot.memory.models import ChatContext, ChatMeta, Message, Summary

__all__ = ["ChatContext", "ChatMeta", "ChatRepository", "FileRepository", "Message", "Summary"]
