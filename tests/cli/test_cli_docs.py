"""The user docs stay true: docs/cli.md is what scripts/gen_cli_docs.py generates from the
typer app, the getting-started example runs as printed, and the links resolve."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
Lf = Callable[..., Any]


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_generated_from_the_app() -> None:
    text = generator().render()
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == text, (
        "docs/cli.md is stale: run python scripts/gen_cli_docs.py")
    for command in ("run", "submit", "check", "resume", "recover", "complete", "signal",
                    "cancel", "list", "show", "waiting", "output", "graph", "worker"):
        assert f"## `lashflow {command}`" in text


def test_generator_check_mode() -> None:
    assert generator().main(["--check"]) == 0


def blocks(text: str, marker: str) -> str:
    """The fenced block whose first line is ``# marker``."""
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        if block.startswith(f"# {marker}\n"):
            return block
    raise AssertionError(f"no block {marker}")


def test_getting_started_own_workflow_runs_as_printed(lf: Lf, tmp_path: Path) -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    (tmp_path / "hello.lash").write_text(blocks(text, "hello.lash"))
    (tmp_path / "hello.py").write_text(blocks(text, "hello.py"))
    checked = lf("check", tmp_path / "hello.lash")
    assert checked.code == 0
    assert checked.out.strip() == f"{tmp_path / 'hello.lash'}: ok (process greet(name))"
    ran = lf("run", tmp_path / "hello.lash", "--input", '{"name": "ada"}')
    assert ran.code == 0
    assert ran.out.splitlines()[1] == '"HELLO ADA!"'
    assert "$ lashflow check hello.lash\nhello.lash: ok (process greet(name))" in text


def test_getting_started_commands_name_real_commands_and_files() -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    from lashflow.cli import app
    import typer

    group = typer.main.get_command(app)
    known = set(group.commands)
    code = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", text, re.S))
    commands = re.findall(r"^(?:\$ |pip install -e \. && )?lashflow (.+)$", code, re.M)
    assert len(commands) >= 8
    for line in commands:
        words = shlex.split(line.split(" && ")[0])
        assert words[0] in known, line
        for word in words:
            for path in re.findall(r"processes/[\w.]+", word):
                assert (ROOT / path).exists(), path


def test_doc_links_resolve() -> None:
    for name in ("getting-started.md", "operations.md", "durability.md", "cli.md"):
        text = (DOCS / name).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([\w./-]+\.md)\)", text):
            assert (DOCS / target).exists(), (name, target)


def test_readme_commands_are_the_getting_started_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    first = "pip install -e . && lashflow run processes/fulfill.lash --input @processes/fulfill.input.json"
    second = "pip install -e '.[dev]' && pytest"
    for text in (readme, guide):
        assert first in text and second in text
