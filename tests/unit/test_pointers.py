"""Every file the docs and the code's words point a reader at is there: a path such as
`tests/unit/usage/test_ledger.py`, `core/prompt.py` or `docs/api.md` named in docs/*.md,
README.md, a module of src/ (docstrings and comments), or a docstring of tests/ and bench/.

A path with a folder is looked for from the repository's root, from src/ and src/membot, from
tests/, and beside the file that names it; a bare name (`runner.py`) beside the module that
names it, or, in the docs and the tests, anywhere in the project."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("src", "tests", "bench", "docs", "scripts", "deploy")
# A relative path to a Python module or a Markdown page, not part of a URL or a longer name.
# Names of what membot writes, not of the project's files: the entries of an export's ZIP.
WRITTEN = frozenset({"conversation.md", "summary.md"})
PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:py|md))(?![\w/])")


def _project_files() -> list[Path]:
    inside = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*") if p.is_file()]
    return [*inside, *(p for p in ROOT.iterdir() if p.is_file())]


def _docstrings(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node)
            if text:
                yield text


def _texts() -> Iterator[tuple[Path, str]]:
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        yield page, page.read_text(encoding="utf-8")
    for module in sorted((ROOT / "src").rglob("*.py")):
        yield module, module.read_text(encoding="utf-8")
    for folder in ("tests", "bench"):
        for module in sorted((ROOT / folder).rglob("*.py")):
            for text in _docstrings(module.read_text(encoding="utf-8")):
                yield module, text


def test_every_file_the_docs_and_docstrings_name_exists() -> None:
    names = {p.name for p in _project_files()}
    missing = []
    for file, text in _texts():
        for ref in PATH.findall(text):
            if ref in WRITTEN:
                continue
            if "/" not in ref and file.is_relative_to(ROOT / "src"):
                found = (file.parent / ref).is_file()  # a module names its siblings
            elif "/" not in ref:
                found = ref in names
            else:
                bases = (ROOT, ROOT / "src", ROOT / "src" / "membot", ROOT / "tests", file.parent)
                found = any((base / ref).is_file() for base in bases)
            if not found:
                missing.append(f"{file.relative_to(ROOT)}: {ref}")
    assert not missing, "pointing at files that are not there:\n" + "\n".join(missing)
