"""One turn of conversation, independent of any front door: history -> prompt -> LLM
(-> tools) -> store -> reply."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from membot.core.consult import RoundPlan
from membot.core.facts import FactsDraft
from membot.core.language import Detect, detect_in_thread, detect_language
from membot.core.prompt import PromptBuilder, to_chat_message
from membot.core.summarizer import HistoryCompressor
from membot.core.tools.builtin import MAX_FACTS
from membot.core.tools.context import TurnContext
from membot.core.turn import ConsultSwitch, Incoming, ReplySink, TurnOptions, TurnResult
from membot.ids import ConversationId
from membot.llm.errors import LLMInvalidOutput, LLMUnavailable
from membot.llm.model import CallOptions, ChatMessage, ChatModel, LLMResponse
from membot.llm.tools import NativeMode, ToolExecutor, ToolMode, ToolRegistry
from membot.memory.base import ChatRepository
from membot.memory.models import Message
from membot.tasks import TaskSupervisor
from membot.tool_names import CONSULTATION_TOOL

if TYPE_CHECKING:
    from membot.llm.structured import OutputSpec
    from membot.search import HistorySearch

__all__ = ["GAVE_UP", "Agent", "Incoming", "ReplySink", "TurnOptions", "TurnResult"]

log = logging.getLogger(__name__)

# The model spent every tool round and then still said nothing: say so rather than nothing.
GAVE_UP = "Sorry, I could not finish this one. Could you rephrase or narrow the question?"


class Agent:
    """Owns a turn. The order is the contract: the whole turn (user message, tool calls and
    results, answer) and the state it leaves are durable before the answer is sent, and
    summarization starts only after the answer is out, in the background. Text the model
    writes beside a tool call is sent at once as progress; it is stored with the turn."""

    def __init__(
        self,
        *,
        model: ChatModel,
        repository: ChatRepository,
        prompts: PromptBuilder,
        summarizer: HistoryCompressor,
        window_size: int,
        tools: ToolExecutor | None = None,
        tool_mode: ToolMode | None = None,
        max_tool_rounds: int = 10,
        search: HistorySearch | None = None,
        tasks: TaskSupervisor | None = None,
        consult_rounds: int = 3,
        max_rounds: int = 10,
        detect: Detect = detect_language,
        models: tuple[str, ...] = (),
    ) -> None:
        self.model = model
        self.repository = repository
        self.prompts = prompts
        self.summarizer = summarizer
        self.window_size = window_size
        self.tools = tools
        self.registry = tools.registry if tools else ToolRegistry()
        # During a consultation (or where a front door does not want it) the model is not
        # offered `start_consultation`; both registries and their prompt text are fixed.
        self.registry_no_consult = self.registry.subset(
            n for n in self.registry.names() if n != CONSULTATION_TOOL
        )
        self.mode = tool_mode or NativeMode()
        self._sections = {
            offered: ([s] if (s := self.mode.system_section(reg)) else [])
            for offered, reg in ((True, self.registry), (False, self.registry_no_consult))
        }
        self.max_tool_rounds = max_tool_rounds
        self.search = search
        self.tasks = tasks if tasks is not None else TaskSupervisor()
        self.consult_rounds = consult_rounds
        self.max_rounds = max_rounds
        # Tells a conversation's language from its first (long enough) user message.
        self.detect = detect
        # What a chat may have chosen (MODELS): a stored choice the operator has since taken
        # off the list is not used; the default is. Empty: any.
        self.models = frozenset(models)

    async def respond(
        self, incoming: Incoming, sink: ReplySink, options: TurnOptions | None = None
    ) -> TurnResult:
        """Answer one message. Raises LLMError (nothing stored, no state changed) when the
        model fails."""
        opts = options or TurnOptions()
        cid = incoming.conversation
        ctx = await self.repository.context(cid, self.window_size)
        fresh = ctx.meta.messages_total == 0
        # A new API session's own settings: what its first turn starts from and keeps.
        given = opts.state if fresh else None
        before = given or ctx.meta.state
        # Read while the storage is down (memory/resilient.py): ctx.meta.state is a stand-in,
        # not the conversation's. The turn is answered, but it writes no state built on it;
        # only a state the front door gave (a new API session's, an explicit /consult) is the
        # conversation's own and kept.
        degraded = ctx.meta.degraded
        explicit = opts.start is not None or given is not None
        # The state with the conversation's language, once per conversation: detected from the
        # first user message long enough to tell, then kept with the turn and never detected
        # again. /finish's text is the bot's own words, not the user's: it tells nothing.
        known = before
        if before.language is None and not opts.finish and not degraded:
            language = await detect_in_thread(self.detect, cid, incoming.text)
            if language is not None:
                known = replace(before, language=language)
        if opts.start is not None:
            plan: RoundPlan | None = RoundPlan.start(incoming.text, opts.start)
        else:
            plan = RoundPlan.next_for(before, finish=opts.finish)
        switch = None
        if plan is None and opts.consult_tool and self.registry.get(CONSULTATION_TOOL):
            switch = ConsultSwitch(self.consult_rounds, self.max_rounds)
        user = Message(
            role="user",
            content=incoming.text,
            user_id=incoming.user_id,
            name=incoming.name,
            tg_message_id=incoming.message_id,
        )

        window = self.prompts.window(ctx.history, group=incoming.group)

        def system(plan: RoundPlan | None) -> ChatMessage:
            offered = plan is None and switch is not None
            return self.prompts.build_system(
                summary=ctx.summary,
                has_history=bool(window),
                group=incoming.group,
                facts=ctx.facts,
                extra_system=[
                    *self._sections[offered],
                    *([plan.system_note()] if plan else []),
                ],
                # An API session's own prompt, else the chat's persona, else SYSTEM_PROMPT.
                system_prompt=opts.system_prompt or before.persona,
            )

        messages = [system(plan), *window, to_chat_message(user, group=incoming.group)]
        facts = FactsDraft(self.repository, cid, MAX_FACTS)
        tool_ctx = TurnContext(
            conversation=cid,
            repository=self.repository,
            search=self.search,
            consultation=switch,
            facts=facts,
        )
        chosen = before.model
        if (
            chosen is not None
            and (not self.models or chosen in self.models)
            and (opts.call is None or opts.call.model is None)
        ):
            opts = replace(opts, call=replace(opts.call or CallOptions(), model=chosen))
        produced, response = await self._run(messages, sink, tool_ctx, plan, system, opts, switch)
        if switch is not None and switch.plan is not None:
            plan = switch.plan
            log.info("%s: the model started a consultation of %d rounds", cid, plan.max_rounds)
        after = plan.state_after(known) if plan else None
        if after is None and (known is not before or given is not None):
            # A language just detected, or a new API session's settings: kept with the turn.
            after = known
        if degraded and not explicit:
            after = None  # see `degraded` above: the stored state stays as it is
        stored = await self.repository.append(cid, [user, *produced], state=after)
        await facts.commit()  # what the tools changed, now that the turn is kept
        result = TurnResult(
            reply=produced[-1].content,
            model=response.model,
            state=after or known,
            plan=plan,
        )
        await sink.answer(result)
        if self.summarizer.due(stored[-1].seq, ctx.meta.summarized_upto):
            self.tasks.spawn(("summary", cid), self.summarizer.maybe_summarize(cid))
        return result

    async def _run(
        self,
        messages: list[ChatMessage],
        sink: ReplySink,
        tool_ctx: TurnContext,
        plan: RoundPlan | None,
        system: _SystemFor,
        opts: TurnOptions,
        switch: ConsultSwitch | None,
    ) -> tuple[list[Message], LLMResponse]:
        """The model's side of the turn: tool rounds, then the answer. Returns what to store
        after the user message (the last item is the answer) and the last response."""
        produced: list[Message] = []
        for round_no in range(self.max_tool_rounds + 1):
            # The last round is "answer now": past the cap tools are refused, never looped on.
            final = round_no == self.max_tool_rounds
            if switch is not None and switch.plan is not None and plan is None:
                # The model switched into a consultation: from now on the prompt is round 1's.
                plan = switch.plan
                messages = [system(plan), *messages[1:]]
            registry = self.registry if plan is None and switch else self.registry_no_consult
            output = opts.output if plan is None or plan.final else None
            call = _with_output(opts.call, output)
            request = self.mode.request(messages, registry, final=final)
            response = await self.model.complete(
                request.messages, tools=request.tools, tool_choice=request.tool_choice, options=call
            )
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
                    text, response = await self._checked(messages, text, response, output, call)
                produced.append(Message(role="assistant", content=text))
                return produced, response
            if text:
                await self._progress(tool_ctx.conversation, sink, text)
            results = await self.tools.run(calls, tool_ctx, registry)
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
            messages = [*messages, *(to_chat_message(m) for m in step)]
        raise AssertionError("unreachable: the final round always returns")

    async def _checked(
        self,
        messages: list[ChatMessage],
        text: str,
        response: LLMResponse,
        output: OutputSpec,
        call: CallOptions | None,
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
        request = self.mode.request(repair, self.registry_no_consult, final=final)
        response = await self.model.complete(
            request.messages, tools=request.tools, tool_choice=request.tool_choice, options=call
        )
        text, _ = self.mode.parse(response)
        if output.check(text) is not None:
            raise LLMInvalidOutput("the answer did not match the requested format")
        return output.clean(text), response

    @staticmethod
    async def _progress(cid: ConversationId, sink: ReplySink, text: str) -> None:
        """Send "Let me look that up..." before the tools run. Best effort: a lost progress
        note must not cost the user the answer that follows."""
        try:
            await sink.progress(text)
        except Exception as exc:
            log.warning("%s: progress text not delivered: %s", cid, type(exc).__name__)

    async def reset(self, cid: ConversationId) -> None:
        """Forget the conversation. A summary being made for it is stopped first."""
        await self.tasks.cancel(("summary", cid))
        await self.repository.reset(cid)
        if self.search is not None:
            await self.search.drop(cid)
        log.info("%s: memory reset", cid)

    async def aclose(self) -> None:
        await self.tasks.close()


class _SystemFor(Protocol):
    def __call__(self, plan: RoundPlan | None) -> ChatMessage: ...


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
