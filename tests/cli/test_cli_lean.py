"""`lashflow resume` read without the typer application (``lashflow.cli.lean``, the path
after a crash): the same exit code, stdout and stderr as the full application for every
form it takes, every other form left to the full application, and none of typer, click,
rich, pydantic or the HTTP layer imported on the way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lashflow.cli.lean import read_resume

ROOT = Path(__file__).resolve().parents[2]

# Run as a script: the entry point the console script calls (``lashflow.cli.main``), or
# the typer application itself; either way the modules loaded by the end are written out.
PROBE = '''
import atexit, json, os, sys

def dump():
    with open(os.environ["PROBE_MODULES"], "w") as out:
        json.dump(sorted(sys.modules), out)
    with open(os.environ["PROBE_MODULES"] + ".dataclasses", "w") as out:
        json.dump(sorted(f"{name}.{key}" for name, module in list(sys.modules.items())
                         if name.startswith("lashflow") for key, value in vars(module).items()
                         if isinstance(value, type) and value.__module__ == name
                         and "__dataclass_fields__" in vars(value)), out)

atexit.register(dump)
sys.argv[0] = "lashflow"
if os.environ.get("PROBE_FULL"):
    from lashflow.cli.application import main
else:
    from lashflow.cli import main
main()
'''

NOT_ON_THE_LEAN_PATH = ("typer", "click", "rich", "pydantic", "starlette", "uvicorn",
                        "lashflow.http", "lashflow.cli.application", "lashflow.cli.run")


def probe(tmp_path: Path, env: dict[str, str], args: list[str],
          full: bool) -> tuple[tuple[int, str, str], list[str]]:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    modules = tmp_path / ("full.json" if full else "lean.json")
    environment = dict(env, PROBE_MODULES=str(modules), TTY_COMPATIBLE="0")
    if full:
        environment["PROBE_FULL"] = "1"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=120)
    return (done.returncode, done.stdout, done.stderr), json.loads(modules.read_text())


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.fixture
def waiting_run(lfx: Any, tmp_path: Path) -> str:
    gate = tmp_path / "gate.lash"
    gate.write_text('process gate(who: str) {\n  d = wait_signal("go")\n  finish d\n}\n')
    ran = lfx("run", gate, "--input", '{"who": "a"}', "--run-id", "gate-1")
    assert ran.code == 3, ran
    return "gate-1"


def test_resume_answers_as_the_full_application_without_typer_rich_or_http(
        waiting_run: str, cli_env: dict[str, str], tmp_path: Path) -> None:
    db = cli_env["LASHFLOW_DB"]
    forms = [
        ["resume", waiting_run],
        ["resume", "--json", waiting_run],
        ["resume", f"--db={db}", waiting_run, "--max-wait", "0", "--tools", "json"],
        ["resume", "no-such-run"],
        ["resume", "no-such-run", "--db", db, "--json"],
    ]
    expected_codes = [3, 3, 3, 2, 2]
    for args, code in zip(forms, expected_codes):
        assert read_resume(args) is not None, args  # the lean entry takes this form
        lean, lean_modules = probe(tmp_path, cli_env, args, full=False)
        full, full_modules = probe(tmp_path, cli_env, args, full=True)
        assert lean == full, args
        assert lean[0] == code, (args, lean)
        assert loaded(lean_modules, NOT_ON_THE_LEAN_PATH) == [], args
        assert "typer" in full_modules  # the probe does tell the two apart
    assert "waiting on signal `go`" in lean_output_of(tmp_path, cli_env, waiting_run)


def dataclasses_in(modules: dict[str, Any]) -> set[str]:
    """The classes defined as dataclasses in ``modules`` (name -> module), as the probe
    lists them."""
    return {f"{name}.{key}" for name, module in modules.items()
            for key, value in vars(module).items()
            if isinstance(value, type) and value.__module__ == name
            and "__dataclass_fields__" in vars(value)}


def test_a_resume_builds_no_dataclass(
        waiting_run: str, cli_env: dict[str, str], tmp_path: Path) -> None:
    """Each dataclass costs the import of its module 2.6-4.6 M instructions of generated
    code; a resume's classes are written out on ``lashflow.slotted`` (ADR 0044)."""
    (code, _, _), modules = probe(tmp_path, cli_env, ["resume", waiting_run], full=False)
    assert code == 3
    assert "lashflow.store.base" in modules and "lashflow.durable.outcome" in modules
    assert json.loads((tmp_path / "lean.json.dataclasses").read_text()) == []
    import lashflow.http.models as models  # the probe's test, on a module that has some

    assert "lashflow.http.models.RunPage" in dataclasses_in({models.__name__: models})


def lean_output_of(tmp_path: Path, env: dict[str, str], run_id: str) -> str:
    (code, out, _), _ = probe(tmp_path, env, ["resume", run_id], full=False)
    assert code == 3
    return out


@pytest.mark.parametrize("args", [
    [],
    ["run", "x.lash"],
    ["resume"],                                    # no run: typer's usage error
    ["resume", "a", "b"],                          # two runs
    ["resume", "--help"],
    ["resume", "a", "--max-wait", "soon"],         # not a number: typer says so
    ["resume", "a", "--db"],                       # an option without its value
    ["resume", "a", "--db", "--json"],             # typer decides what that means
    ["resume", "a", "--bogus"],
    ["resume", "a", "-tjson"],
    ["resume", "a", "--"],
    ["--utc", "resume", "a"],                      # a root option
])
def test_every_other_form_is_left_to_the_full_application(args: list[str]) -> None:
    assert read_resume(args) is None


def test_the_lean_reading_gives_what_typer_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LASHFLOW_DB", "")  # an empty variable counts as unset, as in click
    read = read_resume(["resume", "r1", "-t", "a", "--tools=b", "--tools", "c", "-f",
                        "--retry-interrupted", "--source", "x.lash", "--max-wait", "2.5"])
    assert read == {"as_json": False, "retry_interrupted": True, "follow": True, "db": None,
                    "tools": ["a", "b", "c"], "max_wait": 2.5, "source": Path("x.lash"),
                    "run_id": "r1"}
    monkeypatch.setenv("LASHFLOW_DB", "sqlite:///env.db")
    assert read_resume(["resume", "r1"])["db"] == "sqlite:///env.db"  # type: ignore[index]
    assert read_resume(["resume", "r1", "--db", "a.db", "--db", "b.db"])["db"] == "b.db"  # type: ignore[index]
