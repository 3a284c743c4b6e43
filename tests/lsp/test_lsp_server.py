"""``lashflow lsp`` end to end: a real server process over stdio, driven by pytest-lsp's
client, on a project folder with a ``.lash`` file and its tools in the ``.py`` beside it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from lashflow.lang.format import format_source

TOOLS = '''"""Tools of orders.lash."""
from lashflow import tool


@tool
async def quote(order_id: str, qty: int, note: str = "") -> dict:
    """Price an order line: the quantity times the list price."""
    return {"order_id": order_id, "amount": qty * 2.5}


@tool
async def charge(amount: float) -> dict:
    """Charge an amount to the customer's card."""
    return {"charged": amount}
'''

PROGRAM = '''type Line = { order_id: str, qty: int }

# price one line, then charge it
process bill(line: Line) signals { approve: bool } {
  priced = await tools.quote({ order_id: line.order_id, qty: line.qty })?
  sleep for "90s"
  ok = wait_signal("approve")
  receipt = await tools.charge({ amount: priced.amount })?
  finish receipt
}
'''


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lashflow",
                                                               "lsp"]))
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=pytest_lsp.client_capabilities("visual-studio-code"),
        root_uri=tmp_path.as_uri()))
    yield
    await lsp_client.shutdown_session()


def position(text: str, needle: str, delta: int = 0) -> T.Position:
    offset = text.index(needle) + delta
    line = text.count("\n", 0, offset)
    return T.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


class Editor:
    """One open document: edits, and the diagnostics the server publishes for it."""

    def __init__(self, client: LanguageClient, path: Path, text: str) -> None:
        self.client, self.path, self.uri, self.text = client, path, path.as_uri(), text
        self.version = 1

    async def open(self) -> list[T.Diagnostic]:
        self.client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=
            T.TextDocumentItem(uri=self.uri, language_id="lashlang", version=self.version,
                               text=self.text)))
        return await self.diagnostics()

    async def diagnostics(self) -> list[T.Diagnostic]:
        await self.client.wait_for_notification(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(self.client.diagnostics[self.uri])

    async def replace(self, old: str, new: str) -> list[T.Diagnostic]:
        start = self.text.index(old)
        begin, end = position(self.text, old), position(self.text, old, len(old))
        self.text = self.text[:start] + new + self.text[start + len(old):]
        self.version += 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(text_document=
            T.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(
                range=T.Range(start=begin, end=end), text=new)]))
        return await self.diagnostics()

    def at(self, needle: str, delta: int = 0) -> Any:
        return T.TextDocumentIdentifier(uri=self.uri), position(self.text, needle, delta)


async def opened(client: LanguageClient, tmp_path: Path, text: str = PROGRAM) -> Editor:
    (tmp_path / "orders.py").write_text(TOOLS)
    editor = Editor(client, tmp_path / "orders.lash", text)
    (tmp_path / "orders.lash").write_text(text)
    return editor


async def test_a_diagnostic_where_check_puts_it_and_gone_once_fixed(
        client: LanguageClient, tmp_path: Path) -> None:
    editor = await opened(client, tmp_path)
    assert await editor.open() == []

    found = await editor.replace("tools.charge", "tools.chrage")
    assert len(found) == 1
    d = found[0]
    assert d.code == "link_error" and d.severity == T.DiagnosticSeverity.Error
    assert d.message == ("module `tools` does not expose operation `chrage`\n"
                         "hint: did you mean `charge`?")
    start = editor.text.index("tools.chrage")
    assert d.range.start == position(editor.text, "tools.chrage")
    end = editor.text.index("})", start) + 2
    assert (d.range.end.line, d.range.end.character) == (
        editor.text.count("\n", 0, end), end - (editor.text.rfind("\n", 0, end) + 1))

    found = await editor.replace("tools.chrage", "tools.charge")
    assert found == []

    found = await editor.replace('  finish receipt\n', '  finish receipt +\n')
    assert [(x.code, x.message) for x in found] == [("parse_error", "unexpected `}`")]
    assert found[0].range.start == T.Position(line=editor.text.count("\n") - 1, character=0)

    found = await editor.replace('sleep for "90s"', 'sleep for "90 sec"')
    assert found[0].code == "parse_error"  # still the parse error above: check's first
    found = await editor.replace('  finish receipt +\n', '  finish receipt\n')
    assert [x.code for x in found] == ["link_error"]
    assert found[0].message.startswith('invalid duration "90 sec" in `sleep for`')


async def test_completion_after_tools_dot_lists_the_tools_with_their_fields(
        client: LanguageClient, tmp_path: Path) -> None:
    editor = await opened(client, tmp_path)
    await editor.open()
    await editor.replace("  finish receipt\n", "  more = tools.\n  finish receipt\n")
    doc, pos = editor.at("tools.\n", len("tools."))
    result = await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=pos))
    assert result is not None
    items = {i.label: i for i in (result.items if isinstance(result, T.CompletionList) else result)}
    assert set(items) == {"quote", "charge"}
    quote = items["quote"]
    assert quote.insert_text == "quote({ order_id: ${1:order_id}, qty: ${2:qty} })"
    assert quote.insert_text_format == T.InsertTextFormat.Snippet
    assert "Price an order line" in quote.documentation.value  # type: ignore[union-attr]
    assert quote.detail == "tools.quote({ order_id: str, qty: int, note: str? }) -> dict"

    # inside the call's record: the fields not given yet
    await editor.replace("tools.\n", "tools.quote({ order_id: \"a\",  })\n")
    doc, pos = editor.at('"a",  })', len('"a", '))
    result = await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=pos))
    labels = [i.label for i in (result.items if isinstance(result, T.CompletionList) else result)]
    assert labels == ["qty", "note"]


async def test_completion_of_processes_signals_builtins_and_variables(
        client: LanguageClient, tmp_path: Path) -> None:
    editor = await opened(client, tmp_path, PROGRAM + 'h = start \n')
    await editor.open()
    doc, pos = editor.at("start \n", len("start "))
    items = (await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=pos))).items
    assert [(i.label, i.insert_text) for i in items] == [("bill", "bill(line: ${1:line})")]

    doc, pos = editor.at('wait_signal("', len('wait_signal("'))
    items = (await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=pos))).items
    assert [i.label for i in items] == ["approve"]

    doc, pos = editor.at("  finish receipt", 2)
    items = (await client.text_document_completion_async(T.CompletionParams(text_document=doc, position=pos))).items
    by_kind: dict[Any, list[str]] = {}
    for i in items:
        by_kind.setdefault(i.kind, []).append(i.label)
    assert by_kind[T.CompletionItemKind.Variable] == ["line", "priced", "ok", "receipt"]
    assert "tools" in by_kind[T.CompletionItemKind.Module]
    assert "push" in by_kind[T.CompletionItemKind.Function]
    assert "finish" in by_kind[T.CompletionItemKind.Keyword]
    push = next(i for i in items if i.label == "push")
    assert push.detail == "push(list, item) -> list"


async def test_hover_and_definition(client: LanguageClient, tmp_path: Path) -> None:
    editor = await opened(client, tmp_path)
    await editor.open()
    doc, pos = editor.at("tools.quote", len("tools.q"))
    hover = await client.text_document_hover_async(T.HoverParams(text_document=doc, position=pos))
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "tools.quote({ order_id: str, qty: int, note: str? }) -> dict" in text
    assert "Price an order line" in text
    assert '"required": [\n    "order_id",\n    "qty"\n  ]' in text

    found = await client.text_document_definition_async(T.DefinitionParams(text_document=doc, position=pos))
    assert isinstance(found, T.Location)
    assert found.uri == (tmp_path / "orders.py").as_uri()
    def_line = TOOLS.splitlines().index("async def quote(order_id: str, qty: int, note: str = \"\") -> dict:")
    assert found.range.start.line == def_line

    doc, pos = editor.at('"90s"', 1)
    hover = await client.text_document_hover_async(T.HoverParams(text_document=doc, position=pos))
    assert hover.contents.value == "`sleep for`: 90 seconds"  # type: ignore[union-attr]

    doc, pos = editor.at("priced.amount", 2)
    found = await client.text_document_definition_async(T.DefinitionParams(text_document=doc, position=pos))
    assert found.range.start == position(editor.text, "priced = ")  # type: ignore[union-attr]

    doc, pos = editor.at("line: Line", len("line: L"))
    found = await client.text_document_definition_async(T.DefinitionParams(text_document=doc, position=pos))
    assert found.range.start == position(editor.text, "Line =")  # type: ignore[union-attr]


async def test_symbols_formatting_and_rename(client: LanguageClient, tmp_path: Path) -> None:
    messy = PROGRAM.replace("  priced = ", "  priced   =  ").replace("finish receipt", "finish   receipt # done")
    editor = await opened(client, tmp_path, messy)
    await editor.open()
    doc = T.TextDocumentIdentifier(uri=editor.uri)
    symbols = await client.text_document_document_symbol_async(T.DocumentSymbolParams(text_document=doc))
    assert [(s.name, s.kind) for s in symbols] == [  # type: ignore[union-attr]
        ("Line", T.SymbolKind.Struct), ("bill", T.SymbolKind.Function)]

    edits = await client.text_document_formatting_async(T.DocumentFormattingParams(
        text_document=doc, options=T.FormattingOptions(tab_size=2, insert_spaces=True)))
    assert edits is not None and len(edits) == 1
    assert edits[0].new_text == format_source(messy)

    doc, pos = editor.at("priced.amount", 1)
    edit = await client.text_document_rename_async(T.RenameParams(text_document=doc, position=pos, new_name="price"))
    changes = edit.changes[editor.uri]  # type: ignore[union-attr,index]
    assert len(changes) == 2
    assert {c.range.start.line for c in changes} == {4, 7}


async def test_tools_are_reloaded_when_their_file_changes(
        client: LanguageClient, tmp_path: Path) -> None:
    editor = await opened(client, tmp_path, PROGRAM.replace("tools.charge", "tools.refund"))
    found = await editor.open()
    assert "does not expose operation `refund`" in found[0].message
    (tmp_path / "orders.py").write_text(TOOLS + '''

@tool
async def refund(amount: float) -> dict:
    """Give the money back."""
    return {"refunded": amount}
''')
    found = await editor.replace("  finish receipt\n", "  finish receipt \n")
    for _ in range(20):  # the first answer may use the old tools; the reload answers next
        if not found:
            break
        found = await asyncio.wait_for(editor.diagnostics(), 60)
    assert found == []


async def test_a_tool_file_that_fails_to_load_is_the_one_diagnostic(
        client: LanguageClient, tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import nothing_such_module\n")
    editor = Editor(client, tmp_path / "broken.lash", "finish 1\n")
    found = await editor.open()
    assert [d.code for d in found] == ["usage_error"]
    assert "cannot load tools from" in found[0].message and "nothing_such_module" in found[0].message


@pytest.mark.parametrize("unused", [None])
def test_builtin_signatures_cover_every_builtin(unused: None) -> None:
    from lashflow.lang.linker import BUILTINS
    from lashflow.lsp.features import BUILTIN_SIGNATURES

    assert set(BUILTINS) <= set(BUILTIN_SIGNATURES)


ROOT = Path(__file__).resolve().parents[2]
WORKER_TOOLS = ROOT / "tests" / "workers" / "worker_tools.py"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[
    sys.executable, "-m", "lashflow", "lsp", "--tools", str(WORKER_TOOLS)]))
async def repo_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=pytest_lsp.client_capabilities("neovim"), root_uri=ROOT.as_uri()))
    yield
    await lsp_client.shutdown_session()


async def test_no_diagnostic_on_any_lash_file_of_the_repository(repo_client: LanguageClient) -> None:
    files = sorted(p for p in ROOT.glob("**/*.lash") if "node_modules" not in p.parts
                   and not any(part.startswith(".") for part in p.relative_to(ROOT).parts))
    assert len(files) >= 8
    for path in files:
        editor = Editor(repo_client, path, path.read_text(encoding="utf-8"))
        assert await editor.open() == [], path
