"""Parked runs woken by completions delivered from another process while workers run.

On PostgreSQL the workers poll only every few seconds, so the measured complete -> next
step latency shows the LISTEN/NOTIFY wake-up; on SQLite (no notifications) it is the
poll interval. The racing test delivers each key the moment the tool has minted it,
while the run is still on its way to parking: no wake-up may be lost.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lashflow.store import open_store
from workers_support import (
    COMPLETER, PARKED, Db, Fleet, check_journal, child_env, create_runs, executions, journals,
    percentiles, read_log, scaled, wait_all,
)

VALUE = 100  # what completer.py delivers; `after` adds one
# runs, worker poll interval (s), bound on the median latency (s). On PostgreSQL the
# workers poll every 30 s: polling alone would give three workers a median of about 6 s
# (the first of three random phases), so a median under 3 s proves the NOTIFY woke them,
# with room for a machine whose cores are busy. On SQLite the poll is the wake-up: its
# latency is printed, not bounded (a bound would measure the machine's load).
PARKED_SIZES = {"postgres": (scaled("parked", 1000), 30.0, 3.0),
                "sqlite": (scaled("sqlite_parked", 100), 0.2, None)}
RACING_SIZES = {"postgres": scaled("racing", 200), "sqlite": scaled("sqlite_racing", 60)}


def completer(db: Db, log: Path, out: Path, count: int, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(COMPLETER), db.url, str(log), str(out),
                             "--count", str(count), *extra], env=child_env(log))


def cli_complete(db: Db, log: Path, key: str) -> None:
    """As an operator: ``lashflow complete KEY --result ...`` (no --resume: workers go on)."""
    done = subprocess.run([sys.executable, "-m", "lashflow", "complete", key, "--result",
                           str(VALUE), "--db", db.url, "--json"],
                          env=child_env(log), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def deliveries(out: Path) -> dict[str, tuple[float, str, str]]:
    """run_id -> (time just before delivery, run status after it, status before it)."""
    found = {}
    for text in out.read_text().splitlines():
        run_id, before, _, status, seen = text.split(" ")
        found[run_id] = (float(before), status, seen)
    return found


def check_finished(runs: dict, steps: dict, attempts: dict, ids: list[str], log: Path) -> None:
    calls = executions(read_log(log))
    for run_id in ids:
        assert (runs[run_id].status, runs[run_id].result) == ("finished", VALUE + 1), run_id
        keys = check_journal(steps[run_id], attempts[run_id])
        assert len(keys) == 3
        for key in keys:
            assert len(calls[(run_id, key)]) >= 1
        # a run parks once and takes its next step once
        assert len(calls[(run_id, keys[2])]) == 1, calls[(run_id, keys[2])]


async def test_parked_runs_wake_on_completions_from_another_process(
        db: Db, fleet: Fleet, log: Path, tmp_path: Path) -> None:
    count, poll, bound = PARKED_SIZES[db.name]
    for _ in range(3):
        fleet.start(concurrency=64, poll=poll)
    await fleet.ready()
    ids = await create_runs(db.url, PARKED, [{"n": n} for n in range(count)], "parked")
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "waiting", timeout=180)
        parked_keys = {line.run_id: line.extra for line in read_log(log) if line.tag == "park"}
        for run_id in ids[:2]:
            cli_complete(db, log, parked_keys[run_id])
        out = tmp_path / "delivered.txt"
        sender = completer(db, log, out, count, "--rate", "100")
        await wait_all(store, fleet, count, "finished", timeout=240, helpers=(sender,))
        assert sender.wait(timeout=120) == 0
    assert set(fleet.stop().values()) == {0}

    runs, steps, attempts = await journals(db.url)
    check_finished(runs, steps, attempts, ids, log)
    woke = {line.run_id: line.at for line in read_log(log) if line.tag == "after"}
    delivered = deliveries(out)
    # the same answer again: a repeat, not a refusal (as over HTTP)
    assert {delivered[run_id][1] for run_id in ids[:2]} == {"duplicate"}
    latencies = [woke[run_id] - at for run_id, (at, status, _) in delivered.items()
                 if status != "duplicate"]  # all were parked by then
    assert len(latencies) == count - 2
    figures = percentiles(latencies)
    print(f"\n{db.name}: {count} parked runs, workers polling every {poll:g} s; complete -> next "
          f"step latency p50 {figures['p50'] * 1000:.1f} ms, p90 {figures['p90'] * 1000:.1f} ms, "
          f"max {figures['max'] * 1000:.1f} ms")
    if bound is not None:
        assert figures["p50"] < bound


async def test_completions_racing_the_park_are_not_lost(
        db: Db, fleet: Fleet, log: Path, tmp_path: Path) -> None:
    count = RACING_SIZES[db.name]
    for _ in range(2):
        fleet.start(concurrency=32, poll=5.0 if db.name == "postgres" else 0.2)
    await fleet.ready()
    out = tmp_path / "delivered.txt"
    sender = completer(db, log, out, count, "--eager")
    ids = await create_runs(db.url, PARKED, [{"n": n} for n in range(count)], "racing")
    async with open_store(db.url) as store:
        await wait_all(store, fleet, count, "finished", timeout=180, helpers=(sender,))
    assert sender.wait(timeout=120) == 0
    assert set(fleet.stop().values()) == {0}
    runs, steps, attempts = await journals(db.url)
    check_finished(runs, steps, attempts, ids, log)
    seen = [before for _, _, before in deliveries(out).values()]
    print(f"\n{db.name}: {count} completions raced their runs' park; the deliverer found "
          f"{seen.count('running')} runs still running, {seen.count('waiting')} parked")
