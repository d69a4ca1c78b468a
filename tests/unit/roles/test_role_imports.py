"""What a role's process imports: `membot receive` runs no turn, so it never imports the
model's client (openai: 0.3 s of its start-up or more); a role that answers does, at start-up
rather than in its first turn. Each role is built in a fresh process, as `python -m membot`
builds it (building connects nowhere); should that model ever be called, it is built then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from membot.llm.model import ModelRequest
from membot.roles import ProcessRole
from membot.wiring import build_model
from tests.conftest import API_KEY
from tests.fakes import FakeLLM
from tests.unit.conftest import llm_settings

SCRIPT = """
import sys
from membot.config import load_settings
from membot.roles.process import Process

settings = load_settings(
    _env_file=None,
    telegram_bot_token="123456:test-token",
    openrouter_api_key="test-key",
    storage="redis",
    queue="redis",
    redis_url="redis://127.0.0.1:1/0",
    data_dir=sys.argv[2],
)
Process(settings, sys.argv[1])
print(sorted({"openai", "aiogram"} & set(sys.modules)))
"""


def imported_by(role: ProcessRole, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, role, str(tmp_path / "data")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("role", "imported"),
    [("receive", "['aiogram']"), ("worker", "['aiogram', 'openai']")],
)
def test_only_a_role_that_answers_imports_the_models_client(
    role: ProcessRole, imported: str, tmp_path: Path
) -> None:
    assert imported_by(role, tmp_path) == imported


async def test_a_model_built_on_first_call_answers_when_called(llm: FakeLLM) -> None:
    llm.script("built when asked")
    model = build_model(llm_settings(llm.base_url, API_KEY), on_first_call=True)
    assert model.model_name == "test/model"
    try:
        reply = await model.complete(ModelRequest([{"role": "user", "content": "hi"}]))
        assert reply.content == "built when asked"
    finally:
        await model.close()
