"""A project's configuration names a process's default queue and key (issue 31):
``[tool.lashflow.processes.NAME]`` (or ``"*"``) in ``lashflow.toml``/``pyproject.toml``
beside or above the ``.lash`` file. A run submitted without a queue enters it, its key
filled from its input; a queue given at submit wins; mistakes are ``queue_invalid``."""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine, LashflowError

FLOW = """
process handle_order(customer: { id: int, region: str }, total: int) {
  finish total
}

process report(day: str) {
  finish day
}
"""

CONFIG = """
[tool.lashflow.processes.handle_order]
queue = "orders"
key = "c{customer.id}-{customer.region}"
priority = 2

[tool.lashflow.processes."*"]
queue = "default"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "lashflow.toml").write_text(CONFIG)
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "shop.lash").write_text(FLOW)
    return folder / "shop.lash"


async def test_a_run_enters_its_process_default_queue_with_its_key(backend_url: str,
                                                                   project: Path) -> None:
    async with Engine(db=backend_url) as engine:
        await engine.queues.create("orders", concurrency_per_key=1, priority_levels=3)
        await engine.queues.create("default")
        order = await engine.create(project, "handle_order",
                                    input={"customer": {"id": 17, "region": "eu"}, "total": 5})
        assert order.meta["queue"] == {"name": "orders", "key": "c17-eu", "priority": 2}
        other = await engine.create(project, "report", input={"day": "mon"})
        assert other.meta["queue"]["name"] == "default" and other.meta["queue"]["key"] == ""
        chosen = await engine.create(project, "handle_order", queue="default", key="k",
                                     input={"customer": {"id": 1, "region": "us"}, "total": 1})
        assert chosen.meta["queue"]["name"] == "default" and chosen.meta["queue"]["key"] == "k"
        runs = await engine.runs(queue="orders", key="c17-eu")
        assert [run.run_id for run in runs.runs] == [order.run_id]
        # the file's text, not its path: no project, no queue
        plain = await engine.create(FLOW, "report", input={"day": "tue"})
        assert "queue" not in plain.meta


async def test_a_key_from_a_field_the_input_lacks_is_refused(backend_url: str,
                                                             project: Path) -> None:
    (project.parent.parent / "lashflow.toml").write_text(
        CONFIG.replace("{customer.region}", "{customer.zone}"))
    async with Engine(db=backend_url) as engine:
        await engine.queues.create("orders", priority_levels=3)
        with pytest.raises(LashflowError) as refused:
            await engine.create(project, "handle_order",
                                input={"customer": {"id": 1, "region": "eu"}, "total": 1})
        assert refused.value.code == "queue_invalid"
        assert "'customer.zone'" in refused.value.message
        assert await engine.store.list_runs() == []


@pytest.mark.parametrize("table, says", [
    ('[tool.lashflow.processes.report]\nkey = "x"\n', 'give at least queue = "NAME"'),
    ('[tool.lashflow.processes.report]\nqueue = "q"\nweight = 3\n', "unknown setting 'weight'"),
    ('[tool.lashflow.processes.report]\nqueue = "q"\nkey = "{a b}"\n', "{field.path} parts"),
    ('[tool.lashflow.processes.report]\nqueue = "q"\npriority = "high"\n', "whole number"),
])
async def test_a_bad_configuration_is_one_clear_error(tmp_path: Path, project: Path, table: str,
                                                      says: str) -> None:
    (project.parent.parent / "lashflow.toml").write_text(table)
    async with Engine(db=str(tmp_path / "db.sqlite")) as engine:
        with pytest.raises(LashflowError) as refused:
            await engine.create(project, "report", input={"day": "mon"})
    assert refused.value.code == "queue_invalid" and says in refused.value.message
    assert "lashflow.toml [tool.lashflow.processes] report" in refused.value.message
