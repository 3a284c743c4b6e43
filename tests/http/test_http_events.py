"""Server-Sent Events of runs against real processes on loopback (ADR 0033): a subscriber
that reconnects with ``Last-Event-ID`` after its worker was SIGKILLed and after ``serve``
itself was SIGKILLed sees every event of the run exactly once, in order; the feed of a
process's runs resumes the same way."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from pydantic import TypeAdapter
from serve_support import TOKEN, Server, serving

from lashflow.http.models import RunEventData

pytestmark = pytest.mark.subprocess

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TICK_LASH = """
process tick(n: int) {
  total = 0
  for i in range(n) {
    r = await tools.nap({ i: i })?
    yield { done: i + 1, of: n }
    total = total + r
  }
  finish total
}
"""
TICK_PY = """
import asyncio
from lashflow import tool

@tool
async def nap(i: int) -> int:
    await asyncio.sleep(0.03)  # a run long enough to be killed in the middle of
    return i
"""
STEPS = 40


def sse(response: httpx.Response) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(id, event, data) of each event of an open SSE answer."""
    ident = kind = ""
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield ident, kind, json.loads("\n".join(data))
            ident, kind, data = "", "", []
        elif line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


class Subscriber:
    """Reads a run's events into ``seen`` until the stream breaks or the run finishes."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, dict[str, Any]]] = []
        self.progress = threading.Condition()
        self.finished = False

    def read(self, url: str, run_id: str) -> None:
        headers = dict(AUTH)
        if self.seen:
            headers["Last-Event-ID"] = str(self.seen[-1][0])
        try:
            with httpx.Client(timeout=httpx.Timeout(60, read=120)) as client, \
                    client.stream("GET", f"{url}/v1/runs/{run_id}/events",
                                  headers=headers) as response:
                assert response.status_code == 200, response.read()
                assert response.headers["content-type"].startswith("text/event-stream")
                for ident, kind, data in sse(response):
                    with self.progress:
                        self.seen.append((int(ident), kind, data))
                        self.finished = kind == "run" and data["status"] == "finished"
                        self.progress.notify_all()
                    if self.finished:
                        return
        except (httpx.HTTPError, OSError):
            return  # the server went away: the caller reconnects
        finally:
            with self.progress:
                self.progress.notify_all()

    def wait_for(self, count: int, reader: threading.Thread) -> None:
        with self.progress:
            while len(self.seen) < count and not self.finished and reader.is_alive():
                self.progress.wait(1)
        assert len(self.seen) >= count and not self.finished, (len(self.seen), self.finished)


def _worker(tmp: Path, db: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "lashflow", "worker", "--db", db, "--poll", "0.1",
         "--lease-ttl", "30", "--tools", str(tmp / "processes" / "tick.py")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)


def test_a_subscriber_sees_every_event_once_across_kills_of_worker_and_serve(
        tmp_path: Path) -> None:
    files = {"tick.lash": TICK_LASH, "tick.py": TICK_PY}
    workers: list[subprocess.Popen[bytes]] = []
    with serving(tmp_path, files) as served:
        db = served.db
        try:
            served.stop()
            served = Server(tmp_path, db, "--no-worker")
            served.start()
            workers.append(_worker(tmp_path, db))
            started = httpx.post(f"{served.url}/v1/runs", headers=AUTH, timeout=30,
                                 json={"file": "tick.lash", "input": {"n": STEPS},
                                       "run_id": "tick-1"})
            assert started.status_code == 202, started.text
            sub = Subscriber()

            def reader() -> threading.Thread:
                thread = threading.Thread(target=sub.read, args=(served.url, "tick-1"),
                                          daemon=True)
                thread.start()
                return thread

            thread = reader()
            sub.wait_for(12, thread)
            workers[0].kill()  # SIGKILL mid-run: its lease dies with it
            workers[0].wait(30)
            workers.append(_worker(tmp_path, db))
            sub.wait_for(30, thread)
            served.kill()  # SIGKILL serve: the stream breaks
            thread.join(60)
            assert not thread.is_alive()
            served = Server(tmp_path, db, "--no-worker")
            served.start()
            thread = reader()  # Last-Event-ID: the last offset seen
            thread.join(300)
            assert sub.finished, sub.seen[-3:]
            offsets = [seq for seq, _, _ in sub.seen]
            assert offsets == list(range(1, len(offsets) + 1))  # no gap, no duplicate
            yields = [data["value"]["done"] for _, kind, data in sub.seen if kind == "yield"]
            assert yields == list(range(1, STEPS + 1))
            assert sub.seen[-1][2]["result"] == sum(range(STEPS))

            # the same events, read afresh from the start, are exactly these
            with httpx.Client(timeout=60) as client, client.stream(
                    "GET", f"{served.url}/v1/runs/tick-1/events?after=0",
                    headers=AUTH) as response:
                again = []
                for ident, kind, data in sse(response):
                    again.append((int(ident), kind, data))
                    if len(again) == len(sub.seen):
                        break
            assert again == sub.seen
            for _, _, data in again:  # each data line has the shape the OpenAPI gives
                TypeAdapter(RunEventData).validate_python(data)

            # the feed of the process's runs resumes after a cursor too
            with httpx.Client(timeout=60) as client, client.stream(
                    "GET", f"{served.url}/v1/events?process=tick&after=0",
                    headers=AUTH) as response:
                feed = []
                for ident, kind, data in sse(response):
                    feed.append((ident, data["seq"]))
                    if len(feed) == 5:
                        break
            assert [seq for _, seq in feed] == [1, 2, 3, 4, 5]
            with httpx.Client(timeout=60) as client, client.stream(
                    "GET", f"{served.url}/v1/events?process=tick",
                    headers={**AUTH, "Last-Event-ID": feed[2][0]}) as response:
                ident, kind, data = next(sse(response))
            assert (ident, data["seq"]) == feed[3]
            bad = httpx.get(f"{served.url}/v1/runs/tick-1/events?after=x", headers=AUTH)
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "usage_error"
            ghost = httpx.get(f"{served.url}/v1/runs/ghost/events", headers=AUTH)
            assert ghost.status_code == 404 and ghost.json()["error"]["code"] == "unknown_run"
            assert httpx.get(f"{served.url}/v1/runs/tick-1/events").status_code == 401
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait(30)
            if served.proc is not None and served.proc.poll() is None:
                served.kill()


NAP_LASH = 'process nap() {\n  sleep for "1h"\n  finish 1\n}\n'


class Watcher:
    """Reads one run's stream on a thread for as long as the test lasts."""

    def __init__(self, url: str, run_id: str) -> None:
        self.seen: list[tuple[int, str, dict[str, Any]]] = []
        self.progress = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(url, run_id), daemon=True)
        self.thread.start()

    def _read(self, url: str, run_id: str) -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(60, read=300)) as client, \
                    client.stream("GET", f"{url}/v1/runs/{run_id}/events",
                                  headers=AUTH) as response:
                for ident, kind, data in sse(response):
                    with self.progress:
                        self.seen.append((int(ident), kind, data))
                        self.progress.notify_all()
        except (httpx.HTTPError, OSError):
            pass
        finally:
            with self.progress:
                self.progress.notify_all()

    def status(self, after: int, status: str, **data: Any) -> int:
        """The index of the first ``run`` event past ``after`` with this status (and
        these fields), once it has come."""
        with self.progress:
            while True:
                for index, (_, kind, found) in enumerate(self.seen[after:], after):
                    if kind == "run" and found["status"] == status and \
                            all(found.get(k) == v for k, v in data.items()):
                        return index
                assert self.thread.is_alive(), self.seen
                self.progress.wait(1)


def test_operators_changes_reach_a_subscriber_as_they_happen(tmp_path: Path) -> None:
    """Pause, unpause, and bulk pause, cancel and retry of a run, over HTTP, each reach
    the run's open SSE stream as a status event, in order, with no gap."""
    with serving(tmp_path, {"nap.lash": NAP_LASH}) as served:
        def post(path: str, body: dict[str, Any] | None = None) -> Any:
            answer = httpx.post(f"{served.url}{path}", headers=AUTH, json=body or {},
                                timeout=60)
            assert answer.status_code in (200, 202), answer.text
            return answer.json()

        def bulk(action: str, where: str, **extra: Any) -> None:
            job = post("/v1/runs/bulk", {"action": action, "where": where, **extra})
            while job["state"] == "running":  # the job's own progress, read until done
                job = httpx.get(f"{served.url}/v1/jobs/{job['job_id']}", headers=AUTH,
                                timeout=60).json()
            assert (job["state"], job["acted"]) == ("done", 1), job

        post("/v1/runs", {"file": "nap.lash", "process": "nap", "run_id": "nap-1"})
        watch = Watcher(served.url, "nap-1")
        at = watch.status(0, "waiting")
        post("/v1/runs/nap-1/pause", {"reason": "look"})
        at = watch.status(at, "paused", reason="look", was="waiting")
        post("/v1/runs/nap-1/unpause")
        at = watch.status(at, "queued", unpaused=True)
        at = watch.status(at, "waiting")  # a worker replayed it to its wait
        bulk("pause", "process=nap", reason="bulk")
        at = watch.status(at, "paused", reason="bulk")
        bulk("cancel", "process=nap and status=paused", reason="not needed")
        at = watch.status(at, "queued", cancel_requested=True, reason="not needed")
        at = watch.status(at, "cancelled")  # settled by the worker
        bulk("retry", "status=cancelled and process=nap")
        at = watch.status(at, "queued", reopened=True)
        watch.status(at, "waiting")
        offsets = [seq for seq, _, _ in watch.seen]
        assert offsets == list(range(1, len(offsets) + 1))
        for _, _, data in watch.seen:
            TypeAdapter(RunEventData).validate_python(data)
