"""Every mistake a user can make ends as one line ``error[code]: message`` on stderr and
exit 2 (a caret excerpt for source errors), or one ``rejected`` JSON object with --json;
never a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

Lf = Callable[..., Any]


def one_error(ran: Any, code: str, *fragments: str) -> None:
    """Exit 2, nothing on stdout, exactly one error line naming ``code``."""
    assert ran.code == 2, ran
    assert ran.out == "", ran
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1, ran.err
    assert lines[0].startswith(f"error[{code}]: "), ran.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, ran.err)
    assert "Traceback" not in ran.err


def rejected(ran: Any, code: str) -> dict[str, Any]:
    assert ran.code == 2, ran
    data = ran.json
    assert data["status"] == "rejected" and data["error"]["code"] == code
    assert set(data) <= {"run_id", "status", "error"}
    assert set(data["error"]) >= {"code", "message"}
    return data


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    """A one-parameter process with a tool beside it."""
    (tmp_path / "flow.lash").write_text(
        "process flow(n: int, tag: str) {\n  v = await tools.double({ n: n })?\n  finish v\n}\n")
    (tmp_path / "flow.py").write_text(
        "from lashflow import tool\n\n@tool\nasync def double(n: int) -> int:\n    return n * 2\n")
    return tmp_path / "flow.lash"


def test_missing_file(lf: Lf, tmp_path: Path) -> None:
    one_error(lf("run", tmp_path / "nope.lash"), "file_not_found", "no such file", "nope.lash")
    rejected(lf("run", tmp_path / "nope.lash", "--json"), "file_not_found")
    one_error(lf("check", tmp_path / "nope.lash"), "file_not_found")
    one_error(lf("graph", tmp_path / "nope.lash"), "file_not_found")
    one_error(lf("submit", tmp_path / "nope.lash"), "file_not_found")


def test_directory_instead_of_file(lf: Lf, tmp_path: Path) -> None:
    one_error(lf("run", tmp_path), "usage_error", "directory")


def test_bad_json_input(lf: Lf, flow: Path) -> None:
    ran = lf("run", flow, "--input", '{"n": 1,')
    one_error(ran, "input_invalid", "--input is not valid JSON", "line 1 column")
    rejected(lf("run", flow, "--input", "{n: 1}", "--json"), "input_invalid")


def test_missing_input_file(lf: Lf, flow: Path, tmp_path: Path) -> None:
    one_error(lf("run", flow, "--input", f"@{tmp_path / 'in.json'}"), "file_not_found",
              "--input", "in.json")


def test_bad_json_in_input_file(lf: Lf, flow: Path, tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text("{ not json")
    one_error(lf("run", flow, "--input", f"@{tmp_path / 'in.json'}"), "input_invalid",
              "not valid JSON")


@pytest.mark.parametrize("given, path, words", [
    ('{"n": 1}', "$.tag", "missing parameter `tag`"),
    ('{"n": "one", "tag": "x"}', "$.n", "expected int"),
    ('{"n": 1, "tag": "x", "extra": true}', "$.extra", "no parameter `extra`"),
    ("[1, 2]", "$", "JSON object"),
])
def test_input_not_matching_the_parameters(lf: Lf, flow: Path, given: str, path: str,
                                           words: str) -> None:
    ran = lf("run", flow, "--input", given)
    one_error(ran, "input_invalid", path + ":", words)
    data = rejected(lf("run", flow, "--input", given, "--json"), "input_invalid")
    assert path in data["error"]["message"]
    assert lf("list", "--json").json["runs"] == []  # nothing was stored


def test_unknown_run(lf: Lf) -> None:
    for command in (["show", "ghost"], ["resume", "ghost"], ["cancel", "ghost"],
                    ["signal", "ghost", "go"], ["output", "ghost", "a:1"]):
        one_error(lf(*command), "unknown_run", "no run with id 'ghost'")
        assert rejected(lf(*command, "--json"), "unknown_run")["run_id"] == "ghost"


def test_unknown_step(lf: Lf, flow: Path) -> None:
    run_id = lf("run", flow, "--input", '{"n": 2, "tag": "t"}', "--json").json["run_id"]
    one_error(lf("output", run_id, "nope:1"), "unknown_step", "has no step 'nope:1'", "its steps:")


def test_unknown_completion_key(lf: Lf, example: Any) -> None:
    one_error(lf("complete", "lfk_forged.key", "--result", "1"), "unknown_completion_key")
    file, data = example("fulfill")
    key = lf("run", file, "--input", data, "--json").json["waiting"][0]["key"]
    tampered = key[:-2] + ("AA" if not key.endswith("AA") else "BB")
    one_error(lf("complete", tampered, "--result", "1"), "unknown_completion_key")
    rejected(lf("complete", tampered, "--result", "1", "--json"), "unknown_completion_key")


def test_reused_completion_key(lf: Lf, example: Any) -> None:
    file, data = example("fulfill")
    key = lf("run", file, "--input", data, "--json").json["waiting"][0]["key"]
    assert lf("complete", key, "--result", '{"approved": true}').code == 0
    one_error(lf("complete", key, "--result", '{"approved": false}'),
              "completion_already_resolved", "already resolved")
    data = rejected(lf("complete", key, "--error", "no", "--json"), "completion_already_resolved")
    assert data["error"]["winner"]["kind"] == "ok"
    assert data["error"]["winner"]["value"] == {"approved": True}


def test_complete_needs_exactly_one_result(lf: Lf) -> None:
    one_error(lf("complete", "lfk_x"), "usage_error", "exactly one of --result")
    one_error(lf("complete", "lfk_x", "--result", "1", "--error", "e"), "usage_error")
    one_error(lf("complete", "lfk_x", "--result", "{oops"), "input_invalid", "--result")


@pytest.mark.parametrize("url, words", [
    ("mysql://x", "unsupported scheme 'mysql'"),
    ("sqlite://somehost/x.db", "bad database URL"),
    ("sqlite://", "names no file"),
    ("sqlite:///x.db?synchronous=sometimes", "synchronous"),
])
def test_bad_db_url(lf: Lf, url: str, words: str) -> None:
    one_error(lf("list", "--db", url), "db_error", words)
    rejected(lf("list", "--db", url, "--json"), "db_error")


def test_db_from_the_environment_is_checked_too(lf: Lf) -> None:
    one_error(lf("list", env={"LASHFLOW_DB": "mysql://x"}), "db_error", "mysql")


def test_unwritable_db_path(lf: Lf, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    (tmp_path / "one.lash").write_text("finish 1\n")
    one_error(lf("run", tmp_path / "one.lash", "--db", str(blocker / "journal.db")), "db_error",
              "cannot open database")


def test_newer_schema_version(lf: Lf, tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    (tmp_path / "one.lash").write_text("finish 1\n")
    assert lf("run", tmp_path / "one.lash", "--db", str(path)).code == 0  # today's version
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    one_error(lf("list", "--db", str(path)), "db_error", "schema version 999", "upgrade lashflow")
    rejected(lf("show", "x", "--db", str(path), "--json"), "db_error")


def test_parse_error_has_a_caret(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "bad.lash"
    file.write_text("process p() {\n  x = = 1\n}\n")
    ran = lf("run", file)
    assert ran.code == 2 and ran.out == ""
    lines = ran.err.rstrip("\n").split("\n")
    assert lines[0] == "error[parse_error]: unexpected `=`"
    assert lines[1] == f"--> {file}:2:7"
    assert lines[2] == "  |   x = = 1"
    assert lines[3] == "  |       ^"
    data = rejected(lf("run", file, "--json"), "parse_error")
    assert (data["error"]["line"], data["error"]["column"]) == (2, 7)
    assert lf("check", file).err == ran.err


def test_link_error_has_a_caret(lf: Lf, flow: Path) -> None:
    flow.write_text("process flow(n: int) {\n  v = await tools.triple({ n: n })?\n  finish v\n}\n")
    ran = lf("check", flow)
    assert ran.code == 2
    assert ran.err.startswith("error[link_error]: ")
    assert f"--> {flow}:2:" in ran.err and "^" in ran.err
    data = lf("check", flow, "--json").json
    assert data["status"] == "rejected" and data["ok"] is False
    assert data["error"]["code"] == "link_error" and data["error"]["line"] == 2


def test_run_conflict(lf: Lf, flow: Path) -> None:
    assert lf("run", flow, "--input", '{"n": 1, "tag": "a"}', "--run-id", "r1").code == 0
    same = lf("run", flow, "--input", '{"n": 1, "tag": "a"}', "--run-id", "r1", "--json")
    assert same.code == 0 and same.json["result"] == 2  # idempotent: the same run back
    one_error(lf("run", flow, "--input", '{"n": 9, "tag": "a"}', "--run-id", "r1"), "run_conflict",
              "different input")


def test_process_choice(lf: Lf, tmp_path: Path) -> None:
    file = tmp_path / "two.lash"
    file.write_text("process a() { finish 1 }\nprocess b() { finish 2 }\n")
    one_error(lf("run", file), "usage_error", "several processes (a, b)", "--process")
    one_error(lf("run", file, "--process", "c"), "usage_error", "no process `c`")
    assert lf("run", file, "--process", "b", "--json").json["result"] == 2


def test_tool_module_that_fails_to_import(lf: Lf, tmp_path: Path) -> None:
    (tmp_path / "t.lash").write_text("finish 1\n")
    (tmp_path / "t.py").write_text("import a_module_that_does_not_exist_anywhere\n")
    one_error(lf("run", tmp_path / "t.lash"), "usage_error", "cannot load tools", "t.py")


def test_settled_run_takes_no_signal(lf: Lf, flow: Path) -> None:
    lf("run", flow, "--input", '{"n": 1, "tag": "a"}', "--run-id", "done-1")
    one_error(lf("signal", "done-1", "go"), "run_settled", "finished")


@pytest.mark.parametrize("args, words", [
    (["run"], "Missing argument"),
    (["list", "--nope"], "No such option: --nope"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["--db", "x.db", "list"], "--db goes after the command"),
    (["list", "--status", "sleeping"], "unknown status 'sleeping'"),
    (["list", "--limit", "many"], "--limit"),
    (["worker", "--concurrency", "0"], "--concurrency"),
    (["graph", "x.lash", "--format", "svg"], "mermaid or dot"),
])
def test_usage_errors(lf: Lf, args: list[str], words: str) -> None:
    one_error(lf(*args), "usage_error", words)


def test_usage_error_with_json_is_one_object(lf: Lf) -> None:
    data = rejected(lf("list", "--bogus", "--json"), "usage_error")
    assert "--bogus" in data["error"]["message"]


def test_no_arguments_prints_help(lf: Lf) -> None:
    ran = lf()
    assert ran.code == 0 and "Commands" in ran.out and "run" in ran.out
