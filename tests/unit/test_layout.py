"""The shape of the source tree: small modules (one concern each, read in one sitting)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "membot"
BENCH = Path(__file__).parents[2] / "bench"
MAX_LINES = 300


def test_no_module_is_over_300_lines() -> None:
    sizes = {
        str(path.relative_to(SRC)): len(path.read_text(encoding="utf-8").splitlines())
        for path in SRC.rglob("*.py")
    }
    assert len(sizes) > 50  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_bench_takes_from_the_tests_only_the_shared_fakes() -> None:
    # What the bench shares with the tests lives in tests/fakes: a test can change without a
    # benchmark breaking.
    found = {
        f"{path.name}: {name}"
        for path in BENCH.glob("*.py")
        for name in _imports(path)
        if name.split(".")[0] == "tests" and name.split(".")[:2] != ["tests", "fakes"]
    }
    assert found == set()


def test_no_bench_module_imports_in_a_circle() -> None:
    modules = {path.stem for path in BENCH.glob("*.py")}
    graph = {
        name: {
            imported.split(".")[1]
            for imported in _imports(BENCH / f"{name}.py")
            if imported.startswith("bench.") and imported.split(".")[1] in modules
        }
        for name in modules
    }
    graph = {name: edges - {name} for name, edges in graph.items()}
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"bench imports in a circle: {exc.args[1]}") from None
