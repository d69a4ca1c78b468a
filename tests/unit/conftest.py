"""Fixtures of the core's unit tests: the in-memory backend and the scripted model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.scripted import ScriptedModel

from membot.memory import MemoryRepository


@pytest.fixture
def repo() -> MemoryRepository:
    """The in-memory backend; modules that test the file backend define their own `repo`."""
    return MemoryRepository()


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    """A scripted model that fails the test if it got requests the test did not script."""
    scripted = ScriptedModel()
    yield scripted
    assert not scripted.unexpected, "the model got requests the test did not script"
