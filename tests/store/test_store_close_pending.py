"""An engine's close leaves nothing running when its store closes (issue: CLI processes
stayed alive up to 20 s after printing their result): drives under way are waited for
(or cancelled after the grace), and so is a drive that starts during the close (a
parent woken by a child that settled), and the cancel watcher's look; a task left behind
would hold a database connection that the store's close then waits for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lashflow import Engine, RunStatus, ToolCall, ToolResult, tool

GATE: dict[str, asyncio.Event] = {}

SOURCE = """
process kid(n: int) {
  go = wait_signal("go")
  a = tools.gated({ n: n })?
  finish a
}

process parent(n: int) {
  h = start kid(n: n)
  r = await h
  finish r
}
"""


@tool
async def gated(call: ToolCall) -> ToolResult:
    await GATE["open"].wait()
    return ToolResult.ok(call.input["n"])


async def test_nothing_is_left_running_when_the_store_closes(backend: Any) -> None:
    GATE["open"] = asyncio.Event()
    engine = Engine(db=backend.url, tools=[gated])
    await engine.__aenter__()
    try:
        parked = await engine.run(SOURCE, "parent", {"n": 1}, run_id="p")
        assert parked.status is RunStatus.WAITING, parked
        kid = parked.waiting[0].child_run_id
        assert kid is not None
        await engine.signal(kid, "go", resume=False)
        await engine.drive_soon(kid)  # in the background: its tool waits at the gate
        kid_drive = engine.driver.spawn(kid)  # the drive under way
        late: list[asyncio.Task[Any]] = []
        # the kid's drive ends during the close and a drive of its parent starts then
        kid_drive.add_done_callback(lambda _: late.append(engine.driver.spawn("p")))
    finally:
        drain, close = engine.driver.begin_drain, engine.store.close
        pending_at_close: list[asyncio.Task[Any]] = []

        def begin_drain() -> None:
            drain()
            GATE["open"].set()  # the close has begun: the kid's tool may end now

        async def store_close() -> None:
            me = asyncio.current_task()
            # the store's own tasks (PostgreSQL's wake-up listener) are stopped by the
            # close itself, as is a task already told to stop; a leak is anything else
            pending_at_close.extend(t for t in asyncio.all_tasks()
                                    if t is not me and not t.done() and not t.cancelling()
                                    and not _owned_by_the_store(t))
            await close()

        engine.driver.begin_drain = begin_drain  # type: ignore[method-assign]
        engine.store.close = store_close  # type: ignore[method-assign]
        await engine.__aexit__(None, None, None)
    assert late and late[0].done() and not late[0].cancelled()
    assert pending_at_close == []

    async with Engine(db=backend.url, tools=[gated]) as again:  # nothing was lost
        assert (await again.get_record("p")).status in ("waiting", "queued")
        assert (await again.get_record(kid)).status in ("queued", "finished")


def _owned_by_the_store(task: asyncio.Task[Any]) -> bool:
    """The store's own tasks (its close stops them)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and Path(code.co_filename).parent.name == "store"
