"""Outcomes of a Lashlang program on both implementations, and how they are compared.

One outcome is a JSON object: ``finished``/``failed`` (value, prints, tool calls),
``continued`` (the original's main block without ``finish``: lashflow's ``finished null``),
``parse_error``/``link_error`` (message, location), ``runtime_error`` (kind, message),
``limit_exceeded``, ``panic`` (the original only), ``crash`` (an escaped Python exception).

``run_program`` runs one program on lashflow with the in-memory test host; run as a script
with ``--serve`` it answers one JSON request line (``{"source", "stubs", "signals"}``) with
one outcome line, which is how the campaign drives it in a separate process.

``verdict`` compares two outcomes: ``None`` when they agree, ``accepted: <class>`` when the
difference is one that docs/adr/0025 decides lashflow keeps, else a short description.
The corpus test and the campaign share it, so both accept exactly the same differences.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import select
import subprocess
import sys
import time
import traceback
from typing import Any

SIGNAL_TIMEOUT = 0.05  # a wait_signal with nothing queued fails at once instead of after 2 s

Outcome = dict[str, Any]


# --------------------------------------------------------------------------- lashflow side


def _jsonable(v: Any) -> Any:
    from lashflow.interp.values import to_json

    try:
        return to_json(v)
    except TypeError:  # already JSON data
        return v


async def _run(source: str, stubs: dict[str, Any], signals: dict[str, Any]) -> Outcome:
    from lashflow.errors import LimitExceeded
    from lashflow.interp.compiler import compile_module
    from lashflow.interp.errors import LashRuntimeError
    from lashflow.lang import link, parse
    from lashflow.lang.catalog import Catalog
    from lashflow.lang.diagnostics import LangError
    from lashflow.testing.memory_host import MemoryHost

    try:
        catalog = Catalog.permissive({"tools": sorted(stubs) or ["noop"]})
        program = compile_module(link(parse(source), catalog), catalog)
    except LangError as exc:
        d = exc.diagnostic
        return {"outcome": d.code, "message": d.message, "line": d.line, "column": d.column}
    host = MemoryHost(program, stubs, signals, signal_timeout=SIGNAL_TIMEOUT)

    def extras(out: Outcome) -> Outcome:
        out["prints"] = list(host.prints)
        out["calls"] = [{"tool": c["tool"], "input": _jsonable(c["input"])} for c in host.calls]
        return out

    try:
        result = await host.run()
    except LashRuntimeError as exc:
        return extras({"outcome": "runtime_error", "kind": exc.kind, "message": exc.message})
    except LimitExceeded as exc:
        return extras({"outcome": "limit_exceeded", "message": str(exc)})
    if result.status == "finished":
        return extras({"outcome": "finished", "value": _jsonable(result.value)})
    err = result.error
    return extras({"outcome": result.status, "value": _jsonable(getattr(err, "value", None)),
                   "message": getattr(err, "message", str(err))})


def run_program(source: str, stubs: dict[str, Any] | None = None,
                signals: dict[str, Any] | None = None) -> Outcome:
    """The outcome of ``source`` on lashflow; any escaped exception is a ``crash``."""
    try:
        return asyncio.run(_run(source, dict(stubs or {}), dict(signals or {})))
    except Exception as exc:  # noqa: BLE001 - every escape is a finding
        return {"outcome": "crash", "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8)}


def run_children_in_memory(source: str, stubs: dict[str, Any] | None = None,
                           signals: dict[str, Any] | None = None) -> Outcome:
    """The outcome on lashflow with what the interpreter hands to another run or the host
    kept as it is in memory, non-finite numbers included, where lashflow writes it as
    JSON (docs/adr/0025 ``child-input-is-json``): the original passes a child its
    arguments as values, so ``start p(m: 1 / -0.0)`` gives the child ``-inf``, not null."""
    from lashflow.interp import instructions, values

    kept = instructions.to_json

    def keeping(v: Any) -> Any:
        t = type(v)
        if t is float and v - v != 0.0:
            return v
        if t is list or t is tuple:
            return [keeping(x) for x in v]
        if t is dict:
            return {k: keeping(x) for k, x in v.items()}
        return values.to_json(v)

    instructions.to_json = keeping  # type: ignore[assignment]  # restored below
    try:
        return run_program(source, stubs, signals)
    finally:
        instructions.to_json = kept  # type: ignore[assignment]


def run_with_serde_numbers(source: str, stubs: dict[str, Any] | None = None,
                           signals: dict[str, Any] | None = None) -> Outcome:
    """The outcome on lashflow with ``json_parse`` reading numbers as the original's JSON
    reader does, one rounding too many (docs/adr/0025 ``json-number-rounding``)."""
    from lashflow.interp import json_parse
    from serde_float import serde_number  # noqa: PLC0415 - a sibling module of this script

    kept = json_parse._read_int, json_parse._read_float

    def read_int(text: str) -> int | float:
        value = kept[0](text)  # lashflow's range check and -0
        return value if isinstance(value, float) else serde_number(text)

    def read_float(text: str) -> float:
        kept[1](text)
        return float(serde_number(text))

    json_parse._read_int, json_parse._read_float = read_int, read_float  # restored below
    try:
        return run_program(source, stubs, signals)
    finally:
        json_parse._read_int, json_parse._read_float = kept


def run_saturated(source: str, stubs: dict[str, Any] | None = None,
                  signals: dict[str, Any] | None = None) -> Outcome:
    """The outcome on lashflow with 2^63 and 2^64 written as the original writes them (one
    too low: docs/adr/0025 ``boundary-integers-one-too-low``), to tell whether a difference
    follows from those digits alone, wherever they went (a slice of the text, a position a
    search reports, a length)."""
    from lashflow.interp import values

    kept = values.number_text, values.json_number
    low = {2.0**63: "9223372036854775807", 2.0**64: "18446744073709551615"}

    def number_text(x: float) -> str:
        return low.get(x) or kept[0](x)

    def json_number(x: float) -> str:
        return low.get(x) or kept[1](x)

    values.number_text, values.json_number = number_text, json_number  # type: ignore[assignment]
    try:
        return run_program(source, stubs, signals)
    finally:
        values.number_text, values.json_number = kept  # type: ignore[assignment]


def serve() -> int:
    """JSON request lines on stdin, one outcome line each on stdout."""
    sys.setrecursionlimit(20000)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            out = run_program(req.get("source", ""), req.get("stubs"), req.get("signals"))
        except Exception as exc:  # noqa: BLE001
            out = {"outcome": "harness_error", "message": str(exc)}
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
        sys.stdout.flush()
    return 0


class Server:
    """A runner process in serve mode. A request that takes longer than ``timeout`` kills
    it (outcome ``timeout``); the next request starts a fresh one."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.argv = argv
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, request: dict[str, Any]) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, bufsize=0)
            self.buf = b""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
        except BrokenPipeError:
            self.close()
            return {"outcome": "harness_error", "message": "runner died before the request"}
        deadline = time.monotonic() + self.timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                return {"outcome": "timeout", "message": f"no answer within {self.timeout}s"}
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    self.close()
                    return {"outcome": "crash", "message": f"runner exited with {code}"}
                self.buf += chunk
        text, _, self.buf = self.buf.partition(b"\n")
        return json.loads(text.decode("utf-8", "replace"))


# --------------------------------------------------------------------------- comparison


def canon(v: Any) -> Any:
    """JSON value -> comparable form: numbers as floats (the original has only f64),
    records as sorted items, process handle ids replaced (they are host-defined)."""
    if isinstance(v, bool) or v is None:
        return ("b", v) if isinstance(v, bool) else None
    if isinstance(v, (int, float)):
        f = float(v)
        return ("nan",) if math.isnan(f) else ("n", f)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("l", tuple(canon(x) for x in v))
    if isinstance(v, dict):
        if v.get("__handle__") == "process" and "id" in v:
            v = {**v, "id": "<handle>"}
        return ("r", tuple(sorted((k, canon(x)) for k, x in v.items())))
    return ("?", repr(v))


def _shown_resource_type(message: str) -> str:
    # lashflow names the module where the original names its resource type (docs/adr/0015)
    return message.replace("resource type `Tools` does not expose", "module `tools` does not expose")


def summary(out: Outcome, *, ordered_calls: bool) -> tuple[Any, ...]:
    """The comparable part of an outcome (locations of link errors are lashflow's own)."""
    kind = out.get("outcome")
    calls = [(c.get("tool"), canon(c.get("input"))) for c in out.get("calls") or ()]
    calls_key = tuple(calls) if ordered_calls else tuple(sorted(calls, key=repr))
    prints = tuple(out.get("prints") or ())
    if kind == "continued":
        return ("finished", None, prints, calls_key)
    if kind in ("finished", "failed"):
        return (kind, canon(out.get("value")), prints, calls_key)
    if kind == "parse_error":
        return (kind, out.get("message"), out.get("line"), out.get("column"))
    if kind == "link_error":
        return (kind, _shown_resource_type(out.get("message") or ""))
    if kind == "runtime_error":
        return (kind, out.get("kind"), out.get("message"), prints, calls_key)
    return (kind, out.get("message"))


def has_processes(source: str) -> bool:
    """Children run concurrently in lashflow: their calls are compared as a set."""
    return bool(re.search(r"\bprocess\b|\bstart\b", source))


def differs(ref: Outcome, new: Outcome, source: str) -> str | None:
    """None when the outcomes agree, else what differs first."""
    ordered = not has_processes(source)
    a, b = summary(ref, ordered_calls=ordered), summary(new, ordered_calls=ordered)
    if a == b:
        return None
    if a[0] != b[0]:
        return f"outcome {a[0]} vs {b[0]}"
    names = {"finished": ["value", "prints", "calls"], "failed": ["value", "prints", "calls"],
             "parse_error": ["message", "line", "column"], "link_error": ["message"],
             "runtime_error": ["kind", "message", "prints", "calls"]}.get(str(a[0]), ["message"])
    for name, x, y in zip(names, a[1:], b[1:]):
        if x != y:
            return f"{a[0]}: {name} differs"
    return "differs"


def verdict(ref: Outcome, new: Outcome, source: str, stubs: dict[str, Any] | None = None,
            signals: dict[str, Any] | None = None) -> str | None:
    """None when both agree; ``accepted: <class>`` for a difference docs/adr/0025 keeps;
    otherwise the divergence. With ``stubs`` (the program's tool answers), a difference no
    rule explains is run again under each change ``RERUNS`` names (the original's boundary
    integers; children handed values, not JSON): if one agrees, the difference is its
    class's."""
    what = differs(ref, new, source)
    if what is None:
        return None
    from accepted import accepted_class  # noqa: PLC0415 - a sibling module of this script

    name = accepted_class(ref, new, source)
    for rerun, rerun_class in RERUNS if name is None and stubs is not None else ():
        if rerun_class in _RERUN_ONLY_WITH and _RERUN_ONLY_WITH[rerun_class] not in source:
            continue
        again = verdict(ref, rerun(source, stubs, signals), source)
        if again is None or again.startswith("accepted: "):
            name = rerun_class
            break
    return f"accepted: {name}" if name else what


# A rerun that cannot change a program without this word is not tried on it.
_RERUN_ONLY_WITH = {"child-input-is-json": "start", "json-number-rounding": "json_parse"}

# Reruns of a difference no rule explains, each under the one change its class names.
RERUNS = ((run_saturated, "boundary-integers-one-too-low"),
          (run_children_in_memory, "child-input-is-json"),
          (run_with_serde_numbers, "json-number-rounding"))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    sys.exit(__doc__)
