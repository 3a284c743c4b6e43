"""``Store.setting``: a value lashflow's own parts keep in the database (the console's
session generation), seen by every store on the database and kept across restarts."""

from __future__ import annotations

from typing import Any


async def test_a_setting_is_shared_and_survives_a_restart(backend: Any) -> None:
    async with backend.make() as first, backend.make() as second:
        assert await first.setting("console_session_generation") is None
        await first.put_setting("console_session_generation", "g1")
        assert await second.setting("console_session_generation") == "g1"
        await second.put_setting("console_session_generation", "g2")  # replaced, not added
        assert await first.setting("console_session_generation") == "g2"
        assert await first.setting("secret") is None  # the store's own meta stays apart
    async with backend.make() as reopened:
        assert await reopened.setting("console_session_generation") == "g2"
