"""An MCP tool as providers take it: its name (`<server>_<tool>`, ^[a-zA-Z0-9_-]{1,64}$) and
its input schema (local `$ref`s inlined, nullable types rewritten, an object at the top).

Servers write their schemas with whatever their framework makes: pydantic's `$defs` and
`$ref`s, `anyOf: [{type: X}, {type: null}]` for an optional field, `type: [X, "null"]`.
Several providers refuse those (Gemini's function declarations take neither `$ref` nor
`null`), so every tool's schema is rewritten once, when the server lists its tools. The
server still gets the arguments as the model wrote them and checks them itself."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from typing import Any

MAX_NAME = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]")
# A recursive model (a tree of nodes) would inline forever: past this depth, or at a `$ref`
# already being inlined, the node becomes "any object".
_MAX_DEPTH = 12
# Keywords whose value is a map of names to schemas, a list of schemas, or one schema.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
    }
)
# Dropped everywhere: definitions are inlined, and the rest is noise to a model (pydantic's
# titles repeat the property names) or refused by some provider.
_DROPPED = frozenset({"$defs", "definitions", "$schema", "$id", "$anchor", "$comment", "title"})


def tool_name(server: str, tool: str, taken: Collection[str]) -> str:
    """`<server>_<tool>` in the characters providers allow, within 64; one that is too long
    or already `taken` (a built-in's name, another tool's) ends in a short hash of the
    original names, so it stays the same from one start to the next."""
    name = f"{server}_{_INVALID.sub('_', tool)}"
    if len(name) <= MAX_NAME and name not in taken:
        return name
    digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:8]
    name = f"{name[: MAX_NAME - 9]}_{digest}"
    n = 1
    while name in taken:  # a hash taken too: never in practice, still never a clash
        name = f"{name[: MAX_NAME - 9 - len(str(n))]}{n}_{digest}"
        n += 1
    return name


def provider_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` (a tool's inputSchema) with its local `$ref`s inlined, nullable types made
    plain, and `type: object` with `properties` at the top."""
    root = dict(schema)
    out = _rewrite(root, root, 0, ())
    if not isinstance(out, dict):
        out = {}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    return out


def _rewrite(node: Any, root: dict[str, Any], depth: int, inlining: tuple[str, ...]) -> Any:
    if not isinstance(node, dict):
        return node  # true / false are schemas too; anything else is left as it is
    ref = node.get("$ref")
    if isinstance(ref, str):
        rest = {k: v for k, v in node.items() if k != "$ref"}
        target = _resolve(root, ref) if ref not in inlining and depth < _MAX_DEPTH else None
        if target is None:  # remote, broken or recursive: any object
            node = {"type": "object", **rest}
        else:
            node = {**target, **rest}
            inlining = (*inlining, ref)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:  # a property named "title" is a key of `properties`, kept
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _rewrite(v, root, depth + 1, inlining) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_rewrite(v, root, depth + 1, inlining) for v in value]
        elif key in _SCHEMA_ONE and isinstance(value, dict | list):
            if isinstance(value, list):  # the old tuple form of `items`
                out[key] = [_rewrite(v, root, depth + 1, inlining) for v in value]
            else:
                out[key] = _rewrite(value, root, depth + 1, inlining)
        else:
            out[key] = value
    return _not_null(out)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    """The schema a local JSON pointer (`#/$defs/Query`) names; None for any other."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, dict) else None


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) <= 2


def _not_null(node: dict[str, Any]) -> dict[str, Any]:
    """`X or null` as `X`: the field can be left out instead (an optional field's default is
    null on the server's side anyway)."""
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        kinds = [k for k in kind if k != "null"]
        if not kinds:
            node.pop("type")
        else:
            node["type"] = kinds[0] if len(kinds) == 1 else kinds
    node.pop("nullable", None)
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list) and any(_is_null(o) for o in options):
            kept = [o for o in options if not _is_null(o)]
            del node[key]
            if len(kept) == 1 and isinstance(kept[0], dict):
                node = {**kept[0], **node}
            elif kept:
                node[key] = kept
    if "default" in node and node["default"] is None:
        del node["default"]
    if isinstance(node.get("enum"), list) and None in node["enum"]:
        node["enum"] = [v for v in node["enum"] if v is not None]
    return node
