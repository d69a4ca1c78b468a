"""Another assistant's data export (ChatGPT, Claude) read into conversations (/import)."""

from membot.imports.formats import NotAnExport, Said, Thread
from membot.imports.read import BrokenExport, ExportTooBig, read_export

__all__ = ["BrokenExport", "ExportTooBig", "NotAnExport", "Said", "Thread", "read_export"]
