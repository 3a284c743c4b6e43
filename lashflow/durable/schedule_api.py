"""``engine.schedules``: make, change and look at schedules from Python. What to start
is compiled and checked here, once, when the schedule is made or changed (the same
checks as ``engine.create``); the firing itself is ``schedules.Scheduler``'s."""

from __future__ import annotations

import os
from typing import Any

from ..errors import UnknownSchedule, UsageError
from ..schedules.spec import ScheduleSpec, parse_moment
from .outcome import RunSummary
from .schedules import BackfillReport, ScheduleInfo, Scheduler, spec_from_options


class Schedules:
    """``await engine.schedules.create("nightly", "report.lash", cron="30 2 * * *",
    tz="Europe/Berlin")``. Durations are seconds or text like ``"5m"``; times are epoch
    seconds or RFC 3339 text (without an offset: in the schedule's zone)."""

    def __init__(self, engine: Any, scheduler: Scheduler) -> None:
        """``engine``: the ``Engine`` this belongs to (its compile checks and tools)."""
        self._engine = engine
        self.scheduler = scheduler

    async def _target(self, source_or_path: str | os.PathLike[str], process: str | None,
                      input: Any) -> dict[str, Any]:
        engine = self._engine
        source, compiled, process_name, data, input_hash, _ = await engine._prepare(
            source_or_path, process, input)
        await engine.store.put_source(compiled.source_hash, source.text)
        return {"source_hash": compiled.source_hash, "process": process_name, "input": data,
                "input_hash": input_hash, "file": source.path,
                "tool_modules": sorted(engine.tools.loaded_modules)}

    async def create(self, name: str, source_or_path: str | os.PathLike[str],
                     process: str | None = None, *, input: Any = None, cron: str | None = None,
                     every: str | float | None = None, tz: str = "UTC",
                     jitter: str | float = 0, overlap: str = "skip",
                     catchup_window: str | float = 60, start: str | float | None = None,
                     end: str | float | None = None, queue: str | None = None,
                     key: str | None = None) -> ScheduleInfo:
        """A new schedule (``ScheduleExists`` if the name is taken): exactly one of
        ``cron`` (five fields, or six with seconds first) and ``every``. With ``queue``
        (and ``key``) its runs enter that queue and start when it allows."""
        spec = spec_from_options(cron=cron, every=every, tz=tz, jitter=jitter, overlap=overlap,
                                 catchup_window=catchup_window, start=start, end=end)
        from ..schedules.spec import check_name

        check_name(name)
        target = await self._target(source_or_path, process, input)
        if queue is not None:
            target["queue"] = await self._queue_entry(queue, key)
        elif key is not None:
            raise UsageError("a key needs a queue (--queue NAME --key K)")
        await self.scheduler.create(name, spec, target)
        return await self.get(name)

    async def _queue_entry(self, queue: str, key: str | None) -> dict[str, Any]:
        entry, _ = await self._engine.queues.entry(queue, key, None, None)
        return dict(entry)

    async def get(self, name: str, *, runs: int = 10, fires: int = 5) -> ScheduleInfo:
        """The schedule, its next ``fires`` fire times and its latest ``runs`` runs."""
        return await self.scheduler.info(name, runs=runs, fires=fires)

    async def runs(self, name: str, limit: int = 50) -> list[RunSummary]:
        """The runs the schedule started, newest first (as ``engine.runs`` lists runs)."""
        await self.scheduler.info(name, runs=0, fires=0)  # an unknown name is an error
        runs: list[RunSummary] = await self._engine.reads.schedule_runs(name, limit)
        return runs

    async def pause(self, name: str, note: str | None = None) -> ScheduleInfo:
        await self.scheduler.pause(name, note)
        return await self.get(name)

    async def resume(self, name: str) -> ScheduleInfo:
        await self.scheduler.resume(name)
        return await self.get(name)

    async def trigger(self, name: str) -> str:
        """Start a run now (whatever the overlap policy); returns its run id."""
        return await self.scheduler.trigger(name)

    async def backfill(self, name: str, start: str | float, end: str | float) -> BackfillReport:
        info = await self.scheduler.info(name, runs=0, fires=0)
        return await self.scheduler.backfill(name, parse_moment(start, info.spec.tz, "--from"),
                                             parse_moment(end, info.spec.tz, "--to"))

    async def update(self, name: str, source_or_path: str | os.PathLike[str] | None = None,
                     process: str | None = None, *, input: Any = None, queue: str | None = None,
                     key: str | None = None, **options: Any) -> ScheduleInfo:
        """Change the spec (any ``create`` option; ``cron`` replaces ``every`` and the
        reverse) and/or what it starts (a new source, process, input, queue or key in
        its queue)."""
        info = await self.scheduler.info(name, runs=0, fires=0)
        spec: ScheduleSpec | None = None
        if options:
            current = info.spec.to_json()
            if options.get("cron") is not None:
                current["every"] = None
            if options.get("every") is not None:
                current["cron"] = None
            current.update({k: v for k, v in options.items() if v is not None})
            spec = spec_from_options(**current)
        target = None
        if any(given is not None for given in (source_or_path, process, input, queue, key)):
            source = source_or_path if source_or_path is not None else info.file
            if source is None:
                row = await self._engine.store.get_schedule(name)
                if row is None:
                    raise UnknownSchedule(f"no schedule named {name!r}", schedule=name)
                source = await self._engine.store.get_source(row.definition["source_hash"])
            target = await self._target(source, process if process is not None else info.process,
                                        input if input is not None else info.input)
            current = info.queue or {}
            if queue is not None or key is not None:
                if queue is None and not current:
                    raise UsageError(f"schedule {name!r} enters no queue: give --queue with "
                                     "--key")
                target["queue"] = await self._queue_entry(
                    queue if queue is not None else current["name"],
                    key if key is not None else current.get("key"))
            elif current:
                target["queue"] = current
        await self.scheduler.update(name, spec, target)
        return await self.get(name)

    async def delete(self, name: str) -> None:
        """Delete the schedule; the runs it started stay."""
        await self.scheduler.delete(name)

    async def list(self) -> list[ScheduleInfo]:  # last: `list` names the builtin above it
        """Every schedule, by name, with its next fire time and counts."""
        return await self.scheduler.infos()


__all__ = ["Schedules"]
