"""Completion keys under attack (forged, truncated, re-encoded, replayed, of another run),
through the Engine and the CLI.

tests/tools/test_tools_keys.py checks ``verify_key`` alone; here the whole path is
checked: every bad key gets the one opaque ``unknown_completion_key`` answer and
writes nothing; the MAC comparison is ``hmac.compare_digest``; the per-database
secret is 256 bits from ``secrets`` and appears in no output; eight processes
resolving one key at once have exactly one winner; no log record carries a key.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import inspect
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hardening_support import ROOT, cli_env, run_cli
from lashflow import CompletionError, Engine, PendingCompletion, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import LashflowError
from lashflow.testing import FakeClock
from lashflow.tools import keys as keys_module

FLOW = """
process p(n: int) {
  a = await tools.approve({ n: n })?
  finish { n: n, approved: a }
}
"""

TOOL_SOURCE = '''
from lashflow import PendingCompletion, ToolCall, ToolResult, tool


@tool
async def approve(call: ToolCall) -> ToolResult:
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())
'''


@tool
async def approve(call: ToolCall) -> ToolResult:
    """Parks on its completion key (what a human approval looks like)."""
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion())


async def _parked(url: str, run_id: str = "r") -> str:
    async with Engine(db=url, tools=[approve]) as engine:
        outcome = await engine.run(FLOW, input={"n": 1}, run_id=run_id)
        assert outcome.status is RunStatus.WAITING
        key = outcome.waiting[0].key
        assert key is not None and key.startswith("lfk_")
        return key


def _bad_keys(key: str, foreign: str) -> dict[str, Any]:
    body, mac = key[4:].split(".")
    other = base64.urlsafe_b64encode(json.dumps(["other-run", "x:1"]).encode()).rstrip(b"=")
    flip = {c: ("A" if c != "A" else "B") for c in set(key)}
    return {
        "foreign_database": foreign,  # the same run id and step, signed by another database
        "mac_flipped_last": key[:-1] + flip[key[-1]],
        "mac_flipped_first": f"lfk_{body}.{flip[mac[0]]}{mac[1:]}",
        "payload_flipped": f"lfk_{flip[body[0]]}{body[1:]}.{mac}",
        "other_payload_same_mac": f"lfk_{other.decode()}.{mac}",
        "truncated_1": key[:-1],
        "truncated_half": key[: len(key) // 2],
        "truncated_prefix": "lfk_",
        "extended": key + "A",
        "no_prefix": key[4:],
        "upper_prefix": "LFK_" + key[4:],
        "empty": "",
        "huge": "lfk_" + "A" * 20_000,
        "unicode": "lfk_é" + key[5:],
    }


def _completions(db: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT * FROM completions ORDER BY run_id, step_key").fetchall()
    conn.close()
    return rows


async def test_tampered_truncated_and_foreign_keys_get_one_answer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    key = await _parked(url)
    foreign = await _parked(f"sqlite:///{tmp_path / 'b.db'}")  # same run id "r", same step
    assert foreign != key
    before = _completions(tmp_path / "a.db")
    answers = set()
    async with Engine(db=url, tools=[approve]) as engine:
        for name, bad in _bad_keys(key, foreign).items():
            with pytest.raises(CompletionError) as info:
                await engine.complete(bad, ToolResult.ok("forged"))
            answers.add((info.value.code, info.value.message, info.value.winner))
        # a key of a cancelled run gets the same answer
        await engine.cancel("r")
        with pytest.raises(CompletionError) as info:
            await engine.complete(key, ToolResult.ok("late"))
        answers.add((info.value.code, info.value.message, info.value.winner))
    assert answers == {("unknown_completion_key", "unknown completion key", None)}
    after = _completions(tmp_path / "a.db")
    assert [row for row in after if row[-1] is not None and "forged" in row[-1]] == []
    assert len(after) == len(before)


def test_bad_keys_through_the_cli_get_the_same_json_and_never_echo_the_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    key = asyncio.run(_parked(url))
    foreign = asyncio.run(_parked(f"sqlite:///{tmp_path / 'b.db'}"))
    env = cli_env(url)
    bad = _bad_keys(key, foreign)
    outputs = set()
    for name in ("foreign_database", "mac_flipped_last"):
        result = run_cli(env, "complete", bad[name], "--result", '"forged"', "--json")
        assert result.returncode == 2, result.stderr
        outputs.add(result.stdout)
        plain = run_cli(env, "complete", bad[name], "--result", '"forged"')
        assert plain.stderr.strip() == "error[unknown_completion_key]: unknown completion key"
        assert bad[name] not in plain.stderr + plain.stdout
    assert len(outputs) == 1
    assert json.loads(outputs.pop()) == {
        "run_id": None, "status": "rejected",
        "error": {"code": "unknown_completion_key", "message": "unknown completion key"}}


def test_signatures_are_compared_with_compare_digest_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """By inspection (no ``==`` on key text in ``verify_key``) and by a spy: every key
    whose payload decodes reaches ``hmac.compare_digest`` with the whole expected key."""
    tree = ast.parse(inspect.getsource(keys_module.verify_key))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            assert not names & {"key", "expected", "_mac_text"} or not any(
                isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops), ast.unparse(node)
    calls: list[tuple[bytes, bytes]] = []
    real = keys_module.hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(keys_module.hmac, "compare_digest", spy)
    secret = os.urandom(32)
    key = keys_module.derive_key(secret, "run", "s:1")
    assert keys_module.verify_key(secret, key) == ("run", "s:1")
    bad = [key[:-1] + ("A" if key[-1] != "A" else "B"), key[:-3],
           keys_module.derive_key(os.urandom(32), "run", "s:1")]
    for candidate in bad:
        assert keys_module.verify_key(secret, candidate) is None
    assert len(calls) == 1 + len(bad)
    assert all(expected == key.encode() for expected, _ in calls)


async def test_the_secret_is_256_random_bits_from_secrets(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from lashflow.store import core as store_core

    asked: list[int] = []
    real = store_core.secrets.token_bytes

    def spy(n: int) -> bytes:
        asked.append(n)
        return real(n)

    monkeypatch.setattr(store_core.secrets, "token_bytes", spy)
    secrets_seen = []
    for name in ("one", "two"):
        async with Engine(db=f"sqlite:///{tmp_path / name}.db"):
            pass
        conn = sqlite3.connect(tmp_path / f"{name}.db")
        secrets_seen.append(bytes(conn.execute(
            "SELECT value FROM meta WHERE key = 'secret'").fetchone()[0]))
        conn.close()
    assert asked == [32, 32]
    assert all(len(s) == 32 for s in secrets_seen) and secrets_seen[0] != secrets_seen[1]
    async with Engine(db=f"sqlite:///{tmp_path / 'one'}.db"):  # reopening keeps it
        pass
    conn = sqlite3.connect(tmp_path / "one.db")
    assert bytes(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0]) \
        == secrets_seen[0]
    conn.close()


def _forms(secret: bytes) -> list[str]:
    """Every way the secret could leak into text."""
    return [secret.hex(), secret.hex().upper(), base64.b64encode(secret).decode(),
            base64.urlsafe_b64encode(secret).decode().rstrip("="),
            base64.b64encode(secret).decode().rstrip("="), secret.decode("latin-1"),
            repr(secret)[2:-1]]


def test_the_secret_never_leaves_the_database(tmp_path: Path) -> None:
    """Every JSON output of the CLI (run, show, list, waiting, complete, output, resume)
    and every public Engine answer, for a run that parked on a key and was completed."""
    folder = tmp_path / "flow"
    folder.mkdir()
    (folder / "flow.lash").write_text(FLOW)
    (folder / "flow.py").write_text(TOOL_SOURCE)
    url = f"sqlite:///{tmp_path / 's.db'}"
    env = cli_env(url)
    texts: list[str] = []
    ran = run_cli(env, "run", str(folder / "flow.lash"), "--input", '{"n": 2}', "--run-id", "r",
                  "--json")
    assert ran.returncode == 3, ran.stderr
    key = json.loads(ran.stdout)["waiting"][0]["key"]
    for args in (["show", "r", "--json"], ["list", "--json"], ["waiting", "--json"], ["show", "r"]):
        texts.append(run_cli(env, *args).stdout)
    done = run_cli(env, "complete", key, "--result", "true", "--resume", "--json")
    assert json.loads(done.stdout)["status"] == "finished", done.stdout + done.stderr
    texts += [ran.stdout, ran.stderr, done.stdout, done.stderr]
    step = json.loads(run_cli(env, "show", "r", "--json").stdout)["steps"][0]["step"]
    texts.append(run_cli(env, "output", "r", step, "--json").stdout)

    async def api() -> None:
        async with Engine(db=url, tools=[approve]) as engine:
            texts.append(repr(await engine.get("r")))
            texts.append(repr(await engine.get_record("r")))
            texts.append(repr(await engine.steps("r")))
            texts.append(repr(await engine.list()))
            texts.append(repr(await engine.waiting()))
            texts.append(json.dumps((await engine.get("r")).to_json()))

    asyncio.run(api())
    conn = sqlite3.connect(tmp_path / "s.db")
    secret = bytes(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])
    conn.close()
    blob = "\n".join(texts)
    assert key in blob  # the outputs are real: the key they hand out is there
    for form in _forms(secret):
        assert form not in blob


def test_ten_processes_resolving_one_key_have_exactly_one_winner(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    key = asyncio.run(_parked(url))
    go = tmp_path / "go"
    racer = (
        "import sys, time, os\n"
        "import lashflow.cli\n"
        "from lashflow.durable import engine\n"  # everything imported before the start line
        "open(sys.argv[3], 'w').close()\n"  # ready
        f"while not os.path.exists({str(go)!r}): time.sleep(0.002)\n"
        "sys.argv = ['lashflow', 'complete', sys.argv[1], '--result', sys.argv[2], '--json']\n"
        "lashflow.cli.main()\n"
    )
    env = cli_env(url)
    ready = [tmp_path / f"ready-{i}" for i in range(10)]
    procs = [subprocess.Popen([sys.executable, "-c", racer, key, str(i), str(ready[i])], env=env,
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(10)]
    deadline = time.monotonic() + 60
    while not all(path.exists() for path in ready):  # all ten imported, polling for go
        assert time.monotonic() < deadline, [p.poll() for p in procs]
        time.sleep(0.01)
    go.write_text("go")
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    winners = [json.loads(out) for code, out, _ in results if code == 0]
    losers = [json.loads(out) for code, out, _ in results if code == 2]
    assert len(winners) == 1 and len(losers) == 9, results
    assert winners[0]["delivered"] is True
    codes = {loser["error"]["code"] for loser in losers}
    assert codes == {"completion_already_resolved"}
    values = {loser["error"]["winner"]["value"] for loser in losers}
    assert len(values) == 1  # they all name the same winner

    async def finish() -> Any:
        async with Engine(db=url, tools=[approve]) as engine:
            return await engine.resume("r")

    outcome = asyncio.run(finish())
    assert outcome.status is RunStatus.FINISHED
    assert outcome.result == {"n": 1, "approved": values.pop()}


async def test_fifty_concurrent_resolvers_in_separate_engines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'many.db'}"
    key = await _parked(url)
    engines = [Engine(db=url) for _ in range(10)]
    for engine in engines:
        await engine.__aenter__()
    try:
        async def resolve(i: int) -> str:
            try:
                await engines[i % 10].complete(key, ToolResult.ok(i), resume=False)
                return "won"
            except CompletionError as exc:
                return exc.code
        answers = await asyncio.gather(*(resolve(i) for i in range(50)))
    finally:
        for engine in engines:
            await engine.__aexit__(None, None, None)
    assert answers.count("won") == 1
    assert answers.count("completion_already_resolved") == 49


async def test_keys_never_appear_in_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every logger at DEBUG (asyncio and aiosqlite included) through a run that parks on
    a key, a forged resolve, a real resolve, a second resolve and the resumed run."""
    caplog.set_level(logging.DEBUG)
    url = f"sqlite:///{tmp_path / 'logs.db'}"
    async with Engine(db=url, tools=[approve]) as engine:
        parked = await engine.run(FLOW, input={"n": 3}, run_id="r")
        key = parked.waiting[0].key
        assert key is not None
        with pytest.raises(CompletionError):
            await engine.complete(key[:-2] + ("xx" if not key.endswith("xx") else "yy"), ToolResult.ok(0))
        assert await engine.complete(key, ToolResult.ok(True)) is RunStatus.FINISHED
        with pytest.raises(CompletionError):
            await engine.complete(key, ToolResult.ok(False))
    logging.getLogger("lashflow").debug("marker")  # the capture works
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "marker" in text and len(caplog.records) > 1
    body, mac = key[4:].split(".")
    for part in (key, body, mac):
        assert part not in text


async def test_a_resolve_racing_a_cancel_has_one_winner_recorded_once(tmp_path: Path) -> None:
    """Two engines on one database: one resolves the key while the other cancels the run,
    started together, twenty times. Whoever wins, the key is settled once, the run ends
    cancelled (a cancel always ends a parked run), and a losing resolver is told why."""
    url = f"sqlite:///{tmp_path / 'cancel-race.db'}"
    outcomes: dict[str, int] = {}
    async with Engine(db=url, tools=[approve]) as resolver, \
            Engine(db=url, tools=[approve]) as canceller:
        for trial in range(20):
            run_id = f"r{trial}"
            parked = await resolver.run(FLOW, input={"n": trial}, run_id=run_id)
            key = parked.waiting[0].key
            assert key is not None

            async def resolve() -> str:
                try:
                    await resolver.complete(key, ToolResult.ok(trial), resume=False)
                    return "resolved"
                except CompletionError as exc:
                    if exc.code == "completion_already_resolved":  # told what won
                        assert exc.winner is not None and exc.winner.source.value == "cancel", \
                            exc.winner
                    return exc.code

            told, status = await asyncio.gather(resolve(), canceller.cancel(run_id))
            assert status is RunStatus.CANCELLED
            assert told in ("resolved", "unknown_completion_key", "completion_already_resolved")
            outcomes[told] = outcomes.get(told, 0) + 1
            steps = await resolver.steps(run_id)
            [step] = [s for s in steps if s.kind == "tool"]
            if told == "resolved":  # the resolution stands in the journal, once
                assert step.outcome["status"] == "ok" and step.outcome["value"] == trial
            else:  # the cancel won: the call reads cancelled, the resolution was never used
                assert step.outcome["status"] == "cancelled"
            assert len([a for a in step.attempts if a.status != "interrupted"]) == 1
            assert (await resolver.get(run_id)).status is RunStatus.CANCELLED
    assert sum(outcomes.values()) == 20, outcomes


@tool(name="approve")
async def approve_within(call: ToolCall) -> ToolResult:
    """Parks on its key with a deadline 10 s after the call."""
    await call.context.completion_key()
    return ToolResult.pending(PendingCompletion().with_deadline(timedelta(seconds=10)))


async def test_a_resolve_racing_the_deadline_has_one_winner(tmp_path: Path) -> None:
    """A resolver whose clock still reads before the deadline and a worker whose clock has
    passed it (so its resume records the timeout), ten times, started together or the
    worker first: exactly one of the two is recorded, the run ends by it, and a resolver
    that lost is told so."""
    url = f"sqlite:///{tmp_path / 'deadline-race.db'}"
    won: dict[str, int] = {}
    for trial in range(10):
        run_id = f"d{trial}"
        async with Engine(db=url, tools=[approve_within], clock=FakeClock(1000.0)) as engine:
            parked = await engine.run(FLOW, input={"n": trial}, run_id=run_id)
            key = parked.waiting[0].key
            assert key is not None
        async with Engine(db=url, tools=[approve_within], clock=FakeClock(1009.0)) as early, \
                Engine(db=url, tools=[approve_within], clock=FakeClock(1011.0)) as late:

            async def resolve() -> str:
                try:
                    await early.complete(key, ToolResult.ok("yes"), resume=False)
                    return "resolver"
                except CompletionError as exc:
                    assert exc.code in ("completion_already_resolved", "completion_expired")
                    return "timeout"

            async def expire() -> Any:
                try:
                    return await late.resume(run_id)
                except LashflowError as exc:  # the resolver is driving it right now
                    assert exc.code == "run_busy"
                    return None

            if trial % 2 == 0:  # started together: whichever the store takes first wins
                told, _ = await asyncio.gather(resolve(), expire())
            else:  # the worker first: the resolver comes too late and is told so
                await expire()
                told = await resolve()
            outcome = await late.resume(run_id)
        won[told] = won.get(told, 0) + 1
        if told == "resolver":
            assert outcome.status is RunStatus.FINISHED
            assert outcome.result == {"n": trial, "approved": "yes"}
        else:
            assert outcome.status is RunStatus.FAILED, outcome
        async with Engine(db=url, tools=[approve_within]) as engine:
            [step] = [s for s in await engine.steps(run_id) if s.kind == "tool"]
            assert step.outcome["status"] == ("ok" if told == "resolver" else "failed"), step
    assert sum(won.values()) == 10 and won.get("timeout", 0) >= 5, won
