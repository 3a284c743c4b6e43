"""The compile cache's last text: the same text object again is its program without
hashing; an equal text of another object, or another text, goes by its digest."""

from __future__ import annotations

import pytest

from lashflow.durable import programs as programs_module
from lashflow.durable.programs import Programs, source_digest
from lashflow.lang import Catalog

TEXT = "process p(n: int) {\n  finish n\n}\n"
OTHER = "process q(n: int) {\n  finish n + 1\n}\n"


def _programs() -> Programs:
    catalog = Catalog.permissive({})
    return Programs(lambda: catalog)


def test_the_same_text_object_is_its_program_again(monkeypatch: pytest.MonkeyPatch) -> None:
    programs = _programs()
    first = programs.compile(TEXT)
    hashed: list[str] = []
    monkeypatch.setattr(programs_module, "source_digest",
                        lambda text: hashed.append(text) or source_digest(text))
    assert programs.compile(TEXT) is first
    assert hashed == []  # not hashed again
    assert first.source_hash == source_digest(TEXT)


def test_an_equal_text_of_another_object_and_another_text_go_by_the_digest() -> None:
    programs = _programs()
    first = programs.compile(TEXT)
    copy = "".join([TEXT[:5], TEXT[5:]])  # equal, not the same object
    assert copy == TEXT and copy is not TEXT
    assert programs.compile(copy) is first  # the digest's entry
    other = programs.compile(OTHER)
    assert other is not first and other.source_hash == source_digest(OTHER)
    assert programs.compile(TEXT) is first  # after another text: found by its digest
