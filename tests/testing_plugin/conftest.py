"""Fixtures of the plugin's tests."""

from __future__ import annotations

import pytest

from plugin_support import ENTRY_POINT, FLOW, TOOLS


def pytest_configure(config: pytest.Config) -> None:
    if not ENTRY_POINT and not config.pluginmanager.has_plugin("lashflow"):
        config.pluginmanager.import_plugin("lashflow.testing.plugin")


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Load here, once, every module a run uses: ``runpytest`` (in process) forgets the
    modules first imported during it, and a second run would import lashflow's classes
    anew, which the modules kept from before would not recognise (and asyncpg's C
    extensions, loaded twice, crash the process)."""
    import asyncpg  # noqa: F401

    import lashflow.store.postgres  # noqa: F401
    import lashflow.testing.fixtures  # noqa: F401
    import lashflow.testing.replayer  # noqa: F401
    import lashflow.testing.schemas  # noqa: F401
    from lashflow.testing import WorkflowEnv, assert_finished

    folder = tmp_path_factory.mktemp("warm")
    (folder / "order.lash").write_text(FLOW)
    (folder / "order.py").write_text(TOOLS)
    with WorkflowEnv(str(folder / "warm.db")) as env:
        run = env.run(folder / "order.lash", {"id": "warm"})
        env.complete(run, "tools.approve", True)
        assert_finished(run)
