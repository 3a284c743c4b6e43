"""Exactly one run per tick with real worker processes racing for the ticks (and one of
them killed with SIGKILL while they fire): 20 schedules ticking every second for 10
seconds, 200 ticks in all, on both backends. The count is kept modest so the suite stays
fast on two busy cores; the race is the same at any count."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lashflow import Engine
from pg_support import with_query
from lashflow.schedules.ticks import tick_id

ROOT = Path(__file__).resolve().parents[2]
HOLD = str(Path(__file__).resolve().parent / "hold.lash")
SCHEDULES, TICKS = 20, 10


class Workers:
    """``lashflow worker`` processes of one test, stopped by their own pids only."""

    def __init__(self, tmp_path: Path, db: str) -> None:
        self.tmp_path, self.db = tmp_path, db
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        """A worker; on PostgreSQL with a small pool (the test server's slots are shared)."""
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("LASHFLOW_DB", None)
        err = open(self.tmp_path / f"worker{len(self.procs)}.err", "wb")
        db = self.db if self.db.startswith("sqlite") else with_query(self.db, pool_size="3")
        proc = subprocess.Popen([sys.executable, "-m", "lashflow", "worker", "--db", db,
                                 "--poll", "0.2"], env=env, stdout=subprocess.DEVNULL,
                                stderr=err, cwd=self.tmp_path)
        err.close()
        self.procs.append(proc)
        return proc

    def errors(self, index: int) -> str:
        return (self.tmp_path / f"worker{index}.err").read_text(errors="replace")

    async def ready(self) -> None:
        deadline = time.monotonic() + 120
        for index, proc in enumerate(self.procs):
            while "polling every" not in self.errors(index):
                assert proc.poll() is None, self.errors(index)
                assert time.monotonic() < deadline, "a worker never got ready"
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


async def test_workers_racing_for_ticks_make_exactly_one_run_each(db: str, tmp_path: Path) -> None:
    async with Engine(db=db) as engine:  # the schema exists before the workers race to open it
        workers = Workers(tmp_path, db)
        try:
            for _ in range(3):
                workers.start()
            await workers.ready()
            start = float(int(time.time()) + 2)
            for index in range(SCHEDULES):
                await engine.schedules.create(
                    f"race{index:02d}", HOLD, input={"n": index}, every="1s", overlap="allow",
                    catchup_window="1h", start=start, end=start + TICKS)
            victim = workers.procs[0]
            deadline = time.monotonic() + 300
            killed = False
            while True:  # until every schedule has ended (each tick handled)
                infos = await engine.schedules.list()
                fired = sum(info.fired for info in infos)
                if not killed and fired >= SCHEDULES * TICKS // 3:
                    victim.send_signal(signal.SIGKILL)  # while the others keep firing
                    victim.wait(timeout=10)
                    killed = True
                    workers.start()
                if all(not info.next_fires for info in infos) and killed:
                    break
                for index, proc in enumerate(workers.procs):
                    assert proc is victim or proc.poll() is None, workers.errors(index)
                assert time.monotonic() < deadline, f"ticks still due: {fired} fired"
                await asyncio.sleep(0.1)
        finally:
            workers.stop()
        infos = await engine.schedules.list()
        assert sum(info.fired for info in infos) == SCHEDULES * TICKS
        assert sum(info.missed + info.skipped for info in infos) == 0
        for info in infos:
            runs = await engine.schedules.runs(info.name, limit=100)
            assert sorted(r.run_id for r in runs) == sorted(
                tick_id(info.name, start + second) for second in range(TICKS)), info.name
        every_run = await engine.runs(limit=1000)
        assert len(every_run.runs) == SCHEDULES * TICKS
