"""Latency of ``lashflow lsp`` on a 2,000-line file, as an editor sees it.

A real server process (``python -m lashflow lsp``) is driven over stdio by pygls's
client. The file is ~110 processes of tool calls, loops and conditionals, with its tools
in the ``.py`` beside it. Measured from the client, each sample is the wall time of:

* diagnostics after an edit: ``didChange`` (one character typed or deleted in a
  process body, every other edit making a link error and the next one mending it) until
  ``publishDiagnostics`` arrives;
* the same for an edit in the main block at the end of the file (the server re-parses
  the main block's statements from the one before the edit);
* the same for an edit that leaves a bracket open, which the server answers by parsing
  the whole text again (the fallback: it is reported, not part of the goal);
* completion after ``tools.``, and inside a call's ``{ ... }``;
* hover on a tool name;
* completion and hover again, each the first request after an edit (the server then
  rebuilds its index of names: only the item the edit re-parsed is indexed again).

Goal: p95 under 50 ms for diagnostics after an edit, completion and hover.

Run: python bench/bench_lsp.py [--lines 2000] [--samples 100]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.client import BaseLanguageClient

TOOLS = '''from lashflow import tool


@tool
async def quote(order_id: str, qty: int) -> dict:
    """Price an order line."""
    return {"amount": qty * 2.5}


@tool
async def charge(amount: float, label: str = "") -> dict:
    """Charge an amount."""
    return {"charged": amount}
'''


def process(i: int) -> list[str]:
    return [
        f"# step {i}",
        f"process step{i}(order_id: str, n: int) -> int {{",
        "  priced = await tools.quote({ order_id: order_id, qty: n })?",
        "  total = 0",
        "  for item in range(n) {",
        "    total = total + item * 2 - n % 3",
        "    if total > 100 { break } else { continue }",
        "  }",
        '  label = total > 10 ? "big" : "small"',
        "  receipt = await tools.charge({ amount: priced.amount, label: label })",
        "  if not receipt.ok { fail receipt.error }",
        '  sleep for "5s"',
        "  finish total",
        "}",
        "",
    ]


def program(lines: int) -> str:
    out: list[str] = []
    i = 0
    while len(out) + 15 < lines - 3:
        out += process(i)
        i += 1
    while len(out) < lines - 2:
        out.append(f"pad{len(out)} = {len(out)}")
    out += ['h = start step0(order_id: "o1", n: 3)', "finish (await h)?"]
    return "\n".join(out) + "\n"


def pos(text: str, offset: int) -> T.Position:
    line = text.count("\n", 0, offset)
    return T.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


class Bench:
    def __init__(self, client: BaseLanguageClient, uri: str, text: str) -> None:
        self.client, self.uri, self.text, self.version = client, uri, text, 1
        self.published: asyncio.Queue[T.PublishDiagnosticsParams] = asyncio.Queue()

    async def edit(self, start: int, end: int, new: str) -> tuple[float, int]:
        begin, stop = pos(self.text, start), pos(self.text, end)
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        t0 = time.perf_counter()
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(
                range=T.Range(start=begin, end=stop), text=new)]))
        got = await asyncio.wait_for(self.published.get(), 60)
        return time.perf_counter() - t0, len(got.diagnostics)

    async def request(self, kind: str, offset: int) -> float:
        doc = T.TextDocumentIdentifier(uri=self.uri)
        at = pos(self.text, offset)
        t0 = time.perf_counter()
        if kind == "completion":
            result = await self.client.text_document_completion_async(
                T.CompletionParams(text_document=doc, position=at))
            assert result is not None and len(result.items) > 0
        else:
            hover = await self.client.text_document_hover_async(
                T.HoverParams(text_document=doc, position=at))
            assert hover is not None
        return time.perf_counter() - t0


def row(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    verdict = "ok" if p95 < 50 else "OVER"
    return (f"{name:<34} {len(ms):>4} {statistics.median(ms):>8.1f} {p95:>8.1f} "
            f"{ms[-1]:>8.1f}  {verdict}")


async def run(lines: int, samples: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench_lsp_"))
    text = program(lines)
    (folder / "orders.lash").write_text(text)
    (folder / "orders.py").write_text(TOOLS)
    client = BaseLanguageClient("bench-lsp", "1")
    uri = (folder / "orders.lash").as_uri()
    bench = Bench(client, uri, text)

    @client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: T.PublishDiagnosticsParams) -> None:
        bench.published.put_nowait(params)

    await client.start_io(sys.executable, "-m", "lashflow", "lsp")
    await client.initialize_async(T.InitializeParams(capabilities=T.ClientCapabilities(),
                                                     root_uri=folder.as_uri()))
    client.initialized(T.InitializedParams())
    t0 = time.perf_counter()
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="lashlang", version=1, text=text)))
    first = await asyncio.wait_for(bench.published.get(), 120)
    opened = time.perf_counter() - t0
    assert not first.diagnostics, first.diagnostics
    rnd = random.Random(1)

    body_edits: list[float] = []
    errors = 0
    for _ in range(samples):  # type "x" after a `total`, then delete it again
        at = bench.text.index("  finish total", rnd.randrange(len(bench.text) // 2)) + len("  finish total")
        took, found = await bench.edit(at, at, "x")
        body_edits.append(took)
        errors += found
        took, found = await bench.edit(at, at + 1, "")
        body_edits.append(took)
        assert found == 0
    assert errors == samples  # `totalx` is an unknown name each time

    main_edits: list[float] = []
    for _ in range(max(10, samples // 5)):
        at = bench.text.index("finish (await h)?")
        main_edits.append((await bench.edit(at + 6, at + 6, " "))[0])
        main_edits.append((await bench.edit(at + 6, at + 7, ""))[0])

    open_bracket: list[float] = []
    for _ in range(10):
        at = bench.text.index("  finish total", rnd.randrange(len(bench.text) // 2)) + 2
        open_bracket.append((await bench.edit(at, at, "("))[0])
        open_bracket.append((await bench.edit(at, at + 1, ""))[0])

    tools_at = [bench.text.index("tools.quote", rnd.randrange(len(bench.text) // 2)) for _ in range(samples)]
    completion = [await bench.request("completion", at + len("tools.")) for at in tools_at]
    fields = [await bench.request("completion", bench.text.index("qty: n }", at) ) for at in tools_at]
    hover = [await bench.request("hover", at + len("tools.q")) for at in tools_at]
    after_edit: list[float] = []
    hover_after_edit: list[float] = []
    for at in tools_at:  # each request first in line after an edit elsewhere
        edit_at = bench.text.index("  finish total", rnd.randrange(len(bench.text) // 2))
        await bench.edit(edit_at, edit_at, " ")
        after_edit.append(await bench.request("completion", at + len("tools.")))
        await bench.edit(edit_at, edit_at + 1, "")
        hover_after_edit.append(await bench.request("hover", at + len("tools.q")))

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()

    print(f"file: {text.count(chr(10))} lines, {len(text):,} characters; first diagnostics "
          f"after open (tools loaded in a child process): {opened * 1000:.0f} ms")
    print(f"{'operation':<34} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  goal p95<50")
    print(row("diagnostics after an edit (body)", body_edits))
    print(row("  same, edit in the main block", main_edits))
    print(row("  fallback: a bracket left open", open_bracket))
    print(row("completion after `tools.`", completion))
    print(row("completion of a call's fields", fields))
    print(row("hover on a tool", hover))
    print(row("completion, first after an edit", after_edit))
    print(row("hover, first after an edit", hover_after_edit))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()
    asyncio.run(run(args.lines, args.samples))


if __name__ == "__main__":
    main()
