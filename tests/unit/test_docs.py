"""Every setting is documented where a user looks for it: .env.example and the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from membot.bot.texts import EN
from membot.config import env_names

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(env_names()))
def test_setting_is_in_env_example_and_readme(name: str) -> None:
    env_example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"^#? ?{name}=", env_example, re.MULTILINE), f"{name} not in .env.example"
    assert f"| `{name}` |" in readme, f"{name} not in the README's settings table"


@pytest.mark.parametrize("command", sorted(name for name, _ in EN.COMMANDS))
def test_every_bot_command_is_in_the_readme(command: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"| `/{command}" in readme, f"/{command} not in the README's command table"


@pytest.mark.parametrize(
    "command", ["run", "worker", "receive", "api", "check-config", "search", "migrate", "usage"]
)
def test_every_cli_command_is_in_the_readme(command: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"\nmembot {command}" in readme, f"membot {command} not in the README's command line"
