"""MCP tools' names and schemas as providers take them (membot/mcp/schema.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from membot.mcp.schema import MAX_NAME, provider_schema, tool_name
from membot.tool_names import BUILTIN_TOOL_NAMES

PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# What pydantic (the SDK's MCPServer) writes for `lookup(query: Query, limit: int | None)`.
PYDANTIC = {
    "type": "object",
    "title": "lookupArguments",
    "$defs": {
        "Query": {
            "title": "Query",
            "type": "object",
            "description": "What to look up.",
            "properties": {
                "word": {"title": "Word", "type": "string", "description": "The word"},
                "language": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "default": None,
                    "title": "Language",
                },
            },
            "required": ["word"],
        }
    },
    "properties": {
        "query": {"$ref": "#/$defs/Query"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
    },
    "required": ["query"],
}


def test_local_refs_are_inlined_and_nullable_fields_made_plain() -> None:
    assert provider_schema(PYDANTIC) == {
        "type": "object",
        "properties": {
            "query": {
                "type": "object",
                "description": "What to look up.",
                "properties": {
                    "word": {"type": "string", "description": "The word"},
                    "language": {"type": "string"},
                },
                "required": ["word"],
            },
            "limit": {"type": "integer"},
        },
        "required": ["query"],
    }


def test_a_recursive_model_is_cut_instead_of_inlined_forever() -> None:
    tree = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    out = provider_schema(tree)
    root = out["properties"]["root"]
    assert root["properties"]["name"] == {"type": "string"}
    assert root["properties"]["children"]["items"] == {"type": "object"}
    assert "$ref" not in json.dumps(out)


def test_other_nullable_spellings_and_what_is_kept() -> None:
    schema: dict[str, Any] = {
        "properties": {
            "title": {"type": ["string", "null"], "title": "Title", "nullable": True},
            "mode": {"enum": ["a", "b", None], "default": None},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "remote": {"$ref": "https://example.com/schema.json", "description": "Far away"},
            "broken": {"$ref": "#/$defs/Missing"},
        },
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    assert provider_schema(schema) == {
        "type": "object",
        "properties": {
            # A property named "title" is kept: only the keyword is dropped.
            "title": {"type": "string"},
            "mode": {"enum": ["a", "b"]},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "remote": {"type": "object", "description": "Far away"},
            "broken": {"type": "object"},
        },
    }


def test_an_empty_schema_becomes_an_object_without_properties() -> None:
    assert provider_schema({}) == {"type": "object", "properties": {}}
    assert provider_schema({"type": "object"}) == {"type": "object", "properties": {}}


def test_names_are_the_server_and_the_tool_in_what_providers_allow() -> None:
    assert tool_name("notes", "search", ()) == "notes_search"
    assert tool_name("wiki", "pages.get v2", ()) == "wiki_pages_get_v2"
    long = tool_name("server", "x" * 100, ())
    assert len(long) == MAX_NAME and PROVIDER_NAME.fullmatch(long)
    # The same tool gets the same name from one start to the next.
    assert tool_name("server", "x" * 100, ()) == long
    assert tool_name("server", "y" * 100, ()) != long


def test_a_name_taken_by_a_built_in_or_another_tool_is_changed() -> None:
    clash = tool_name("search", "history", BUILTIN_TOOL_NAMES)
    assert clash != "search_history" and clash.startswith("search_history_")
    assert PROVIDER_NAME.fullmatch(clash)
    taken = {"a_b_c"}
    other = tool_name("a_b", "c", taken)
    assert other not in taken and PROVIDER_NAME.fullmatch(other)
