"""The CLI's telemetry in real subprocesses: OTEL_* environment set-up, and the worker's
run-transition lines as text and as JSON."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

Lfx = Callable[..., Any]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_otel_traces_exporter_console_prints_spans_on_stderr(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    parked = lfx("run", file, "--input", data, env={"OTEL_TRACES_EXPORTER": "console",
                                                     "OTEL_SERVICE_NAME": "shop"})
    assert parked.code == 3, parked
    key = parked.out.splitlines()[2].split()[2]
    assert parked.out.startswith("run ")  # stdout stays the command's own
    assert '"name": "lashflow.run fulfill"' in parked.err
    assert '"name": "lashflow.attempt tools.request_approval"' in parked.err
    assert '"service.name": "shop"' in parked.err
    assert key not in parked.err


def test_an_unknown_exporter_is_a_usage_error(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    refused = lfx("run", file, "--input", data, env={"OTEL_TRACES_EXPORTER": "zipkin"})
    assert refused.code == 2
    assert refused.err.strip() == ("error[usage_error]: OTEL_TRACES_EXPORTER=zipkin: lashflow "
                                   "knows console, otlp and none")


def test_the_worker_logs_each_run_transition_as_json(lfx: Lfx, example: Any) -> None:
    file, data = example("fulfill")
    assert lfx("submit", file, "--input", data, "--run-id", "order-7").code == 0
    worked = lfx("worker", "--once", "--log-format", "json")
    assert worked.code == 0, worked
    lines = [json.loads(line) for line in worked.out.splitlines()]
    assert [(line["run_id"], line["status"]) for line in lines] == [
        ("order-7", "running"), ("order-7", "waiting")]
    assert all(ISO.match(line["ts"]) for line in lines)
    assert lines[1]["waits"] == ["completion"]
    assert lines[1]["step"] == lfx("show", "order-7", "--json").json["waiting"][0]["step"]
    key = lfx("waiting", "--json").json["waiting"][0]["key"]
    assert key not in worked.out and key not in worked.err
    lfx("complete", key, "--result", '{"approved": true}')
    text = lfx("worker", "--once")
    words = [line.split() for line in text.out.splitlines()]
    assert [w[1:4] for w in words] == [["run", "order-7", "running"],
                                       ["run", "order-7", "finished"]]
    assert words[1][4:6] == ["step", lfx("show", "order-7", "--json").json["steps"][-1]["step"]]
    assert all(ISO.match(w[0]) for w in words)


def test_a_bad_log_format_is_refused(lfx: Lfx) -> None:
    refused = lfx("worker", "--once", "--log-format", "xml")
    assert refused.code == 2
    assert refused.err.strip() == "error[usage_error]: --log-format xml: use text or json"
