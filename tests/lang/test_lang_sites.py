"""Effect-site ids depend on the place in the tree, never on text positions: a
reformatted file replays its journal."""

from __future__ import annotations

from lashflow.lang import Catalog, link, parse
from lashflow.lang import ast as A
from lashflow.lang.sites import EFFECT_NODES, nodes

CATALOG = Catalog.permissive({"tools": ["quote", "charge", "read"]})

BASE = """process fulfill(order: dict) {
  q = await tools.quote({ order: order })?
  if q.ok { r = await tools.charge({ q: q })? }
  sleep for "1s"
  d = wait_signal("go")
  yield d
  finish r
}
process other() { finish 1 }
h = start fulfill(order: {})
x = await { a: tools.read({}), b: tools.read({}) }
print x
finish (await h)?
"""

# The same program: comments, blank lines, spacing, `;`, another process edited.
REFORMATTED = """# a comment up front

process other() { x = 1; finish x }   // edited, other process
process fulfill(order: dict) {
    # spacing and comments changed
    q = await tools.quote({order: order})?
    if q.ok {
        r = await tools.charge({ q: q })?
    }
    sleep for "1s"; d = wait_signal("go")
    yield d
    finish r
}

h = start fulfill(order: {})
x = await {
  a: tools.read({}),
  b: tools.read({}),
}
print x
finish (await h)?
"""


def sites(source: str) -> dict[str, list[tuple[str, str]]]:
    module = link(parse(source), CATALOG)
    out: dict[str, list[tuple[str, str]]] = {"main": []}
    for stmt in module.main:
        out["main"] += [(type(n).__name__, n.site) for n in nodes(stmt)
                        if isinstance(n, EFFECT_NODES)]
    for decl in module.processes:
        out[decl.name] = [(type(n).__name__, n.site) for s in decl.body.body for n in nodes(s)
                          if isinstance(n, EFFECT_NODES)]
    return out


def test_every_effect_node_gets_a_site() -> None:
    got = sites(BASE)
    kinds = [k for k, _ in got["fulfill"]]
    assert kinds == ["Await", "ReceiverCall", "Await", "ReceiverCall", "Sleep",
                     "WaitSignal", "ValueStmt", "ValueStmt"]
    for entry in got.values():
        for _, site in entry:
            assert len(site) == 16 and int(site, 16) >= 0
    all_sites = [s for entry in got.values() for _, s in entry]
    assert len(all_sites) == len(set(all_sites))


def test_sites_survive_reformatting_and_edits_elsewhere() -> None:
    before = sites(BASE)
    after = sites(REFORMATTED)
    assert before["fulfill"] == after["fulfill"]
    assert before["main"] == after["main"]
    assert before["other"] != after["other"]


def test_inserting_a_statement_moves_only_later_sites() -> None:
    edited = BASE.replace("h = start fulfill(order: {})", "y = 0\nh = start fulfill(order: {})")
    before = sites(BASE)
    after = sites(edited)
    assert before["fulfill"] == after["fulfill"]
    start_before = [site for kind, site in before["main"] if kind == "Start"]
    start_after = [site for kind, site in after["main"] if kind == "Start"]
    assert start_before != start_after


def test_same_shape_in_different_entries_differs() -> None:
    module = link(parse("process a() { finish 1 }\nprocess b() { finish 1 }\nfinish 1"), CATALOG)
    ids = {module.processes[0].body.body[0].site, module.processes[1].body.body[0].site,
           module.main[0].site}
    assert len(ids) == 3


def test_site_kind_is_part_of_the_id() -> None:
    module = link(parse("x = await tools.read({})"), CATALOG)
    awaited = module.main[0].value
    assert isinstance(awaited, A.Await)
    assert awaited.site != awaited.expr.site
