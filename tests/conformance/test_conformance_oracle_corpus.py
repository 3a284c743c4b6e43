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
    verdict = outcomes.verdict(case["original"], new, case["source"], case["stubs"])
    assert verdict is None or verdict.startswith("accepted: "), (
        f"{verdict}\noriginal: {json.dumps(case['original'])}\nlashflow: {json.dumps(new)}")


def test_the_corpus_covers_every_accepted_class() -> None:
    """Each class the ADR accepts is shown by at least one recorded program, so a rule
    that stopped matching (or matched too much) is noticed."""
    seen = set()
    for case in CORPUS:
        new = outcomes.run_program(case["source"], case["stubs"])
        verdict = outcomes.verdict(case["original"], new, case["source"], case["stubs"]) or ""
        if verdict.startswith("accepted: "):
            seen.add(verdict[len("accepted: "):])
    assert seen == set(accepted.CLASSES) | {name for _, name in outcomes.RERUNS}


def test_an_unaccepted_difference_is_reported() -> None:
    """The comparison is not a rubber stamp: a changed value is a divergence."""
    original = {"outcome": "finished", "value": [1, 2]}
    assert outcomes.verdict(original, {"outcome": "finished", "value": [1, 2]}, "") is None
    assert outcomes.verdict(original, {"outcome": "finished", "value": [2, 1]}, "") == \
        "finished: value differs"


def test_a_second_run_with_the_originals_digits_explains_only_what_they_cause() -> None:
    """With the program's stubs, a difference no rule explains is run again with 2^64
    written as the original writes it: a position that moved with those digits is
    accepted, a real difference is still reported."""
    source = 'print grep_text(to_string([18446744073709551616]), "]")\nfinish 1'
    original = {"outcome": "finished", "value": 1, "prints": [
        '[{"end":22,"line":1,"match":"]","start":21,"text":"[18446744073709551615]"}]']}
    new = outcomes.run_program(source, {})
    assert outcomes.verdict(original, new, source) is not None  # no rule sees through it
    assert outcomes.verdict(original, new, source, {}) == \
        "accepted: boundary-integers-one-too-low"
    wrong = {"outcome": "finished", "value": 2, "prints": original["prints"]}
    assert outcomes.verdict(wrong, new, source, {}) == "finished: value differs"



def test_a_second_run_with_children_given_values_explains_only_what_json_causes() -> None:
    """A child's input is JSON in lashflow, so ``-inf`` reaches it as null; run again
    with the values handed over in memory, as the original does, the difference is
    accepted, while a real one is still reported."""
    source = ("process p(m: any) { finish to_string(m) }\n"
              "h = start p(m: 4.0 / -0.0)\nfinish (await h)?")
    original = {"outcome": "finished", "value": "-inf"}
    new = outcomes.run_program(source, {})
    assert new == {"outcome": "finished", "value": "null", "prints": [], "calls": []}
    assert outcomes.verdict(original, new, source) == "finished: value differs"
    assert outcomes.verdict(original, new, source, {}) == "accepted: child-input-is-json"
    wrong = {"outcome": "finished", "value": "inf"}
    assert outcomes.verdict(wrong, new, source, {}) == "finished: value differs"


def test_a_second_run_with_the_originals_json_numbers_explains_only_their_rounding() -> None:
    """The original reads ``-999999999999999.9`` in JSON as ``-1e15`` (two roundings):
    run again reading JSON numbers that way, the difference is accepted; a real one is
    still reported."""
    source = 'finish json_parse("-999999999999999.9") + 1'
    original = {"outcome": "finished", "value": -999999999999999}
    new = outcomes.run_program(source, {})
    assert new["value"] == -999999999999998.9
    assert outcomes.verdict(original, new, source) == "finished: value differs"
    assert outcomes.verdict(original, new, source, {}) == "accepted: json-number-rounding"
    wrong = {"outcome": "finished", "value": -999999999999998}
    assert outcomes.verdict(wrong, new, source, {}) == "finished: value differs"
