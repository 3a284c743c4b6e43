"""FakeClock: sleeps fall due only when advanced, in order, and can be cancelled."""

import asyncio

import pytest

from lashflow.testing import FakeClock, RealClock


async def test_sleep_waits_for_advance():
    clock = FakeClock(start=100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name, seconds):
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    tasks = [asyncio.ensure_future(sleeper("b", 2.0)), asyncio.ensure_future(sleeper("a", 1.0))]
    await clock.wait_for_sleepers(2)
    assert clock.next_due() == 101.0
    clock.advance(0.5)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(0.5)
    await asyncio.sleep(0)
    assert [w[0] for w in woke] == ["a"]
    clock.advance(5)
    await asyncio.gather(*tasks)
    assert [w[0] for w in woke] == ["a", "b"] and clock.now() == 106.0 and clock.sleepers == 0


async def test_zero_sleep_returns_and_cancel_cleans_up():
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), 1)
    task = asyncio.ensure_future(clock.sleep(10))
    await clock.wait_for_sleepers(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.sleepers == 0 and clock.next_due() is None
    clock.advance(20)  # nothing to wake; no error
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_wait_for_sleepers_gives_up():
    with pytest.raises(TimeoutError):
        await FakeClock().wait_for_sleepers(1, timeout=0.05)


async def test_real_clock():
    clock = RealClock()
    before = clock.now()
    await clock.sleep(0.001)
    assert clock.now() >= before
