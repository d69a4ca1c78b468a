"""Reading an export: ChatGPT's active branch, Claude's, and every file refused whole."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membot.imports import BrokenExport, ExportTooBig, NotAnExport, read_export
from tests.fakes.exports import (
    Chat,
    Turn,
    chatgpt_conversation,
    chatgpt_json,
    claude_json,
    claude_zip,
)

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def chat() -> Chat:
    return Chat(
        "c1",
        "Bread",
        [
            Turn("user", "How do I bake rye bread?", T0),
            Turn("assistant", "Start with a sourdough starter", T0 + timedelta(minutes=1)),
            Turn("user", "How long to proof?", T0 + timedelta(minutes=2)),
            Turn("assistant", "About four hours", T0 + timedelta(minutes=3)),
        ],
        abandoned={1: [Turn("assistant", "Use commercial yeast", T0)]},
    )


def write(tmp_path: Path, data: bytes, name: str = "export") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_chatgpt_takes_the_branch_last_shown(tmp_path: Path) -> None:
    [thread] = read_export(write(tmp_path, chatgpt_json([chat()])), 10**6)
    assert [s.text for s in thread.messages] == [
        "How do I bake rye bread?",
        "Start with a sourdough starter",
        "How long to proof?",
        "About four hours",
    ]
    assert thread.label == "ChatGPT: Bread"
    assert thread.messages[1].ts == T0 + timedelta(minutes=1)


def test_chatgpt_without_a_current_node_follows_the_last_children(tmp_path: Path) -> None:
    conversation = chatgpt_conversation(chat())
    del conversation["current_node"]
    [thread] = read_export(write(tmp_path, json.dumps([conversation]).encode()), 10**6)
    assert thread.messages[-1].text == "About four hours"


def test_claude_takes_the_branch_of_its_last_message(tmp_path: Path) -> None:
    [thread] = read_export(write(tmp_path, claude_json([chat()])), 10**6)
    assert [s.role for s in thread.messages] == ["user", "assistant", "user", "assistant"]
    assert "Use commercial yeast" not in [s.text for s in thread.messages]
    assert thread.messages[0].origin == "claude:c1:c1-m0"


def test_claudes_zip_is_read_like_its_json(tmp_path: Path) -> None:
    from_zip = read_export(write(tmp_path, claude_zip([chat()]), "a.zip"), 10**6)
    assert from_zip == read_export(write(tmp_path, claude_json([chat()]), "b.json"), 10**6)


def test_a_zip_that_inflates_past_the_limit_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", b"[" + b" " * 5_000_000 + b"]")
    assert len(buffer.getvalue()) < 50_000
    with pytest.raises(ExportTooBig):
        read_export(write(tmp_path, buffer.getvalue()), 1_000_000)


def test_json_past_the_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportTooBig):
        read_export(write(tmp_path, chatgpt_json([chat()])), 100)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"%PDF-1.7 not json", NotAnExport),
        (b'{"conversations": []}', NotAnExport),
        (b"[]", NotAnExport),
        (b'[{"uuid": "x", "name": "y"}]', NotAnExport),
        (b'[{"mapping": {}, "title": "no id"}]', NotAnExport),
        (b'[{"mapping": {"a": ', BrokenExport),
        (b"PK\x03\x04 then nothing", BrokenExport),
    ],
)
def test_what_is_not_an_export(tmp_path: Path, data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        read_export(write(tmp_path, data), 10**6)


def test_a_zip_without_conversations_is_not_an_export(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("photos/cat.jpg", b"\xff\xd8")
    with pytest.raises(NotAnExport):
        read_export(write(tmp_path, buffer.getvalue()), 10**6)
