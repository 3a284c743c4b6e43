"""editors/vscode packs into a .vsix with the official packager (npm's @vscode/vsce), and
the package holds what VS Code needs: the manifest, the client, the grammar, the language
configuration and the language client library."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

from editor_support import VSCODE, node_tools


def test_the_extension_packs_into_a_vsix(tmp_path: Path) -> None:
    node = node_tools()
    vsix = tmp_path / "lashlang.vsix"
    done = subprocess.run(
        [node, str(VSCODE / "node_modules" / "@vscode" / "vsce" / "vsce"), "package",
         "--allow-missing-repository", "--out", str(vsix)],
        capture_output=True, text=True, timeout=300, cwd=VSCODE)
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(vsix) as package:
        names = set(package.namelist())
        manifest = json.loads(package.read("extension/package.json"))
        grammar = json.loads(package.read("extension/syntaxes/lashlang.tmLanguage.json"))
    for name in ["extension/extension.js", "extension/language-configuration.json",
                 "extension/syntaxes/lashlang.tmLanguage.json", "extension.vsixmanifest",
                 "extension/node_modules/vscode-languageclient/package.json"]:
        assert name in names, name
    assert not any("vscode-textmate" in n or "/test/" in n for n in names)  # dev-only
    language = manifest["contributes"]["languages"][0]
    assert (language["id"], language["extensions"]) == ("lashlang", [".lash"])
    assert manifest["contributes"]["grammars"][0]["scopeName"] == grammar["scopeName"]
    assert manifest["contributes"]["configuration"]["properties"][
        "lashflow.server.command"]["default"] == ["lashflow", "lsp"]


def test_the_client_starts_lashflow_lsp() -> None:
    client = (VSCODE / "extension.js").read_text(encoding="utf-8")
    assert '"lashflow", "lsp"' in client and "vscode-languageclient/node" in client
    config = json.loads((VSCODE / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"]["lineComment"] == "#"
    assert ["{", "}"] in config["brackets"]
