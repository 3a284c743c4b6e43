"""The HTTP API's schemas of the engine's answers are dataclasses beside the engine's own
classes (``lashflow.durable.outcome``, written out without ``dataclasses``; ADR 0044):
the same fields in the same order, so /openapi.json describes what ``to_json`` gives."""

from __future__ import annotations

import dataclasses

import pytest

from lashflow.durable import outcome
from lashflow.http import models


@pytest.mark.parametrize("name", ["RunError", "Wait", "CompletionInfo", "AttemptView",
                                  "RunSummary", "RunPage"])
def test_a_schema_has_the_fields_of_the_engine_class(name: str) -> None:
    schema = getattr(models, name)
    engine_class = getattr(outcome, name)
    assert tuple(f.name for f in dataclasses.fields(schema)) == engine_class.__slots__
    assert schema.__doc__ == engine_class.__doc__ or engine_class.__doc__ is None
