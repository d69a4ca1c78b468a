"""One root for membot's own exceptions, and the tree written down (errors.py, docs)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import membot
from membot.errors import Busy, MembotError, Unavailable

DOCS = Path(__file__).parents[2] / "docs" / "architecture.md"


def our_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(membot.__path__, "membot."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[obj.__name__] = obj
    return found


def test_every_exception_of_ours_derives_from_the_one_root() -> None:
    found = our_exceptions()
    assert len(found) > 20  # the walk saw the packages
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, MembotError))
    assert strays == []


def test_the_tree_is_written_down_in_the_architecture_page() -> None:
    """Every class, by name, in docs/architecture.md's Errors section: a new one must be
    placed in the tree where a reader looks for it."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Errors") :]
    missing = sorted(name for name in our_exceptions() if name not in section)
    assert missing == []


def test_busy_and_unavailable_are_the_families_front_doors_translate() -> None:
    found = our_exceptions()
    assert issubclass(found["ConversationBusy"], Busy)
    for name in ("StorageUnavailable", "IntakeUnavailable", "LLMUnavailable"):
        assert issubclass(found[name], Unavailable)
