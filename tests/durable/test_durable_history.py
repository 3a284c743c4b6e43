"""What a run's history tells: budgeted outputs keep a tail tool's tail, prints survive a
re-run, a cancelled run closes its pending steps, a cancel in a retry delay records no
second attempt, a print's output is its text, a replay mismatch says what differs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from lashflow import (
    Engine, PendingCompletion, RetryPolicy, RunStatus, ToolCall, ToolResult, tool,
)
from lashflow.cli import app
from lashflow.durable.prints import KEPT_CHARS
from lashflow.testing import FakeClock


@tool(output_tail=True)
async def log_tail() -> str:
    return "\n".join(f"line {i}" for i in range(20_000)) + "\nTHE END"


@tool
async def park(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


@tool(retry=RetryPolicy.safe(max_attempts=3, base_delay=30.0))
async def flaky() -> ToolResult:
    return ToolResult.retryable_failure("down")


@tool
async def echo(text: str) -> str:
    return text



async def test_history_keeps_the_tail_of_a_tail_tool(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[log_tail]) as engine:
        outcome = await engine.run("x = await tools.log_tail({})?\nfinish 1")
        [step] = await engine.steps(outcome.run_id)
    assert step.projected is not None and "THE END" in step.projected
    assert "line 0\n" not in step.projected
    assert f"lashflow output {outcome.run_id} {step.step_key}" in step.projected


async def test_the_tail_is_kept_by_a_reader_without_the_tool(backend_url: str) -> None:
    # the step row says its output keeps its tail: `show` in another process, which has
    # no tools loaded, shows the end too
    async with Engine(db=backend_url, tools=[log_tail]) as engine:
        outcome = await engine.run("x = await tools.log_tail({})?\nfinish 1")
    async with Engine(db=backend_url) as reader:
        [step] = await reader.steps(outcome.run_id)
    assert step.projected is not None and "THE END" in step.projected
    assert "line 0\n" not in step.projected
    shown = await asyncio.to_thread(CliRunner().invoke, app,
                                    ["show", outcome.run_id, "--db", backend_url])
    assert shown.exit_code == 0, shown.output
    assert "THE END" in shown.output and f"lashflow output {outcome.run_id}" in shown.output


async def test_a_re_run_of_the_same_id_gives_back_its_prints(backend_url: str) -> None:
    source = 'print("hello")\nprint("world")\nfinish 1'
    async with Engine(db=backend_url) as engine:
        first = await engine.run(source, run_id="r1")
        again = await engine.run(source, run_id="r1")
        got = await engine.get("r1")
    assert first.prints == again.prints == got.prints == ["hello", "world"]


async def test_prints_kept_in_an_outcome_are_bounded(backend_url: str) -> None:
    # 2**15 characters a print: 100 of them are three times what an outcome keeps
    assert 100 * 2**15 > 3 * KEPT_CHARS
    source = ('s = "x"\nfor i in range(15) { s = s + s }\n'
              'for i in range(100) { print(s) }\nfinish 1')
    async with Engine(db=backend_url) as engine:
        outcome = await engine.run(source, run_id="loud")
        got = await engine.get("loud")
        steps = await engine.steps("loud")
    assert sum(1 for s in steps if s.kind == "print") == 100  # the journal keeps them all
    for prints in (outcome.prints, got.prints):
        assert sum(len(p) for p in prints) <= KEPT_CHARS + 200
        assert prints[-1].startswith("(") and "more prints are in the journal" in prints[-1]
    assert outcome.prints == got.prints


async def test_a_cancelled_run_closes_its_pending_tool_step(backend_url: str) -> None:
    async with Engine(db=backend_url, tools=[park]) as engine:
        parked = await engine.run("x = await tools.park({})\nfinish x")
        assert parked.status is RunStatus.WAITING
        assert await engine.cancel(parked.run_id) is RunStatus.CANCELLED
        [step] = await engine.steps(parked.run_id)
    assert step.status == "done"
    assert step.outcome["status"] == "cancelled"
    assert [(a.attempt, a.status) for a in step.attempts] == [(1, "cancelled")]


async def test_a_cancel_in_a_retry_delay_records_the_attempt_once(backend_url: str) -> None:
    clock = FakeClock()
    async with Engine(db=backend_url, tools=[flaky], clock=clock) as engine:
        handle = await engine.start("x = await tools.flaky({})\nfinish x")
        await clock.wait_for_sleepers(1)  # attempt 1 failed; the retry delay has begun
        await engine.cancel(handle.run_id)
        outcome = await asyncio.wait_for(handle.result(), 10)
        [step] = await engine.steps(handle.run_id)
    assert outcome.status is RunStatus.CANCELLED
    assert [(a.attempt, a.status) for a in step.attempts] == [(1, "failed")]
    assert step.outcome["status"] == "cancelled"


def test_output_of_a_print_step_is_its_text(backend_url: str) -> None:
    url = backend_url

    async def make() -> str:
        async with Engine(db=url) as engine:
            outcome = await engine.run('print("a \\"quoted\\"\\nline")\nfinish 1', run_id="p")
            assert outcome.status is RunStatus.FINISHED
            [step] = await engine.steps("p")
            return step.step_key

    key = asyncio.run(make())
    result = CliRunner().invoke(app, ["output", "p", key, "--db", url])
    assert result.exit_code == 0, result.output
    assert result.stdout == 'a "quoted"\nline\n'


async def test_a_replay_mismatch_in_arguments_only_says_so(backend_url: str,
                                                           tmp_path: Path) -> None:
    clock = FakeClock()
    async with Engine(db=backend_url, tools=[echo], clock=clock) as engine:
        first = await engine.run('x = await tools.echo({text: "a"})?\nsleep for "1h"\nfinish x')
        assert first.status is RunStatus.WAITING
        clock.advance(7200)
        edited = tmp_path / "edited.lash"
        edited.write_text('x = await tools.echo({text: "b"})?\nsleep for "1h"\nfinish x')
        outcome = await engine.resume(first.run_id, source=edited)
    assert outcome.status is RunStatus.NEEDS_ATTENTION
    assert outcome.error is not None
    message = outcome.error.message
    assert "recorded tool tools.echo with other arguments" in message
    assert "differ at $.text" in message
    assert "asks tool tools.echo" not in message


async def test_journal_growth_by_prints_is_bounded(backend_url: str) -> None:
    from lashflow.interp.limits import Limits

    limits = Limits(max_journal_bytes=4 * 2**20)
    source = ('s = "x"\nfor i in range(18) { s = s + s }\n'  # 256 Ki characters
              'for i in range(1000) { print(s + to_string(i)) }\nfinish 1')
    async with Engine(db=backend_url, limits=limits) as engine:
        outcome = await engine.run(source)
        steps = await engine.steps(outcome.run_id)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None and outcome.error.code == "limit_exceeded"
    assert "journal more than 4194304 bytes" in outcome.error.message
    # each print journals its text and value: 2 x (256 Ki + 1) bytes; 7 fit in 4 MiB
    assert len(steps) == limits.max_journal_bytes // (2 * (2**18 + 1)) == 7
