"""Regular expressions from a client's JSON Schema, run with a time limit.

`pattern`, `patternProperties` and the `additionalProperties` that depends on them are
jsonschema keywords that run Python's backtracking `re` on the model's reply: a client's
`^(a|aa)+$` and a reply of forty "a"s and a "b" would hold the event loop (and the GIL) for
minutes. These replacements use the `regex` module with a timeout instead; a pattern that
runs out of time counts as not matching, so the reply is refused, never waited on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import regex  # type: ignore[import-untyped]

# Per search. A reply is a few KiB of JSON: a sane pattern needs microseconds.
TIMEOUT = 0.05


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text`; False if it cannot tell in time."""
    try:
        return regex.search(pattern, text, timeout=TIMEOUT) is not None
    except TimeoutError:
        return False


def check_pattern(pattern: object) -> str | None:
    """None if the pattern compiles, else why not (for the request's error sentence)."""
    if not isinstance(pattern, str):
        return "a pattern must be a string"
    try:
        regex.compile(pattern)
    except regex.error as exc:
        return f"bad pattern {pattern[:40]!r}: {exc}"
    return None


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance[:60]!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        for key, value in instance.items():
            if search(patrn, key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


def _additional_properties(
    validator: Any, extra_schema: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in known and not any(search(p, key) for p in patterns)
    ]
    if validator.is_type(extra_schema, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra_schema, path=key)
    elif not extra_schema and extras:
        listed = ", ".join(repr(key) for key in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def guarded(cls: Any) -> Any:
    """The validator class `cls` with the three keywords above in place of its own."""
    from jsonschema.validators import extend  # type: ignore[import-untyped]

    return extend(
        cls,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
