"""`list` and `show` are presentation over the read API: each reads the store once,
however many runs or steps there are."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import pytest

from lashflow.store.sqlite import SqliteStore

FAN = """
process child(n: int) { finish n * 2 }
hs = [start child(n: i) for i in range(6)]
finish await hs
"""


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store calls made (opening and closing the store aside)."""
    calls: list[str] = []
    for name, method in inspect.getmembers(SqliteStore, inspect.iscoroutinefunction):
        if name.startswith("_") or name in ("open", "close", "secret"):
            continue

        def counted(method: Any = method, name: str = name) -> Any:
            @functools.wraps(method)
            async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                return await method(self, *args, **kwargs)
            return call
        monkeypatch.setattr(SqliteStore, name, counted())
    return calls


def test_list_and_show_read_the_store_once_each(lf: Any, tmp_path: Path,
                                                reads: list[str]) -> None:
    file = tmp_path / "fan.lash"
    file.write_text(FAN)
    ran = lf("run", file, "--run-id", "parent", "--json")
    assert ran.code == 0, ran
    for args in (["list"], ["list", "--json"], ["list", "--status", "finished,failed"],
                 ["show", "parent"], ["show", "parent", "--json"]):
        reads.clear()
        shown = lf(*args)
        assert shown.code == 0, (args, shown)
        assert len(reads) == 1, (args, reads)
    shown = lf("show", "parent", "--json").json
    assert len(shown["children"]) == 6 and len(shown["steps"]) >= 7


def test_times_carry_their_offset_and_utc_on_request(cli_env: dict[str, str],
                                                     tmp_path: Path) -> None:
    import re
    import subprocess
    import sys

    def lashflow(*args: str, **env: str) -> str:
        done = subprocess.run([sys.executable, "-m", "lashflow", *args], env={**cli_env, "TZ": "America/New_York",
                                                        **env},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    flow = tmp_path / "one.lash"
    flow.write_text("finish 1\n")
    lashflow("run", str(flow), "--run-id", "t1")
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d)"
    local, utc, by_env = (re.search(stamp, out).group(1) for out in (
        lashflow("list"), lashflow("--utc", "list"), lashflow("list", LASHFLOW_UTC="1")))
    assert utc == by_env == "+00:00"
    assert local in ("-05:00", "-04:00")  # New York, winter or summer
