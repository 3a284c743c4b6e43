"""Deployed versions of processes, and moving runs to newer ones where it is safe.

A run stores the exact source it runs (content-addressed) and never changes code by
itself. ``deploy`` records, per process of a file, a numbered version: the source hash,
a content hash (of the source and the schemas of the tools it calls) and those schemas.
Runs started by process name run the latest version and record its number. ``upgrade``
moves a run to another version only where replaying its journal against that version
says ``compatible``, in one atomic write that also keeps the version it came from.
"""

from __future__ import annotations

import builtins
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from ..errors import LashflowError, UsageError
from ..lang.changes import operations_called
from ..store import Store
from ..tools.clock import Clock
from .canonical import digest
from .programs import Compiled, Programs
from .reads import Reads
from .tool_runner import ToolRunner
from .verifier import Verifier
from .verify import COMPATIBLE, Verdict


@dataclass(slots=True)
class Deployment:
    """One numbered version of a process."""

    process: str
    version: int
    source_hash: str
    content_hash: str
    tools: dict[str, Any] = field(default_factory=dict)  # "module.op" -> input/output schemas
    deployed_at: float = 0.0
    created: bool = False  # made by this deploy (False: the same content was the latest)
    modules: list[str] = field(default_factory=list)  # the tool modules it was deployed with

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Upgrade:
    """What ``upgrade`` did (or, dry, would do) with one run."""

    run_id: str
    process: str | None
    from_version: int | None
    to_version: int
    verdict: str
    moved: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Versions:
    def __init__(self, store: Store, tools: ToolRunner, programs: Programs, reads: Reads,
                 verifier: Verifier, clock: Clock) -> None:
        self.store = store
        self.tools = tools
        self.programs = programs
        self.reads = reads
        self.verifier = verifier
        self.clock = clock

    def _tool_schemas(self, compiled: Compiled, process: str) -> dict[str, Any]:
        """The input and output schemas of every tool the process calls."""
        decl = compiled.module.process(process)
        called = operations_called(type(compiled.module)(
            compiled.module.source, processes=[decl] if decl is not None else []))
        catalog = self.tools.catalog()
        schemas: dict[str, Any] = {}
        for module, operations in sorted(called.items()):
            for name in sorted(operations):
                found = catalog.operation(module, name)
                if found is not None:
                    schemas[f"{module}.{name}"] = {"input": found.input_schema,
                                                   "output": found.output_schema}
        return schemas

    async def deploy(self, sources: Iterable[Any]) -> list[Deployment]:
        """A new version of every process of each file whose source or tool schemas
        changed since its latest version (the others keep theirs)."""
        deployed: list[Deployment] = []
        for source_or_path in sources:
            source = self.tools.read_source(source_or_path)
            compiled = self.programs.compile(source.text)
            if not compiled.module.processes:
                raise UsageError(f"{source.path or 'the source'} defines no process to deploy")
            await self.store.put_source(compiled.source_hash, source.text)
            for decl in compiled.module.processes:
                tools = self._tool_schemas(compiled, decl.name)
                content = digest({"source": compiled.source_hash, "process": decl.name,
                                  "tools": tools})
                now = self.clock.now()
                modules = sorted(self.tools.loaded_modules)
                number, created = await self.store.deploy_version(
                    decl.name, compiled.source_hash, content,
                    {"schemas": tools, "modules": modules}, now)
                deployed.append(Deployment(decl.name, number, compiled.source_hash, content,
                                           tools, now, created, modules))
        return deployed

    async def list(self, process: str | None = None) -> builtins.list[Deployment]:
        found = []
        for row in await self.store.versions(process):
            stored = row.pop("tools")
            found.append(Deployment(**row, tools=stored.get("schemas", {}),
                                    modules=stored.get("modules", [])))
        return found

    async def version(self, process: str, number: int | None = None) -> Deployment:
        """A version of ``process`` (default: its latest); ``unknown_version`` if none."""
        found = await self.list(process)
        if not found:
            raise UsageError(f"no deployed version of process `{process}`",
                             code="unknown_version", hint="deploy it: lashflow deploy FILE")
        if number is None:
            return found[-1]
        for deployment in found:
            if deployment.version == number:
                return deployment
        raise UsageError(f"process `{process}` has no version {number} (versions 1 to "
                         f"{found[-1].version})", code="unknown_version")

    async def compiled(self, deployment: Deployment) -> Compiled:
        """The version's program, linked against its tools (the modules it was deployed
        with are loaded where this machine has them)."""
        self.tools.load_modules(deployment.modules)
        text = await self.store.get_source(deployment.source_hash)
        if text is None:
            raise LashflowError(f"the source of version {deployment.version} of "
                                f"`{deployment.process}` is missing from the database",
                                code="db_error")
        return self.programs.compile(text)

    async def upgrade(self, run_ids: Iterable[str], to: int | None = None, *,
                      dry_run: bool = False) -> builtins.list[Upgrade]:
        """Move each run to version ``to`` of its process (default: the latest) where a
        replay against it says compatible; one atomic write per run."""
        done: builtins.list[Upgrade] = []
        for run_id in run_ids:
            run = await self.reads.require(run_id)
            current = run.meta.get("version")
            if run.process is None:
                done.append(Upgrade(run_id, None, current, to or 0, "unknown", False,
                                    "a run of a main block has no deployed versions"))
                continue
            target = await self.version(run.process, to)
            if current == target.version and run.source_hash == target.source_hash:
                done.append(Upgrade(run_id, run.process, current, target.version, COMPATIBLE,
                                    False, f"already on version {target.version}"))
                continue
            verdict = await self._verify(run, target)
            moved, reason = False, verdict.reason
            if verdict.verdict == COMPATIBLE and not dry_run:
                outcome = await self.store.move_run(
                    run.run_id, run.source_hash, target.source_hash,
                    _record_move(current, run.source_hash, target, self.clock.now()),
                    self.clock.now())
                moved = outcome == "moved"
                reason = (f"moved to version {target.version}" if moved else
                          {"busy": "a worker holds it now: try again",
                           "settled": "it has settled", "changed": "its code changed meanwhile",
                           "unknown": "it is gone"}[outcome])
            elif verdict.verdict == COMPATIBLE:
                reason = f"would move to version {target.version}: {verdict.reason}"
            done.append(Upgrade(run_id, run.process, current, target.version, verdict.verdict,
                                moved, reason))
        return done

    async def _verify(self, run: Any, target: Deployment) -> Verdict:
        """The run against the target version, its recorded outputs checked against the
        output schemas recorded with that version."""
        def schema(module: str, operation: str) -> dict[str, Any] | None:
            found: dict[str, Any] | None = (target.tools.get(f"{module}.{operation}")
                                            or {}).get("output")
            return found

        return await self.verifier.verdict(await self.verifier.entry(run),
                                           await self.compiled(target), schema)


def _record_move(current: int | None, source_hash: str, target: Deployment, now: float) -> Any:
    """The meta edit of a move: the new version, and the one left (to undo it)."""
    def edit(meta: dict[str, Any]) -> None:
        meta.setdefault("previous_versions", []).append(
            {"version": current, "source_hash": source_hash, "until": now})
        meta["version"] = target.version

    return edit


__all__ = ["Deployment", "Upgrade", "Versions"]
