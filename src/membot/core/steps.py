"""The model's side of a turn: tool steps, then the answer, in the format asked for.

The agent (core/agent.py) owns the turn: what it starts from, what is stored and when. This is
the exchange with the model within it, in steps: at each step the model either calls tools
(their text shown at once as progress, their results fed back) or answers; past the cap it
must answer. (A step is not a consultation's round: a round is a whole turn, core/consult.py.)

A sink whose reader can stop the answer (turn.StoppableSink, Telegram's Stop button) ends
the steps as soon as it is stopped: the model's stream is closed (the HTTP request with
it), or the tools running are cancelled, and what the model had written of the answer so
far is the answer, marked as stopped. A step cut short leaves nothing half-done: its text
beside the calls (already sent as progress) is kept as a message of its own, its calls not,
nor what those that ended changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING

from membot.core.cited import Cited
from membot.core.citing import MarkerFilter, cited_answer, strip_markers
from membot.core.pictures import ToolPictures
from membot.core.prompt import to_chat_message
from membot.core.stops import until_stopped
from membot.core.turn import StreamingSink, is_paced, is_stoppable, is_streaming
from membot.llm.errors import LLMInvalidOutput, LLMUnavailable
from membot.llm.model import (
    CallOptions,
    ChatMessage,
    ChatModel,
    LLMResponse,
    ModelRequest,
    StreamNotes,
)
from membot.llm.tools.visible import VisibleText
from membot.memory.contract.models import Message

if TYPE_CHECKING:
    from membot.core.media import MediaReader
    from membot.core.offers import Offer
    from membot.core.plan import TurnPlan
    from membot.core.tools.context import TurnContext
    from membot.core.turn import ReplySink, TurnOptions
    from membot.ids import ConversationId
    from membot.llm.structured import OutputSpec
    from membot.llm.tools import ToolExecutor, ToolMode, ToolRegistry

log = logging.getLogger(__name__)

# The model spent every tool step and then still said nothing: say so rather than nothing.
GAVE_UP = "Sorry, I could not finish this one. Could you rephrase or narrow the question?"

# The prompt for the plan as it stands (PromptBuilder.build): it changes when the model
# starts a consultation within the turn.
PromptFor = Callable[[], list[ChatMessage]]


class ToolSteps:
    """Talks to the model for one turn, offering it the tools of the turn's `Offer`
    (core/offers.py: `start_consultation` in plain chat only). `max_tool_steps` caps the
    steps with tools; one more step must answer."""

    def __init__(
        self,
        *,
        model: ChatModel,
        mode: ToolMode,
        tools: ToolExecutor | None,
        max_tool_steps: int,
        media: MediaReader | None = None,
    ) -> None:
        self.model = model
        self.mode = mode
        self.tools = tools
        self.max_tool_steps = max_tool_steps
        # Images tools return, shown to a model that sees them (core/pictures.py).
        self.pictures = ToolPictures(media) if media is not None else None

    async def run(
        self,
        prompt: PromptFor,
        sink: ReplySink,
        tool_ctx: TurnContext,
        plan: TurnPlan,
        opts: TurnOptions,
        offer: Offer,
    ) -> tuple[list[Message], LLMResponse]:
        """Tool steps, then the answer. Returns what to store after the user message (the
        last item is the answer) and the last response."""
        produced: list[Message] = []
        # The pages the model's web searches cited, over every step: the answer's sources.
        cited = Cited()
        stop = sink.stop if is_stoppable(sink) else None
        prompted = plan.round  # the consultation round `head` was made for
        head = prompt()
        exchanged: list[ChatMessage] = []  # the tool steps so far, as the model sees them
        for step_no in range(self.max_tool_steps + 1):
            # The last step is "answer now": past the cap tools are refused, never looped on.
            final = step_no == self.max_tool_steps
            if plan.round is not prompted:
                # The model switched into a consultation: from now on the prompt is round 1's.
                prompted = plan.round
                head = prompt()
            messages = [*head, *exchanged]
            registry = offer.registry(plan.offers_consultation)
            output = opts.output if plan.completes else None
            call = _with_output(opts.call, output)
            request = self.mode.request(messages, registry, final=final).with_options(call)
            # An answer held to a format is checked (and maybe repaired) before it is shown.
            streamed = sink if is_streaming(sink) and output is None else None
            if stop is not None and stop.is_set():
                return await self._stopped(produced, "", request, cited, tool_ctx)
            if stop is not None and streamed is not None:
                shown, notes = list[str](), StreamNotes()  # what the stream gave so far
                answered = await until_stopped(self._call(request, streamed, shown, notes), stop)
                if answered is None:  # with the sources this step cited before the stop
                    cited.add(LLMResponse("", sources=notes.sources))
                    return await self._stopped(produced, "".join(shown), request, cited, tool_ctx)
                response = answered
            else:
                response = await self._call(request, streamed)
            cited.add(response)
            text, calls = self.mode.parse(response)
            if not calls or self.tools is None or final:
                if calls:
                    why = "past the cap" if self.tools else "while tools are off"
                    log.warning("%s: tool calls made %s were ignored", tool_ctx.conversation, why)
                if not text:
                    if not produced:
                        raise LLMUnavailable("the model returned an empty answer")
                    text = GAVE_UP
                if output is not None:  # GAVE_UP too: the answer must be what was asked
                    text, response = await self._checked(
                        messages, text, response, output, call, offer.no_consult
                    )
                    cited.add(response)
                produced.append(await cited_answer(text, tool_ctx, cited.sources))
                return produced, response
            text = strip_markers(text)  # beside a call: what it cites is not shown
            if text:
                await _progress(tool_ctx.conversation, sink, text)
            if stop is None:
                results = await self.tools.run(calls, tool_ctx, registry)
            else:
                facts = tool_ctx.facts.mark() if tool_ctx.facts is not None else 0
                before = plan.mark()
                ran = await until_stopped(self.tools.run(calls, tool_ctx, registry), stop)
                if ran is None:  # stopped: the calls are not kept without their results,
                    if tool_ctx.facts is not None:  # nor what those that ended changed
                        tool_ctx.facts.undo(facts)
                    plan.undo(before)
                    if text:
                        produced.append(Message(role="assistant", content=text))
                    return await self._stopped(produced, "", request, cited, tool_ctx)
                results = ran
            # What an outside tool returned reaches the model now: from here on this turn sets
            # nothing lasting up (TurnContext.from_the_user).
            tool_ctx.outside_results.update(
                r.call.name for r in results if (t := registry.get(r.call.name)) and t.outside
            )
            step = [
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=tuple(call.to_openai() for call in calls),
                ),
                *(
                    Message(
                        role="tool",
                        content=result.content,
                        tool_call_id=result.call.id,
                        name=result.call.name,
                    )
                    for result in results
                ),
            ]
            produced.extend(step)
            exchanged.extend(to_chat_message(m) for m in step)
            images = [image for result in results for image in result.images]
            if images and self.pictures is not None:
                model = request.model_or(self.model.model_name)
                if (seen := await self.pictures.message(images, model)) is not None:
                    exchanged.append(seen)  # this turn only: the archive keeps the text
        raise AssertionError("unreachable: the final step always returns")

    async def _stopped(
        self,
        produced: list[Message],
        text: str,
        request: ModelRequest,
        cited: Cited,
        ctx: TurnContext,
    ) -> tuple[list[Message], LLMResponse]:
        """The user stopped the answer: what was written of it so far is the answer (with
        the sources the steps before it cited, and the messages it cited so far)."""
        produced.append(answer := await cited_answer(text, ctx, cited.sources, stopped=True))
        model = request.model_or(self.model.model_name)
        return produced, LLMResponse(content=answer.content, model=model, finish_reason="stopped")

    async def _call(
        self,
        request: ModelRequest,
        sink: StreamingSink | None,
        shown: list[str] | None = None,
        notes: StreamNotes | None = None,
    ) -> LLMResponse:
        """One model call: whole, or streamed into `sink` (what may be shown of it, also
        kept in `shown`, and what it learned in `notes`: should the user stop it)."""
        if sink is None:
            return await self.model.complete(request)
        visible = VisibleText()
        markers = MarkerFilter()  # what the answer cites is shown under it, not as [#12]
        paced = sink if is_paced(sink) else None
        if paced is not None:
            request = replace(request, hold=paced.hold, ramp=True)
        items = self.model.stream(request, notes)
        # aclosing: however this ends (the sink raised, the turn was cancelled), the stream
        # is closed at once, and with it the provider's HTTP response.
        try:
            async with aclosing(items):
                async for item in items:
                    if not isinstance(item, str):
                        if tail := markers.flush():
                            await sink.delta(tail)
                        return item
                    piece = visible.feed(item)
                    if piece and shown is not None:
                        shown.append(piece)
                    if piece := markers.feed(piece):
                        await sink.delta(piece)
        finally:
            if paced is not None:
                paced.written()
        raise LLMUnavailable("the stream ended without an answer")

    async def _checked(
        self,
        messages: list[ChatMessage],
        text: str,
        response: LLMResponse,
        output: OutputSpec,
        call: CallOptions | None,
        registry: ToolRegistry,
    ) -> tuple[str, LLMResponse]:
        """The answer in the requested format: one repair request, then LLMInvalidOutput."""
        problem = output.check(text)
        if problem is None:
            return output.clean(text), response
        log.warning("the answer did not match the output format; asking for a repair")
        repair = [
            *messages,
            {"role": "assistant", "content": text},
            output.repair_message(problem),
        ]
        # Native mode forbids tool calls with final=True; Hermes mode's final note ("answer in
        # plain text now") would contradict the repair, so it gets the plain request there.
        final = self.mode.name != "hermes"
        request = self.mode.request(repair, registry, final=final)
        # Only the form is wrong: what the answer found stays, nothing is searched again.
        again = replace(call, web_search=False) if call is not None else None
        response = await self.model.complete(request.with_options(again))
        text, _ = self.mode.parse(response)
        if output.check(text) is not None:
            raise LLMInvalidOutput("the answer did not match the requested format")
        return output.clean(text), response


async def _progress(cid: ConversationId, sink: ReplySink, text: str) -> None:
    """Send "Let me look that up..." before the tools run. Best effort: a lost progress
    note must not cost the user the answer that follows."""
    try:
        await sink.progress(text)
    except Exception as exc:
        log.warning("%s: progress text not delivered: %s", cid, type(exc).__name__)


def _with_output(call: CallOptions | None, output: OutputSpec | None) -> CallOptions | None:
    """The call's options with the output format's response_format added."""
    if output is None:
        return call
    base = call or CallOptions()
    return replace(
        base,
        response_format=output.response_format(),
        require_parameters=base.require_parameters or output.require_parameters,
    )
