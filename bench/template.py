"""The words of docs/benchmarks.md, read from the Markdown template bench/benchmarks.md.

The template's own first comment describes its markers and the figure syntax; bench/report.py
fills the figures in. A template that breaks the rules (a section without `what`, a marker
this module does not know) is an error naming the line, not a page with a hole in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).with_name("benchmarks.md")
# `<!-- intro -->`, `<!-- what -->`, ... or `<!-- section NAME` with `key: value` lines.
_MARKER = re.compile(
    r"^<!-- ([a-z]+)(?: ([a-z][a-z0-9]*))?((?:\n[a-z]+: [^\n]*)*) -->\n", re.MULTILINE
)
_PARTS = ("what", "found", "reading")


@dataclass(frozen=True)
class Section:
    name: str  # as in `python -m bench --only NAME`
    title: str
    source: str
    summary: str  # one line for the summary table
    what: str  # what is measured, and how
    found: str  # the headline figures
    reading: str = ""  # how to read them (no figures)


@dataclass(frozen=True)
class Words:
    intro: str
    sections: tuple[Section, ...]
    footer: str


class TemplateError(ValueError):
    pass


def load(path: Path = TEMPLATE) -> Words:
    text = path.read_text(encoding="utf-8")
    marks = list(_MARKER.finditer(text))
    blocks: dict[str, str] = {}
    sections: list[Section] = []
    current: dict[str, str] | None = None

    def close() -> None:
        if current is None:
            return
        lacking = [k for k in ("title", "source", "summary", "what", "found") if k not in current]
        if lacking:
            raise TemplateError(f"{path}: section {current['name']} lacks {', '.join(lacking)}")
        sections.append(Section(**current))

    for i, mark in enumerate(marks):
        kind, name, keys = mark.group(1), mark.group(2), mark.group(3)
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip()
        line = text.count("\n", 0, mark.start()) + 1
        if kind == "section" and name:
            close()
            title = body.removeprefix("## ")
            if not body.startswith("## ") or "\n" in title:
                raise TemplateError(f"{path}:{line}: section {name}: a `## title` line only")
            current = {"name": name, "title": title}
            for key_line in keys.strip().splitlines():
                key, value = key_line.split(": ", 1)
                current[key] = value
        elif kind in _PARTS and current is not None and not name:
            current[kind] = body
        elif kind in ("intro", "footer") and not name:
            close()
            current = None
            blocks[kind] = body
        else:
            raise TemplateError(f"{path}:{line}: unknown marker {mark.group(0).strip()!r}")
    close()
    if set(blocks) != {"intro", "footer"}:
        raise TemplateError(f"{path}: needs an intro and a footer")
    return Words(blocks["intro"], tuple(sections), blocks["footer"])
