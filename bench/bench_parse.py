"""Parse + link speed of the Lashlang front end.

Run: ``python bench/bench_parse.py [--lines 5000] [--earley-lines 500] [--repeat 5]``.

Method
------
* A program of exactly ``--lines`` lines is generated: type declarations, processes with
  loops, conditionals, ternaries, comprehensions, awaited tool calls and `start`s, and a
  main block (about 10 tokens per line, like hand-written workflows).
* ``parse`` (tokenizer + token pass + Lark LALR + AST builder) and ``link`` are timed
  separately, best of ``--repeat`` runs after one warm-up (the LALR tables are built once
  per process and cached on disk by Lark, so the warm-up is what a worker pays once).
* Earley comparison: the token stream the token pass produced for the program is recorded
  (terminal types and values), and fed unchanged to two Lark parsers built from the same
  ``grammar/lashlang.lark``: ``parser="lalr"`` and ``parser="earley"``, each with a custom
  lexer that replays the recorded tokens and without building an AST. Same grammar, same
  tokens, so the ratio is the parsing algorithm alone. Earley runs on a prefix of
  ``--earley-lines`` lines (it is ~300x slower; a full 5,000-line run takes about a
  minute, pass ``--earley-lines 5000`` for it), and its lines/s is compared with LALR's
  lines/s on the same prefix.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lark import Lark  # noqa: E402
from lark.lexer import Lexer  # noqa: E402

from lashflow.lang import Catalog  # noqa: E402
from lashflow.lang.linker import link  # noqa: E402
from lashflow.lang.parser import get_classifier, get_parser, grammar_text, parse  # noqa: E402
from lashflow.lang.tokenpass import TokenPass  # noqa: E402
from lashflow.lang.tokens import tokenize  # noqa: E402

CATALOG = Catalog.permissive({"tools": ["quote", "charge", "read", "notify"]})


def chunk(i: int) -> list[str]:
    """One process and the main-block lines that use it (18 lines)."""
    return [
        f"# step {i}",
        f"process step{i}(order: Order, n: int) -> int {{",
        "  quoted = await tools.quote({ order: order, n: n, tags: [\"a\", \"b\"] })?",
        "  total = 0",
        "  for item in order.items {",
        "    total = total + len(item) * 2 - n % 3",
        "    if total > 100 { break } else { continue }",
        "  }",
        "  label = total > 10 ? \"big\" : \"small\"",
        "  doubled = [x * 2 for x in range(n) if x % 2 == 0]",
        "  receipt = await tools.charge({ amount: order.total, label: label })",
        "  if not receipt.ok { fail receipt.error }",
        "  finish total",
        "}",
        f"r{i} = await tools.read({{ path: \"f{i}.txt\" }})",
        f"h{i} = start step{i}(order: {{ id: \"o{i}\", items: [], total: 1.5 }}, n: {i})",
        f"results = push(results, {{ id: {i}, done: (await h{i})?, text: r{i}.ok }})",
        f"print format(\"{{}} done\", {i})",
    ]


def program(lines: int) -> str:
    out = ["type Order = { id: str, items: list[dict], total: float }", "results = []"]
    i = 0
    while len(out) + 18 <= lines - 1:
        i += 1
        out += chunk(i)
    while len(out) < lines - 1:
        out.append(f"pad{len(out)} = {len(out)} + 1")
    out.append("finish results")
    return "\n".join(out) + "\n"


def best(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


class _Replay(Lexer):
    __future_interface__ = 2

    def __init__(self, conf: Any) -> None:
        pass

    def lex(self, state: Any, parser_state: Any) -> Any:
        return iter(state.text.tokens)


class _Tokens:
    def __init__(self, tokens: list[Any]) -> None:
        self.tokens = tokens
        self.text = ""


def recorded_tokens(source: str) -> list[Any]:
    """The tokens of ``source`` with the terminals the token pass gave them."""
    toks = tokenize(source)
    TokenPass(source, toks).drive(get_classifier().parse_interactive(""))
    return toks[:-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=5000)
    ap.add_argument("--earley-lines", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    source = program(args.lines)
    lines = source.count("\n")
    t0 = time.perf_counter()
    get_parser()
    setup = time.perf_counter() - t0

    t_tok = best(lambda: tokenize(source), args.repeat)
    t_parse = best(lambda: parse(source), args.repeat)
    module = parse(source)
    t_link = best(lambda: link(parse(source), CATALOG), args.repeat) - t_parse
    link(module, CATALOG)
    total = t_parse + t_link
    ntok = len(tokenize(source))

    prefix = program(min(args.earley_lines, args.lines))
    plines = prefix.count("\n")
    tokens = recorded_tokens(prefix)
    lalr = Lark(grammar_text(), parser="lalr", lexer=_Replay)
    earley = Lark(grammar_text(), parser="earley", lexer=_Replay, ambiguity="resolve")
    t_lalr = best(lambda: lalr.parse(_Tokens(tokens)), args.repeat)
    t_earley = best(lambda: earley.parse(_Tokens(tokens)), 1)

    rows = [
        ("tokenize (hand-written)", lines, t_tok),
        ("parse = tokenize + token pass + LALR + AST", lines, t_parse),
        ("link (names, tools, types, site ids)", lines, t_link),
        ("parse + link", lines, total),
        (f"Lark LALR only, replayed tokens ({plines} lines)", plines, t_lalr),
        (f"Lark Earley only, replayed tokens ({plines} lines)", plines, t_earley),
    ]
    print(f"program: {lines} lines, {ntok} tokens; parser setup (first use) {setup * 1000:.0f} ms")
    print(f"{'stage':<52} {'lines':>6} {'time ms':>9} {'lines/s':>11}")
    for name, n, secs in rows:
        print(f"{name:<52} {n:>6} {secs * 1000:>9.1f} {n / secs:>11,.0f}")
    ratio = (plines / t_lalr) / (plines / t_earley)
    front = (lines / total) / (plines / t_earley)
    print(f"LALR vs Earley on the same grammar and tokens: {ratio:,.0f}x faster")
    print(f"whole front end (parse + link) vs Earley parsing alone: {front:,.0f}x more lines/s")
    verdict = "PASS" if total < 0.5 else "FAIL"
    print(f"bar: parse + link of {lines} lines < 500 ms: {total * 1000:.0f} ms -> {verdict}")


if __name__ == "__main__":
    main()
