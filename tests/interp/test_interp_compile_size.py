"""Compilation is linear in the program: every node of a chain is compiled once, so a
hostile 40-deep chain of any operator costs 40 compilations, not 2**40 (it used to be
exponential for `not`/`!`, which compiled their operand as a value and as a condition)."""

from __future__ import annotations

from typing import Any

import pytest

from lashflow.interp import exprs
from lashflow.interp.compiler import compile_module
from lashflow.lang import parse

UNARY = ["not ", "!", "-"]
BINARY = ["and", "or", "&&", "||", "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">="]


def compilations(source: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times the expression compiler compiled a node for ``source``."""
    seen = [0]
    original = exprs.ExprCompiler.expr

    def counting(self: Any, node: Any) -> Any:
        seen[0] += 1
        return original(self, node)

    monkeypatch.setattr(exprs.ExprCompiler, "expr", counting)
    compile_module(parse(source))
    return seen[0]


def assert_linear(counts: list[int]) -> None:
    """Compilations for chains of 10, 20 and 40 operators: each added operator costs the
    same, a few compilations at most (an exponential compiler doubles per operator)."""
    ten, twenty, forty = counts
    assert forty - twenty == 2 * (twenty - ten)
    assert 0 < twenty - ten <= 30


@pytest.mark.parametrize("op", UNARY)
def test_a_unary_chain_compiles_each_node_once(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    operand = "true" if op != "-" else "1"
    assert_linear([compilations(f"finish {op * n}{operand}", monkeypatch) for n in (10, 20, 40)])


@pytest.mark.parametrize("op", BINARY)
def test_a_binary_chain_compiles_each_node_once(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_linear([compilations("finish x\n".replace("x", f" {op} ".join(["1"] * (n + 1))),
                                monkeypatch) for n in (10, 20, 40)])
