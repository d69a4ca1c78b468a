"""`python -m bench.report [--check]`: docs/benchmarks.md, generated from bench/results.json.

The page is never edited by hand: every figure on it comes from results.json, and the words
around the figures live in the Markdown template bench/benchmarks.md. `make bench` runs this after
the benchmarks; `tests/unit/test_docs.py` fails when the committed page is not what this
module makes of the committed results. The output depends on nothing but results.json (no
clock, no machine lookups), so the same results always give the same page.

The template syntax is described at the top of bench/benchmarks.md. A figure the results
lack renders as "(not measured)", so a run of fewer sections, or an older results file, still
gives a page (and `missing_figures` lets the tests insist that the committed results have
them all).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.template import Section
from bench.template import load as load_words

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PAGE = ROOT / "docs" / "benchmarks.md"
MISSING = "(not measured)"
_FIGURE = re.compile(r"\[\[([^\[\]|]+)\|([^\[\]|]+)(?:\|(target|verdict|percent))?\]\]")
_TARGETS = "[[targets]]"


def section_of(row: dict[str, Any]) -> str:
    """The section a row belongs to (bench/search.py names its rows `search_history`)."""
    benchmark = str(row.get("benchmark", ""))
    return "search" if benchmark.startswith("search") else benchmark


def format_number(value: Any) -> str:
    """A figure as people read it: thousands separated, three significant places at most."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:,.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        return f"{value:.3f}" if magnitude < 1 else f"{value:.2f}"
    return str(value)


def with_unit(value: Any, unit: str) -> str:
    if unit == "x" and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.2f}×"
    number = format_number(value)
    if unit in ("", "ratio", "msgs"):
        return number
    return f"{number} {unit}"


def target_of(row: dict[str, Any]) -> str:
    return str(row.get("target") or "").replace(">=", "≥").replace("<=", "≤")


def verdict(row: dict[str, Any]) -> str:
    return {True: "met", False: "not met"}.get(row.get("ok"), "no target")


class Figures:
    """The rows of one section, looked up by (case, metric)."""

    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        self.rows = {(str(r.get("case", "")), str(r.get("metric", ""))): r for r in rows}
        self.targets = targets(rows)
        self.missing: list[str] = []

    def fill(self, template: str) -> str:
        return _FIGURE.sub(self._figure, template.replace(_TARGETS, self.targets))

    def _figure(self, match: re.Match[str]) -> str:
        case, metric, part = match.group(1), match.group(2), match.group(3)
        found = self.rows.get((case, metric))
        if found is None:
            self.missing.append(f"{case}|{metric}")
            return MISSING
        if part == "target":
            return target_of(found) or "none"
        if part == "verdict":
            return verdict(found)
        value = found.get("value")
        if part == "percent" and isinstance(value, int | float):
            return f"{value * 100:.1f}%"
        return with_unit(found.get("value"), str(found.get("unit", "")))


def _starts_block(word: str) -> bool:
    """Whether a line beginning with this word would be read as Markdown structure (a list,
    a quote, a heading, a heading's underline) instead of the paragraph's text."""
    return (
        word in ("-", "+", "*")
        or word.startswith((">", "#"))
        or re.fullmatch(r"\d+[.)]", word) is not None
        or set(word) <= {"-", "="}
    )


def reflow(text: str, width: int = 100) -> str:
    """Each paragraph (blank-line separated) filled to `width`, after the figures went in.
    A word that would start Markdown structure stays on the line before it."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        lines: list[str] = []
        for word in paragraph.split():
            if lines and (len(lines[-1]) + 1 + len(word) <= width or _starts_block(word)):
                lines[-1] += " " + word
            else:
                lines.append(word)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(
    headers: Sequence[str], lines: Iterable[Sequence[Any]], *, padded: Sequence[int] = ()
) -> str:
    """A Markdown table: the page's, and the terminal's (`python -m bench`) with `padded`
    columns, the numbers' (their indexes), right-aligned and every column padded to width."""
    cells = [[_cell(c) for c in line] for line in lines]
    if not padded:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out.extend("| " + " | ".join(line) + " |" for line in cells)
        return "\n".join(out)
    widths = [max([len(h), 3, *(len(line[i]) for line in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(
                v.rjust(widths[i]) if i in padded else v.ljust(widths[i])
                for i, v in enumerate(values)
            )
            + " |"
        )

    rule = ["-" * (w - 1) + (":" if i in padded else "-") for i, w in enumerate(widths)]
    return "\n".join([line(headers), line(rule), *(line(c) for c in cells)])


def rows_table(rows: Sequence[dict[str, Any]]) -> str:
    def line(r: dict[str, Any]) -> list[str]:
        ok = {True: "yes", False: "**no**"}.get(r.get("ok"), "")
        value = with_unit(r.get("value"), str(r.get("unit", "")))
        return [str(r.get("case", "")), str(r.get("metric", "")), value, target_of(r), ok]

    return table(("case", "metric", "value", "target", "met"), (line(r) for r in rows))


def notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        note = str(r.get("note") or "").strip()
        if note and note not in seen:
            seen.append(note)
    return seen


def measured_on(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """The run a section's rows come from: its own entry under `earlier` when a later run of
    other sections kept it, else the file's top-level run."""
    earlier = results.get("earlier", {}).get(name)
    if earlier:
        return {"mode": earlier.get("mode"), "machine": earlier.get("machine") or {}}
    return {"mode": results.get("mode"), "machine": results.get("machine") or {}}


def describe_run(run: dict[str, Any]) -> str:
    machine = run["machine"]
    when = str(machine.get("timestamp", "")).replace("T", " ").replace("+00:00", " UTC")
    cpus = machine.get("cpu_count")
    cpu = f"{machine.get('cpu_model') or 'unknown CPU'}, {cpus} CPUs" if cpus else "unknown CPU"
    return f"{run.get('mode') or 'unknown'} run, {when or 'undated'}, {cpu}"


def targets(rows: Sequence[dict[str, Any]]) -> str:
    judged = [r for r in rows if r.get("ok") is not None]
    if not judged:
        return "informational"
    met = sum(1 for r in judged if r.get("ok"))
    return f"{met} of {len(judged)} met"


def render_section(
    section: Section, rows: list[dict[str, Any]], results: dict[str, Any], missing: list[str]
) -> str:
    figures = Figures(rows)
    seconds = results.get("seconds", {}).get(section.name)
    took = f"; the section took {format_number(seconds)} s" if seconds is not None else ""
    parts = [
        f"## {section.title}",
        f"*`{section.name}` ({section.source}); {describe_run(measured_on(section.name, results))}"
        f"{took}.*",
        reflow(figures.fill(section.what)),
    ]
    if rows:
        parts.append(reflow(figures.fill(section.found)))
        parts.append(rows_table(rows))
        found_notes = notes(rows)
        if found_notes:
            parts.append(reflow("Notes from the run: " + "; ".join(found_notes) + "."))
    else:
        parts.append("This section has no results in bench/results.json yet.")
    if section.reading:
        parts.append(reflow(figures.fill(section.reading)))
    missing.extend(f"{section.name}: {m}" for m in figures.missing if rows)
    return "\n\n".join(p.strip() for p in parts if p.strip())


def render(results: dict[str, Any], missing: list[str] | None = None) -> str:
    """The whole page. `missing` collects the figures a template names that the results lack
    (a section without rows at all is not counted: it simply was not run)."""
    missing = [] if missing is None else missing
    all_rows: list[dict[str, Any]] = list(results.get("rows", []))
    by_section: dict[str, list[dict[str, Any]]] = {}
    for r in all_rows:
        by_section.setdefault(section_of(r), []).append(r)
    words = load_words()
    known = [s.name for s in words.sections]
    summary = table(
        ("section", "what it measures", "targets", "measured"),
        (
            (
                f"[{s.name}](#{_anchor(s.title)})",
                s.summary,
                targets(by_section.get(s.name, [])) if s.name in by_section else "not run",
                describe_run(measured_on(s.name, results)) if s.name in by_section else "",
            )
            for s in words.sections
        ),
    )
    body = [words.intro, "## Summary", summary]
    body.extend(
        render_section(s, by_section.get(s.name, []), results, missing) for s in words.sections
    )
    for name in sorted(set(by_section) - set(known)):  # a section this page has no words for
        rows = by_section[name]
        body.append(f"## {name}\n\n{rows_table(rows)}")
    body.append(words.footer)
    return "\n\n".join(body) + "\n"


def _anchor(title: str) -> str:
    # GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def load(path: Path = RESULTS) -> dict[str, Any]:
    import json

    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="bench/results.json")
    parser.add_argument("--out", type=Path, default=PAGE, help="docs/benchmarks.md")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the page is stale"
    )
    args = parser.parse_args(argv)
    page = render(load(args.results))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != page:
            print(f"{args.out} is stale: run `python -m bench.report`", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
