"""The engine's one timer for announcing long calls (``tool_runner.Announcer``): each
entry is called back once its time has come, in the order added, unless discarded first;
one timer serves them all, and an engine opened again on a new event loop still announces."""

from __future__ import annotations

import asyncio

from lashflow.durable.tool_runner import Announcer


async def test_entries_come_due_in_order_and_a_discarded_one_never_does() -> None:
    announcer = Announcer(after=0.01)
    called: list[str] = []
    last = asyncio.Event()
    first = announcer.add(lambda: called.append("first"))
    announcer.add(lambda: called.append("second"))
    gone = announcer.add(lambda: called.append("discarded"))
    announcer.discard(gone)
    announcer.discard(first)
    await asyncio.sleep(0)
    announcer.add(lambda: (called.append("third"), last.set()))
    await last.wait()
    assert called == ["second", "third"]


async def test_many_entries_due_together_are_each_called_once_in_order() -> None:
    """A thousand entries (a fan-out's calls) come due together: each is called once, in
    the order added, and one an earlier callback discarded is not called."""
    announcer = Announcer(after=0.01)
    called: list[int] = []
    done = asyncio.Event()
    tokens: list[object] = []
    tokens.append(announcer.add(lambda: (called.append(0), announcer.discard(tokens[2]))))
    for i in range(1, 1000):
        tokens.append(announcer.add(lambda i=i: called.append(i)))
    announcer.add(done.set)
    await done.wait()
    assert called == [0, 1] + list(range(3, 1000))


def test_a_new_event_loop_gets_its_own_timer() -> None:
    announcer = Announcer(after=0.01)

    async def one_round() -> list[str]:
        called: list[str] = []
        done = asyncio.Event()
        announcer.add(lambda: (called.append("due"), done.set()))
        await done.wait()
        return called

    async def abandoned() -> None:  # a loop that closes with the timer still armed
        announcer.discard(announcer.add(lambda: None))

    asyncio.run(abandoned())
    assert asyncio.run(one_round()) == ["due"]
