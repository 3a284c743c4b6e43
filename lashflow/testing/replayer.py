"""``Replayer``: replay recorded runs against a program in a test, running nothing.

A project keeps exported runs (``lashflow export RUN... > runs.json``) as fixtures and
checks every edit of its workflows against them in CI::

    from lashflow.testing import Replayer

    def test_the_edit_keeps_recorded_runs_compatible():
        verdicts = Replayer("flows/fulfill.lash").replay("tests/runs.json")
        assert [v.verdict for v in verdicts if v.verdict != "compatible"] == []

Each run gets the classification ``lashflow verify`` gives (``compatible``,
``incompatible`` with the step, line and JSON paths, or ``unknown`` with the reason).
No tool is called: recorded answers are replayed; tools passed (or the ``.py`` file
beside the program) are used for linking and for their output schemas only. Without
any, every operation the program calls is taken as ``any -> any``.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable

from ..durable.events import Events
from ..durable.export import load_document
from ..durable.programs import Compiled, Programs
from ..durable.tool_runner import ToolRunner
from ..durable.verify import Verdict, verify_run
from ..interp.limits import Limits
from ..lang import Catalog, parse
from ..lang.changes import call_sites, operations_called, site_of
from ..tools.clock import RealClock

__all__ = ["Replayer"]


class Replayer:
    """Replays runs against ``source_or_path`` (a ``.lash`` file or source text).

    ``tools``/``modules``: as for ``Engine`` (decorated functions or tool objects; module
    names or ``.py`` paths)."""

    def __init__(self, source_or_path: str | os.PathLike[str], *, tools: Iterable[Any] = (),
                 modules: Iterable[str] = (), limits: Limits | None = None) -> None:
        self._tools = list(tools)
        self._modules = [str(m) for m in modules]
        self._source_or_path = source_or_path
        self.limits = limits or Limits()
        # registers tools, reads the source (and a .py beside it), binds resources; it
        # never opens a store here
        # no store on purpose: the replayer only registers tools and binds resources
        self._runner = ToolRunner(None, RealClock(), Events())  # type: ignore[arg-type]
        for item in self._tools:
            self._runner.add_tool(item)
        for module in self._modules:
            self._runner.load(module)
        text = self._runner.read_source(source_or_path).text
        catalog = (self._runner.catalog() if len(self._runner.registry)
                   else Catalog.permissive(operations_called(parse(text))))
        self._catalog = catalog
        self.compiled: Compiled = Programs(lambda: catalog).compile(text)

    def replay(self, document_or_run: Any, *, db: str | None = None) -> list[Verdict]:
        """The verdict of every run of an export (a dict, JSON text or a file path), or,
        with ``db``, of the run id(s) given, read from that database read-only."""
        if db is not None:
            ids = [document_or_run] if isinstance(document_or_run, str) else list(document_or_run)
            return self._from_db(db, ids)
        verdicts = []
        for exported in load_document(document_or_run):
            places = {site: (call.line, call.column)
                      for site, call in call_sites(parse(exported.source)).items()}
            verdicts.append(verify_run(
                exported.run, exported.steps, exported.attempts, self.compiled,
                schemas=self._schema, locate=lambda key: places.get(site_of(key)),
                limits=self.limits, now=time.time(), bind=self._binder(exported.run.process)))
        return verdicts

    def _schema(self, module: str, operation: str) -> dict[str, Any] | None:
        found = self._catalog.operation(module, operation)
        return None if found is None else found.output_schema

    def _binder(self, process: str | None) -> Any:
        return lambda args: self._runner.bind_resources(self.compiled.module, process or "", args)

    def _from_db(self, db: str, run_ids: list[str]) -> list[Verdict]:
        from ..durable.engine import Engine

        async def read() -> list[Verdict]:
            async with Engine(db=db, tools=self._tools, modules=self._modules, create=False,
                              readonly=True, limits=self.limits) as engine:
                report = await engine.verify(self._source_or_path, runs=run_ids, keep_all=True)
                return report.verdicts

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(read())
        with ThreadPoolExecutor(1) as pool:  # called from a test that runs a loop already
            return pool.submit(asyncio.run, read()).result()
