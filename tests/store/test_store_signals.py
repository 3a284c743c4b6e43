"""Signals: 1-based ordinals per (run, name), also under concurrent senders."""

from __future__ import annotations

import asyncio
from typing import Any

from lashflow.store import Store


async def test_ordinals_count_per_run_and_name(store: Store) -> None:
    assert await store.add_signal("r", "go", {"n": 1}) == 1
    assert await store.add_signal("r", "go", {"n": 2}) == 2
    assert await store.add_signal("r", "stop", None) == 1
    assert await store.add_signal("other", "go", "x") == 1
    assert await store.add_signal("r", "go", [3]) == 3
    assert await store.get_signal("r", "go", 1) == (True, {"n": 1})
    assert await store.get_signal("r", "go", 3) == (True, [3])
    assert await store.get_signal("r", "stop", 1) == (True, None)  # a null payload is a signal
    assert await store.get_signal("other", "go", 1) == (True, "x")


async def test_a_missing_signal_is_not_found(store: Store) -> None:
    assert await store.get_signal("r", "go", 1) == (False, None)
    await store.add_signal("r", "go", 1)
    assert await store.get_signal("r", "go", 2) == (False, None)
    assert await store.get_signal("r", "Go", 1) == (False, None)  # names are case-sensitive


async def test_concurrent_senders_get_distinct_gapless_ordinals(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        stores = [first, second]
        ordinals = await asyncio.gather(*[
            stores[i % 2].add_signal("r", "tick", {"i": i}) for i in range(30)])
        assert sorted(ordinals) == list(range(1, 31))
        for i, ordinal in enumerate(ordinals):
            assert await first.get_signal("r", "tick", ordinal) == (True, {"i": i})


async def test_a_sender_step_delivers_once(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        assert await first.add_signal("r", "x", 1, sender="s/step-1") == 1
        # the sender resumed after a crash sends again: its first delivery stands
        assert await first.add_signal("r", "x", 1, sender="s/step-1") == 1
        assert await first.add_signal("r", "x", 2, sender="s/step-2") == 2
        assert await first.add_signal("r", "x", 3) == 3  # no sender: always appended
        again = await asyncio.gather(*[(first, second)[i % 2].add_signal(
            "r", "x", 4, sender="s/step-4") for i in range(10)])
        assert again == [4] * 10  # ten racing re-sends, one delivery
        assert await second.get_signal("r", "x", 5) == (False, None)
        assert await second.get_signal("r", "x", 2) == (True, 2)
