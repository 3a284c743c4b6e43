"""Commands for the language itself: check, fmt, lsp, graph."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..errors import UsageError
from .context import Invocation
from .exits import caret_text, fail, run_async
from .options import DbOption, JsonOption, ToolsOption, no_run, read_source, source_or_none
from .output import dumps, stderr, stdout

if TYPE_CHECKING:
    from ..durable.checking import FileCheck


def check(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to check.", show_default=False),
    tools: list[str] = ToolsOption,
    as_json: bool = JsonOption,
) -> None:
    """Parse and link a file against the tools it would run with; run nothing.

    Exit 0 if it is fine, 2 with the diagnostic (and a caret under the place) if not.
    """
    from ..durable.engine import Engine

    inv = Invocation.of(ctx, as_json)

    async def go() -> FileCheck:
        return Engine.check_file(file, tools)

    found = run_async(inv, go)
    if not found.ok:
        if as_json:
            stdout(dumps({"run_id": None, "status": "rejected", "ok": False,
                          "error": found.diagnostics[0].to_dict(),
                          "diagnostics": [d.to_dict() for d in found.diagnostics]}))
        else:
            for d in found.diagnostics:
                stderr(caret_text(d, found.text, str(file)))
        raise typer.Exit(2)
    if as_json:
        stdout(dumps({"run_id": None, "status": "ok", "ok": True, "file": str(file),
                      "main": found.main, "processes": found.processes,
                      "fan_outs": found.fan_outs, "diagnostics": []}))
    else:
        entry = ["main block"] if found.main else []
        entry += [f"process {p['name']}({', '.join(p['params'])})" for p in found.processes]
        stdout(f"{file}: ok ({'; '.join(entry) or 'empty'})")
        for batch in found.fan_outs:
            stdout(f"  line {batch['line']}: fan-out {batch['fan_out']} (one concurrent batch)")
    raise typer.Exit(0)


def fmt(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", show_default=False,
                                       help=".lash files, or folders to search for them."),
    check: bool = typer.Option(False, "--check", help="Write nothing; name the files that "
                               "would change and exit 1 if there are any (for CI)."),
    diff: bool = typer.Option(False, "--diff", help="Write nothing; print what would change."),
) -> None:
    """Rewrite .lash files in the one canonical layout (comments kept, meaning unchanged).

    Names each file it changes; exit 2 if a file cannot be read or does not parse.
    """
    from ..fmt import format_paths

    raise typer.Exit(format_paths(paths, check=check, diff=diff, out=stdout, err=stderr))


def lsp(tools: list[str] = ToolsOption) -> None:
    """Run the Lashlang language server on stdin/stdout, for editors (docs/editors.md)."""
    from ..lsp import serve

    serve(tools)


def graph(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="FILE",
                                help="The .lash file to draw.", show_default=False),
    fmt: str = typer.Option("mermaid", "--format", metavar="FORMAT",
                            help="mermaid (default) or dot."),
    run: Optional[str] = typer.Option(None, "--run", metavar="RUN",
                                      help="Colour the steps by this run's journal (and its "
                                           "child runs')."),
    process: Optional[str] = typer.Option(None, "--process", "-p", metavar="NAME",
                                          help="Only this process (default: every process and "
                                               "the main block)."),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """The process as a graph (Mermaid or Graphviz DOT): its steps (tool calls, starts,
    sleeps, signals, awaits), branches, loops and batches, titled by @label.

    With --json: {"run_id", "status": "ok", "format", "text", "nodes", "edges"}, each
    node with its kind, label, state and executions."""
    from ..lang.graph import GraphError, build_graph, node_state, render, site_states

    inv = Invocation.of(ctx, as_json)
    if fmt not in ("mermaid", "dot"):
        fail("usage_error", f"--format must be mermaid or dot, not {fmt!r}", as_json)
    text = source_or_none(file)

    async def go() -> int:
        source = read_source(file)
        states: dict[str, list[str]] = {}
        if run is not None:
            from ..durable.programs import source_digest

            async with inv.engine(db, create=False, absent=no_run(run)) as eng:
                states = await site_states(eng, run)
                if (await eng.get_record(run)).source_hash != source_digest(source):
                    stderr(f"warning: run {run} was started from another version of {file}; "
                           "steps are matched by their place in the process")
        try:
            drawing = build_graph(source, process=process)
        except GraphError as exc:
            raise UsageError(str(exc)) from None
        shown = states if run is not None else None
        text_out = render(drawing, fmt, shown)
        if not as_json:
            stdout(text_out)
            return 0
        nodes = []
        for node in drawing.nodes.values():
            state, runs = node_state(node, shown) if shown is not None else (None, 0)
            nodes.append({"id": node.id, "kind": node.kind, "label": node.label,
                          "sites": node.sites, "state": state, "executions": runs})
        stdout(dumps({"run_id": run, "status": "ok", "format": fmt, "text": text_out,
                      "nodes": nodes, "edges": [{"from": a, "to": b, "label": label}
                                                for a, b, label in drawing.edges]}))
        return 0

    raise typer.Exit(run_async(inv, go, text, str(file), run))

