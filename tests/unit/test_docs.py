"""Every setting is documented where a user looks for it: .env.example and the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from membot.config import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(n.upper() for n in Settings.model_fields))
def test_setting_is_in_env_example_and_readme(name: str) -> None:
    env_example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"^#? ?{name}=", env_example, re.MULTILINE), f"{name} not in .env.example"
    assert f"| `{name}` |" in readme, f"{name} not in the README's settings table"
