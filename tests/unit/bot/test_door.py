"""The Telegram door's shape: handlers are module-level functions that small build_router()s
register, and they learn their chat (`cid`, `state`, `words`) from the ChatContext
middleware, never by reading it themselves."""

from __future__ import annotations

import ast
from pathlib import Path

HANDLERS = Path(__file__).parents[3] / "src" / "membot" / "bot" / "handlers"
# What a handler wrote to learn its chat before the middleware gave it.
BY_HAND = ("service.state(", "ConversationId.telegram(", "chat_state(", "texts_for(")


def test_handlers_take_their_chat_from_the_middleware() -> None:
    modules = sorted(HANDLERS.glob("*.py"))
    assert len(modules) > 5  # the glob found the handlers
    found = {
        f"{path.name}: {needle}"
        for path in modules
        for needle in BY_HAND
        if needle in path.read_text(encoding="utf-8")
    }
    assert found == set()


def test_build_router_only_registers() -> None:
    nested = {}
    for path in sorted(HANDLERS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "build_router":
                inner = [
                    n.name
                    for n in ast.walk(node)
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n is not node
                ]
                if inner:
                    nested[path.name] = inner
    assert nested == {}
