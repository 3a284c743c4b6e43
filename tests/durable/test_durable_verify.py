"""``Engine.verify``: runs parked under one version of a file, replayed read-only against
an edited one. Each kind of edit is classified with the right step and line, and
verification writes nothing (SQLite opened ``mode=ro``; PostgreSQL under a role that
may only read)."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from lashflow import Engine, ToolCall, ToolResult, tool
from lashflow.errors import DbError
from pg_support import postgres_base_url, schema_url, with_query


@tool
async def read(call: ToolCall) -> ToolResult:
    return ToolResult.ok({"text": f"content of {call.input.get('path')}"})


class Price(BaseModel):
    total: float


class PriceText(BaseModel):
    total: str


@tool(name="price")
async def price_v1(sku: str) -> Price:
    return Price(total=12.5)


@tool(name="price")
async def price_v2(sku: str) -> PriceText:
    return PriceText(total="12.50")


SOURCE = """
process fulfill(order: any) {
  q = tools.price({ sku: order.sku })?
  page = tools.read({ path: order.sku })?
  both = await { left: tools.read({ path: "a" })?, right: tools.read({ path: "b" })? }
  pages = await [tools.read({ path: u })? for u in order.urls]
  go = wait_signal("go")
  done = tools.read({ path: "after" })?
  finish [q, page, both, pages, done]
}
"""
ORDER = {"order": {"sku": "s1", "urls": ["u1", "u2", "u3"]}}


def line_of(source: str, text: str) -> int:
    return source[:source.index(text)].count("\n") + 1


async def park_runs(db: str, count: int = 2) -> list[str]:
    async with Engine(db=db, tools=[read, price_v1]) as engine:
        ids = []
        for _ in range(count):
            outcome = await engine.run(SOURCE, "fulfill", ORDER)
            assert outcome.status.value == "waiting", outcome
            ids.append(outcome.run_id)
        return ids


async def verify(db: str, source: str, tools: list[Any] | None = None, **options: Any) -> Any:
    async with Engine(db=db, tools=tools or [read, price_v1], create=False,
                      readonly=True) as engine:
        return await engine.verify(source, keep_all=True, **options)


@pytest.fixture
async def parked(tmp_path: Path) -> tuple[str, list[str]]:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    return db, await park_runs(db)


async def test_an_edit_after_where_runs_stand_is_compatible(parked: tuple[str, list[str]]) -> None:
    db, ids = parked
    edited = SOURCE.replace('done = tools.read({ path: "after" })?',
                            'done = tools.read({ path: "elsewhere", retry: true })?')
    report = await verify(db, edited)
    assert report.counts == {"compatible": 2, "incompatible": 0, "unknown": 0}
    assert {v.run_id for v in report.verdicts} == set(ids)
    verdict = report.verdicts[0]
    assert "waits for signal 'go'" in verdict.reason
    assert verdict.line == line_of(edited, 'wait_signal("go")')


@pytest.mark.parametrize("name, old, new, at, paths", [
    ("changed argument", "tools.read({ path: order.sku })", "tools.read({ path: order.sku + \"!\" })",
     "tools.read({ path: order.sku", ["$.path"]),
    ("reordered batch",
     'await { left: tools.read({ path: "a" })?, right: tools.read({ path: "b" })? }',
     'await { right: tools.read({ path: "b" })?, left: tools.read({ path: "a" })? }',
     'tools.read({ path: "b" })', ["$.path"]),
    ("changed fan-out width", "for u in order.urls]", "for u in order.urls if u != \"u2\"]",
     "tools.read({ path: u })", []),
])
async def test_an_incompatible_edit_names_the_step_line_and_paths(
        parked: tuple[str, list[str]], name: str, old: str, new: str, at: str,
        paths: list[str]) -> None:
    db, _ = parked
    edited = SOURCE.replace(old, new)
    assert edited != SOURCE
    report = await verify(db, edited)
    assert report.counts["incompatible"] == 2, (name, report.to_json())
    verdict = report.verdicts[0]
    assert verdict.verdict == "incompatible" and verdict.step
    assert verdict.line == line_of(edited, at), (name, verdict)
    assert verdict.paths == paths, (name, verdict)
    assert verdict.recorded is not None and verdict.recorded["kind"] == "tool"
    if name == "changed fan-out width":
        assert "fan-out of 3 calls but the code now forms 2" in verdict.reason


async def test_a_removed_call_is_the_recorded_step_no_longer_reached(
        parked: tuple[str, list[str]]) -> None:
    db, _ = parked
    edited = SOURCE.replace("  page = tools.read({ path: order.sku })?\n", "  page = 0\n")
    report = await verify(db, edited)
    assert report.counts["incompatible"] == 2
    verdict = report.verdicts[0]
    assert "no longer reaches" in verdict.reason
    assert verdict.recorded == {**verdict.recorded, "kind": "tool", "tool": "tools.read",
                                "args": {"path": "s1"}}
    assert verdict.recorded_at == f"{line_of(SOURCE, 'page = tools.read')}:{10}"
    assert verdict.line == line_of(edited, 'wait_signal("go")')  # where the edit goes instead


async def test_a_tool_output_schema_change_is_incompatible(parked: tuple[str, list[str]]) -> None:
    db, _ = parked
    report = await verify(db, SOURCE, tools=[read, price_v2])
    assert report.counts["incompatible"] == 2
    verdict = report.verdicts[0]
    assert verdict.paths == ["$.total"] and "output schema" in verdict.reason
    assert verdict.line == line_of(SOURCE, "tools.price")
    assert verdict.recorded["outcome"]["value"] == {"total": 12.5}


async def test_a_removed_process_and_a_failing_edit(parked: tuple[str, list[str]]) -> None:
    db, ids = parked
    report = await verify(db, SOURCE.replace("process fulfill", "process other"),
                          process="fulfill")
    assert report.counts["incompatible"] == 2
    assert "no process `fulfill`" in report.verdicts[0].reason
    failing = SOURCE.replace("  go = wait_signal", "  boom = [1, 2][q.total]\n  go = wait_signal")
    report = await verify(db, failing, runs=[ids[0]])
    assert report.counts == {"compatible": 0, "incompatible": 0, "unknown": 1}
    assert "fails at" in report.verdicts[0].reason


def _written(path: Path) -> tuple[str, int]:
    """The database file's digest and the bytes of its write-ahead log (a WAL reader
    makes an empty log and a shared-memory index beside it: no data)."""
    wal = path.with_name(path.name + "-wal")
    return (hashlib.sha256(path.read_bytes()).hexdigest(),
            wal.stat().st_size if wal.exists() else 0)


async def test_verify_writes_nothing_to_a_sqlite_file_opened_read_only(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    await park_runs(f"sqlite:///{path}", 3)
    before = _written(path)
    assert before[1] == 0  # the writer checkpointed everything when it closed
    async with Engine(db=f"sqlite:///{path}?mode=ro", tools=[read, price_v1],
                      create=False) as engine:
        assert engine.store.readonly
        report = await engine.verify(SOURCE.replace('"after"', '"later"'))
        assert report.counts["compatible"] == 3
        with pytest.raises(DbError, match="readonly|read-only"):  # the file refuses writes
            await engine.store.put_setting("probe", "x")
    assert _written(path) == before


async def test_verify_writes_nothing_on_postgresql_under_a_read_only_role() -> None:
    role = f"lashflow_ro_{uuid.uuid4().hex[:12]}"
    async with schema_url() as url:
        await park_runs(url, 2)
        schema = dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&"))["search_path"]
        admin = await asyncpg.connect(postgres_base_url(), timeout=30)
        try:
            await admin.execute(f"CREATE ROLE {role} LOGIN")
            await admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            await admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
            counts = await _row_counts(admin, schema)
            base = postgres_base_url()
            user, _, rest = base.partition("://")[2].partition("@")
            ro_url = with_query(f"postgresql://{role}@{rest}", search_path=schema)
            async with Engine(db=ro_url, tools=[read, price_v1], create=False,
                              readonly=True) as engine:
                report = await engine.verify(SOURCE.replace("order.sku })", '"x" })'))
                assert report.counts == {"compatible": 0, "incompatible": 2, "unknown": 0}
                with pytest.raises(DbError):
                    await engine.store.put_setting("probe", "x")
            assert await _row_counts(admin, schema) == counts
        finally:
            await admin.execute(f"DROP OWNED BY {role}")
            await admin.execute(f"DROP ROLE IF EXISTS {role}")
            await admin.close()


async def _row_counts(conn: Any, schema: str) -> dict[str, Any]:
    tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    return {t["tablename"]: await conn.fetchval(f'SELECT count(*) FROM {schema}."{t["tablename"]}"')
            for t in tables}
