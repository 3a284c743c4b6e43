"""Journal fixtures: recorded runs (a ``lashflow export`` document) as regression tests.

Production runs, exported with ``lashflow export RUN... > tests/runs.json`` and kept
beside the tests, are replayed against the current source by ``Replayer``: nothing runs,
each recorded step must be what the code asks now. ``assert_replays`` fails with every run
that no longer replays, where and why, as ``lashflow verify`` reports it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

from lashflow.durable.timeline import one_line
from lashflow.json_text import line_sorted

if TYPE_CHECKING:
    from lashflow.durable.verify import Verdict


def exported_runs(document: Any) -> list[str]:
    """The run ids of an export (a dict, JSON text or a file path): for
    ``pytest.mark.parametrize``, one test per recorded run."""
    from lashflow.durable.export import load_document

    return [exported.run.run_id for exported in load_document(document)]


def replay(source_or_path: str | os.PathLike[str], document: Any, *, run: str | None = None,
           tools: Iterable[Any] = (), modules: Iterable[str] = ()) -> "list[Verdict]":
    """The verdict of every run of ``document`` (or of run ``run``) under the source."""
    from .replayer import Replayer

    verdicts = Replayer(source_or_path, tools=tools, modules=modules).replay(document)
    if run is None:
        return verdicts
    found = [verdict for verdict in verdicts if verdict.run_id == run]
    if not found:
        raise AssertionError(f"the export holds no run {run!r} (it holds "
                             f"{', '.join(v.run_id for v in verdicts) or 'none'})")
    return found


def assert_replays(source_or_path: str | os.PathLike[str], document: Any, *,
                   run: str | None = None, tools: Iterable[Any] = (),
                   modules: Iterable[str] = ()) -> "list[Verdict]":
    """Every recorded run (or run ``run``) replays against the source; returns the
    verdicts. Fails naming each run that does not: the step, the line in the source, the
    JSON paths that differ and what the journal recorded."""
    verdicts = replay(source_or_path, document, run=run, tools=tools, modules=modules)
    bad = [verdict for verdict in verdicts if verdict.verdict != "compatible"]
    if bad:
        shown = source_or_path if isinstance(source_or_path, os.PathLike) or (
            isinstance(source_or_path, str) and source_or_path.endswith(".lash")) else "the source"
        lines = [f"{len(bad)} of {len(verdicts)} recorded run(s) no longer replay against "
                 f"{shown}:"]
        lines += [line for verdict in bad for line in _described(verdict)]
        raise AssertionError("\n".join(lines))
    return verdicts


def _described(verdict: "Verdict") -> list[str]:
    where = f" at step {verdict.step}" if verdict.step else ""
    if verdict.line:
        where += f", line {verdict.line}:{verdict.column}"
    lines = [f"  run {verdict.run_id} ({verdict.process or 'main block'}, {verdict.status}): "
             f"{verdict.verdict}{where}", f"    {verdict.reason}"]
    recorded = verdict.recorded or {}
    if "args" in recorded:
        lines.append(f"    recorded: {recorded.get('tool') or recorded.get('kind')} "
                     f"{one_line(line_sorted(recorded['args']), 100)}")
    return lines


__all__ = ["assert_replays", "exported_runs", "replay"]
