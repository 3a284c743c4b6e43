"""The pytest plugin lashflow ships (the ``pytest11`` entry point ``lashflow``).

Fixtures: ``lashflow_env`` (a ``WorkflowEnv`` on a fresh SQLite database in the test's
``tmp_path``; on PostgreSQL when the test is marked ``@pytest.mark.lashflow(store=
"postgres")``) and ``lashflow_env_postgres`` (always PostgreSQL). PostgreSQL is the
server named by ``--lashflow-postgres`` or ``$LASHFLOW_TEST_POSTGRES_URL``; each test
gets a schema of its own, dropped afterwards. Without a server such a test is skipped.

Only pytest is imported when pytest starts; lashflow itself loads when a fixture is used.
Disable the plugin with ``-p no:lashflow``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from .env import WorkflowEnv

POSTGRES_URL_VARIABLE = "LASHFLOW_TEST_POSTGRES_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lashflow")
    group.addoption("--lashflow-postgres", dest="lashflow_postgres", default=None,
                    metavar="URL", help="PostgreSQL server for lashflow_env_postgres and "
                    f"tests marked lashflow(store='postgres') (default: ${POSTGRES_URL_VARIABLE})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lashflow(store='sqlite'|'postgres', start=EPOCH_SECONDS, tools=[...], "
        "modules=[...], max_timers=N): how lashflow_env is built for this test")


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("lashflow")
    options = dict(marker.kwargs) if marker is not None else {}
    unknown = set(options) - {"store", "start", "tools", "modules", "lease_ttl", "max_timers"}
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.lashflow: unknown option(s) "
                                f"{', '.join(sorted(unknown))}")
    return options


def _env(db: str, options: dict[str, Any]) -> "WorkflowEnv":
    from .env import WorkflowEnv

    options = {k: v for k, v in options.items() if k != "store"}
    return WorkflowEnv(db, **options)


def _postgres_server(config: pytest.Config) -> str:
    # default: the plugin may be registered after the options were parsed (``-p`` in a
    # conftest), and then it has no option of its own
    url = config.getoption("lashflow_postgres", None) or os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        pytest.skip(f"no PostgreSQL server: set ${POSTGRES_URL_VARIABLE} or --lashflow-postgres")
    return str(url)


def _sqlite(tmp_path: Any) -> str:
    # synchronous=normal: a test needs no protection against power loss, and a crash the
    # test injects stops a drive, not the machine (the journal's order is the same)
    return f"sqlite:///{tmp_path / 'lashflow.db'}?synchronous=normal"


@pytest.fixture
def lashflow_env(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator["WorkflowEnv"]:
    """A ``WorkflowEnv`` on a fresh store, closed after the test."""
    options = _options(request)
    store = options.get("store", "sqlite")
    if store == "postgres":
        yield from _on_postgres(request, options)
        return
    if store != "sqlite":
        raise pytest.UsageError(f"@pytest.mark.lashflow(store={store!r}): use 'sqlite' or "
                                "'postgres'")
    with _env(_sqlite(tmp_path), options) as env:
        yield env


@pytest.fixture
def lashflow_env_postgres(request: pytest.FixtureRequest) -> Iterator["WorkflowEnv"]:
    """A ``WorkflowEnv`` on a fresh PostgreSQL schema, dropped after the test."""
    yield from _on_postgres(request, _options(request))


def _on_postgres(request: pytest.FixtureRequest,
                 options: dict[str, Any]) -> Iterator["WorkflowEnv"]:
    from .schemas import fresh_schema

    with fresh_schema(_postgres_server(request.config)) as url:
        with _env(url, options) as env:
            yield env


__all__ = ["lashflow_env", "lashflow_env_postgres"]
