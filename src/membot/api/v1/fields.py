"""The fields of a Chat Completions request beside its messages, each weighed (the table in
docs/api.md, "Other fields"): sampling fields go to the provider as they are, for each of
the turn's model calls; `max_tokens` and `response_format` are honoured; what membot cannot
give as asked (log probabilities, a required or named client tool, an answer in audio) is
refused with a 400 naming the field, since an answer without it would not be what the
client asked for. The rest (`store`, `metadata`, `parallel_tool_calls`, ...) changes
nothing about the answer and is ignored."""

from __future__ import annotations

from typing import Any, Final

from membot.api.output_schema import check_output_schema
from membot.api.v1.errors import V1Error, invalid
from membot.api.v1.models import CompletionRequest, Turn
from membot.llm.model import CallOptions
from membot.llm.structured import OutputSpec

#: Sent to the provider verbatim when set (OpenRouter takes each of them).
SAMPLING: Final = (
    "temperature",
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "logit_bias",
    "reasoning_effort",
    "verbosity",
    "top_k",
    "min_p",
    "repetition_penalty",
)
_NO_TOOL: Final = (None, "none", "auto")
_FORMAT = "response_format"


def call_options(request: CompletionRequest, turn: Turn) -> CallOptions:
    """The options of the turn's model calls; V1Error for a field refused."""
    _refuse(request)
    sampling = {name: getattr(request, name) for name in SAMPLING}
    return CallOptions(
        model=turn.model,
        max_tokens=turn.max_tokens,
        sampling={name: value for name, value in sampling.items() if value is not None},
    )


def output_of(request: CompletionRequest) -> OutputSpec | None:
    """What the answer must be (`response_format`): a JSON object, matching a schema if one
    is given; None for text. The client's response_format goes to the provider as written;
    V1Error (param response_format) for one membot cannot hold an answer to."""
    form = request.response_format
    if form is None or form.type == "text":
        return None
    if form.type == "json_object":
        return OutputSpec(wire={"type": "json_object"})
    spec = form.json_schema
    if spec is None:
        raise bad_format("A response_format of type json_schema needs `json_schema`.")
    schema: dict[str, Any] | None = None
    if spec.schema_ is not None:
        try:
            schema = check_output_schema(spec.schema_)
        except ValueError as exc:
            sentence = str(exc).replace("outputSchema", "response_format.json_schema.schema")
            raise bad_format(f"{sentence}.") from None
    wire = {"type": "json_schema", "json_schema": spec.model_dump(by_alias=True, exclude_none=True)}
    return OutputSpec(schema=schema, wire=wire)


def bad_format(sentence: str) -> V1Error:
    return invalid(sentence, _FORMAT, "invalid_response_format")


def _refuse(request: CompletionRequest) -> None:
    if request.logprobs or request.top_logprobs:
        param = "logprobs" if request.logprobs else "top_logprobs"
        sentence = (
            "Log probabilities are not returned: an answer is put together from several "
            "model calls (its tool steps). Send the request without `logprobs`."
        )
        raise invalid(sentence, param, "logprobs_not_supported")
    for param in ("tool_choice", "function_call"):
        if getattr(request, param) not in _NO_TOOL:
            sentence = (
                f"`{param}` may only be none or auto: membot takes no client-side tools "
                "(it runs its own), so none can be required or named."
            )
            raise invalid(sentence, param, "tools_not_supported")
    others = set(request.modalities or ()) - {"text"}
    if others or request.audio is not None:
        param = "modalities" if others else "audio"
        sentence = 'membot answers in text only: `modalities` may only be ["text"].'
        raise invalid(sentence, param, "modalities_not_supported")
