"""The /v1 routes: a thin door to the conversation core, entered as a Telegram message is
(bot/turns.py): the conversation's turn in arrival order (`service.ordered`), the caller's
budgets and rate limit (`service.admit`), then `service.say` with this request's options.
Nothing here keeps state: the conversation is the caller's (`ConversationId.v1_user` /
`v1_token`), its memory the core's."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from membot.api.errors import ApiError, api_error
from membot.api.forget import BadForget, forget, parse_forget
from membot.api.stream import streamed
from membot.api.v1.errors import (
    V1Error,
    from_api_error,
    from_media_error,
    invalid,
    over_limit,
    unknown_model,
)
from membot.api.v1.fields import call_options, output_of
from membot.api.v1.models import (
    DEFAULT_MODEL,
    MAX_USER,
    Turn,
    parse,
    take_turn,
)
from membot.api.v1.shapes import (
    Choice,
    Completion,
    ModelCard,
    ModelList,
    OutMessage,
    Usage,
    cited_messages,
    cited_pages,
    usage_of,
)
from membot.api.v1.stream import ChunkStream
from membot.api.wire import SESSION, Tokens, json_response, read_body
from membot.clock import Clock
from membot.core.service import ConversationService
from membot.core.turn import Incoming, TurnOptions, TurnResult
from membot.errors import MembotError
from membot.ids import ConversationId
from membot.media.errors import MediaError
from membot.usage import OverLimit, tallied

#: The header Open WebUI sends with ENABLE_FORWARD_USER_INFO_HEADERS=true.
OPEN_WEBUI_USER = "X-OpenWebUI-User-Id"
_NOT_AUTHORIZED = V1Error(401, "invalid_api_key", "A valid API key is required (API_TOKENS).")


@dataclass(frozen=True, slots=True)
class V1Options:
    default_model: str
    models: tuple[str, ...]  # what `model` may name besides `membot`; empty: any model id
    listed: tuple[str, ...]  # what GET /v1/models lists besides `membot`
    max_message_chars: int


class V1Door:
    def __init__(
        self, service: ConversationService, tokens: Tokens, options: V1Options, clock: Clock
    ) -> None:
        self.service = service
        self.tokens = tokens
        self.options = options
        self.clock = clock
        cards = [ModelCard(id=m) for m in dict.fromkeys((DEFAULT_MODEL, *options.listed))]
        self._models = ModelList(data=cards).model_dump(mode="json")
        self._cards = {card.id: card.model_dump(mode="json") for card in cards}

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self.completions)
        router.add_get("/v1/models", self.models)
        router.add_post("/v1/memory/forget", self.forget)
        # `.+`: a model id has a slash (vendor/model), which OpenAI's client sends as %2F.
        router.add_get("/v1/models/{model:.+}", self.model)

    async def models(self, request: web.Request) -> web.Response:
        if not self.tokens.authorized(request):
            raise _NOT_AUTHORIZED
        return json_response(200, self._models)

    async def model(self, request: web.Request) -> web.Response:
        """One of the listed models; 404 model_not_found for any other id."""
        if not self.tokens.authorized(request):
            raise _NOT_AUTHORIZED
        card = self._cards.get(request.match_info["model"])
        if card is None:
            raise unknown_model(request.match_info["model"][:200], tuple(self._cards), None)
        return json_response(200, card)

    async def forget(self, request: web.Request) -> web.Response:
        """The caller's own conversation (as its chat calls name it): what words match, or
        erase it (api/forget.py)."""
        token = self.tokens.bearer(request)
        if token is None:
            raise _NOT_AUTHORIZED
        try:
            asked = parse_forget(await read_body(request))
        except ApiError as exc:
            raise from_api_error(exc) from None
        except BadForget as exc:
            raise invalid(exc.message, "words" if exc.words else None, _code(exc)) from None
        cid = _whose(asked.user, request, token)
        request[SESSION] = str(cid)
        try:
            return json_response(200, await forget(self.service, cid, asked))
        except MembotError as exc:
            error = _error(exc, ())
            if error is None:
                raise
            raise error from None

    async def completions(self, request: web.Request) -> web.StreamResponse:
        token = self.tokens.bearer(request)
        if token is None:
            raise _NOT_AUTHORIZED
        try:
            body = await read_body(request)
        except ApiError as exc:
            raise from_api_error(exc) from None
        parsed = parse(body)
        turn = await take_turn(parsed, self.options.max_message_chars)
        allowed = self.options.models
        if turn.model is not None and allowed and turn.model not in allowed:
            raise unknown_model(turn.model, (DEFAULT_MODEL, *allowed))
        cid = _whose(parsed.user, request, token)
        request[SESSION] = str(cid)  # a digest: the log never has the caller's name
        incoming = Incoming(cid, turn.text, user_id=payer(cid), uploads=turn.uploads)
        options = TurnOptions(
            system_prompt=turn.system_prompt,
            call=call_options(parsed, turn),
            output=output_of(parsed),
            consult_tool=False,  # one request, one answer: no consultation opens here
        )
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(self.clock().timestamp())
        if not parsed.stream:
            result, usage = await self._turn(incoming, options, _Quiet(), turn.places)
            completion = Completion(
                id=completion_id,
                created=created,
                model=result.model,
                choices=[Choice(message=_message(result), finish_reason=_finish(result))],
                usage=usage,
            )
            return json_response(200, completion.model_dump(mode="json"))
        stream = ChunkStream(request, completion_id, created, parsed.model, parsed.usage_asked)
        return await self._streamed(request, stream, incoming, options, turn)

    async def _streamed(
        self,
        request: web.Request,
        stream: ChunkStream,
        incoming: Incoming,
        options: TurnOptions,
        turn: Turn,
    ) -> web.StreamResponse:
        async def answer() -> web.StreamResponse:
            result, usage = await self._turn(incoming, options, stream, turn.places)
            end: dict[str, Any] = {}
            if result.sources:
                pages = cited_pages(result.sources, result.reply)
                end["annotations"] = [a.model_dump(mode="json") for a in pages]
            if result.citations:
                cited = cited_messages(result.citations)
                end["citations"] = [c.model_dump(mode="json") for c in cited]
            return await stream.finish(
                result.reply, result.model, end, usage.model_dump(mode="json"), _finish(result)
            )

        return await streamed(request, stream, answer)

    async def _turn(
        self,
        incoming: Incoming,
        options: TurnOptions,
        sink: _Quiet | ChunkStream,
        places: tuple[str, ...],
    ) -> tuple[TurnResult, Usage]:
        """The answer, stored, and the tokens its calls took; V1Error for what the client
        is told (nothing was stored)."""
        service = self.service
        try:
            async with service.ordered(incoming.conversation):
                await service.admit(incoming)
                with tallied() as tally:
                    result = await service.say(incoming, sink, options)
        except OverLimit as refused:
            raise over_limit(refused, self.clock()) from None
        except MembotError as exc:
            error = _error(exc, places)
            if error is None:
                raise  # ours to fix: internal_error, logged by the envelope
            raise error from None
        return result, usage_of(tally.prompt_tokens, tally.completion_tokens)


class _Quiet:
    """The sink of a plain request: the answer is returned (text the model writes beside a
    tool call stays in the archive)."""

    async def progress(self, text: str) -> None:
        return None

    async def answer(self, result: TurnResult) -> None:
        return None


def _finish(result: TurnResult) -> Literal["stop", "length"]:
    return "length" if result.cut else "stop"


def _message(result: TurnResult) -> OutMessage:
    return OutMessage(
        content=result.reply,
        annotations=cited_pages(result.sources, result.reply),
        citations=cited_messages(result.citations),
    )


def _error(exc: MembotError, places: tuple[str, ...]) -> V1Error | None:
    if isinstance(exc, V1Error):
        return exc
    if isinstance(exc, MediaError) and not isinstance(exc, ApiError):
        return from_media_error(exc, places)
    translated = api_error(exc, names_session=False)
    return None if translated is None else from_api_error(translated)


def _code(exc: BadForget) -> str:
    return "words_too_short" if exc.words else "invalid_request"


def _whose(user: str | None, http: web.Request, token: str) -> ConversationId:
    """The request's `user`, else Open WebUI's user header, else the token: each caller
    its own conversation."""
    for name in (user, http.headers.get(OPEN_WEBUI_USER)):
        if name is not None and name.strip():
            if len(name) > MAX_USER:
                raise invalid(f"A user id is at most {MAX_USER} characters long.", "user")
            return ConversationId.v1_user(name.strip())
    return ConversationId.v1_token(token)


def payer(cid: ConversationId) -> int:
    """The number a caller's budgets and rate limit are kept under (the usage ledger's user):
    from 2**62 up, far above Telegram's user ids (at most 52 bits), from the conversation's
    digest, so the same caller always has the same."""
    digest = hashlib.sha256(cid.key.encode()).digest()
    return (1 << 62) | (int.from_bytes(digest[:8], "big") >> 2)
