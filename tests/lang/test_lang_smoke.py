"""End-to-end smoke test of the front end on the workflow shape everyone builds on."""

from lashflow.lang import Catalog, check, link, parse
from lashflow.lang import ast as A

FULFILL = """type Order = { id: str, items: list[dict], total: float }
process fulfill(order: Order) {
  quoted   = await tools.quote({ order: order })?
  approved = await tools.request_approval({ quote: quoted })?
  receipt  = await tools.charge({ approval: approved })?
  finish receipt
}
h = start fulfill(order: { id: "o1", items: [{ sku: "a" }], total: 2.5 })
finish (await h)?
"""

CATALOG = Catalog.permissive({"tools": ["quote", "request_approval", "charge"]})


def test_fulfill_parses_links_and_gets_sites() -> None:
    module = link(parse(FULFILL), CATALOG)
    assert [t.name for t in module.types] == ["Order"]
    proc = module.processes[0]
    assert proc.name == "fulfill" and [p.name for p in proc.params] == ["order"]
    first = proc.body.body[0]
    assert isinstance(first, A.Assign) and first.name == "quoted"
    awaited = first.value
    assert isinstance(awaited, A.Await) and isinstance(awaited.expr, A.Unwrap)
    call = awaited.expr.expr
    assert isinstance(call, A.ReceiverCall)
    assert call.module == "tools" and call.operation == "quote"
    assert len(call.site) == 16 and len(awaited.site) == 16
    finish = proc.body.body[-1]
    assert isinstance(finish, A.ValueStmt) and finish.kind == "finish" and finish.site
    start = module.main[0].value
    assert isinstance(start, A.Start) and start.process == "fulfill"


def test_check_reports_unknown_operation() -> None:
    [diag] = check("x = await tools.nope({})?", CATALOG)
    assert diag.code == "link_error"
    assert diag.message == "module `tools` does not expose operation `nope`"
    assert (diag.line, diag.column) == (1, 11)
