"""Every Python example in docs/tools.md runs as written."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_guide_has_examples():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int):
    namespace = {"__name__": f"docs_tools_example_{index}"}
    exec(compile(BLOCKS[index], f"docs/tools.md[{index}]", "exec"), namespace)
