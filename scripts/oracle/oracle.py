#!/usr/bin/env python3
"""Differential testing of lashflow against the original Lashlang implementation.

    python scripts/oracle/oracle.py build --sources DIR        # build the original (once)
    python scripts/oracle/oracle.py probe FILE                 # programs in FILE on both
    python scripts/oracle/oracle.py campaign --minutes 30 --seed 7
    python scripts/oracle/oracle.py record FILE [--name-prefix P]   # add FILE's programs to
                                                               # the corpus, with the original's
                                                               # outcome as the expected one

``--sources`` is a folder with the original's source archives (``lash-<commit>.tar.gz``,
``compact_str-0.9.1.tar.gz``, ``castaway-0.2.4.tar.gz``); the build needs Debian's
``librust-*-dev`` crate sources and cargo, and no network. Everything built goes to
``$ORACLE_WORK`` (default: ``oracle-work`` in the system temp folder).

A program file holds programs separated by lines ``----``; a line ``STUBS {json}`` inside a
program sets its tool stubs (``{"name": {"ok": V} | {"error": "m"} | "echo" | {"seq": [...]}
| {"by": {...}}}``, all in the module ``tools``).

A campaign runs generated programs and mutations of the corpus through both, one program
at a time (one core for each side while it runs), and writes ``classes.json`` (one smallest
example per divergence class), ``accepted.json`` (counts per docs/adr/0025 class) and
``stats.json`` into ``--out``. ``--record`` adds each new class's smallest example to the
corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402
import outcomes  # noqa: E402

WORK = Path(os.environ.get("ORACLE_WORK") or Path(tempfile.gettempdir()) / "oracle-work")
RUNNER = WORK / "build" / "target" / "release" / "lash-diff-runner"
CORPUS = ROOT / "tests" / "conformance" / "oracle_corpus.json"
KEPT = ("outcome", "value", "message", "kind", "prints", "calls", "line", "column")


def original_server(timeout: float) -> outcomes.Server:
    if not RUNNER.exists():
        sys.exit(f"no original runner at {RUNNER}: run `oracle.py build` with the same ORACLE_WORK")
    return outcomes.Server([str(RUNNER), "--serve"], timeout)


def lashflow_server(timeout: float) -> outcomes.Server:
    return outcomes.Server([sys.executable, str(HERE / "outcomes.py"), "--serve"], timeout)


class Pair:
    """Both runners; the original first (a program it cannot finish in time is skipped)."""

    def __init__(self) -> None:
        self.ref = original_server(float(os.environ.get("ORACLE_TIMEOUT", "3")))
        self.new = lashflow_server(float(os.environ.get("LASHFLOW_TIMEOUT", "20")))

    def run(self, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        req = {"source": case["source"], "stubs": case.get("stubs") or {},
               "signals": case.get("signals") or {}}
        a = self.ref.run(req)
        if a.get("outcome") == "timeout":
            return a, {"outcome": "skipped", "message": "the original timed out"}
        if "stub host: too many child processes" in str(a.get("message")):
            # the runner's own bound on children (so a runaway program ends), not the
            # language's: the original could not finish the program here, as with a timeout
            return a, {"outcome": "skipped", "message": "the original's runner started too many children"}
        if "stub host: child process nesting too deep" in str(a):
            # the runner's own bound on nesting (16), where lashflow's engine allows 64:
            # what a run does past 16 (its message, wherever it went) is the runner's
            return a, {"outcome": "skipped", "message": "the original's runner nested too deep"}
        return a, self.new.run(req)

    def close(self) -> None:
        self.ref.close()
        self.new.close()


def trimmed(o: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in o.items() if k in KEPT and not (k in ("prints", "calls") and not v)}


def read_programs(path: str) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8")
    cases = []
    for block in text.split("\n----\n"):
        stubs: dict[str, Any] = {}
        lines = []
        for line in block.strip("\n").split("\n"):
            if line.startswith("STUBS "):
                stubs = json.loads(line[6:])
            elif not line.startswith("# "):
                lines.append(line)
        if any(x.strip() for x in lines):
            cases.append({"source": "\n".join(lines) + "\n", "stubs": stubs})
    return cases


# --------------------------------------------------------------------------- commands


def build(args: argparse.Namespace) -> int:
    env = dict(os.environ, ORACLE_WORK=str(WORK), ORACLE_SOURCES=str(Path(args.sources).resolve()))
    return subprocess.call(["bash", str(HERE / "build.sh")], env=env)


def probe(args: argparse.Namespace) -> int:
    pair = Pair()
    try:
        for case in read_programs(args.file):
            a, b = pair.run(case)
            print("=" * 72)
            print(case["source"].rstrip())
            print("  original:", json.dumps(trimmed(a), ensure_ascii=False)[:400])
            print("  lashflow:", json.dumps(trimmed(b), ensure_ascii=False)[:400])
            print("  ->", outcomes.verdict(a, b, case["source"], case.get("stubs") or {}, case.get("signals")) or "agree")
    finally:
        pair.close()
    return 0


def load_corpus() -> list[dict[str, Any]]:
    return json.loads(CORPUS.read_text(encoding="utf-8")) if CORPUS.exists() else []


def save_corpus(cases: list[dict[str, Any]]) -> None:
    CORPUS.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def add_to_corpus(pair: Pair, found: list[dict[str, Any]], prefix: str) -> int:
    """Append programs to the corpus with the original's outcome as the expected one."""
    corpus = load_corpus()
    known = {c["source"] for c in corpus}
    added = 0
    for case in found:
        if case["source"] in known:
            continue
        a, _ = pair.run(case)
        if a.get("outcome") in ("timeout", "crash", "harness_error"):
            continue
        corpus.append({"name": f"{prefix}{len(corpus) + 1:03d}", "source": case["source"],
                       "stubs": case.get("stubs") or {}, "original": trimmed(a)})
        known.add(case["source"])
        added += 1
    save_corpus(corpus)
    return added


def record(args: argparse.Namespace) -> int:
    pair = Pair()
    try:
        added = add_to_corpus(pair, read_programs(args.file), args.name_prefix)
    finally:
        pair.close()
    print(f"{added} programs added to {CORPUS.relative_to(ROOT)}")
    return 0


def signature(ref: dict[str, Any], new: dict[str, Any], what: str) -> str:
    """A coarse class key: the two outcome kinds, message shapes, and what differs."""
    def shape(o: dict[str, Any]) -> str:
        m = str(o.get("message") or "")
        m = re.sub(r"`[^`]*`", "`_`", m)
        m = re.sub(r'"[^"]*"', '"_"', m)
        m = re.sub(r"-?\d+(\.\d+)?", "N", m)
        kind = "finished" if o.get("outcome") == "continued" else o.get("outcome")
        return f"{kind}/{o.get('kind') or ''}/{' '.join(m.split()[:5])}"
    return f"{shape(ref)} <> {shape(new)} :: {what}"


def minimize(pair: Pair, case: dict[str, Any], sig: str, tries: int = 300) -> dict[str, Any]:
    """Smaller program with the same class: drop lines, then single tokens."""
    def same(src: str) -> bool:
        nonlocal tries
        if tries <= 0:
            return False
        tries -= 1
        a, b = pair.run({**case, "source": src})
        what = outcomes.verdict(a, b, src, case.get("stubs") or {}, case.get("signals"))
        return what is not None and not what.startswith("accepted") and signature(a, b, what) == sig

    src = case["source"]
    lines = src.split("\n")
    i = 0
    while i < len(lines) and tries > 0:
        cand = lines[:i] + lines[i + 1:]
        if cand and same("\n".join(cand)):
            lines = cand
        else:
            i += 1
    src = "\n".join(lines)
    toks = gen.tokens(src)
    i = len(toks) - 1
    while i >= 0 and tries > 0:
        s, e = toks[i]
        cand = src[:s] + src[e:]
        if same(cand):
            src = cand
            toks = gen.tokens(src)
        i = min(i - 1, len(toks) - 1)
    return {**case, "source": src}


def campaign(args: argparse.Namespace) -> int:
    out = Path(args.out or WORK / f"campaign-{args.seed}")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    seeds = [{"source": c["source"], "stubs": c.get("stubs") or {}} for c in load_corpus()]
    stats: dict[str, Any] = {"seed": args.seed, "programs": 0, "divergent": 0, "accepted": 0,
                             "skipped": 0}
    classes: dict[str, Any] = {}
    accepted: dict[str, int] = {}
    pair = Pair()
    began = time.monotonic()
    deadline = began + args.minutes * 60
    last_note = began
    try:
        while time.monotonic() < deadline:
            if seeds and rng.random() < args.mutate_share:
                case = gen.mutate(rng, rng.choice(seeds))
            else:
                case = gen.generate(rng)
            a, b = pair.run(case)
            stats["programs"] += 1
            if b.get("outcome") == "skipped" or "harness_error" in (a.get("outcome"), b.get("outcome")):
                stats["skipped"] += 1
                continue
            what = outcomes.verdict(a, b, case["source"], case.get("stubs") or {}, case.get("signals"))
            if what is None:
                continue
            if what.startswith("accepted: "):
                stats["accepted"] += 1
                name = what[len("accepted: "):]
                accepted[name] = accepted.get(name, 0) + 1
                continue
            stats["divergent"] += 1
            sig = signature(a, b, what)
            entry = classes.setdefault(sig, {"count": 0, "example": case, "original": trimmed(a),
                                             "lashflow": trimmed(b)})
            entry["count"] += 1
            if entry["count"] == 1:
                print(f"[{stats['programs']}] new class {len(classes)}: {sig[:150]}", flush=True)
            elif len(case["source"]) < len(entry["example"]["source"]):
                entry.update(example=case, original=trimmed(a), lashflow=trimmed(b))
            if time.monotonic() - last_note > 60:
                last_note = time.monotonic()
                print(f"... {stats['programs']} programs, {stats['divergent']} divergent, "
                      f"{len(classes)} classes", flush=True)
        stats["seconds"] = round(time.monotonic() - began, 1)
        if args.minimize or args.record:
            for sig, entry in classes.items():
                entry["minimized"] = minimize(pair, entry["example"], sig)
        if args.record:
            found = [e.get("minimized") or e["example"] for e in classes.values()]
            print(f"{add_to_corpus(pair, found, args.name_prefix)} programs added to the corpus")
    finally:
        pair.close()
    judged = stats["programs"] - stats["skipped"]
    stats["programs_per_second"] = round(stats["programs"] / max(stats.get("seconds", 1), 1), 1)
    stats["divergence_rate"] = round(stats["divergent"] / max(judged, 1), 5)
    stats["classes"] = len(classes)
    stats["accepted_by_class"] = accepted
    (out / "classes.json").write_text(json.dumps(classes, indent=1, ensure_ascii=False), "utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=1), "utf-8")
    print(json.dumps(stats, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the original's runner into $ORACLE_WORK")
    b.add_argument("--sources", required=True, help="folder with the source archives")
    p = sub.add_parser("probe", help="run the programs of a file on both")
    p.add_argument("file")
    r = sub.add_parser("record", help="add a file's programs to the corpus")
    r.add_argument("file")
    r.add_argument("--name-prefix", default="case-")
    c = sub.add_parser("campaign", help="generated and mutated programs on both")
    c.add_argument("--minutes", type=float, default=30.0)
    c.add_argument("--seed", type=int, default=int(time.time()))
    c.add_argument("--out")
    c.add_argument("--mutate-share", type=float, default=0.35)
    c.add_argument("--minimize", action="store_true", help="shrink each class's example")
    c.add_argument("--record", action="store_true", help="add each new class to the corpus")
    c.add_argument("--name-prefix", default="found-")
    args = ap.parse_args()
    return {"build": build, "probe": probe, "record": record, "campaign": campaign}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
