"""One turn of conversation, independent of any front door: history -> prompt -> LLM (-> tools)
-> store -> reply. The turn plan (core/plan.py) says what the turn starts from and may write;
the prompt is core/prompt.py's; the exchange with the model, in tool steps, core/steps.py's."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from membot.core.consult import RoundPlan, initial_request_of
from membot.core.facts import FactsDraft
from membot.core.forget import Forgetting
from membot.core.imported import summary_due, window_of
from membot.core.language import Detect, detect_in_thread, detect_language
from membot.core.media import MediaReader, Understood
from membot.core.offers import Offers
from membot.core.plan import ConsultSwitch, TurnPlan
from membot.core.prompt import PromptBuilder
from membot.core.steps import ToolSteps
from membot.core.summarizer import HistoryCompressor
from membot.core.tools.book import TaskDesk
from membot.core.tools.builtin import MAX_FACTS
from membot.core.tools.context import TurnContext
from membot.core.turn import (
    Incoming,
    ReplySink,
    TurnOptions,
    TurnResult,
    is_delivering,
    is_hearing,
)
from membot.core.window import WindowPolicy
from membot.ids import ConversationId
from membot.llm.model import CallOptions, ChatMessage, ChatModel
from membot.llm.tools import NativeMode, ToolExecutor, ToolMode, ToolRegistry
from membot.media.errors import UnsupportedType
from membot.memory.contract.models import ChatMeta, Message
from membot.memory.contract.repository import ChatRepository
from membot.search.excerpts import DEFAULT_BUDGET_TOKENS
from membot.tasks import TaskSupervisor, to_the_end
from membot.tool_names import CONSULTATION_TOOL

if TYPE_CHECKING:
    from membot.mcp.hub import McpTools
    from membot.memory.contract.state import ConversationState
    from membot.search import HistorySearch

log = logging.getLogger(__name__)


class Agent:
    """Owns a turn. The order is the contract: the whole turn (user message, tool calls and
    results, answer) and the state it leaves are durable before the answer is sent, and
    summarization starts only after the answer is out, in the background. Text the model
    writes beside a tool call is sent at once as progress; it is stored with the turn. A sink
    that wants the answer as it is written (turn.StreamingSink) gets it in pieces while the
    model writes (core/steps.py); a turn that ends before it is stored (the sink's reader
    went away, the task was cancelled) stores nothing, so a consultation's round is not
    counted either."""

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
        max_tool_steps: int = 10,
        search: HistorySearch | None = None,
        search_budget: int = DEFAULT_BUDGET_TOKENS,
        tasks: TaskSupervisor | None = None,
        consult_rounds: int = 3,
        max_rounds: int = 10,
        detect: Detect = detect_language,
        models: tuple[str, ...] = (),
        media: MediaReader | None = None,
        task_desk: TaskDesk | None = None,
        web_search: bool = False,
        mcp: McpTools | None = None,
        admins: frozenset[int] = frozenset(),
        forgetting: Forgetting | None = None,
    ) -> None:
        self.model, self.repository = model, repository
        self.prompts, self.summarizer = prompts, summarizer
        # The window starts where the summary ends and only grows until the next summary
        # (core/window.py): the prompt's prefix stays the same for a provider's cache.
        self.policy = WindowPolicy(window_size, summarizer.every)
        self.registry = tools.registry if tools else ToolRegistry()
        self.mode = tool_mode or NativeMode()
        # What each kind of turn is offered, with its fixed prompt text (core/offers.py).
        self.offers = Offers(self.registry, self.mode, mcp, admins)
        self.steps = ToolSteps(
            model=model, mode=self.mode, tools=tools, max_tool_steps=max_tool_steps, media=media
        )
        # The chats' tasks, for the task tools; None: no turn is offered them.
        self.task_desk = task_desk
        self.search, self.search_budget = search, search_budget
        self.tasks = tasks if tasks is not None else TaskSupervisor()
        self.consult_rounds, self.max_rounds = consult_rounds, max_rounds
        self.forgetting = forgetting or Forgetting(repository, search, self.tasks)  # /forget
        # Tells a conversation's language from its first (long enough) user message.
        self.detect = detect
        # What a chat may have chosen (MODELS): a stored choice the operator has since taken
        # off the list is not used; the default is. Empty: any.
        self.models = frozenset(models)
        # Understands what users send besides text; None: uploads are refused.
        self.media = media
        # WEB_SEARCH: offered in every turn whose state allows it; the model decides when.
        self.web_search = web_search

    async def respond(
        self, incoming: Incoming, sink: ReplySink, options: TurnOptions | None = None
    ) -> TurnResult:
        """Answer one message; LLMError (nothing stored, no state changed) if the model fails."""
        opts = options or TurnOptions()
        cid = incoming.conversation
        ctx = await self.repository.context(cid, self.policy.read)
        history = await window_of(self.repository, self.policy, ctx)
        plan = await self._plan(incoming, ctx.meta, opts)
        opening = plan.round
        call = opts.call or CallOptions()
        chosen = plan.start.model
        if chosen is not None and call.model is None and (not self.models or chosen in self.models):
            call = replace(call, model=chosen)
        call = replace(call, web_search=self.web_search and plan.start.searches)
        opts = replace(opts, call=call)
        model = call.model
        seen = await self._understand(incoming, plan, model)
        if seen.heard and is_hearing(sink):
            await sink.heard(seen.heard)  # shown while the model is still to write
        user = Message(
            role="user",
            content=seen.text,
            user_id=incoming.user_id,
            name=incoming.name,
            tg_message_id=incoming.message_id,
            attachments=seen.attachments,
            task=incoming.task,
            guest=incoming.guest,
        )
        images: Mapping[int, tuple[dict[str, Any], ...]] = {}
        if self.media is not None and any(m.attachments for m in history):
            images = await self.media.window_images(
                self.repository, cid, history, model=model, taken=len(seen.images)
            )

        book = self.task_desk.for_turn(incoming, plan) if self.task_desk else None
        offer = self.offers.for_turn(book is not None, self.offers.admin(cid, incoming.user_id))
        now = book.now() if book is not None else None

        def prompt() -> list[ChatMessage]:  # for the plan as it stands
            return self.prompts.build(
                summary=ctx.summary,
                history=history,
                new=user,
                group=incoming.group,
                facts=ctx.facts,
                extra_system=[
                    *offer.sections(plan.offers_consultation),
                    *([plan.round.system_note()] if plan.round else []),
                ],
                # An API session's own prompt, else the chat's persona, else SYSTEM_PROMPT.
                system_prompt=opts.system_prompt or plan.start.persona,
                images=images,
                new_images=seen.images,
                documents=seen.documents,
                now=now,
            )

        facts = FactsDraft(self.repository, cid, MAX_FACTS)
        tool_ctx = TurnContext(
            conversation=cid,
            repository=self.repository,
            search=self.search,
            search_budget=self.search_budget,
            consultation=(
                ConsultSwitch(plan, self.consult_rounds, self.max_rounds)
                if plan.offers_consultation
                else None
            ),
            facts=facts,
            tasks=book,
            forgetting=self.forgetting.desk(incoming),
        )
        produced, response = await self.steps.run(prompt, sink, tool_ctx, plan, opts, offer)
        if plan.round is not None and plan.round is not opening:
            log.info(
                "%s: the model started a consultation of %d rounds", cid, plan.round.max_rounds
            )
        after = plan.state_after()
        if stopped := produced[-1].stopped:  # a consultation's round is answered all the same
            log.info("%s: answer stopped by the user, kept as written so far", cid)
        result = TurnResult(
            reply=produced[-1].content,
            model=response.model,
            state=after or plan.start,
            plan=plan.round,
            heard=seen.heard,
            stopped=stopped,
            sources=produced[-1].sources,
            citations=produced[-1].citations,
            cut=response.finish_reason == "length",
        )
        if is_delivering(sink):  # sent again by the next process if need be
            produced[-1] = replace(produced[-1], delivery=sink.delivery(result))
        # Kept whole once begun: a turn cancelled now (its API client gone) must not leave its
        # messages saying "Remembered" without the fact, nor files without their turn.
        files = [*seen.files, *opts.files]
        stored = await to_the_end(self._keep(cid, files, [user, *produced], after, facts))
        result = replace(result, first_seq=stored[0].seq, seq=stored[-1].seq)
        await sink.answer(result)
        if facts.dropped or summary_due(self.summarizer, ctx.meta, stored[-1].seq):
            self.tasks.spawn(("summary", cid), self.summarizer.maybe_summarize(cid, facts.dropped))
        return result

    async def _keep(
        self,
        cid: ConversationId,
        files: Sequence[tuple[str, bytes]],
        messages: list[Message],
        state: ConversationState | None,
        facts: FactsDraft,
    ) -> list[Message]:
        """Store the turn: its files, its messages (and the state it leaves), its facts."""
        for key, data in files:  # before the turn that refers to them
            await self.repository.put_file(cid, key, data)
        stored = await self.repository.append(cid, messages, state=state)
        await facts.commit()  # what the tools changed, now that the turn is kept
        return stored

    async def _understand(
        self, incoming: Incoming, plan: TurnPlan, model: str | None
    ) -> Understood:
        """The turn's uploads understood (core/media.py); the language detected from a
        transcript when the text told none. Nothing is stored here."""
        if not incoming.uploads:
            return Understood(text=incoming.text)
        if self.media is None:
            raise UnsupportedType(incoming.uploads[0].mime)
        seen = await self.media.understand(
            incoming.text, incoming.uploads, model=model, language=plan.start.language
        )
        if plan.start.language is None and plan.keep and seen.text != incoming.text:
            language = await detect_in_thread(self.detect, incoming.conversation, seen.text)
            if language is not None:
                plan.learn_language(language)
        return seen

    async def _plan(self, incoming: Incoming, meta: ChatMeta, opts: TurnOptions) -> TurnPlan:
        """What the turn starts from, which round it answers and what it may write."""
        # A new API session's own settings: what its first turn starts from and keeps.
        given = opts.state if meta.messages_total == 0 else None
        start = given or meta.state
        # A due task's turn, or a question from another chat (Guest Mode), is beside the
        # conversation: it answers no consultation round, starts none, detects no language.
        aside = incoming.aside
        next_round = None
        if opts.start is None and not aside:  # else a consultation starts below (consult)
            request = await initial_request_of(self.repository, incoming.conversation, start)
            next_round = RoundPlan.next_for(start, finish=opts.finish, request=request)
        plan = TurnPlan(
            start,
            round=next_round,
            # Read while the storage is down (memory/outage/), meta.state is a stand-in: the
            # turn writes no state built on it. A state the front door gave (a new API
            # session's, an explicit /consult) is the conversation's own, and kept.
            keep=not meta.degraded or opts.start is not None or given is not None,
            unsaved=given is not None,
            offer=opts.consult_tool
            and not aside
            and self.registry.get(CONSULTATION_TOOL) is not None,
        )
        # The conversation's language, once per conversation: detected from the first user
        # message long enough to tell, then kept with the turn and never detected again.
        # /finish's text is the bot's own words, not the user's: it tells nothing.
        if start.language is None and not opts.finish and not aside and not meta.degraded:
            language = await detect_in_thread(self.detect, incoming.conversation, incoming.text)
            if language is not None:
                plan.learn_language(language)
        if opts.start is not None:
            # A new API session's request is the first line of its archive: referred to from
            # the state, not copied into every round's.
            plan.consult(incoming.text, opts.start, seq=1 if given is not None else 0)
        return plan

    async def reset(self, cid: ConversationId) -> None:
        """Forget the conversation. A summary being made for it is stopped first."""
        await self.tasks.cancel(("summary", cid))
        await self.repository.reset(cid)
        if self.search is not None:
            await self.search.drop(cid)
        log.info("%s: memory reset", cid)

    async def aclose(self) -> None:
        await self.tasks.close()
