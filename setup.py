"""Build step that pyproject.toml cannot say: the grammar goes into the package.

``grammar/lashlang.lark`` stays the single source at the top of the repository (the
editors, the docs and the benchmarks read it there); a built package gets a copy at
``lashflow/grammar/lashlang.lark``, where ``lashflow.lang.parser`` looks first. A
checkout reads the source itself, so nothing depends on a symlink (docs/adr/0027).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithGrammar(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "lashflow" / "grammar"
        self.mkpath(str(target))
        self.copy_file(str(Path("grammar") / "lashlang.lark"), str(target / "lashlang.lark"))


setup(cmdclass={"build_py": BuildWithGrammar})
