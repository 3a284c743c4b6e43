"""Every program on which lashflow once differed from the original implementation, with the
original's outcome recorded as the expected one (``scripts/oracle/oracle.py record`` and
``campaign --record`` write them). lashflow must agree, or differ only in a way
docs/adr/0025 accepts; the original itself is not needed here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = json.loads((ROOT / "tests" / "conformance" / "oracle_corpus.json").read_text("utf-8"))
sys.path.insert(0, str(ROOT / "scripts" / "oracle"))

import accepted  # noqa: E402
import outcomes  # noqa: E402


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_lashflow_agrees_with_the_original(case: dict) -> None:
    new = outcomes.run_program(case["source"], case["stubs"])
    verdict = outcomes.verdict(case["original"], new, case["source"])
    assert verdict is None or verdict.startswith("accepted: "), (
        f"{verdict}\noriginal: {json.dumps(case['original'])}\nlashflow: {json.dumps(new)}")


def test_the_corpus_covers_every_accepted_class() -> None:
    """Each class the ADR accepts is shown by at least one recorded program, so a rule
    that stopped matching (or matched too much) is noticed."""
    seen = set()
    for case in CORPUS:
        new = outcomes.run_program(case["source"], case["stubs"])
        verdict = outcomes.verdict(case["original"], new, case["source"]) or ""
        if verdict.startswith("accepted: "):
            seen.add(verdict[len("accepted: "):])
    assert seen == set(accepted.CLASSES)


def test_an_unaccepted_difference_is_reported() -> None:
    """The comparison is not a rubber stamp: a changed value is a divergence."""
    original = {"outcome": "finished", "value": [1, 2]}
    assert outcomes.verdict(original, {"outcome": "finished", "value": [1, 2]}, "") is None
    assert outcomes.verdict(original, {"outcome": "finished", "value": [2, 1]}, "") == \
        "finished: value differs"
