"""Each example of processes/ run through the CLI (a real ``python -m lashflow``), the way
docs/getting-started.md tells a new user to run it."""

from __future__ import annotations

import time
from typing import Any, Callable

Lfx = Callable[..., Any]


def test_fulfill(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    parked = lfx("run", file, "--input", data, "--json")
    assert parked.code == 3
    key = parked.json["waiting"][0]["key"]
    done = lfx("complete", key, "--result", '{"approved": true}', "--resume", "--json")
    assert done.code == 0 and done.json["result"]["charged"] is True


def test_fanout_batch_with_a_partial_failure(lfx: Lfx, example: Any) -> None:
    file, data = example("fanout")
    ran = lfx("run", file, "--input", data, "--json")
    assert ran.code == 0, ran
    assert ran.json["result"] == {
        "reservation": {"reservation": "rsv-south-lamp-5", "warehouse": "south", "qty": 5},
        "unreachable": [{"warehouse": "east", "error": "warehouse east is offline"}]}
    steps = lfx("show", ran.json["run_id"], "--json").json["steps"]
    batch, reserve = steps[:3], steps[3]
    sites = {s["step"].rsplit(":", 1)[0] for s in batch}
    assert len(sites) == 1  # one batch: <site>:<occurrence>:<member>
    assert [s["step"].rsplit(":", 1)[1] for s in batch] == ["0", "1", "2"]
    assert [s["state"] for s in batch] == ["ok", "ok", "err"]
    starts = [s["started_at"] for s in batch]
    ends = [s["finished_at"] for s in batch]
    assert max(starts) < min(ends)  # concurrent: every call started before any finished
    assert reserve["tool"] == "tools.reserve" and reserve["state"] == "ok"


def test_retry_with_backoff(lfx: Lfx, example: Any) -> None:
    file, data = example("retry")
    ran = lfx("run", file, "--input", data, "--json")
    assert ran.code == 0, ran
    assert ran.json["result"] == {"amount": 250, "currency": "USD", "converted": 270,
                                  "checked_with": "primary only"}
    fetch, legacy = lfx("show", ran.json["run_id"], "--json").json["steps"]
    assert [a["status"] for a in fetch["attempt_log"]] == ["failed", "failed", "ok"]
    assert [a["code"] for a in fetch["attempt_log"]][:2] == ["http_503", "http_503"]
    assert [a["status"] for a in legacy["attempt_log"]] == ["failed"] * 3 + ["exhausted"]
    assert legacy["state"] == "exhausted"
    log = legacy["attempt_log"]
    gaps = [log[i + 1]["started_at"] - log[i]["finished_at"] for i in range(3)]
    for gap, delay in zip(gaps, [0.05, 0.1, 0.2]):  # base_delay * 2**i
        assert gap >= delay * 0.9, gaps


def test_approval_sleep_then_signal(lfx: Lfx, example: Any) -> None:
    file, data = example("approval")
    started = time.monotonic()
    parked = lfx("run", file, "--input", data)
    assert time.monotonic() - started >= 1.0  # drove through the 1 s cooling-off sleep
    assert parked.code == 3, parked
    run_id = parked.out.split()[1]
    command = parked.out.splitlines()[2].strip()
    assert command.startswith(f"lashflow signal {run_id} decision --payload '<json>' --db ")
    approved = lfx("signal", run_id, "decision", "--payload", '{"approved": true}', "--json")
    assert approved.code == 0
    result = approved.json["result"]
    assert result["status"] == "paid" and result["payment"] == {
        "paid": 42.5, "to": "ada", "ref": "pay-" + result["claim"][4:]}
    kinds = [s["kind"] for s in lfx("show", run_id, "--json").json["steps"]]
    assert kinds == ["tool", "sleep", "wait_signal", "tool"]


def test_approval_rejected_and_parked_on_the_sleep(lfx: Lfx, example: Any) -> None:
    file, data = example("approval")
    parked = lfx("run", file, "--input", data, "--max-wait", "0", "--json")
    assert parked.code == 3
    [wait] = parked.json["waiting"]
    assert wait["kind"] == "sleep"
    time.sleep(max(0.0, wait["until"] - time.time()) + 0.05)  # the recorded timer is due
    again = lfx("resume", parked.json["run_id"], "--json")
    assert again.code == 3 and again.json["waiting"][0]["kind"] == "signal"
    rejected = lfx("signal", parked.json["run_id"], "decision", "--payload",
                   '{"approved": false, "reason": "no receipt"}', "--json")
    assert rejected.code == 0
    assert rejected.json["status"] == "failed"
    assert '"reason":"no receipt"' in rejected.json["error"]["message"]


def test_thumbnails_parent_and_children(lfx: Lfx, example: Any) -> None:
    file, data = example("thumbnails")
    ran = lfx("run", file, "--process", "thumbnails", "--input", data, "--json")
    assert ran.code == 0, ran
    assert ran.json["result"] == {"thumbnails": ["cat-128w.png", "dog-128w.png"],
                                  "failed": ["notes.txt is not an image"]}
    parent = ran.json["run_id"]
    runs = lfx("list", "--json").json["runs"]
    children = [r for r in runs if r["parent_run_id"] == parent]
    assert len(children) == 3 and {r["process"] for r in children} == {"resize"}
    assert sorted(r["status"] for r in children) == ["failed", "finished", "finished"]
    kinds = [s["kind"] for s in lfx("show", parent, "--json").json["steps"]]
    assert kinds == ["start"] * 3 + ["await"] * 3
    plain = lfx("list", "--process", "resize")
    assert plain.out.count("resize") == 3
