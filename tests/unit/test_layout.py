"""The shape of the source tree: small modules (one concern each, read in one sitting)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path
from typing import get_type_hints

from membot.config import Settings

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


def _flat_settings() -> tuple[set[str], set[str]]:
    """Settings' flat names (its fields and derived values) and its groups' names."""
    # Settings and the class of its fields (config/fields.py), with the derived values.
    members = {name: m for cls in Settings.__mro__[:2] for name, m in vars(cls).items()}
    groups = {
        name
        for name, member in members.items()
        if isinstance(member, property)
        and str(get_type_hints(member.fget).get("return", "")).endswith("Settings'>")
    }
    derived = {name for name, m in members.items() if isinstance(m, property)} - groups
    return set(Settings.model_fields) | derived, groups


def _settings_reads(tree: ast.AST, flat: set[str]) -> list[tuple[int, str]]:
    # `settings.x`, `self.settings.x`, `core.settings.x`, `self._settings.x` ...
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in flat:
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if name.endswith("settings"):
            found.append((node.lineno, node.attr))
    return found


def test_settings_are_read_by_group_outside_config() -> None:
    # A module reads the group of its concern (settings.redis.prefix), so each value has one
    # spelling and the groups say which part uses what; config/ alone builds the groups.
    flat, groups = _flat_settings()
    assert {"telegram", "llm", "redis", "logging"} <= groups
    assert {"redis_prefix", "default_model", "data_dir"} <= flat
    reads = {
        f"{path.relative_to(SRC)}:{line} settings.{name}"
        for path in SRC.rglob("*.py")
        if path.parent.name != "config"
        for line, name in _settings_reads(ast.parse(path.read_text(encoding="utf-8")), flat)
    }
    assert reads == set(), "read a group instead (membot/config/groups.py)"
