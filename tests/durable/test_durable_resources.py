"""A process parameter typed with a tool module's resource type receives that module's
authority: it links, its input is checked, and calls through it run, for a dotted module
(``workspace.default`` -> ``WorkspaceDefault``) as for ``tools`` -> ``Tools``.

Found here: the linker and the input check named a dotted module's type
``WorkspaceDefault`` while the run-time binding named it ``Workspace.Default``, so such a
process linked and passed the input check, then failed with "not a module authority".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lashflow import Engine, RunStatus, ToolCall, ToolResult, tool
from lashflow.errors import InputInvalid

READS: list[str] = []


@tool(module="workspace.default")
async def read_file(call: ToolCall) -> ToolResult:
    READS.append(call.input["path"])
    return ToolResult.ok(f"contents of {call.input['path']}")


@tool
async def shout(call: ToolCall) -> ToolResult:
    return ToolResult.ok(str(call.input["text"]).upper())


SOURCE = """
process p(w: WorkspaceDefault, t: Tools) {
  text = await w.read_file({ path: "a.txt" })?
  loud = await t.shout({ text: text })?
  finish loud
}
"""


async def test_a_dotted_module_authority_is_passed_in_and_called(tmp_path: Path) -> None:
    READS.clear()
    async with Engine(db=f"sqlite:///{tmp_path / 'r.db'}", tools=[read_file, shout]) as engine:
        outcome = await engine.run(SOURCE, process="p",
                                   input={"w": "workspace.default", "t": "tools"})
        assert outcome.status is RunStatus.FINISHED, outcome.error
        assert outcome.result == "CONTENTS OF A.TXT"
    assert READS == ["a.txt"]


@pytest.mark.parametrize("given", ["tools", "workspace", "nope", 3])
async def test_an_authority_must_name_its_own_module(tmp_path: Path, given: object) -> None:
    async with Engine(db=f"sqlite:///{tmp_path / 'r.db'}", tools=[read_file, shout]) as engine:
        with pytest.raises(InputInvalid) as info:
            await engine.run(SOURCE, process="p", input={"w": given, "t": "tools"})
    assert info.value.message.startswith('$.w: expected the module name "workspace.default" '
                                         "(a WorkspaceDefault is that module's authority), got ")
