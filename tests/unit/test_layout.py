"""The shape of the source tree: small modules (one concern each, read in one sitting)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "membot"
MAX_LINES = 300


def test_no_module_is_over_300_lines() -> None:
    sizes = {
        str(path.relative_to(SRC)): len(path.read_text(encoding="utf-8").splitlines())
        for path in SRC.rglob("*.py")
    }
    assert len(sizes) > 50  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
