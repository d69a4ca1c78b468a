"""How much of each prompt a provider's prefix cache can serve.

One private chat of 90 messages (45 questions of 40-300 characters, answers of 180-600, a
summary of about 700 characters every SUMMARY_EVERY messages), membot's defaults
(WINDOW_SIZE=20, SUMMARY_EVERY=20, the built-in tools) and an Anthropic model id, so the
`cache_control` breakpoints are on the wire. The fake LLM records every prompt; each is
rendered as a provider reads it (tools, then the messages) and compared with the prompts
before it: the longest prefix it shares with one of them is what a prefix cache serves.

"Today" is the layout before the prefix-cache one (a window sliding by one exchange),
rebuilt here from the same transcript as a reference: the head (system prompt, tools, a
summary of everything up to the last multiple of SUMMARY_EVERY) and the last WINDOW_SIZE
messages, a window that slides by one exchange each turn. (Checked once against the code of
that layout, commit 7665f3f, driven the same way: its prompts gave the same figures to the
character.) The steady state is answers 21-45 (after the first 40 messages, once both
layouts summarize). Costs are the prompt's only (the answers are the
same in both layouts), with 4 characters a token: Anthropic (Claude Sonnet 4.5: $3 per
million input tokens, a cache read 10% of it, a cache write 125%; without breakpoints, as
today, nothing is cached) and OpenAI (GPT-5: $1.25, cached $0.125; it caches prefixes by
itself, today's layout too).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Reply, common_prefix, rendered_prompt

from bench.core import Row, fakes, make_membot, row, running
from membot.core.prompt import PromptBuilder
from membot.core.window import WindowPolicy

BENCH = "cache"
CHAT = 4001
ANSWERS = 45
STEADY_FROM = 21  # answers from here on are the steady state
MODEL = "anthropic/claude-sonnet-4.5"
WINDOW = 20
EVERY = 20
CHARS_PER_TOKEN = 4
# $ per million tokens: (input, cached read, cache write)
ANTHROPIC = (3.0, 0.30, 3.75)
OPENAI = (1.25, 0.125, 1.25)

WORDS = [
    "the",
    "a",
    "memory",
    "summary",
    "window",
    "answer",
    "question",
    "model",
    "cache",
    "prompt",
    "tokens",
    "user",
    "chat",
    "remember",
    "yesterday",
    "project",
    "deadline",
    "travel",
    "budget",
    "recipe",
    "garden",
    "python",
    "server",
    "meeting",
    "because",
    "however",
    "which",
    "would",
    "could",
    "should",
    "about",
    "with",
    "from",
    "into",
    "over",
    "under",
    "between",
    "plan",
    "idea",
    "detail",
    "example",
    "reason",
    "result",
    "option",
    "choice",
    "price",
    "time",
    "place",
    "friend",
    "family",
]


def text(rng: random.Random, low: int, high: int, lead: str) -> str:
    size = rng.randint(low, high)
    out = [lead]
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:size].rstrip() + "."


def transcript(seed: int = 19) -> tuple[list[str], list[str], list[str]]:
    """Questions, answers and summaries, the same for both layouts."""
    rng = random.Random(seed)
    questions = [text(rng, 40, 300, f"Question {n}:") for n in range(1, ANSWERS + 1)]
    answers = [text(rng, 180, 600, f"Answer {n}:") for n in range(1, ANSWERS + 1)]
    summaries = [text(rng, 650, 780, f"Summary {n}:") for n in range(1, ANSWERS + 1)]
    return questions, answers, summaries


async def run(quick: bool = False) -> tuple[list[Row], dict[str, Any]]:
    questions, answers, summaries = transcript()
    bodies: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="membot-bench-") as tmp:
        async with fakes() as (tg, llm):

            def respond(body: dict[str, Any]) -> Reply:
                if llm.is_summary_request(body):
                    return Reply(content=summaries[len(llm.summary_requests) - 1])
                bodies.append(body)
                return Reply(content=answers[len(bodies) - 1])

            llm.set_responder(respond)
            app = make_membot(
                tg,
                llm,
                Path(tmp) / "data",
                openrouter_model=MODEL,
                window_size=WINDOW,
                summary_every=EVERY,
            )
            system_prompt = app.settings.system_prompt
            async with running(app, tg):
                policy, upto, made = WindowPolicy(WINDOW, EVERY), 0, 0
                for n, question in enumerate(questions, 1):
                    answered = tg.expect_answer(CHAT)  # not tg.ask: no echo of the question
                    tg.push_text(CHAT, question)
                    await asyncio.wait_for(answered, 30)
                    # A person takes longer to write than a summary takes: the one this
                    # turn started (sent after the answer) has landed before the next turn.
                    if policy.due(2 * n, upto):
                        upto, made = policy.boundary(upto, 2 * n, ()), made + 1
                        await llm.wait_until(lambda m=made: len(llm.summary_requests) >= m)
                    await app.core.tasks.join()
    now = [rendered_prompt(b) for b in bodies]
    before = today(bodies, system_prompt, questions, answers, summaries)
    figures = {"today": measure(before), "now": measure(now)}
    return rows(figures), {
        "model": MODEL,
        "window_size": WINDOW,
        "summary_every": EVERY,
        "messages": 2 * ANSWERS,
        "steady_from_answer": STEADY_FROM,
        **figures,
        "breakpoints_sent": sum("cache_control" in str(b["messages"]) for b in bodies),
    }


def today(
    bodies: list[dict[str, Any]],
    system_prompt: str,
    questions: list[str],
    answers: list[str],
    summaries: list[str],
) -> list[str]:
    """The same turns' prompts in the sliding-window layout ("today")."""
    builder = PromptBuilder(system_prompt)
    history: list[dict[str, Any]] = []
    out = []
    for n, (body, question) in enumerate(zip(bodies, questions, strict=True)):
        covered = len(history) // EVERY  # summaries made so far, each of the whole backlog
        window = history[-WINDOW:]
        system = builder.build_system(
            summary=summaries[covered - 1] if covered else "", has_history=bool(window)
        )
        messages = [system, *window, {"role": "user", "content": question}]
        out.append(rendered_prompt({"tools": body.get("tools"), "messages": messages}))
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answers[n]},
        ]
    return out


def measure(prompts: list[str]) -> dict[str, float]:
    """Per answer in the steady state: prompt and uncached characters, the cached share."""
    sizes: list[int] = []
    uncached: list[int] = []
    for n, prompt in enumerate(prompts):
        shared = max((common_prefix(prompt, earlier) for earlier in prompts[:n]), default=0)
        if n + 1 >= STEADY_FROM:
            sizes.append(len(prompt))
            uncached.append(len(prompt) - shared)
    chars = sum(sizes) / len(sizes)
    fresh = sum(uncached) / len(uncached)
    return {"prompt_chars": round(chars), "uncached_chars": round(fresh)}


def cost(chars: float, fresh: float, prices: tuple[float, float, float], cached: bool) -> float:
    """$ per answer for the prompt; `cached`: the provider serves the repeated prefix."""
    price, read, write = prices
    tokens = chars / CHARS_PER_TOKEN
    if not cached:
        return tokens * price / 1e6
    new = fresh / CHARS_PER_TOKEN
    return ((tokens - new) * read + new * write) / 1e6


def rows(figures: dict[str, dict[str, float]]) -> list[Row]:
    before, after = figures["today"], figures["now"]
    case = f"{2 * ANSWERS} messages, answers {STEADY_FROM}-{ANSWERS}"
    out: list[Row] = []
    for name, f in (("today", before), ("now", after)):
        share = 1 - f["uncached_chars"] / f["prompt_chars"]
        f["cached_share"] = round(share, 3)
        out.append(
            row(
                BENCH,
                case,
                f"share of the prompt repeating a prefix ({name})",
                round(share, 3),
                "",
                target=">= 0.85" if name == "now" else "",
                ok=share >= 0.85 if name == "now" else None,
            )
        )
    for metric, key, limit in (
        ("prompt chars per answer", "prompt_chars", 1.8),
        ("uncached chars per answer", "uncached_chars", 0.40),
    ):
        ratio = after[key] / before[key]
        out.append(row(BENCH, case, f"{metric} (today)", before[key], "chars"))
        out.append(row(BENCH, case, f"{metric} (now)", after[key], "chars"))
        out.append(
            row(
                BENCH, case, f"{metric}, now / today", round(ratio, 2), "x",
                target=f"<= {limit}", ok=ratio <= limit,
            )
        )  # fmt: skip
    for provider, prices, today_cached in (
        ("Anthropic", ANTHROPIC, False),
        ("OpenAI", OPENAI, True),
    ):
        was = cost(before["prompt_chars"], before["uncached_chars"], prices, today_cached)
        now = cost(after["prompt_chars"], after["uncached_chars"], prices, True)
        unit = "$ per 1000 answers"
        out.append(row(BENCH, case, f"prompt cost, {provider} (today)", round(was * 1000, 3), unit))
        out.append(row(BENCH, case, f"prompt cost, {provider} (now)", round(now * 1000, 3), unit))
        note = "today: no breakpoints, nothing cached" if not today_cached else ""
        out.append(
            row(BENCH, case, f"prompt cost, {provider}, now / today", round(now / was, 2), "x",
                note=note)
        )  # fmt: skip
    return out
