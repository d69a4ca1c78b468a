"""The embedded default backend (`STORAGE=files`): one directory of plain files per
conversation, its layout, the archive's reader, the small JSON files, the contexts kept hot
and the delivery marks."""

from membot.memory.files.repository import FileRepository

__all__ = ["FileRepository"]
