"""Tools' rate limits as one engine meets them, on both backends (ADR 0036, 0043): a call
whose slot is later parks its run (``rate limited until``, in ``show`` and ``waiting``)
and starts at its slot when driven again, without taking a second slot; so does a
retry whose own slot is later; a call that finds no free global slot parks its run too;
a named limit nobody defined parks the run until it is; bad options are refused with
``rate_invalid``. Several workers sharing a limit:
``tests/workers/test_workers_ratelimits.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest

from lashflow import Engine, LashflowError, RetryPolicy, RunStatus, ToolCall, ToolResult, tool
from lashflow.cli import app
from lashflow.errors import RateInvalid
from lashflow.testing import FakeClock

SLOTS: list[float | None] = []
HELD: dict[str, asyncio.Event] = {}  # ``single``: set once it runs; it returns once released


@tool(rate="1/m", module="limited")
async def once_a_minute(call: ToolCall) -> int:
    """Every minute, once."""
    SLOTS.append(call.context.rate_slot)
    return int(call.input["i"]) + 1


@tool(rate_limit="mail", module="limited")
async def send(call: ToolCall) -> int:
    """Takes from the named limit ``mail``."""
    SLOTS.append(call.context.rate_slot)
    return int(call.input["i"]) + 1


@tool(rate="1/m", module="limited",
      retry=RetryPolicy.safe(max_attempts=3, base_delay=0, max_delay=0))
async def flaky(call: ToolCall) -> Any:
    """Fails its first attempt (a retryable failure), then answers."""
    SLOTS.append(call.context.rate_slot)
    if call.context.attempt == 1:
        return ToolResult.retryable_failure("the service is down")
    return int(call.input["i"]) + 1


@tool(global_concurrency=1, module="limited")
async def single(call: ToolCall) -> int:
    """One call at a time across every worker; holds its slot until released."""
    HELD["running"].set()
    await HELD["release"].wait()
    return int(call.input["i"]) + 1


SOURCE = """
process twice() {
  a = await limited.once_a_minute({ i: 0 })?
  b = await limited.once_a_minute({ i: a })?
  finish b
}

process mail() {
  finish await limited.send({ i: 0 })?
}

process pair() {
  finish await [limited.once_a_minute({ i: i }) for i in range(2)]
}
"""
PARKING = """
process retried() {
  finish await limited.flaky({ i: 1 })?
}

process alone() {
  finish await limited.single({ i: 1 })?
}
"""


def _source(path: Path, text: str) -> Path:
    path.write_text(text)
    SLOTS.clear()
    return path


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    return _source(tmp_path / "limited.lash", SOURCE)


@pytest.fixture
def parking(tmp_path: Path) -> Path:
    return _source(tmp_path / "parking.lash", PARKING)


def cli(db: str) -> Callable[..., Any]:
    """The CLI in-process against ``db`` (sync: from an async test, in a thread)."""
    from typer.testing import CliRunner

    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args), env={"LASHFLOW_DB": db, "TTY_COMPATIBLE": "0",
                                                   "COLUMNS": "200"})
    return invoke


async def acli(db: str, *args: str) -> Any:
    return await asyncio.to_thread(cli(db), *args)


async def test_a_later_slot_parks_the_run_and_shows_until_when(backend_url: str,
                                                               flow: Path) -> None:
    async with Engine(db=backend_url, tools=[once_a_minute, send], telemetry=True) as engine:
        outcome = await engine.run(flow, "twice", run_id="rl-1")
        assert outcome.status is RunStatus.WAITING
        [wait] = outcome.waiting
        assert (wait.kind, wait.tool, wait.limit) == ("rate", "limited.once_a_minute",
                                                      "tool:limited.once_a_minute")
        assert SLOTS[0] is not None and wait.until is not None
        assert 59.9 < wait.until - SLOTS[0] < 60.1  # the next slot, a minute on
        record = await engine.get_record("rl-1")
        assert record.wake_at is not None and record.wake_at < wait.until  # due just before
        info = await engine.rate_limits.get("tool:limited.once_a_minute")
        assert (info.calls, info.delayed, info.limited_until) == (2, 1, pytest.approx(
            wait.until + 60))
        # a resume before the slot takes no second slot: it parks on the same one
        again = await engine.resume("rl-1")
        assert again.status is RunStatus.WAITING and again.waiting[0].until == wait.until
        assert (await engine.rate_limits.get("tool:limited.once_a_minute")).calls == 2
        metrics = await engine.metrics_text()
        # counted once, when it first parked (the early resume parked it again)
        assert ('lashflow_rate_limited_calls_total{tool="limited.once_a_minute",'
                'how="parked"} 1') in metrics
        assert 'lashflow_rate_limit_calls{limit="tool:limited.once_a_minute"} 2' in metrics
        assert 'lashflow_rate_limit_delayed_calls{limit="tool:limited.once_a_minute"} 1' \
            in metrics
        booked = next(line for line in metrics.splitlines()
                      if line.startswith("lashflow_rate_limit_booked_seconds{"))
        assert 60 < float(booked.split()[-1]) <= 120, booked
    shown = await acli(backend_url, "show", "rl-1")
    assert shown.exit_code == 0 and "rate limited until" in shown.stdout, shown.stdout
    waiting = await acli(backend_url, "waiting")
    assert "limited.once_a_minute: rate limited until" in waiting.stdout, waiting.stdout
    limit = await acli(backend_url, "ratelimit", "show", "tool:limited.once_a_minute")
    assert "rate limited until" in limit.stdout and "1/m" in limit.stdout, limit.stdout
    listed = await acli(backend_url, "ratelimit", "list", "--json")
    assert '"tool:limited.once_a_minute"' in listed.stdout, listed.stdout


async def test_a_batch_runs_the_member_whose_slot_is_now_and_parks_on_the_other(
        backend_url: str, flow: Path) -> None:
    """The members whose slots are later leave the batch; the others run (ADR 0036)."""
    async with Engine(db=backend_url, tools=[once_a_minute, send]) as engine:
        outcome = await engine.run(flow, "pair", run_id="rl-pair")
        assert outcome.status is RunStatus.WAITING and len(SLOTS) == 1  # one ran
        [wait] = outcome.waiting
        assert wait.kind == "rate" and SLOTS[0] is not None and wait.until is not None
        assert 59.9 < wait.until - SLOTS[0] < 60.1
        steps = [(s.step_key, s.status) for s in (await engine.steps("rl-pair"))
                 if s.kind == "tool"]
        assert len(steps) == 1 and steps[0][1] == "done" and steps[0][0] != wait.step


async def test_a_named_limit_nobody_defined_parks_until_it_is(backend_url: str,
                                                              flow: Path) -> None:
    async with Engine(db=backend_url, tools=[once_a_minute, send]) as engine:
        outcome = await engine.run(flow, "mail", run_id="rl-2")
        assert outcome.status is RunStatus.WAITING
        [wait] = outcome.waiting
        assert (wait.kind, wait.state, wait.limit) == ("rate", "undefined", "mail")
        assert wait.resolve == "lashflow ratelimit set mail N/PERIOD"
        assert SLOTS == []  # the call did not run
    waiting = await acli(backend_url, "waiting")
    assert "rate limit `mail` of limited.send, which is not defined" in waiting.stdout
    done = await acli(backend_url, "ratelimit", "set", "mail", "5/s")
    assert done.exit_code == 0 and "rate limit mail: 5/s" in done.stdout
    async with Engine(db=backend_url, tools=[once_a_minute, send]) as engine:
        finished = await engine.resume("rl-2")
        assert (finished.status, finished.result) == (RunStatus.FINISHED, 1)
        assert SLOTS[0] is not None
        info = await engine.rate_limits.get("mail")
        assert (info.rate, info.calls, info.own) == ((5.0, 1.0), 1, False)
        with pytest.raises(LashflowError) as own:
            await engine.rate_limits.delete("tool:limited.send")
        assert own.value.code == "unknown_rate_limit"
        await engine.rate_limits.delete("mail")
        assert await engine.rate_limits.list() == []


async def test_a_retry_whose_slot_is_later_parks_the_run(backend_url: str,
                                                          parking: Path) -> None:
    clock = FakeClock(1_800_000_000.0)
    async with Engine(db=backend_url, tools=[flaky, single], clock=clock, telemetry=True) as engine:
        outcome = await engine.run(parking, "retried", run_id="rl-3")
        assert outcome.status is RunStatus.WAITING  # the retry did not wait in the call
        [wait] = outcome.waiting
        assert (wait.kind, wait.state, wait.tool) == ("rate", None, "limited.flaky")
        assert SLOTS == [clock.now()] and wait.until == pytest.approx(clock.now() + 60)
        record = await engine.get_record("rl-3")
        assert record.wake_at is not None and record.wake_at < wait.until
        # a resume before the slot parks again on the same one, without a second take
        again = await engine.resume("rl-3")
        assert again.status is RunStatus.WAITING and again.waiting[0].until == wait.until
        assert (await engine.rate_limits.get("tool:limited.flaky")).calls == 2
        assert ('lashflow_rate_limited_calls_total{tool="limited.flaky",how="parked"} 1'
                in await engine.metrics_text())
        shown = await acli(backend_url, "waiting")
        assert "limited.flaky: rate limited until" in shown.stdout, shown.stdout
        clock.advance(60)
        done = await engine.resume("rl-3")
        assert (done.status, done.result) == (RunStatus.FINISHED, 2)
        # the second attempt ran at the slot it parked for, numbered after the first
        assert SLOTS == [wait.until - 60, wait.until]
        assert (await engine.rate_limits.get("tool:limited.flaky")).calls == 2
        _, attempts = await engine.store.load_journal("rl-3")
        assert [(a.attempt, a.status) for a in attempts] == [(1, "failed"), (2, "ok")]


async def test_a_call_with_no_free_global_slot_parks_its_run(backend_url: str,
                                                            parking: Path) -> None:
    HELD.update(running=asyncio.Event(), release=asyncio.Event())
    async with Engine(db=backend_url, tools=[flaky, single]) as engine:
        first = asyncio.ensure_future(engine.run(parking, "alone", run_id="g-1"))
        await HELD["running"].wait()  # g-1's call holds the only slot
        second = await engine.run(parking, "alone", run_id="g-2")
        assert second.status is RunStatus.WAITING
        [wait] = second.waiting
        assert (wait.kind, wait.state, wait.tool) == ("rate", "global", "limited.single")
        assert (await engine.get_record("g-2")).wake_at == wait.until
        assert await engine.rate_limits.slots() == {"limited.single": 1}
        shown = await acli(backend_url, "waiting")
        assert "limited.single: every global concurrency slot is taken" in shown.stdout, \
            shown.stdout
        HELD["release"].set()
        assert (await first).status is RunStatus.FINISHED
        done = await engine.resume("g-2")
        assert (done.status, done.result) == (RunStatus.FINISHED, 2)
        assert await engine.rate_limits.slots() == {}


@pytest.mark.parametrize("options", [
    {"rate": "ten/s"}, {"rate": "0/s"}, {"rate": "5/parsec"}, {"rate": "5"},
    {"rate": "-1/s"}, {"rate_limit": "bad name"}, {"rate_limit": ""},
    {"rate": "1/s", "rate_limit": "both"}, {"global_concurrency": 0},
    {"global_concurrency": True},
])
def test_bad_limit_options_are_refused_with_a_code(options: dict[str, Any]) -> None:
    async def fn() -> None:
        return None

    with pytest.raises(RateInvalid) as refused:
        tool(**options)(fn)
    assert refused.value.code == "rate_invalid" and "fn" in refused.value.message


def test_bad_rates_are_one_line_errors_in_the_cli(tmp_path: Path) -> None:
    invoke = cli(str(tmp_path / "db.sqlite"))
    bad = invoke("ratelimit", "set", "payments", "10/parsec")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error[rate_invalid]: rate limit 'payments': '10/parsec' "
                                 "is not N/PERIOD, like \"10/s\""), bad.stderr
    assert "Traceback" not in bad.stderr
    unknown = invoke("ratelimit", "show", "nothing")
    assert unknown.exit_code == 2 and "error[unknown_rate_limit]" in unknown.stderr
    module = tmp_path / "bad_tools.py"
    module.write_text("from lashflow import tool\n\n@tool(rate='fast')\nasync def f() -> None:\n"
                      "    return None\n")
    loaded = invoke("worker", "--once", "--tools", str(module))
    assert loaded.exit_code == 2 and "error[rate_invalid]: cannot load tools from" in \
        loaded.stderr and "tool 'f': rate: 'fast' is not N/PERIOD" in loaded.stderr, loaded.stderr


@tool(rate="2/s", module="limited")
async def twice_a_second(i: int) -> int:
    return i + 1


def test_a_rate_passes_in_simulated_time_in_the_testing_env(tmp_path: Path) -> None:
    """``WorkflowEnv`` skips time: ten calls at 2/s (six in a row, then a fan-out of
    four) take 4.5 simulated seconds (the first at once, then one every 0.5 s), whether
    a call waits inside the drive or parks its run."""
    from lashflow.testing import WorkflowEnv

    source = """
process go() {
  i = 0
  while i < 6 { i = await limited.twice_a_second({ i: i })? }
  rs = await [limited.twice_a_second({ i: n })? for n in range(4)]
  finish i + len(rs)
}
"""
    with WorkflowEnv(str(tmp_path / "db.sqlite"), tools=[twice_a_second]) as env:
        began = env.clock.now()
        run = env.run(source, process="go")
        assert (run.status, run.result) == (RunStatus.FINISHED, 10)
        assert env.clock.now() - began == pytest.approx(4.5)
