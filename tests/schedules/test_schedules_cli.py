"""``lashflow schedule ...`` in-process (typer's runner) against a test database: every
command once, the errors a user can cause as one line with a code, ``--json`` as the HTTP
API answers, ``list --schedule``, and the list fitting 80 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from lashflow.cli import app

HOLD = Path(__file__).resolve().parent / "hold.lash"


@pytest.fixture
def lf(tmp_path: Path) -> Callable[..., Any]:
    runner = CliRunner()
    db = f"sqlite:///{tmp_path / 'cli.db'}"

    def invoke(*args: str) -> Any:
        result = runner.invoke(app, [str(a) for a in args],
                               env={"LASHFLOW_DB": db, "TTY_COMPATIBLE": "0", "COLUMNS": "80",
                                    "LASHFLOW_UTC": "1"})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    return invoke


def test_every_schedule_command(lf: Callable[..., Any]) -> None:
    made = lf("schedule", "create", "nightly", "--process", HOLD, "--input", '{"n": 1}',
              "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--overlap", "allow")
    assert made.exit_code == 0, made.stderr
    assert "schedule nightly: cron 30 2 * * * (Europe/Berlin), overlap allow" in made.stdout
    assert "next fires (Europe/Berlin):" in made.stdout
    assert made.stdout.count("T02:30:00+0") == 5  # five fire times, at 02:30 local
    shown = lf("schedule", "show", "nightly", "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["name"] == "nightly"
    assert lf("schedule", "pause", "nightly", "--note", "db move").stdout.strip() == \
        "schedule nightly paused"
    assert "PAUSED: db move" in lf("schedule", "show", "nightly").stdout
    listed = lf("schedule", "list")
    assert listed.exit_code == 0
    assert "paused" in listed.stdout and all(len(line) <= 80
                                             for line in listed.stdout.splitlines())
    assert lf("schedule", "resume", "nightly").exit_code == 0
    triggered = lf("schedule", "trigger", "nightly")
    assert triggered.stdout.startswith("run nightly@") and "-trigger queued" in triggered.stdout
    back = lf("schedule", "backfill", "nightly", "--from", "2027-01-01T00:00",
              "--to", "2027-01-04T00:00", "--json")
    assert json.loads(back.stdout) == {"started": 3, "buffered": 0, "skipped": 0}
    runs = lf("list", "--schedule", "nightly", "--json")
    assert runs.exit_code == 0, runs.stderr
    ids = [run["run_id"] for run in json.loads(runs.stdout)["runs"]]
    assert len(ids) == 4 and "nightly@20270102T013000Z" in ids  # 02:30 in Berlin is 01:30Z
    assert "last runs:" in lf("schedule", "show", "nightly").stdout
    updated = lf("schedule", "update", "nightly", "--every", "15m", "--input", '{"n": 2}')
    assert updated.exit_code == 0 and "every 15m" in updated.stdout and '{"n":2}' in \
        updated.stdout.replace(" ", "")
    assert lf("schedule", "delete", "nightly").exit_code == 0
    assert json.loads(lf("schedule", "list", "--json").stdout) == {"schedules": []}
    assert len(json.loads(lf("list", "--json").stdout)["runs"]) == 4  # the runs stay


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (("schedule", "create", "x", "--process", str(HOLD), "--cron", "61 * * * *"),
     "schedule_invalid", "Bad minute"),
    (("schedule", "create", "x", "--process", str(HOLD), "--every", "5"),
     "schedule_invalid", "duration"),
    (("schedule", "create", "x", "--process", str(HOLD), "--every", "1m", "--tz", "Nowhere"),
     "schedule_invalid", "time zone"),
    (("schedule", "create", "x@y", "--process", str(HOLD), "--every", "1m"),
     "schedule_invalid", "schedule name"),
    (("schedule", "create", "x", "--process", str(HOLD), "--every", "1m", "--input", "[1]"),
     "input_invalid", ""),
    (("schedule", "pause", "nope"), "unknown_schedule", "nope"),
    (("schedule", "backfill", "nope", "--from", "2027-01-01", "--to", "2027-01-02"),
     "unknown_schedule", "nope"),
    (("list", "--schedule", "nope"), "unknown_schedule", "nope"),
])
def test_errors_are_one_line_with_a_code(lf: Callable[..., Any], args: tuple[str, ...],
                                         code: str, fragment: str) -> None:
    lf("schedule", "create", "exists", "--process", HOLD, "--input", '{"n": 1}', "--every", "1h")
    result = lf(*args)
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error[{code}]") and fragment in line, line
