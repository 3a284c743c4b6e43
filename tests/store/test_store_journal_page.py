"""``Store.journal_page``, on both backends: a page of runs with their journals in a few
statements gives exactly what ``get_run`` and ``load_journal`` give run by run, covers
every run once across pages, keeps only the processes asked for, and reports a journal
that cannot be trusted on its run instead of failing the page."""

from __future__ import annotations

from lashflow.slotted import replace
from typing import Any

from lashflow import Engine, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import JournalCorrupt
from lashflow.store import RunQuery

SOURCE = """
process p(n: int) {
  a = tools.echo({ i: n })?
  b = await [tools.echo({ i: n + 1 }), tools.echo({ i: n + 2 })]
  go = wait_signal("go")
  finish [a, b, go]
}

process q(n: int) {
  a = tools.echo({ i: n })?
  go = wait_signal("go")
  finish a
}

process done(n: int) {
  finish n
}
"""


@tool
async def echo(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"i": call.input["i"]})


async def all_pages(store: Any, query: RunQuery, processes: Any) -> list[Any]:
    entries: list[Any] = []
    while True:
        page = await store.journal_page(query, processes=processes)
        assert len(page.entries) <= query.limit
        entries += page.entries
        if page.next_cursor is None:
            return entries
        query = replace(query, cursor=page.next_cursor)


async def test_a_page_holds_each_run_and_its_journal_as_read_one_by_one(backend: Any) -> None:
    async with Engine(db=backend.url, tools=[echo]) as engine:
        for n in range(7):
            parked = await engine.run(SOURCE, "p", {"n": n}, run_id=f"p{n}")
            assert parked.status is RunStatus.WAITING
        for n in range(3):
            await engine.run(SOURCE, "q", {"n": n}, run_id=f"q{n}")
        assert (await engine.run(SOURCE, "done", {"n": 1}, run_id="d")).status \
            is RunStatus.FINISHED
    await backend.tamper("UPDATE {steps} SET outcome = 'x' || outcome WHERE run_id = ? "
                         "AND seq = 1", "p3")

    async with backend.make() as store:
        query = RunQuery(statuses=("waiting", "running", "queued"), limit=3)
        entries = await all_pages(store, query, {"p"})
        assert sorted(e.run.run_id for e in entries) == [f"p{n}" for n in range(7)]
        for entry in entries:
            assert entry.run == await store.get_run(entry.run.run_id)
            if entry.run.run_id == "p3":
                assert isinstance(entry.journal_error, JournalCorrupt)
                assert (entry.steps, entry.attempts) == ([], [])
                continue
            assert entry.journal_error is None
            assert (entry.steps, entry.attempts) == await store.load_journal(entry.run.run_id)
            assert [s.kind for s in entry.steps] == ["tool", "tool", "tool"]

        everything = await all_pages(store, RunQuery(limit=4), None)
        assert sorted(e.run.run_id for e in everything) == sorted(
            ["d", *(f"p{n}" for n in range(7)), *(f"q{n}" for n in range(3))])
        newest_first = [e.run.run_id for e in everything]
        listed = [r.run_id for r in (await store.query_runs(RunQuery(limit=50))).runs]
        assert newest_first == listed  # query_runs' order and filters
