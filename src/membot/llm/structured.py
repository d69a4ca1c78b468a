"""Structured output: ask the model for a JSON object (optionally matching a JSON Schema),
check what came back, and word the one repair request.

`jsonschema` is imported on first use, not here: it costs ~100 ms to import and most
processes that import this module never see a schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from membot.llm.errors import clip_reason

# A reply wrapped in one Markdown code fence, ```json or bare; models add it despite asking.
_FENCE = re.compile(r"\A```(?:json\b)?\s*(.*?)\s*```\Z", re.DOTALL | re.IGNORECASE)
# A schema problem is reported to people in one sentence; the full detail is noise there.
_SCHEMA_REASON_CHARS = 160


def schema_object(value: object) -> dict[str, Any]:
    """A schema given as a dict or as JSON text, as a dict; ValueError (one sentence for
    people) if it is not JSON or not an object. Nothing about it is checked yet."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("outputSchema is not valid JSON") from None
    if not isinstance(value, dict):
        raise ValueError("outputSchema must be a JSON object")
    return value


def load_schema(value: object) -> dict[str, Any]:
    """A JSON Schema given as a dict or as JSON text, checked; ValueError (one sentence for
    people) if it is not JSON, not an object, or not a valid schema."""
    schema = schema_object(value)
    _build_validator(schema)
    return schema


def _build_validator(schema: dict[str, Any]) -> Any:
    """A validator for ``schema`` after checking it is a valid JSON Schema (of the draft its
    ``$schema`` names, the latest one otherwise) describing an object."""
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        reason = clip_reason(str(exc.message), _SCHEMA_REASON_CHARS)
        raise ValueError(f"outputSchema is not a valid JSON Schema: {reason}") from None
    kind = schema.get("type", "object")
    # The answer is always a JSON object; a schema that forbids one could never be met.
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise ValueError("outputSchema must describe a JSON object (type 'object')")
    _check_patterns(schema)
    from referencing import Registry

    from membot.llm.schema_regex import guarded

    # An empty registry that retrieves nothing: the schema is a client's text, and
    # jsonschema's default would fetch a remote `$ref` from the network while checking.
    # `guarded`: its regular expressions run with a time limit (see schema_regex).
    return guarded(cls)(schema, registry=Registry())


def _check_patterns(node: Any) -> None:
    """Every `pattern` and `patternProperties` key must compile; `unevaluatedProperties`
    beside `patternProperties` is refused, as jsonschema would run that one's regular
    expressions without the time limit."""
    from membot.llm.schema_regex import check_pattern

    if isinstance(node, list):
        for item in node:
            _check_patterns(item)
        return
    if not isinstance(node, dict):
        return
    patterns = node.get("patternProperties")
    found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    if isinstance(patterns, dict):
        found.extend(patterns)
        if "unevaluatedProperties" in node:
            raise ValueError(
                "outputSchema may not combine unevaluatedProperties with patternProperties"
            )
    for pattern in found:
        if (problem := check_pattern(pattern)) is not None:
            raise ValueError(f"outputSchema has a {problem}")
    for key, value in node.items():
        if key not in ("const", "enum", "default", "examples"):
            _check_patterns(value)


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What the completing answer must be: a JSON object, matching ``schema`` if given.

    Constructing it checks the schema (ValueError as in :func:`load_schema`) and builds its
    validator once, so checking each reply is only the validation itself. ``wire`` is a
    ``response_format`` a client wrote itself (OpenAI's, on /v1): sent as it is, its name
    and `strict` included, instead of the one made from ``schema``.
    """

    schema: dict[str, Any] | None = None
    wire: dict[str, Any] | None = None
    _validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.schema is not None:
            object.__setattr__(self, "_validator", _build_validator(self.schema))

    @property
    def require_parameters(self) -> bool:
        """Whether to ask OpenRouter for providers that honour ``response_format``: a schema
        is only worth sending to one that enforces it."""
        return self.schema is not None

    def response_format(self) -> dict[str, Any]:
        """The request's ``response_format`` for this spec."""
        if self.wire is not None:
            return self.wire
        if self.schema is None:
            return {"type": "json_object"}
        # Not strict: OpenAI's strict mode accepts only a subset of JSON Schema (every
        # property required, no additionalProperties); the reply is checked here instead.
        return {
            "type": "json_schema",
            "json_schema": {"name": "response", "strict": False, "schema": self.schema},
        }

    def clean(self, text: str) -> str:
        """``text`` without surrounding whitespace and one surrounding code fence."""
        stripped = text.strip()
        fenced = _FENCE.match(stripped)
        return fenced.group(1) if fenced else stripped

    def check(self, text: str) -> str | None:
        """None if ``text`` is a valid answer, else a short reason (at most 300 characters)."""
        try:
            value = json.loads(self.clean(text))
        except ValueError as exc:
            return clip_reason(f"the reply is not valid JSON: {exc}")
        if not isinstance(value, dict):
            return f"the reply is a JSON {_json_kind(value)}, not a JSON object"
        if self._validator is None:
            return None
        from jsonschema.exceptions import best_match
        from referencing.exceptions import Unresolvable

        try:
            error = best_match(self._validator.iter_errors(value))
        except Unresolvable as exc:
            # A `$ref` to anything outside the schema: never fetched, so never met.
            return clip_reason(f"the schema refers to something it does not contain: {exc}")
        if error is None:
            return None
        return clip_reason(f"{error.message} (at {error.json_path})")

    def repair_message(self, reason: str) -> dict[str, Any]:
        """A user message asking the model to answer again, fixing ``reason``."""
        lines = [
            f"Your previous reply could not be used: {reason}",
            "Answer again with only a JSON object that fixes this problem: no other text and "
            "no code fence.",
        ]
        if self.schema is not None:
            compact = json.dumps(self.schema, separators=(",", ":"), ensure_ascii=False)
            lines.append(f"The object must match this JSON Schema: {compact}")
        return {"role": "user", "content": "\n".join(lines)}


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


__all__ = ["OutputSpec", "load_schema", "schema_object"]
