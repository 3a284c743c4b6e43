"""``lashflow fmt PATH...``: writes, names (``--check``, exit 1) or shows (``--diff``)
the files whose layout is not the canonical one; a file that does not parse is one
``error[parse_error]`` with its place, exit 2."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # not `from conftest`: which conftest that is
# depends on the folders a run was given


def test_fmt_check_names_the_files_and_writes_nothing(lf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sub").mkdir()
    messy = tmp_path / "sub" / "messy.lash"
    messy.write_text("x=1 # one\nfinish   x\n")
    tidy = tmp_path / "tidy.lash"
    tidy.write_text("finish 1\n")
    ran = lf("fmt", "--check", tmp_path)
    assert (ran.code, ran.out) == (1, f"{messy}\n")
    assert "1 file would be reformatted, 1 unchanged" in ran.err
    assert messy.read_text() == "x=1 # one\nfinish   x\n"

    ran = lf("fmt", "--diff", messy)
    assert ran.code == 0
    assert "-x=1 # one\n-finish   x\n+x = 1  # one\n+finish x\n" in ran.out
    assert messy.read_text() == "x=1 # one\nfinish   x\n"

    ran = lf("fmt", tmp_path)
    assert (ran.code, ran.out) == (0, f"{messy}\n")
    assert messy.read_text() == "x = 1  # one\nfinish x\n"
    assert lf("fmt", "--check", tmp_path).code == 0


def test_fmt_reports_a_file_that_does_not_parse(lf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.lash"
    bad.write_text("x = (\n")
    ran = lf("fmt", bad, tmp_path / "missing.lash")
    assert ran.code == 2
    assert ran.err.startswith("error[usage_error]: no such file or folder:")
    ran = lf("fmt", bad)
    assert ran.code == 2
    assert f"error[parse_error]: unexpected end of input\n--> {bad}:2:1" in ran.err
    assert bad.read_text() == "x = (\n"


def test_the_pre_commit_hook_runs_fmt() -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert "entry: lashflow fmt" in hooks and r"files: \.lash$" in hooks
