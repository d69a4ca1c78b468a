"""The docs say what the code does: every setting, command, endpoint and error code is where a
reader looks for it, the generated pages are what their generators make, and every link
inside the docs leads somewhere."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest
from bench import report, template
from scripts import openapi

from membot.api.errors import ERROR_STATUS, ErrorCode
from membot.api.models import ChatRequest, ChatResponse
from membot.api.openapi import build_document
from membot.bot.texts import EN
from membot.config import Settings, env_names

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLI_COMMANDS = [
    "run",
    "worker",
    "receive",
    "api",
    "check-config",
    "search",
    "mcp",
    "migrate",
    "usage",
]


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(env_names()))
def test_every_setting_is_in_env_example_and_operating(name: str) -> None:
    assert re.search(rf"^#? ?{name}=", read(".env.example"), re.MULTILINE), (
        f"{name} not in .env.example"
    )
    assert read("docs/operating.md").count(f"| `{name}` |") == 1, (
        f"{name} not once in the settings tables of docs/operating.md"
    )


# The heading of each settings group (`settings.<group>`) in docs/operating.md.
GROUP_HEADINGS = {
    "telegram": "Telegram",
    "llm": "LLM",
    "storage": "Storage",
    "redis": "Redis",
    "api": "API",
    "queue": "Queue",
    "limits": "Limits",
    "tools": "Tools",
    "conversation": "Conversation",
    "media": "Media",
    "tasks": "Tasks",
    "mcp": "MCP",
    "logging": "Logging",
}


def _groups() -> dict[str, set[str]]:
    """Each group property of Settings and the variables it is made of, read from the
    properties' code (`self.<field>`, through derived properties such as default_model)."""
    # Settings and the class of its fields (config/fields.py), whose derived values the
    # groups read too.
    source = "\n".join(textwrap.dedent(inspect.getsource(cls)) for cls in Settings.__mro__[:2])
    tree = ast.parse(source)
    properties = {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
    }
    env = dict(zip(Settings.model_fields, env_names(), strict=True))

    def fields(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(properties[name]):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id != "self" or node.attr in seen:
                    continue
                if node.attr in env:
                    found.add(env[node.attr])
                elif node.attr in properties:
                    found |= fields(node.attr, seen | {name})
        return found

    return {
        name: fields(name)
        for name, node in properties.items()
        if isinstance(node.returns, ast.Name | ast.Constant)
        and str(getattr(node.returns, "id", getattr(node.returns, "value", ""))).endswith(
            "Settings"
        )
    }


def _section(markdown: str, heading: str) -> str:
    match = re.search(rf"^### {re.escape(heading)}\n(.*?)(?=^#)", markdown, re.DOTALL | re.M)
    return match.group(1) if match else ""


def test_the_settings_are_documented_in_their_groups() -> None:
    groups = _groups()
    assert set(groups) == set(GROUP_HEADINGS), "a settings group without a heading here"
    page = read("docs/operating.md")
    misplaced = {
        f"{name} (in settings.{group})"
        for group, names in groups.items()
        for name in names
        if f"| `{name}` |" not in _section(page, GROUP_HEADINGS[group])
    }
    assert not misplaced, f"not under their group's heading in docs/operating.md: {misplaced}"


def test_every_setting_is_in_exactly_one_group() -> None:
    # A module handed its group finds every setting of its concern there, and only there.
    groups = _groups()
    seen: dict[str, list[str]] = {}
    for group, names in groups.items():
        for name in names:
            seen.setdefault(name, []).append(group)
    assert set(env_names()) - set(seen) == set(), "a setting in no group"
    assert {name: found for name, found in seen.items() if len(found) > 1} == {}


@pytest.mark.parametrize("command", sorted(name for name, _ in EN.COMMANDS))
def test_every_bot_command_is_in_the_user_guide(command: str) -> None:
    assert f"| `/{command}" in read("docs/user-guide.md"), (
        f"/{command} not in the command table of docs/user-guide.md"
    )


@pytest.mark.parametrize("command", CLI_COMMANDS)
def test_every_cli_command_is_in_operating(command: str) -> None:
    assert f"\nmembot {command}" in read("docs/operating.md"), (
        f"membot {command} not in the command line of docs/operating.md"
    )


def test_the_cli_commands_listed_here_are_the_clis() -> None:
    # The subcommands `membot --help` offers, read from the parser's source.
    source = read("src/membot/__main__.py")
    offered = re.findall(r"add_parser\(\s*\"([a-z-]+)\"", source)
    assert sorted(offered) == sorted(CLI_COMMANDS)


@pytest.mark.parametrize(
    ("method", "path"),
    sorted(
        (method.upper(), path)
        for path, operations in build_document(10, 100_000)["paths"].items()
        for method in operations
    ),
)
def test_every_endpoint_is_in_the_api_page(method: str, path: str) -> None:
    assert f"`{method} {path}`" in read("docs/api.md"), f"{method} {path} not in docs/api.md"


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_error_code_is_in_the_api_page_with_its_status(code: ErrorCode) -> None:
    assert f"| {ERROR_STATUS[code]} | `{code.value}` |" in read("docs/api.md"), (
        f"{ERROR_STATUS[code]} {code.value} not in the error table of docs/api.md"
    )


@pytest.mark.parametrize(
    "field",
    sorted(
        {f.alias or name for name, f in ChatRequest.model_fields.items()}
        | {f.alias or name for name, f in ChatResponse.model_fields.items()}
    ),
)
def test_every_request_and_response_field_is_in_the_api_page(field: str) -> None:
    assert f"| `{field}` |" in read("docs/api.md"), f"{field} not in the tables of docs/api.md"


def test_the_openapi_document_in_docs_is_current() -> None:
    assert read("docs/openapi.json") == openapi.document(), (
        "docs/openapi.json is stale: run `make docs` (python -m scripts.openapi)"
    )


def test_the_benchmarks_page_is_generated_from_the_committed_results() -> None:
    missing: list[str] = []
    page = report.render(report.load(), missing)
    assert read("docs/benchmarks.md") == page, (
        "docs/benchmarks.md is stale: run `make docs` (python -m bench.report)"
    )
    assert not missing, f"the page's templates name figures results.json lacks: {missing}"


def test_every_benchmark_section_has_words_on_the_page() -> None:
    tree = ast.parse(read("bench/__main__.py"))
    sections = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "SECTIONS" for t in node.targets)
    )
    assert [s.name for s in template.load().sections] == list(sections)


def test_every_profiled_part_names_a_function_that_exists() -> None:
    # bench/parts.py finds its parts in cProfile's table by file suffix and function name: a
    # module moved without it (the turn into core/) silently reads as 0 ms on the page.
    import aiogram
    from bench.parts import PARTS

    roots = [ROOT / "src", Path(aiogram.__file__).parent.parent]
    gone = []
    for label, suffix, name, _ in PARTS:
        files = [f for root in roots for f in root.rglob(Path(suffix).name)]
        found = [f for f in files if f.as_posix().endswith(suffix)]
        if not any(re.search(rf"def {name}\(", f.read_text()) for f in found):
            gone.append(f"{label}: {suffix} {name}")
    assert not gone, f"bench/parts.py names parts that are not there: {gone}"


def test_the_readme_stays_short() -> None:
    lines = read("README.md").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the detail into docs/"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, and a
    repeated heading numbered (`-1`, `-2`)."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES)
def test_every_link_between_the_docs_leads_somewhere(page: str) -> None:
    source = ROOT / page
    broken = []
    for target in _LINK.findall(read(page)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        missing_anchor = bool(anchor) and file.suffix == ".md" and file.exists()
        if not file.exists() or (missing_anchor and anchor not in _anchors(file.read_text())):
            broken.append(target)
    assert not broken, f"{page} links to what is not there: {broken}"


def test_nothing_points_at_the_old_pages() -> None:
    old = ("vision.md", 'README "', "(README, ")
    stale = []
    for folder in ("src", "tests", "bench", "scripts", "deploy", "docs"):
        for file in (ROOT / folder).rglob("*"):
            if file == Path(__file__) or file.suffix not in (".py", ".md", ".service", ".yml"):
                continue
            if any(name in file.read_text(encoding="utf-8", errors="replace") for name in old):
                stale.append(str(file.relative_to(ROOT)))
    assert not stale, f"still pointing at docs/vision.md or a README section: {stale}"


def _chat_entries() -> list[str]:
    """What the file backend keeps in a chat's directory, by the names the code gives them."""
    from membot.memory.files import layout
    from membot.memory.files.smallfiles import FACTS
    from membot.search.index import INDEX_FILE

    names = [layout.MESSAGES, layout.SUMMARY, layout.SUMMARIES_LOG, layout.META, FACTS]
    return [*names, INDEX_FILE, f"{layout.FILES}/"]


@pytest.mark.parametrize("entry", _chat_entries())
def test_every_entry_of_a_chats_directory_is_listed(entry: str) -> None:
    # .env.example's DATA_DIR comment lists them in braces; operating.md has a table row each.
    comment = re.search(r"^# Where memory lives:.*?^DATA_DIR=", read(".env.example"), re.M | re.S)
    assert comment is not None
    listed = re.search(r"\{(.*?)\}", comment.group().replace("\n# ", ""), re.S)
    assert listed is not None and entry in listed.group(1).split(","), (
        f"{entry} not in the DATA_DIR comment of .env.example"
    )
    assert f"| `{entry}" in read("docs/operating.md"), f"{entry} not in operating.md's table"
