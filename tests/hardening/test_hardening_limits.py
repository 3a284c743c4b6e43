"""Every limit ends the run with ``limit_exceeded`` (parse nesting with
``parse_error``) and a clear message, in bounded time, and a worker fed hostile process
files keeps serving the other runs.

Found here and fixed in the runtime: the step meter counted one step per statement, so
a statement that copies or scans a big value (``l = l + [1]``, ``y = x; x[0] = 1``,
``x == y``, ``split``, ``to_string``, ...) run in a loop did quadratic work and ran
for hours inside the 10,000,000-step budget (with default limits, 23 of 25 such
programs ran over 20 s, most effectively forever; now each ends in under 2 s). Work that
grows with a value's size is now charged to the same budget
(``lashflow.interp.limits.charge``); ``HOSTILE`` below are those programs, plus the plain
endless loop.
Also fixed: the Engine counted ``finish`` as an effect (a run of exactly
``max_effects`` effects failed on the Engine and finished on the in-memory host).
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hardening_support import ENGINE_TOOLS, TOOLS_PY, cli_env, memory_tools, run_cli
from lashflow import Engine, RunStatus
from lashflow.errors import LimitExceeded
from lashflow.lang import Catalog, LangError, link, parse
from lashflow.interp.compiler import compile_module
from lashflow.interp.limits import Limits
from lashflow.testing.memory_host import MemoryHost
from lashflow.store.check import check_store

HOSTILE = {
    "endless": "while true {}",
    "str_doubling": 's = "x"\nwhile true { s = s + s }',
    "list_concat": "l = []\nwhile true { l = l + [1] }",
    "str_concat": 's = ""\nwhile true { s = s + "x" }',
    "copy_on_write": "x = range(100000)\nwhile true { y = x\n x[0] = 1 }",
    "list_double": "x = range(100000)\nwhile true { y = x + x }",
    "split": "x = to_string(range(100000))\nwhile true { y = split(x, \",\") }",
    "equal": "x = range(100000)\ny = range(100000)\nwhile true { b = x == y }",
    "equal_shared": "x = [1]\ny = [1]\nfor i in range(60) { x = [x, x]\n y = [y, y] }\nb = x == y",
    "contains": "x = range(100000)\nwhile true { b = contains(x, -1) }",
    "to_string": "x = range(100000)\nwhile true { s = to_string(x) }",
    "range": "while true { x = range(100000) }",
    "keys": 'r = json_parse("{}")\nfor i in range(10000) { r[to_string(i)] = i }\n'
            "while true { k = keys(r) }",
    "find": 's = "a"\nfor i in range(18) { s = s + s }\nwhile true { f = find(s, "b") }',
    "compare": 's = "a"\nfor i in range(18) { s = s + s }\nt = s + ""\nwhile true { b = s < t }',
    "numeric_text": 's = "1"\nfor i in range(18) { s = s + s }\nwhile true { b = s * 1 }',
    "slice": "x = range(100000)\nwhile true { y = slice(x, 0, 99999) }",
    "json_parse": "s = to_string(range(100000))\nwhile true { y = json_parse(s) }",
    "validate": "x = range(100000)\nT = Type { a: list[int] }\nwhile true { y = validate({a: x}, T) }",
    "push_shared": "l = range(100000)\nwhile true { m = l\n l = push(l, 1) }",
    "record_copy": 'r = json_parse("{}")\nfor i in range(10000) { r[to_string(i)] = i }\n'
                   "while true { q = r\n r.z = 1 }",
    "comprehension": "while true { x = [i for i in range(100000)] }",
    "grep_text": 's = "a\\n"\nfor i in range(17) { s = s + s }\nwhile true { g = grep_text(s, "b") }',
    "trim": 's = " a "\nfor i in range(18) { s = s + s }\nwhile true { t = trim(s) }',
    "join": "x = range(10000)\nwhile true { j = join(x, \",\") }",
    "format": "x = range(10000)\nwhile true { j = format(\"{}\", x) }",
}
CATALOG = Catalog.permissive({"tools": sorted(memory_tools())})


def _program(source: str):  # type: ignore[no-untyped-def]
    return compile_module(link(parse(source), CATALOG), CATALOG)


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_work_that_grows_with_value_size_is_metered(name: str) -> None:
    """With a budget of 1,000,000 steps each program ends within seconds (a tenth of
    the default budget, so a tenth of the default time): the time is bounded by the
    budget, not by how big the values get. Measured in this process's CPU seconds, which
    a busy machine does not inflate as it does wall time."""
    host = MemoryHost(_program(HOSTILE[name]), memory_tools(),
                      limits=Limits(max_steps=1_000_000))
    started = time.process_time()
    with pytest.raises(LimitExceeded) as info:
        await host.run()
    assert time.process_time() - started < 5.0
    message = info.value.message
    assert "interpreter steps" in message or "bytes per value" in message, message


async def _run(db_url: str, source: str, limits: Limits, run_id: str = "r"):  # type: ignore[no-untyped-def]
    async with Engine(db=db_url, tools=ENGINE_TOOLS, limits=limits) as engine:
        outcome = await engine.run(source, run_id=run_id)
        steps = await engine.steps(run_id)
        assert await check_store(engine.store) == []
    return outcome, steps


LIMITED = [
    ("max_steps", "while true {}", Limits(max_steps=50_000),
     "the run took more than 50000 interpreter steps without an effect (an endless loop?)"),
    ("max_steps_quadratic", "l = []\nwhile true { l = l + [1] }", Limits(max_steps=50_000),
     "the run took more than 50000 interpreter steps without an effect (an endless loop?)"),
    ("max_value_bytes_string", 's = "x"\nwhile true { s = s + s }',
     Limits(max_value_bytes=1 << 16), "a string would take about 131072 bytes, over the limit "
     "of 65536 bytes per value"),
    ("max_value_bytes_list", "l = [1]\nwhile true { l = l + l }",
     Limits(max_value_bytes=1 << 16), "a list would take about 73728 bytes, over the limit of "
     "65536 bytes per value"),
    ("max_value_bytes_record", 'r = json_parse("{}")\nfor i in range(5000) { r[to_string(i)] = i }',
     Limits(max_value_bytes=1 << 16), "a record would take about 65600 bytes, over the limit of "
     "65536 bytes per value"),
    ("max_value_bytes_serialised", "x = [1]\nfor i in range(100) { x = [x, x] }\nfinish x",
     Limits(max_value_bytes=1 << 16), "over the limit of 65536 bytes per value"),
    ("max_effects", "while true { tools.echo({ v: 1 }) }", Limits(max_effects=25),
     "the run performed more than 25 effects"),
    ("max_range_items", "x = range(1001)", Limits(max_range_items=1000),
     "`range` would create more than 1000 items"),
]


@pytest.mark.parametrize("name,source,limits,message", LIMITED, ids=[c[0] for c in LIMITED])
async def test_each_limit_ends_the_run_with_limit_exceeded(name: str, source: str, limits: Limits,
                                                           message: str, db_url: str) -> None:
    """Through the durable Engine: the run fails with ``limit_exceeded`` and the message
    says which limit, the work done before it stays journaled."""
    source = "first = await tools.echo({ v: 1 })?\n" + source
    outcome, steps = await _run(db_url, source, limits)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None and outcome.error.code == "limit_exceeded"
    assert message in outcome.error.message
    assert steps[0].tool == "tools.echo" and steps[0].status == "done"


async def test_a_run_of_exactly_max_effects_effects_finishes(db_url: str) -> None:
    """``finish`` is the end of the run, not an effect: 3 effects under
    ``max_effects=3`` finish, on the Engine as on the in-memory host."""
    source = "a = tools.echo({v: 1})\nb = tools.echo({v: 2})\nc = tools.echo({v: 3})\nfinish 7"
    outcome, _ = await _run(db_url, source, Limits(max_effects=3))
    assert outcome.status is RunStatus.FINISHED and outcome.result == 7
    host = MemoryHost(_program(source), memory_tools(), limits=Limits(max_effects=3))
    assert (await host.run()).value == 7
    outcome, _ = await _run(db_url, source.replace("finish 7", "d = tools.echo({v: 4})"),
                            Limits(max_effects=3), run_id="r4")
    assert outcome.error is not None and outcome.error.code == "limit_exceeded"


@pytest.mark.parametrize("opener,closer", [("[", "]"), ("(", ")"), ("{a: ", "}"),
                                           ("if true { ", "}")])
async def test_parse_nesting_limit_is_40(opener: str, closer: str, db_url: str) -> None:
    def nested(depth: int) -> str:
        body = opener * depth + ("1" if opener[0] in "([{" else "") + closer * depth
        return body if opener.startswith("if") else "x = " + body

    async with Engine(db=db_url, tools=ENGINE_TOOLS) as engine:
        ok = await engine.run(nested(39), run_id="ok")
        assert ok.status is RunStatus.FINISHED
        with pytest.raises(LangError) as info:
            await engine.run(nested(41), run_id="deep")
        diagnostic = info.value.diagnostic
        assert diagnostic.code == "parse_error"
        assert diagnostic.message == "expression nesting too deep (limit 40); flatten the program"
        assert diagnostic.line == 1 and diagnostic.column is not None


def test_parse_nesting_limit_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "deep.lash"
    path.write_text("x = " + "[" * 41 + "]" * 41)
    env = cli_env(f"sqlite:///{tmp_path / 'cli.db'}")
    result = run_cli(env, "run", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error[parse_error]: expression nesting too deep (limit 40); flatten the program")
    assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- workers

NORMAL = """
process job(n: int) {
  a = await tools.echo({ v: n })?
  b = await tools.flaky({ v: a + 1 })?
  finish a + b
}
"""


async def test_a_worker_with_hostile_runs_keeps_serving_the_others(db_url: str) -> None:
    """One worker, hostile runs (endless loop, value bombs, quadratic copies, an effect
    flood) queued first among 30 normal ones: every normal run finishes, every hostile
    one fails with limit_exceeded, the worker itself ends normally."""
    limits = Limits(max_steps=200_000, max_value_bytes=1 << 20, max_effects=500)
    hostile = dict(HOSTILE, flood="while true { tools.echo({ v: 1 }) }")
    async with Engine(db=db_url, tools=ENGINE_TOOLS, limits=limits) as engine:
        for name, source in hostile.items():
            await engine.create(source, run_id=f"hostile-{name}")
        for n in range(30):
            await engine.create(NORMAL, input={"n": n}, run_id=f"normal-{n}")
        started = time.process_time()  # CPU seconds: a busy machine does not inflate them
        driven = await asyncio.wait_for(engine.work(8, idle_exit=0.3, poll=0.05), timeout=600)
        cpu = time.process_time() - started
        assert driven >= 30 + len(hostile)
        for n in range(30):
            outcome = await engine.get(f"normal-{n}")
            assert outcome.status is RunStatus.FINISHED and outcome.result == 2 * n + 1
        for name in hostile:
            outcome = await engine.get(f"hostile-{name}")
            assert outcome.status is RunStatus.FAILED, (name, outcome)
            assert outcome.error is not None and outcome.error.code == "limit_exceeded"
        assert await check_store(engine.store) == []
    assert cpu < 60


def test_cli_worker_with_default_limits_survives_hostile_files(tmp_path: Path) -> None:
    """`lashflow worker --once` with the default limits (what users deploy): hostile
    files end with limit_exceeded, the normal runs finish, the worker exits 0 and its
    peak memory stays bounded (values are capped at 64 MiB)."""
    db_url = f"sqlite:///{tmp_path / 'w.db'}"
    env = cli_env(db_url)
    files = {"endless": HOSTILE["endless"], "doubling": HOSTILE["str_doubling"],
             "quadratic": HOSTILE["list_concat"].replace("[1]", "[1, 2, 3]")}

    async def submit() -> None:  # what `lashflow submit` does, without 8 interpreter starts
        async with Engine(db=db_url) as engine:
            for name, source in files.items():
                (tmp_path / f"{name}.lash").write_text(source)
                await engine.create(tmp_path / f"{name}.lash", run_id=name)
            (tmp_path / "job.lash").write_text(NORMAL)
            (tmp_path / "job.py").write_text(TOOLS_PY)
            for n in range(5):
                await engine.create(tmp_path / "job.lash", input={"n": n}, run_id=f"job-{n}")

    asyncio.run(submit())
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    worker = subprocess.run([sys.executable, "-m", "lashflow", "worker", "--once", "--json"],
                            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert worker.returncode == 0, worker.stderr
    assert "Traceback" not in worker.stderr
    outcomes = {o["run_id"]: o for o in json.loads(worker.stdout)["recovered"]}
    for name in files:
        assert outcomes[name]["status"] == "failed", outcomes[name]
        assert outcomes[name]["error"]["code"] == "limit_exceeded"
    for n in range(5):
        assert outcomes[f"job-{n}"]["status"] == "finished"
        assert outcomes[f"job-{n}"]["result"] == 2 * n + 1
    if peak_kib > before:  # ru_maxrss of children is the largest one so far
        assert peak_kib < 512 * 1024, f"worker peaked at {peak_kib} KiB"
    print(f"worker peak RSS {peak_kib} KiB")


def test_a_source_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    from lashflow.lang.parser import MAX_SOURCE_CHARS

    with pytest.raises(LimitExceeded, match="over the limit of 262,144"):
        parse("finish 1\n" * (MAX_SOURCE_CHARS // 9 + 1))
    # a file that never ends is read only up to the limit
    done = subprocess.run([sys.executable, "-m", "lashflow", "check", "/dev/zero"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error[limit_exceeded]: /dev/zero is over 1,048,576 bytes, "
                                   "and a source may hold 262,144 characters (split it into "
                                   "several files)")


PILE = """
s = "x"
for i in range(20) { s = s + s }
l = []
for i in range(60) {
  PAUSE
  l = push(l, s + to_string(i))
}
finish len(l)
"""


@pytest.mark.parametrize("pause", ["", 'e = await tools.echo({ i: i })?'])
async def test_a_run_cannot_pile_up_values_past_its_live_limit(tmp_path: Path, pause: str) -> None:
    """Each 1 MiB string is well under the value limit, but sixty of them are not under
    the run's live limit, with or without an effect between two of them (item 18)."""
    limits = Limits(max_value_bytes=4 << 20, max_live_bytes=16 << 20)
    async with Engine(db=f"sqlite:///{tmp_path / 'live.db'}", tools=ENGINE_TOOLS,
                      limits=limits) as engine:
        piled = await engine.run(PILE.replace("PAUSE", pause))
        kept = await engine.run(PILE.replace("PAUSE", pause).replace("range(60)", "range(8)"))
    assert piled.status is RunStatus.FAILED
    assert piled.error is not None and piled.error.code == "limit_exceeded"
    assert "over the limit of 16777216 bytes (max_live_bytes)" in piled.error.message
    assert kept.status is RunStatus.FINISHED and kept.result == 8


@pytest.mark.parametrize("source", [
    "x = [range(100000) for i in range(1000)]\nfinish len(x)",
    "x = [[j for j in range(100000)] for i in range(1000)]\nfinish len(x)",
])
async def test_lists_being_built_count_against_the_live_limit(tmp_path: Path, source: str) -> None:
    """A comprehension's result so far is held by no variable, and `range` made its list
    without saying so: both piled up to gigabytes before the step limit bit."""
    limits = Limits(max_steps=2_000_000, max_live_bytes=8 << 20)
    async with Engine(db=f"sqlite:///{tmp_path / 'nest.db'}", limits=limits) as engine:
        outcome = await engine.run(source)
    assert outcome.error is not None and outcome.error.code == "limit_exceeded"
    assert "over the limit of 8388608 bytes (max_live_bytes)" in outcome.error.message


async def test_a_loop_of_prints_is_written_in_groups(tmp_path: Path) -> None:
    """Prints ride with the run's next write, a group at most every 1,000: reaching
    max_effects through 5,000 prints costs a handful of commits, not 5,000."""
    commits: list[int] = []
    async with Engine(db=f"sqlite:///{tmp_path / 'prints.db'}",
                      limits=Limits(max_effects=5_000)) as engine:
        engine.store.on_commit = lambda seconds, size: commits.append(size)
        failed = await engine.run("for i in range(6000) { print(i) }", run_id="p")
        printed = await engine.run("for i in range(2500) { print(i) }\nfinish 1", run_id="q")
        steps = await engine.steps("p")
    assert failed.error is not None and "more than 5000 effects" in failed.error.message
    assert len(steps) == 5_000 and steps[-1].outcome["text"] == "4999"  # none lost
    assert printed.status is RunStatus.FINISHED and len(printed.prints) == 2_500
    assert len(commits) < 20, len(commits)
