"""The language server's diagnostics are ``check``'s, edit after edit: the incremental
analysis (one declaration re-parsed and re-linked when that is provably the whole file's
answer) is compared with ``check`` on the whole text after every one of 800
random edits, and on every program of the repository."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Callable

import pytest

from lashflow.lang import Catalog, check
from lashflow.lsp.analysis import Analysis, first_difference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lang"))
from lash_corpus import programs  # noqa: E402

CATALOG = Catalog.permissive({"tools": ["quote", "charge", "read"]})


def program(processes: int) -> str:
    out = ["type Order = { id: str, items: list[dict], total: float }"]
    for i in range(processes):
        out += [
            f"# step {i}",
            f"process step{i}(order: Order, n: int) -> int {{",
            '  quoted = await tools.quote({ order: order, n: n, tags: ["a", "b"] })?',
            "  total = 0",
            "  for item in order.items {",
            "    total = total + len(item) * 2 - n % 3",
            "    if total > 100 { break } else { continue }",
            "  }",
            '  label = total > 10 ? "big" : "small"',
            "  receipt = await tools.charge({ amount: order.total, label: label })",
            "  if not receipt.ok { fail receipt.error }",
            "  finish total",
            "}",
        ]
    out += ["h = start step0(order: { id: \"o\", items: [], total: 1.5 }, n: 1)",
            "finish (await h)?"]
    return "\n".join(out) + "\n"


SNIPPETS = ["x", " ", "\n", "(", ")", "{", "}", "[", "]", "?", ":", ",", '"', "'", "1", "2.5",
            "tools.", "finish ", "=", ".", "zz = 1\n", "# note\n", "-", "start step1(n: 1)",
            "undefined_name", "process ", "}\n", "tools.nope({})", 'sleep for "5 s"', "@label",
            "type T = int\n", "await ", "r'", '"""', "\\"]


def answer(diagnostics: list) -> tuple | None:  # type: ignore[type-arg]
    if not diagnostics:
        return None
    d = diagnostics[0]
    end = d.end if d.end is not None and d.end > (d.offset or 0) else (d.offset or 0)
    return (d.code, d.message, d.offset or 0, end, d.hint)


def analysis_answer(a: Analysis) -> tuple | None:  # type: ignore[type-arg]
    p = a.problem
    return None if p is None else (p.code, p.message, p.start, p.end, p.hint)


def random_edits(rnd: random.Random, base: str, where: Callable[[str], int],
                 reset: float) -> Analysis:
    """200 random edits at ``where(text)``, each compared with ``check`` on the whole text;
    now and then the text goes back to ``base``. The analysis, for its fast-path count."""
    text = base
    analysis = Analysis(text, CATALOG)
    for _ in range(200):
        pos = where(text)
        if rnd.random() < 0.6:
            text = text[:pos] + rnd.choice(SNIPPETS) + text[pos:]
        else:
            text = text[:pos] + text[pos + rnd.randint(1, 6):]
        if rnd.random() < reset:
            text = base
        analysis.update(text)
        assert analysis_answer(analysis) == answer(check(text, CATALOG)), text
    return analysis


@pytest.mark.parametrize("seed", range(4))
def test_random_edits_give_check_s_answer(seed: int) -> None:
    rnd = random.Random(seed)

    def where(text: str) -> int:
        if rnd.random() < 0.75:  # mostly where people type: inside a process body
            anchor = text.find("  total = 0", rnd.randrange(max(1, len(text) // 2)))
            return max(0, min(len(text) - 1, anchor + rnd.randrange(-30, 300)))
        return rnd.randrange(len(text))

    assert random_edits(rnd, program(6), where, 0.08).fast_edits > 10


MAIN = ["total = 0", "for i in range(3) { total = total + i }", 'label = total > 1 ? "a" : "b"',
        "r = await tools.read({ n: total })", "if not r.ok { print(r.error) }",
        'h = start step1(order: { id: "o", items: [], total: 1.5 }, n: total)']


@pytest.mark.parametrize("seed", range(4))
def test_random_edits_in_the_main_block_give_check_s_answer(seed: int) -> None:
    rnd = random.Random(100 + seed)

    def where(text: str) -> int:  # in the main block, or just before it
        main_at = text.rfind("}\n# step") + 1
        main_at = text.find("\n}\n", main_at) + 3 if main_at > 0 else 0
        return rnd.randrange(max(0, main_at - 20), len(text))

    base = program(3) + "\n".join(MAIN * 3) + "\n"
    assert random_edits(rnd, base, where, 0.05).fast_edits > 25


def test_typing_in_the_main_block_takes_the_tail_path() -> None:
    text = program(20) + "\n".join(MAIN) + "\n"
    analysis = Analysis(text, CATALOG)
    at = text.index("r = await tools.read")
    for ch in "extra = await tools.nope({})\n":
        text = text[:at] + ch + text[at:]
        at += 1
        analysis.update(text)
        assert analysis_answer(analysis) == answer(check(text, CATALOG))
    assert analysis.fast_edits == len("extra = await tools.nope({})\n")
    assert analysis.problem is not None
    assert analysis.problem.message == "module `tools` does not expose operation `nope`"


def test_typing_in_a_body_takes_the_fast_path() -> None:
    text = program(20)
    analysis = Analysis(text, CATALOG)
    at = text.index("  finish total", len(text) // 2)
    for ch in "  extra = quoted.amount\n":
        text = text[:at] + ch + text[at:]
        at += 1
        analysis.update(text)
        assert analysis_answer(analysis) == answer(check(text, CATALOG))
    assert analysis.fast_edits == len("  extra = quoted.amount\n")
    text = text.replace("quoted.amount", "quoted.amount + nope", 1)
    analysis.update(text)
    assert analysis.problem is not None and analysis.problem.message == "unknown name `nope`"


def test_first_difference() -> None:
    assert first_difference("abcdef", "abXYef") == (2, 4, 4)
    assert first_difference("aaa", "aaaa") == (3, 3, 4)
    assert first_difference("abc", "") == (0, 3, 0)


@pytest.mark.parametrize("source", [s for _, s in programs()], ids=[n for n, _ in programs()])
def test_every_program_of_the_repository(source: str) -> None:
    names = set(re.findall(r"tools\.([A-Za-z_]\w*)", source))
    catalog = Catalog.permissive({"tools": sorted(names)})
    assert analysis_answer(Analysis(source, catalog)) == answer(check(source, catalog))
