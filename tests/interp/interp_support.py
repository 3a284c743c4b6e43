"""Shared helpers of the runtime tests: source -> Program, run on MemoryHost."""

from __future__ import annotations

from lashflow.lang.catalog import Catalog
from lashflow.interp.compiler import compile_module
from lashflow.testing.memory_host import MemoryHost


def build(source: str, tools: dict | None = None):
    from lashflow.lang import link, parse

    module = parse(source)
    catalog = Catalog.permissive({"tools": sorted(tools or {}) or ["noop"]})
    module = link(module, catalog)
    return compile_module(module, catalog)


async def run(source: str, tools: dict | None = None, signals: dict | None = None, **kw):
    host = MemoryHost(build(source, tools), tools or {}, signals, **kw)
    return host, await host.run()
