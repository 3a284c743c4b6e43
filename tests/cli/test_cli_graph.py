"""``lashflow graph``: steps, branches, loops and batches as Mermaid or DOT, @label titles,
and nodes coloured by a run's journal (site ids match step keys)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from lashflow.lang.graph import build_graph, node_state, render

Lf = Callable[..., Any]


def nodes_of(mermaid: str) -> dict[str, str]:
    """Mermaid node id -> label text (shape brackets and quotes stripped)."""
    found = {}
    for match in re.finditer(r"^\s+(n\d+)\W+\"(.*?)\"\W*$", mermaid, re.M):
        found[match.group(1)] = match.group(2)
    return found


def edges_of(mermaid: str) -> set[tuple[str, str, str]]:
    out = set()
    for match in re.finditer(r"^\s+(n\d+)(?: -- (.*?) -->| -->) (n\d+)$", mermaid, re.M):
        out.add((match.group(1), match.group(3), match.group(2) or ""))
    return out


def by_label(mermaid: str, text: str) -> str:
    [node] = [n for n, label in nodes_of(mermaid).items() if text in label]
    return node


def test_fulfill_is_a_chain_of_three_tools(lf: Lf, example: Any) -> None:
    file, _ = example("fulfill")
    ran = lf("graph", file)
    assert ran.code == 0 and ran.out.startswith("flowchart TD\n")
    assert 'subgraph c1["process fulfill(order)"]' in ran.out
    quote, approval, charge = (by_label(ran.out, f"tools.{t}") for t in
                               ("quote", "request_approval", "charge"))
    start, finish = by_label(ran.out, "start"), by_label(ran.out, "finish receipt")
    assert {(start, quote, ""), (quote, approval, ""), (approval, charge, ""),
            (charge, finish, "")} <= edges_of(ran.out)


def test_labels_branches_and_waits(lf: Lf, example: Any) -> None:
    file, _ = example("approval")
    out = lf("graph", file).out
    labels = nodes_of(out)
    assert "File the claim<br/>tools.file_claim" in labels.values()
    assert "Cooling-off period<br/>sleep for #quot;1s#quot;" in labels.values()
    decision = by_label(out, "if decision.approved")
    assert out.count(f"{decision}{{") == 1  # a diamond
    pay, fail = by_label(out, "tools.pay"), by_label(out, "fail {")
    assert {(decision, pay, "yes"), (decision, fail, "no")} <= edges_of(out)


def test_batch_is_one_box_of_its_members(lf: Lf, example: Any) -> None:
    file, _ = example("fanout")
    out = lf("graph", file).out
    assert 'subgraph c3["Ask every warehouse at once · batch: 3 calls at once"]' in out
    members = [by_label(out, f"{w}: tools.stock") for w in ("north", "south", "east")]
    start = by_label(out, "start")
    assert {(start, m, "") for m in members} <= edges_of(out)  # all begin together


def test_loops_and_children(lf: Lf, example: Any) -> None:
    file, _ = example("thumbnails")
    out = lf("graph", file, "--process", "thumbnails").out
    assert "process resize" not in out
    loop = by_label(out, "Start one child per image: for image in images")
    assert f"{loop}{{{{" in out  # a hexagon
    start_child = by_label(out, "start resize")
    awaited = by_label(out, "await handles")
    assert {(loop, start_child, "each"), (start_child, loop, "next"),
            (loop, awaited, "done")} <= edges_of(out)


def test_dot_format(lf: Lf, example: Any) -> None:
    file, _ = example("fanout")
    ran = lf("graph", file, "--format", "dot")
    assert ran.code == 0
    out = ran.out
    assert out.startswith("digraph lashflow {") and out.rstrip().endswith("}")
    assert all(line.rstrip().endswith(("{", "}", ";")) for line in out.splitlines())
    assert "subgraph cluster_c3 {" in out and 'style="dashed"' in out
    assert 'label="north: tools.stock", shape=box' in out
    assert re.search(r'n\d+ -> n\d+ \[label="yes"\];', out)


def test_coloured_by_a_run(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    out = lf("graph", file, "--run", run_id).out
    north, south, east = (by_label(out, f"{w}: tools.stock") for w in ("north", "south", "east"))
    reserve = by_label(out, "tools.reserve")
    done = re.search(r"class (\S+) done$", out, re.M).group(1).split(",")
    failed = re.search(r"class (\S+) failed$", out, re.M).group(1).split(",")
    assert set(done) == {north, south, reserve} and failed == [east]
    assert "classDef done fill:#d4edda" in out
    dot = lf("graph", file, "--run", run_id, "--format", "dot").out
    assert 'label="east: tools.stock", shape=box, fillcolor="#f8d7da"' in dot


def test_waiting_and_unreached_and_child_runs(lf: Lf, example: Any, tmp_path: Path) -> None:
    file, data = example("fulfill")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    out = lf("graph", file, "--run", run_id).out
    assert re.search(rf"class {by_label(out, 'request_approval')} waiting$", out, re.M)
    assert re.search(rf"class {by_label(out, 'tools.charge')} unreached$", out, re.M)

    gate = tmp_path / "gate.lash"
    gate.write_text('process gate() {\n  d = wait_signal("go")\n  finish d\n}\n')
    parked = lf("run", gate, "--json").json["run_id"]
    out = lf("graph", gate, "--run", parked).out
    assert re.search(rf"class {by_label(out, 'wait_signal')} waiting$", out, re.M)

    file, data = example("thumbnails")
    parent = lf("run", file, "-p", "thumbnails", "--input", data, "--json").json["run_id"]
    out = lf("graph", file, "--run", parent).out
    assert "start resize ×3" in out and "await handles ×3" in out
    # the children's journals colour the child process: one of three resizes answered err
    resize = by_label(out, "tools.resize")
    assert nodes_of(out)[resize] == "tools.resize ×3"
    assert re.search(rf"class (\S+,)?{resize}(,\S+)? failed$", out, re.M)  # any failed one shows
    # and the child's `fail` that ended the failing resize is marked too
    assert re.search(rf"class (\S+,)?{by_label(out, 'fail out.error')}(,\S+)? failed$", out, re.M)


def test_unknown_run_for_graph(lf: Lf, example: Any) -> None:
    file, _ = example("fulfill")
    ran = lf("graph", file, "--run", "ghost")
    assert ran.code == 2 and ran.err.startswith("error[unknown_run]")


def test_unknown_process_for_graph(lf: Lf, example: Any) -> None:
    file, _ = example("fulfill")
    ran = lf("graph", file, "--process", "nope")
    assert ran.code == 2 and "no process `nope`" in ran.err


SHAPES = """
@label(title: "The whole job")
process job(items: list[str]) {
  n = 0
  while n < 3 {
    r = await tools.poll({ n: n })
    if r.ok { break }
    if n == 1 { continue }
    n = n + 1
  }
  both = await [tools.a({}), tools.b({})?]
  h = start job(items: [])
  kept = await { x: tools.a({}), h: h }
  mixed = await { x: tools.a({}), c: start job(items: []) }
  if n == 0 { x = 1 } else if n == 1 { y = await tools.b({}) } else { z = 2 }
  @label(title: "Tidy up")
  tidy = 1
  finish both
  never = await tools.a({})
}

print "main"
sleep for "1s"
"""


def test_shapes_of_the_language() -> None:
    out = render(build_graph(SHAPES))
    labels = nodes_of(out)
    edges = edges_of(out)
    assert 'subgraph c6["The whole job · process job(items)"]' in out
    assert '["main block"]' in out
    assert 'print #quot;main#quot;' in labels.values()
    assert 'sleep for #quot;1s#quot;' in labels.values()
    loop, poll = by_label(out, "while n #lt; 3"), by_label(out, "tools.poll")
    assert (loop, poll, "each") in edges
    ok = by_label(out, "if r.ok")
    assert any(src == ok and label == "yes" and dst != loop for src, dst, label in edges)  # break
    assert any(dst == loop and label == "yes" for src, dst, label in edges)  # continue
    # a list literal of calls is one batch; a record with a pure leaf (h) is one too
    assert "batch: 2 calls at once" in out and "batch: 1 call at once" in out
    assert "[0]: tools.a" in labels.values() and "[1]: tools.b" in labels.values()
    # a literal holding another effect (a start) is no batch: effects, then an await
    assert any(label.startswith("await { x: tools.a({}), c: start") for label in labels.values())
    assert "Tidy up" in labels.values()  # a labelled pure statement is a note
    assert "if n == 0" in labels.values()  # else-if chains are decisions
    assert sum(1 for label in labels.values() if label.endswith("tools.a")) == 3  # not `never`


def test_node_state_rules() -> None:
    graph = build_graph('process p() {\n  a = await tools.a({})\n  finish a\n}\n')
    [tool] = [n for n in graph.nodes.values() if n.kind == "tool"]
    site = tool.sites[0]
    assert node_state(tool, {}) == ("unreached", 0)
    assert node_state(tool, {site: ["ok"]}) == ("done", 1)
    assert node_state(tool, {site: ["ok", "exhausted"]}) == ("failed", 2)
    assert node_state(tool, {site: ["ok", "pending"]}) == ("waiting", 2)


def test_run_of_another_version_is_flagged(lf: Lf, example: Any, tmp_path: Path) -> None:
    file, data = example("fanout")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    edited = tmp_path / "fanout.lash"
    edited.write_text("# a comment changes the text, not the sites\n" + file.read_text())
    ran = lf("graph", edited, "--run", run_id)
    assert ran.code == 0 and ran.err.startswith(f"warning: run {run_id} was started from another")
    assert "class " in ran.out and " done" in ran.out  # still matched: sites ignore comments
    assert lf("graph", file, "--run", run_id).err == ""


def test_graph_json(lf: Lf, example: Any) -> None:
    file, data = example("fanout")
    run_id = lf("run", file, "--input", data, "--json").json["run_id"]
    graph = lf("graph", file, "--run", run_id, "--json").json
    assert set(graph) == {"run_id", "status", "format", "text", "nodes", "edges"}
    assert graph["run_id"] == run_id and graph["text"].startswith("flowchart TD")
    east = next(n for n in graph["nodes"] if n["label"] == "east: tools.stock")
    assert (east["kind"], east["state"], east["executions"]) == ("tool", "failed", 1)
    assert all({"from", "to", "label"} == set(e) for e in graph["edges"])
    bad = lf("graph", file, "--run", "ghost", "--json")
    assert bad.code == 2 and bad.json["error"]["code"] == "unknown_run"
    assert bad.json["run_id"] == "ghost"


FAN_OUT = """
process fan(urls: list[str]) {
  pages = await [tools.fetch({ url: u })? for u in urls if u != ""]
  one = await tools.fetch({ url: "x" })?
  finish [pages, one]
}
"""


def test_a_fan_out_is_one_node_and_check_lists_it(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "fan.lash"
    file.write_text(FAN_OUT)
    (tmp_path / "fan.py").write_text("from lashflow import tool\n\n@tool\n"
                                     "async def fetch(url: str) -> dict:\n    return {}\n")
    out = lf("graph", file).out
    fan = by_label(out, 'fan-out: tools.fetch for u in urls if u != #quot;#quot;')
    [single] = [n for n, label in nodes_of(out).items() if label == "tools.fetch"]
    assert (fan, single, "") in edges_of(out)
    checked = lf("check", file)
    assert checked.code == 0
    assert checked.out.splitlines()[1:] == [
        '  line 3: fan-out tools.fetch for u in urls if u != "" (one concurrent batch)']
    as_json = lf("check", file, "--json")
    assert '"fan_outs": [{"line": 3, "fan_out": "tools.fetch for u in urls if u != \\"\\""}]' \
        in as_json.out


FAN_THEN_FAIL = """
process fan(urls: list[str]) {
  pages = await [tools.fetch({ url: u })? for u in urls]
  if len(pages) > 2 {
    fail { reason: "too many pages for this one process to take in at once" }
  }
  if len(pages) == 0 {
    fail "none"
  }
  finish pages
}
"""


def _by_start(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Nodes by the first two words of their label (the first one for a fan-out)."""
    return {n["label"].split(":")[0] if n["label"].startswith("fan-out")
            else " ".join(n["label"].split()[:2]): n for n in nodes}


def test_a_fan_out_is_done_when_its_members_are_and_the_failing_fail_is_marked(
        lf: Lf, tmp_path: Path) -> None:
    """Found: the fan-out node stayed "unreached" after all its members ran, and nothing
    said which ``fail`` ended the run."""
    file = tmp_path / "fan.lash"
    file.write_text(FAN_THEN_FAIL)
    (tmp_path / "fan.py").write_text("from lashflow import tool\n\n@tool\n"
                                     "async def fetch(url: str) -> dict:\n    return {}\n")
    failed = lf("run", file, "--input", '{"urls": ["a", "b", "c"]}', "--json").json
    assert failed["status"] == "failed" and failed["error"]["site"]
    graph = _by_start(lf("graph", file, "--run", failed["run_id"], "--json").json["nodes"])
    assert (graph["fan-out"]["state"], graph["fan-out"]["executions"]) == ("done", 3)
    assert graph["fail {"]["state"] == "failed"
    assert graph["fail \"none\""]["state"] is None  # not the one: drawn as any fail
    finished = lf("run", file, "--input", '{"urls": ["a"]}', "--json").json
    graph = _by_start(lf("graph", file, "--run", finished["run_id"], "--json").json["nodes"])
    assert graph["fail {"]["state"] is None
    assert graph["fan-out"]["state"] == "done"
    # a label cut to its width keeps its whole text for a tooltip
    [long_fail] = [n for n in build_graph(FAN_THEN_FAIL).nodes.values()
                   if n.label.startswith("fail {")]
    assert long_fail.label.endswith("…") and long_fail.text.endswith("at once\" }")
