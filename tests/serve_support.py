"""A real ``lashflow serve`` subprocess on a free loopback port, for the HTTP and the
browser tests."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

TOKEN = "test-token-0123456789"
ROOT = Path(__file__).resolve().parents[1]


class Server:
    """One `lashflow serve` subprocess; its output (the access log) is kept whole."""

    def __init__(self, tmp: Path, db: str, *extra: str,
                 env: dict[str, str] | None = None) -> None:
        self.tmp, self.db, self.extra, self.env = tmp, db, extra, env or {}
        self.log: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> None:
        env = dict(os.environ, LASHFLOW_API_TOKEN=TOKEN, PYTHONUNBUFFERED="1", **self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lashflow", "serve", "--port", "0", "--db", self.db,
             "--processes", str(self.tmp / "processes"), *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            cwd=self.tmp)
        up = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line)
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    self.url = found.group(1)
                    up.set()
        threading.Thread(target=read, daemon=True).start()
        if not up.wait(60):
            self.stop()
            raise AssertionError("lashflow serve did not start:\n" + "".join(self.log))

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


@contextlib.contextmanager
def serving(tmp: Path, files: dict[str, str],
            env: dict[str, str] | None = None) -> Iterator[Server]:
    """A started server whose processes directory holds the fulfill example and
    ``files`` (name -> text), with ``env`` added to its environment; killed at the end
    if a test left it running."""
    processes = tmp / "processes"
    processes.mkdir()
    for name in ("fulfill.lash", "fulfill.py"):
        shutil.copy(ROOT / "processes" / name, processes)
    for name, text in files.items():
        (processes / name).write_text(text)
    running = Server(tmp, f"sqlite:///{tmp / 'serve.db'}", env=env)
    running.start()
    try:
        yield running
    finally:
        if running.proc is not None and running.proc.poll() is None:
            running.proc.kill()
            running.proc.wait(30)


def launch_browser(playwright: Any) -> Any:
    """Headless Chromium: Debian's ``chromium`` from PATH, else Playwright's own. Without
    one the test skips, or fails where ``LASHFLOW_REQUIRE_BROWSER`` is set (CI)."""
    import pytest

    system = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        return playwright.chromium.launch(executable_path=system, headless=True,
                                          args=["--no-sandbox"])
    except Exception as exc:  # no usable browser here
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        if system is not None:  # installed, but it did not start: say so, not "install it"
            reason = f"headless Chromium at {system} did not start ({why})"
        else:
            reason = ("no headless Chromium: install Debian's `chromium` (apt-get install "
                      f"chromium) or run `playwright install chromium` ({why})")
        if not os.environ.get("LASHFLOW_REQUIRE_BROWSER"):
            pytest.skip(reason)  # only where CI's LASHFLOW_REQUIRE_BROWSER is unset
        pytest.fail(reason)



@contextlib.contextmanager
def console_page(url: str, height: int = 900) -> Iterator[Any]:
    """A page of a headless Chromium signed in to the console served at ``url``, on the
    runs page where the sign-in lands; the browser is closed after."""
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": height})
            page.goto(url + "/login")
            page.fill("#token", TOKEN)
            page.click("#sign-in")
            page.wait_for_url("**/runs")
            yield page
        finally:
            browser.close()
