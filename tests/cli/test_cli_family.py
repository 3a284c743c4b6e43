"""`run` drives a parent and its children through short sleeps, then lists every wait of
every member of the family with the command that resolves it; no child is left
`running` with nobody driving it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

APPROVALS = """
process approval(req: str) signals { decision: any } {
  yield { waiting: req }
  sleep for "1s"
  d = wait_signal("decision")
  if d.approved { finish { req: req, approved: true } }
  fail { req: req, approved: false }
}
h1 = start approval(req: "r1")
h2 = start approval(req: "r2")
finish await [h1, h2]
"""


def test_run_drives_the_family_through_short_sleeps_and_lists_every_wait(
        lf: Any, tmp_path: Path) -> None:
    file = tmp_path / "approvals.lash"
    file.write_text(APPROVALS)
    ran = lf("run", file, "--run-id", "main", "--json")
    assert ran.code == 3, ran
    waits = ran.json["waiting"]
    children = sorted({w["child_run_id"] for w in waits if w["kind"] == "child"})
    assert len(children) == 2
    signals = sorted((w["child_run_id"], w["signal"]) for w in waits if w["kind"] == "signal")
    assert signals == [(children[0], "decision"), (children[1], "decision")]
    assert not [w for w in waits if w["kind"] == "sleep"]  # both 1 s sleeps were driven
    for wait in waits:
        if wait["kind"] == "signal":
            assert wait["resolve"].startswith(f"lashflow signal {wait['child_run_id']} decision")
    listed = lf("list", "--json").json["runs"]
    assert {r["run_id"]: r["status"] for r in listed} == {
        "main": "waiting", children[0]: "waiting", children[1]: "waiting"}
    # resolving both children from outside finishes the family
    for child in children:
        assert lf("signal", child, "decision", "--payload", '{"approved": true}').code == 0
    done = lf("resume", "main", "--json")
    assert done.code == 0, done
    assert done.json["status"] == "finished"
    assert [r["value"]["approved"] for r in done.json["result"]] == [True, True]
