"""What the testing layer costs.

1. A month in a test: a workflow of about 100 journaled steps spanning 30 simulated days
   (a daily reading with a retried failure every fifth day, a 24-hour sleep every day and
   a 1-hour one every third, a weekly review that parks on a completion key with a 12-hour
   deadline: three answered, one left to expire) run through ``WorkflowEnv`` on a fresh
   SQLite file, as a test would, environment start and close included. Goal: under 1 s.
2. The plugin's share of pytest's start-up, two ways: ``pytest --collect-only`` of one
   trivial test with only the plugin loaded against none (plugin autoloading off, so the
   other installed plugins' cost does not drown it), runs interleaved; and the import of
   the plugin module alone in a process that has pytest loaded. Goal: under 50 ms.

Run: python bench/bench_testing.py [--rounds N] [--startups N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from lashflow import RetryPolicy
from lashflow.testing import Pending, WorkflowEnv

MONTH = """
process month(days: int) {
  total = 0
  for day in range(days) {
    r = await tools.reading({ day: day })?
    total = total + r
    if day % 7 == 6 {
      review = await tools.review({ day: day, total: total })
    }
    await tools.note({ day: day, total: total })?
    sleep for "24h"
    if day % 3 == 2 {
      sleep for "1h"
    }
  }
  finish total
}
"""
DAYS = 30
EXPIRED_REVIEW_DAY = 20


def readings() -> list[object]:
    """One answer per call: every fifth day the first attempt fails (and is retried)."""
    answers: list[object] = []
    for day in range(DAYS):
        if day % 5 == 0:
            answers.append(ConnectionError("meter offline"))
        answers.append(day + 1)
    return answers


def month(db: str) -> tuple[float, dict[str, object]]:
    """Run the month once; (wall seconds, what it did)."""
    began = time.perf_counter()
    with WorkflowEnv(db) as env:
        env.mock("tools.reading", outcomes=readings(),
                 retry=RetryPolicy.safe(max_attempts=3, base_delay=900, max_delay=0))
        env.mock("tools.review", pending=Pending(deadline=timedelta(hours=12)))
        env.mock("tools.note", returns=True)
        run = env.run(MONTH, {"days": DAYS})
        while run.status == "waiting":
            day = run.waiting[0].step  # a review waits: answer it, or let it expire
            reviewed = len(env.calls_of("tools.review"))
            if reviewed * 7 - 1 == EXPIRED_REVIEW_DAY:
                env.advance("12h")
            else:
                env.complete(run, "tools.review", {"ok": True, "step": day})
        steps = run.steps
        facts: dict[str, object] = {
            "status": run.status, "result": run.result, "steps": len(steps),
            "sleeps": sum(1 for s in steps if s.kind == "sleep"),
            "retried": sum(1 for s in steps if len(s.attempts) > 1),
            "expired": sum(1 for s in steps if s.state == "exhausted"
                           or (isinstance(s.outcome, dict)
                               and "timed out" in str(s.outcome.get("message", "")))),
            "simulated": env.elapsed}
    return time.perf_counter() - began, facts


def startup(with_plugin: bool, folder: Path) -> float:
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    if with_plugin:
        args += ["-p", "lashflow.testing.plugin"]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    began = time.perf_counter()
    subprocess.run(args, cwd=folder, check=True, capture_output=True, env=env)
    return time.perf_counter() - began


IMPORT_ALONE = ("import time, pytest; began = time.perf_counter(); "
                "import lashflow.testing.plugin; print(time.perf_counter() - began)")


def plugin_import() -> float:
    out = subprocess.run([sys.executable, "-c", IMPORT_ALONE], check=True,
                         capture_output=True, text=True).stdout
    return float(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--startups", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        walls = []
        facts: dict[str, object] = {}
        for i in range(args.rounds):
            # as the plugin opens it: no fsync per commit (a test needs no power-loss safety)
            wall, facts = month(f"sqlite:///{os.path.join(tmp, f'month{i}.db')}?synchronous=normal")
            walls.append(wall)
        assert facts["status"] == "finished", facts
        print("A month in a test (WorkflowEnv on SQLite, start and close included)")
        print(f"  {'steps':>5} {'sleeps':>6} {'retried':>7} {'expired':>7} {'simulated':>12} "
              f"{'best s':>7} {'median s':>8}")
        simulated = facts["simulated"]
        print(f"  {facts['steps']:>5} {facts['sleeps']:>6} {facts['retried']:>7} "
              f"{facts['expired']:>7} {str(simulated):>12} {min(walls):>7.3f} "
              f"{statistics.median(walls):>8.3f}")
        folder = Path(tmp) / "project"
        folder.mkdir()
        (folder / "test_one.py").write_text("def test_one():\n    pass\n")
        samples: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.startups):
            for with_plugin in (False, True):
                samples[with_plugin].append(startup(with_plugin, folder))
        imports = [plugin_import() for _ in range(args.startups)]
        on, off = statistics.median(samples[True]), statistics.median(samples[False])
        print()
        print(f"pytest start-up, one trivial test collected (median of {args.startups})")
        print(f"  {'no plugin':>11} {'the plugin':>11} {'plugin adds':>12} {'its import':>11}")
        print(f"  {off * 1000:>8.1f} ms {on * 1000:>8.1f} ms {(on - off) * 1000:>9.1f} ms "
              f"{statistics.median(imports) * 1000:>8.2f} ms")


if __name__ == "__main__":
    main()
