"""The pytest plugin itself, through pytest's ``pytester``: the fixtures are there as soon
as lashflow is installed, a test that should fail fails with the journal in its message,
and ``-p no:lashflow`` takes the plugin away."""

from __future__ import annotations

import os
import textwrap

import pytest

from plugin_support import FLOW, TOOLS, inner

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester, warm: None) -> pytest.Pytester:
    pytester.makefile(".lash", order=FLOW)
    pytester.makepyfile(order=TOOLS)
    return pytester


def test_the_fixture_comes_with_the_package(project: pytest.Pytester) -> None:
    project.makepyfile(test_flow=textwrap.dedent("""
        from lashflow.testing import assert_finished

        def test_approved(lashflow_env):
            run = lashflow_env.run("order.lash", {"id": "o-1"})
            assert run.status == "waiting"
            lashflow_env.complete(run, "tools.approve", True)
            assert_finished(run, {"id": "o-1", "approved": True})

        def test_expired(lashflow_env):
            run = lashflow_env.run("order.lash", {"id": "o-2"})
            lashflow_env.advance("24h")
            assert run.status == "failed"
    """))
    result = inner(project)
    result.assert_outcomes(passed=2)


def test_a_failing_assertion_shows_the_journal(project: pytest.Pytester) -> None:
    project.makepyfile(test_flow=textwrap.dedent("""
        from lashflow.testing import assert_finished

        def test_forgot_the_approval(lashflow_env):
            run = lashflow_env.run("order.lash", {"id": "o-3"})
            assert_finished(run)
    """))
    result = inner(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: run run-1 is waiting, expected finished",
        "*run run-1: waiting",
        "*process order   file order.lash",
        "*created 2026-01-01T00:00:00+00:00*",
        "*1 * tool * tools.quote * ok * x1 *{\"id\":\"o-3\",\"amount\":12.5}",
        "*2 * tool * tools.approve * pending * x1 *",
        "*waiting on completion key for tools.approve, deadline 2026-01-02T00:00:00+00:00*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_a_failing_call_count_lists_the_calls(project: pytest.Pytester) -> None:
    project.makepyfile(test_flow=textwrap.dedent("""
        from lashflow.testing import assert_called

        def test_quoted_twice(lashflow_env):
            lashflow_env.run("order.lash", {"id": "o-4"})
            assert_called(lashflow_env, "tools.quote", times=2)
    """))
    result = inner(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: tools.quote was called 1 time(s), expected 2",
        "*call 1: run run-1 step * attempt 1 input {'id': 'o-4'}",
        "*run run-1: waiting",
    ])


def test_the_marker_sets_the_start_and_refuses_unknown_options(project: pytest.Pytester) -> None:
    project.makepyfile(test_flow=textwrap.dedent("""
        import pytest

        @pytest.mark.lashflow(start=86400.0)
        def test_start(lashflow_env):
            assert lashflow_env.now == 86400.0

        @pytest.mark.lashflow(colour="blue")
        def test_typo(lashflow_env):
            pass
    """))
    result = inner(project)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.lashflow: unknown option(s) colour*"])


def test_without_the_plugin_there_is_no_fixture(project: pytest.Pytester) -> None:
    project.makepyfile(test_flow="def test_x(lashflow_env):\n    pass\n")
    result = inner(project, "-p", "no:lashflow")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'lashflow_env' not found*"])


def test_postgres_through_the_marker_and_the_fixture(project: pytest.Pytester) -> None:
    from pg_support import postgres_base_url

    project.makepyfile(test_flow=textwrap.dedent("""
        import pytest

        @pytest.mark.lashflow(store="postgres")
        def test_marked(lashflow_env):
            assert lashflow_env.db.startswith("postgresql://")
            run = lashflow_env.run("order.lash", {"id": "pg-1"})
            lashflow_env.complete(run, "approve", True)
            assert run.status == "finished"

        def test_fixture(lashflow_env_postgres):
            run = lashflow_env_postgres.run("order.lash", {"id": "pg-2"})
            assert [s.tool for s in run.steps] == ["tools.quote", "tools.approve"]
            assert run.run_id == "run-1"  # a schema of its own: no run of the other test
    """))
    result = inner(project,
                               f"--lashflow-postgres={postgres_base_url()}")
    result.assert_outcomes(passed=2)


def test_postgres_without_a_server_is_skipped_with_the_reason(project: pytest.Pytester,
                                                               monkeypatch) -> None:
    monkeypatch.delenv("LASHFLOW_TEST_POSTGRES_URL", raising=False)
    project.makepyfile(test_flow="def test_x(lashflow_env_postgres):\n    pass\n")
    result = inner(project, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no PostgreSQL server: set $LASHFLOW_TEST_POSTGRES_URL*"])
    assert os.environ.get("LASHFLOW_TEST_POSTGRES_URL") is None
