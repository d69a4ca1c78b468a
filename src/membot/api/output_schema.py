"""An `outputSchema` a client sends, checked before the server acts on it: a JSON Schema that
resolves within itself (nothing fetched from the network) and names a known draft."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from membot.llm.structured import load_schema, schema_object


def check_output_schema(value: dict[str, Any] | str) -> dict[str, Any]:
    """outputSchema as an object, checked; ValueError naming the field otherwise.

    Beyond `load_schema`: a schema is the client's text that the server acts on, so it may
    not make the server fetch anything. Only references inside the schema itself are
    allowed (a remote `$ref` would be retrieved from the network when a reply is checked,
    and an unresolvable one would fail there), and `$schema` must name a known draft."""
    value = schema_object(value)
    try:
        _check_dialect(value)
        _check_refs(value, value)
        return load_schema(value)
    except (TypeError, RecursionError):
        raise ValueError("outputSchema is not a valid JSON Schema") from None


def _check_dialect(schema: dict[str, Any]) -> None:
    if "$schema" not in schema:
        return
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    dialect = schema["$schema"]
    if not isinstance(dialect, str) or validator_for(schema, default=None) is None:
        raise ValueError("outputSchema names an unknown $schema")


def _check_refs(node: Any, root: dict[str, Any]) -> None:
    """Every reference resolves within the schema, read as one resource: an `$id` below
    the root would start another, against which "#..." means something else."""
    if isinstance(node, list):
        for item in node:
            _check_refs(item, root)
        return
    if not isinstance(node, dict):
        return
    for key, item in node.items():
        if not isinstance(item, str):
            _check_refs(item, root)
        elif key == "$id" and node is not root:
            raise ValueError("outputSchema may have an $id only at its root")
        elif key in ("$ref", "$dynamicRef", "$recursiveRef") and not _resolves(item, root):
            raise ValueError(f"outputSchema has a reference outside itself: {key}")


def _resolves(ref: str, root: dict[str, Any]) -> bool:
    """Whether `ref` names a place in `root`: "#", a JSON pointer, or an anchor."""
    if not ref.startswith("#"):
        return False
    fragment = ref[1:]
    if not fragment:
        return True
    if not fragment.startswith("/"):
        return fragment in _anchors(root)
    node: Any = root
    for raw in fragment[1:].split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _anchors(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, item in node.items():
            if key in ("$anchor", "$dynamicAnchor") and isinstance(item, str):
                found.add(item)
            else:
                found |= _anchors(item)
    elif isinstance(node, list):
        for item in node:
            found |= _anchors(item)
    return found
