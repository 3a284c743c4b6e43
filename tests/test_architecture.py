"""The layering holds: no import cycle anywhere in the package (type-only and
function-local imports included), the interpreter stays pure, and no module leans on
Lark's or aiosqlite's private insides."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import lashflow

PACKAGE = Path(lashflow.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: frozenset[str] = frozenset()) -> set[str]:
    """Every module this file imports, wherever the import statement stands.
    ``from pkg import mod`` counts as importing ``pkg.mod`` (not ``pkg``) when ``mod`` is
    one of ``modules``: the package is only the way there."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = {f"{target}.{alias.name}" for alias in node.names}
            submodules = names & modules
            found.update(submodules)
            if submodules != names:  # something other than a submodule comes from target
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    names = frozenset(modules)
    return {name: {m for m in imports_of(path, names) if m in modules and m != name}
            for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in edges[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for succ in edges.get(node, ()):
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    return seen


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_interpreter_imports_neither_asyncio_nor_the_store_nor_the_durable_layer() -> None:
    edges = graph()
    interp = [name for name in edges if name.startswith("lashflow.interp")]
    assert interp
    for name in interp:
        path = PACKAGE.parent / Path(*name.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        direct = imports_of(path, frozenset(edges))
        assert "asyncio" not in direct, name
        inside = reachable(edges, name) | {name}
        assert not any(m.startswith(("lashflow.store", "lashflow.durable", "lashflow.tools",
                                     "lashflow.cli")) for m in inside), (name, sorted(inside))
    # and at run time: importing the interpreter loads no asyncio and no store
    code = ("import sys; import lashflow.interp.vm, lashflow.interp.compiler; "
            "bad = [m for m in sys.modules if m == 'asyncio' or m.startswith(('lashflow.store', "
            "'lashflow.durable', 'aiosqlite', 'asyncpg'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_replay_machine_and_the_verifier_decide_without_io() -> None:
    """The replay machine and the verifier's host take a loaded journal and answer with
    decisions: no event loop, no database, no clock of their own, no tool layer beyond
    its outcome records (the live host, the tool runner and the verifier's reads do I/O)."""
    edges = graph()
    for name in ("lashflow.durable.replay", "lashflow.durable.verify"):
        direct = imports_of(PACKAGE / "durable" / f"{name.rsplit('.', 1)[1]}.py",
                            frozenset(edges))
        assert not direct & {"asyncio", "time", "aiosqlite", "asyncpg"}, (name, direct)
        inside = {m for m in direct if m.startswith("lashflow.")}
        assert not any(m.startswith(("lashflow.store.", "lashflow.tools.", "lashflow.durable."))
                       and m not in ("lashflow.store.base", "lashflow.tools.outcome",
                                     "lashflow.durable.replay", "lashflow.durable.canonical",
                                     "lashflow.durable.outcome", "lashflow.durable.programs",
                                     "lashflow.durable.order")
                       for m in inside), (name, sorted(inside))
        assert not {"lashflow.store", "lashflow.tools"} & inside, name


# Every module of the package belongs to one layer; each layer may import only the layers
# named here (and itself). The foundation (errors, run states, JSON values, the base of
# hand-written value classes) is reached by
# all; lang, interp and schedules are pure; tools and store know nothing of the language;
# the durable layer wires them; telemetry is reached by the tool layer's spans and names the
# store's stats type only; the presentation layers (editor tooling, HTTP, CLI) sit on
# top, and the CLI, one package, is the top: nothing but ``python -m lashflow`` imports it.
BASE = {"lashflow", "lashflow.errors", "lashflow.states", "lashflow.json_kinds",
        "lashflow.json_input", "lashflow.json_text", "lashflow.rates", "lashflow.slotted"}
LAYERS: dict[str, set[str]] = {
    "lashflow.errors": {"lashflow.slotted"},
    "lashflow.slotted": set(),
    "lashflow.states": set(),
    "lashflow.json_text": set(),
    "lashflow.json_kinds": {"lashflow.errors"},
    "lashflow.json_input": {"lashflow.errors", "lashflow.json_kinds"},
    "lashflow.rates": {"lashflow.errors"},
    "lashflow.lang": BASE,
    "lashflow.interp": BASE | {"lashflow.lang"},
    "lashflow.telemetry": BASE | {"lashflow.store"},
    "lashflow.tools": BASE | {"lashflow.telemetry"},
    "lashflow.store": BASE,
    "lashflow.schedules": BASE,
    "lashflow.durable": BASE | {"lashflow.lang", "lashflow.interp", "lashflow.tools",
                                "lashflow.store", "lashflow.telemetry", "lashflow.schedules"},
    # the pytest plugin and test helpers: over the engine, as an application's tests are
    "lashflow.testing": BASE | {"lashflow.lang", "lashflow.interp", "lashflow.tools",
                                "lashflow.store", "lashflow.durable", "lashflow.telemetry",
                                "lashflow.schedules"},
    "lashflow.lexer": set(),
    "lashflow.fmt": BASE | {"lashflow.lang"},
    "lashflow.lsp": BASE | {"lashflow.lang", "lashflow.tools"},
    "lashflow.http": BASE | {"lashflow.lang", "lashflow.tools", "lashflow.store",
                             "lashflow.durable", "lashflow.telemetry", "lashflow.schedules"},
    "lashflow.cli": BASE | {"lashflow.lang", "lashflow.tools", "lashflow.store",
                            "lashflow.durable", "lashflow.telemetry", "lashflow.schedules",
                            "lashflow.fmt", "lashflow.lsp", "lashflow.http"},
    "lashflow.__main__": {"lashflow.cli"},
    "lashflow": set(),  # the package's own __init__: names resolved lazily, imports nothing
}


def layer_of(module: str) -> str | None:
    """The longest layer name that is ``module`` or a package above it (``lashflow``
    itself names only the package's ``__init__``)."""
    found = [lay for lay in LAYERS
             if module == lay or (lay != "lashflow" and module.startswith(lay + "."))]
    return max(found, key=len) if found else None


def test_every_module_imports_only_the_layers_below_it() -> None:
    edges = graph()
    assert {"lashflow.cli", "lashflow.http.app", "lashflow.lang.graph",
            "lashflow.testing"} <= set(edges)
    for name, targets in edges.items():
        layer = layer_of(name)
        assert layer is not None, f"{name} belongs to no layer of LAYERS"
        for target in targets:
            other = layer_of(target)
            assert other == layer or other in LAYERS[layer], f"{name} imports {target}"


def test_the_cli_is_one_package_on_top() -> None:
    edges = graph()
    assert not [name for name in edges if name.startswith("lashflow.cli_")]
    assert (PACKAGE / "cli" / "__init__.py").is_file()
    for name, targets in edges.items():
        if layer_of(name) not in ("lashflow.cli", "lashflow.__main__"):
            assert not any(layer_of(t) == "lashflow.cli" for t in targets), name


def test_the_layer_check_finds_a_wrong_import() -> None:
    assert "lashflow.cli" not in LAYERS["lashflow.http"]
    assert layer_of("lashflow.lang.graph") == "lashflow.lang"
    assert layer_of("lashflow.lashflow_extra") is None


EDITOR_LAYER = ("lashflow.lsp", "lashflow.fmt", "lashflow.lexer")


def test_the_editor_tooling_is_a_presentation_layer_over_the_language() -> None:
    """The language server, the formatter's file handling and the Pygments lexer present
    the front end (and load tools to link against), like the CLI and the HTTP service:
    they reach neither the runtime nor storage, and nothing below them reaches them."""
    edges = graph()
    editor = [name for name in edges if name.startswith(EDITOR_LAYER)]
    assert {"lashflow.lsp.server", "lashflow.lsp.analysis", "lashflow.fmt"} <= set(editor)
    for name in editor:
        bad = {t for t in reachable(edges, name) if t.startswith(
            ("lashflow.interp", "lashflow.durable", "lashflow.store", "lashflow.http",
             "lashflow.cli"))}
        assert not bad, (name, sorted(bad))
    for name, targets in edges.items():
        if not name.startswith((*EDITOR_LAYER, "lashflow.cli")):
            assert not any(t.startswith(EDITOR_LAYER) for t in targets), name


def _third_party_reaches(tree: ast.AST) -> set[str]:
    """Imports of Lark's and aiosqlite's inner modules, and reads of their private or
    parser-table members (``db._conn``; our own ``self._conn`` is ours), in one module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(("lark.parsers", "aiosqlite.core")):
                found.add(f"import {node.module}")
        elif isinstance(node, ast.Import):
            found.update(f"import {a.name}" for a in node.names
                         if a.name.startswith(("lark.parsers", "aiosqlite.core")))
        elif isinstance(node, ast.Attribute):
            owner = node.value
            ours = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not ours and node.attr in _LIBRARY_PRIVATES:
                found.add(f".{node.attr}")
            if node.attr in ("parse_table", "parse_conf", "state_stack"):
                found.add(f".{node.attr}")
    return found


# Private members of aiosqlite's Connection and Lark's parser objects.
_LIBRARY_PRIVATES = frozenset(["_execute", "_conn", "_connection", "_tx", "_thread"])


def test_no_private_api_of_aiosqlite_or_lark() -> None:
    offenders = {
        str(path.relative_to(PACKAGE.parent)): sorted(reach)
        for path in PACKAGE.rglob("*.py")
        if (reach := _third_party_reaches(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offenders == {}


def test_the_private_api_finder_finds_a_reach() -> None:
    code = "from lark.parsers.lalr_analysis import Shift\nx = db._execute(f, db._conn)\n"
    assert _third_party_reaches(ast.parse(code)) == {
        "import lark.parsers.lalr_analysis", "._execute", "._conn"}


# Ways to read the wall clock, in Python and in either dialect's SQL.
_WALL_CLOCK = re.compile(r"time\.time\(|datetime\.now|datetime\.utcnow|date\.today|"
                         r"\bnow\(\)|current_timestamp|clock_timestamp|'now'",
                         re.IGNORECASE)


def test_the_store_never_reads_the_wall_clock() -> None:
    """Every time the store writes comes from the caller (the engine's clock, a test's
    FakeClock): a run is never stamped by a clock of the store's own."""
    offenders = {str(path.relative_to(PACKAGE.parent)): found
                 for path in (PACKAGE / "store").rglob("*.py")
                 if (found := _WALL_CLOCK.findall(path.read_text(encoding="utf-8")))}
    assert offenders == {}
    assert _WALL_CLOCK.findall("x = time.time()\nSELECT now() FROM t") == ["time.time(", "now()"]


def test_json_is_written_by_one_module() -> None:
    """Every encoder is ``lashflow.json_text``'s: a shape written in two places drifts."""
    writes = re.compile(r"json\.dumps\(|JSONEncoder\(")
    offenders = sorted(str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py")
                       if path.name != "json_text.py"
                       and writes.search(path.read_text(encoding="utf-8")))
    assert offenders == []
