"""Bad and generated input never gives anything but diagnostics: no traceback, no hang.

Beyond tests/lang/test_lang_fuzz.py (random text into ``check``), programs here are
built as syntax trees by hypothesis strategies (``hardening_programs``), printed with
``lashflow.lang.printer`` and taken through the whole stack:

* parse -> print -> parse gives the same tree (spans ignored), and printing is a fixed
  point;
* generated programs run on the in-memory host and through ``Engine.run`` (durable
  journal) and either finish, park, or fail with a runtime error / ``limit_exceeded``
  / ``process_failed``; the front end may refuse them with ``parse_error`` /
  ``link_error``. No other exception is acceptable. Every run that finishes on the
  Engine is replayed against its own journal (effect order, arguments, result) and its
  journal passes the store checker, and it finishes with the same result as on the
  in-memory host;
* random text, deep nesting, huge literals and mutated conformance programs go through
  ``Engine.run`` and the CLI (``lashflow check`` / ``lashflow run --json``).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hardening_programs import runnable_programs, shape, syntax_modules
from hardening_support import (
    ENGINE_TOOLS, SMALL_LIMITS, TOOLS_PY, assert_clean_cli, cli_env, memory_tools,
    replay_problems, run_cli,
)
from lashflow import Engine, LashflowError, RunStatus
from lashflow.errors import LimitExceeded
from lashflow.lang import Catalog, LangError, link, parse
from lashflow.lang import ast as A
from lashflow.lang.printer import Unprintable, print_module
from lashflow.interp.compiler import compile_module
from lashflow.interp.errors import LashRuntimeError
from lashflow.testing.memory_host import MemoryHost
from lashflow.store.check import check_store

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "conformance"))
from test_conformance_static import OK_PROGRAMS  # noqa: E402

FRONT_END = ("parse_error", "link_error")
RUN_FAILURES = ("runtime_error", "limit_exceeded", "process_failed")
CATALOG = Catalog.permissive({"tools": sorted(memory_tools())})
QUICK = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.data_too_large,
                                                   HealthCheck.filter_too_much])
SEEN: Counter[str] = Counter()  # outcome categories across examples (coverage checks)
SCALE = float(os.environ.get("LASHFLOW_FUZZ_SCALE", "1"))  # e.g. 20 for a long campaign


def examples(base: int) -> int:
    """Examples per property: CI-sized by default, ``LASHFLOW_FUZZ_SCALE`` times more."""
    return max(1, int(base * SCALE))


# --------------------------------------------------------------------------- printer


@settings(max_examples=examples(120), **QUICK)
@given(syntax_modules())
def test_parse_print_parse_gives_the_same_tree(module: Any) -> None:
    text = print_module(module)
    again = parse(text)
    assert shape(again) == shape(module), text
    assert print_module(again) == text  # printing is a fixed point


@pytest.mark.parametrize("case", sorted(OK_PROGRAMS))
def test_conformance_programs_survive_the_printer(case: str) -> None:
    module = parse(OK_PROGRAMS[case])
    assert shape(parse(print_module(module))) == shape(module)


@pytest.mark.parametrize("source", [
    "x = a\n(1, 2)", "x = a\n[1]", "x = a\n-1",
])
def test_trees_without_text_are_refused_not_misprinted(source: str) -> None:
    """An expression statement that would glue onto the statement before it (newlines
    mean nothing) has no text of its own: the printer says so."""
    first, second = source.split("\n")
    module = parse(first)
    module.main.append(A.ExprStmt(parse("_v = " + second).main[0].value))  # type: ignore[union-attr]
    with pytest.raises(Unprintable):
        print_module(module)


# --------------------------------------------------------------------------- running


def _classify_memory(source: str) -> str:
    try:
        program = compile_module(link(parse(source), CATALOG), CATALOG)
    except LangError as exc:
        assert exc.diagnostic.code in FRONT_END
        return exc.diagnostic.code
    host = MemoryHost(program, memory_tools(), limits=SMALL_LIMITS)
    try:
        result = asyncio.run(host.run())
    except LashRuntimeError as exc:
        assert exc.kind and exc.message
        return "runtime_error"
    except LimitExceeded as exc:
        assert exc.code == "limit_exceeded" and exc.message
        return "limit_exceeded"
    return result.status


@settings(max_examples=examples(120), **QUICK)
@given(runnable_programs())
def test_generated_programs_on_the_memory_host(module: Any) -> None:
    SEEN["memory:" + _classify_memory(print_module(module))] += 1


async def _engine_outcome(source: str, folder: Path) -> tuple[str, Any]:
    """Run ``source`` on a fresh Engine; check the journal of whatever it did."""
    db = f"sqlite:///{folder / 'fuzz.db'}"
    async with Engine(db=db, tools=ENGINE_TOOLS, limits=SMALL_LIMITS) as engine:
        try:
            outcome = await engine.run(source, run_id="fuzz")
        except LangError as exc:
            assert exc.diagnostic.code in FRONT_END
            return exc.diagnostic.code, None
        except LashflowError as exc:
            # limit_exceeded: a source over the size limit, refused before parsing
            assert exc.code in ("usage_error", "file_not_found", "limit_exceeded"), exc
            return exc.code, None
        problems = await check_store(engine.store)
        assert not problems, [str(p) for p in problems]
        if outcome.status is RunStatus.FINISHED:
            catalog = engine.tools.catalog()
            assert await replay_problems(engine.store, "fuzz", catalog) == []
            return "finished", outcome.result
        if outcome.status is RunStatus.FAILED:
            assert outcome.error is not None and outcome.error.code in RUN_FAILURES, outcome
            assert outcome.error.message
            return outcome.error.code, None
        assert outcome.status is RunStatus.WAITING, outcome
        return "waiting", None


@settings(max_examples=examples(50), **QUICK)
@given(runnable_programs())
def test_generated_programs_through_the_engine(module: Any) -> None:
    source = print_module(module)
    with tempfile.TemporaryDirectory() as folder:
        kind, result = asyncio.run(_engine_outcome(source, Path(folder)))
    SEEN["engine:" + kind] += 1
    memory_kind = _classify_memory(source)
    if kind == "finished":  # the durable engine computes what the in-memory host does
        assert memory_kind == "finished", (source, memory_kind)
    elif kind in FRONT_END:
        assert memory_kind == kind


def test_generated_programs_reach_every_outcome() -> None:
    """The strategies are not vacuous: across the examples of the two tests above,
    programs finish, fail at run time and are refused by the linker."""
    if not any(k.startswith("memory:") for k in SEEN):
        test_generated_programs_on_the_memory_host()
    if not any(k.startswith("engine:") for k in SEEN):
        test_generated_programs_through_the_engine()
    for where in ("memory", "engine"):
        for kind in ("finished", "runtime_error", "link_error"):
            assert SEEN[f"{where}:{kind}"] > 0, SEEN


@pytest.mark.parametrize("value", ['""', "0", "false", "[]", "{}", "null"])
async def test_falsy_tool_results_replay_as_themselves(value: str, tmp_path: Path) -> None:
    """Found by the Engine fuzz (replay check): a tool answer of "" was journaled without
    its value, so after a resume the process saw null instead of "". Every falsy answer
    must replay as itself."""
    from lashflow import ToolResult

    from test_hardening_keys import approve

    source = (f"a = await tools.echo({{ v: {value} }})?\nb = await tools.approve({{}})?\n"
              "finish [a, b]")
    async with Engine(db=f"sqlite:///{tmp_path / 'f.db'}", tools=[*ENGINE_TOOLS, approve]) as engine:
        parked = await engine.run(source, run_id="r")
        key = parked.waiting[0].key
        assert key is not None
        assert await engine.complete(key, ToolResult.ok("x")) is RunStatus.FINISHED
        assert (await engine.get("r")).result == [json.loads(value), "x"]


# --------------------------------------------------------------------------- bad text

WORDS = ["{", "}", "(", ")", "[", "]", ",", ":", "?", ".", "=", "==", "+", "-", "*", "/",
         "\n", " ", "x", "tools", ".echo", "1", "2.5", '"s"', "if", "else", "for", "in",
         "while", "true", "finish", "await", "process", "print", "range(", "i", "sleep for"]


@settings(max_examples=examples(60), **QUICK)
@given(st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.lists(st.sampled_from(WORDS), max_size=50).map(" ".join),
))
def test_random_text_through_engine_run(source: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_engine_outcome(source, Path(folder)))


@st.composite
def mutated_conformance(draw: st.DrawFn) -> str:
    text = list(draw(st.sampled_from(sorted(OK_PROGRAMS.values()))))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete" and text:
            del text[min(pos, len(text) - 1): pos + draw(st.integers(1, 6))]
        elif action == "insert":
            text[pos:pos] = list(draw(st.sampled_from(WORDS)))
        else:
            start = draw(st.integers(0, len(text)))
            text[pos:pos] = text[start: start + draw(st.integers(1, 25))]
    return "".join(text)


@settings(max_examples=examples(60), **QUICK)
@given(mutated_conformance())
def test_mutated_conformance_programs_through_engine_run(source: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_engine_outcome(source, Path(folder)))


DEEP = [
    ("x = " + "(" * 5000 + "1" + ")" * 5000, "parse_error"),
    ("x = " + "[" * 41 + "]" * 41, "parse_error"),
    ("if true { " * 41 + "}" * 41, "parse_error"),
    ("x = " + " + ".join(["1"] * 5000), "parse_error"),  # long chains are capped too
    ("x = a" + ".b" * 5000, "parse_error"),
    ("x = " + "-" * 5000 + "1", "parse_error"),
    ("x = " + "{a: " * 41 + "1" + "}" * 41, "parse_error"),
    ("x = " + "[" * 39 + "]" * 39 + "\nfinish len(x)", "finished"),
    ("x = [1]\nfor i in range(100000) { x = [x] }\nfinish x", "limit_exceeded"),
    ('finish "' + "a" * (2 << 20) + '"', "limit_exceeded"),  # over SMALL_LIMITS' 1 MiB
    ('finish "' + "a" * 200_000 + '"', "finished"),
    ("finish " + "9" * 400, "finished"),  # inf: finishes as JSON null
    ("finish [" + ", ".join(["7"] * 20_000) + "]", "finished"),
    ("x = " + "1" * 100_000, "finished"),
]


@pytest.mark.parametrize("source,expected", DEEP, ids=[f"deep{i}" for i in range(len(DEEP))])
async def test_deep_nesting_and_huge_literals_through_engine(source: str, expected: str,
                                                             tmp_path: Path) -> None:
    kind, _ = await _engine_outcome(source, tmp_path)
    assert kind == expected


# --------------------------------------------------------------------------- CLI

CLI_INPUTS: list[tuple[str, bytes]] = [
    ("invalid_utf8", b"finish \xff\xfe\x80 1"),
    ("nul_bytes", b"x = 1\x00\x00\nfinish x"),
    ("empty", b""),
    ("deep", ("finish " + "(" * 3000 + "1" + ")" * 3000).encode()),
    ("huge_string", ('finish len("' + "z" * (1 << 20) + '")').encode()),
    ("endless", b"while true {}"),
    ("non_ascii_ident", "na\u00efve = 1".encode()),
]


@pytest.mark.parametrize("name,data", CLI_INPUTS, ids=[n for n, _ in CLI_INPUTS])
def test_cli_check_and_run_on_bad_files(name: str, data: bytes, tmp_path: Path) -> None:
    """`lashflow check` and `lashflow run --json` on hostile files: a documented exit
    code, a one-line error (or one JSON object), never a traceback."""
    path = tmp_path / "bad.lash"
    path.write_bytes(data)
    env = cli_env(f"sqlite:///{tmp_path / 'cli.db'}")
    checked = run_cli(env, "check", str(path))
    assert_clean_cli(checked, as_json=False)
    ran = run_cli(env, "run", str(path), "--json", timeout=120)
    data_out = assert_clean_cli(ran, as_json=True)
    assert data_out is not None
    if ran.returncode == 2:
        assert data_out["status"] == "rejected" and data_out["error"]["code"]
    if name == "endless":
        assert data_out["status"] == "failed" and data_out["error"]["code"] == "limit_exceeded"


@settings(max_examples=examples(2), **QUICK)
@given(runnable_programs())
def test_cli_runs_generated_programs(module: Any) -> None:
    source = print_module(module)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gen.lash"
        path.write_text(source, encoding="utf-8")
        (Path(folder) / "gen.py").write_text(TOOLS_PY, encoding="utf-8")
        env = cli_env(f"sqlite:///{Path(folder) / 'cli.db'}")
        checked = run_cli(env, "check", str(path))
        assert_clean_cli(checked, as_json=False)
        ran = run_cli(env, "run", str(path), "--json")
        data = assert_clean_cli(ran, as_json=True)
        assert data is not None
        if checked.returncode == 2:
            assert ran.returncode == 2 and data["status"] == "rejected"
        else:
            assert data["status"] in ("finished", "failed"), data
            if data["status"] == "failed":
                assert data["error"]["code"] in RUN_FAILURES
