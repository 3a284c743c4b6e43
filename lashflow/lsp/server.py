"""The language server: pygls speaks the protocol over stdio, this module maps its
messages onto ``Analysis`` (diagnostics), ``features`` (completion, hover...) and
``lashflow.lang.format`` (formatting).

Tools are loaded per document by ``probe`` in a child process; they are loaded again when
one of the files the probe named changes (checked on every edit and save, a few ``stat``
calls, and on the client's watched-file notifications), and the document is checked again
against them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from lashflow import __version__
from lashflow.lang.catalog import Catalog, Operation
from lashflow.lang.diagnostics import LangError
from lashflow.errors import LashflowError
from lashflow.lang.format import format_source
from lashflow.lsp import features as F
from lashflow.lsp.analysis import Analysis, Problem
from lashflow.lsp.positions import LineIndex
from lashflow.lsp.symbols import Cache

PROBE_TIMEOUT = 120.0
_KINDS = {
    "tool": T.CompletionItemKind.Method, "field": T.CompletionItemKind.Field,
    "function": T.CompletionItemKind.Function, "process": T.CompletionItemKind.Class,
    "variable": T.CompletionItemKind.Variable, "keyword": T.CompletionItemKind.Keyword,
    "module": T.CompletionItemKind.Module, "signal": T.CompletionItemKind.Event,
}


class ToolSet:
    """The tools one ``.lash`` file links against, and the files that would change them."""

    def __init__(self, tools: dict[tuple[str, str], F.ToolInfo], files: list[str],
                 problem: Problem | None) -> None:
        self.tools = tools
        self.problem = problem
        self.stamps = {f: _stamp(f) for f in files}
        self.catalog = Catalog()
        for tool in tools.values():
            self.catalog.add(tool.module, Operation(tool.name, tool.input_schema,
                                                    tool.output_schema, tool.description))

    def stale(self) -> bool:
        return any(_stamp(f) != stamp for f, stamp in self.stamps.items())


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


async def load_tools(lash_file: str, specs: list[str]) -> ToolSet:
    """Run the probe for ``lash_file``; a failure is the one diagnostic check would give."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lashflow.lsp.probe", lash_file, *specs,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=str(Path(lash_file).parent))
    try:
        out, err = await asyncio.wait_for(process.communicate(), PROBE_TIMEOUT)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return ToolSet({}, [], Problem("usage_error", f"loading the tools of {lash_file} took "
                                       f"over {PROBE_TIMEOUT:.0f} s", 0, 0))
    try:
        data = json.loads(out.decode("utf-8").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no answer"]
        return ToolSet({}, [], Problem("usage_error", f"cannot load tools: {tail[0]}", 0, 0))
    files = data.get("files", [])
    if not data.get("ok"):
        error = data["error"]
        return ToolSet({}, files, Problem(error["code"], error["message"], 0, 0))
    tools = {(t["module"], t["name"]): F.ToolInfo(
        t["module"], t["name"], t["description"] or "", t["input_schema"], t["output_schema"],
        t["file"], t["line"]) for t in data["tools"]}
    return ToolSet(tools, files, None)


class Document:
    def __init__(self, uri: str, text: str, tools: ToolSet) -> None:
        self.uri = uri
        self.path = to_fs_path(uri) or uri
        self.tools = tools
        self.analysis = Analysis(text, tools.catalog)
        self.lines = LineIndex(text)
        self.symbols: Cache = {}  # per top-level item, kept across edits
        self._context: F.Context | None = None

    def update(self, text: str) -> None:
        self.analysis.update(text)
        self.lines = LineIndex(text)
        self._context = None

    def set_tools(self, tools: ToolSet) -> None:
        self.tools = tools
        self.analysis.set_catalog(tools.catalog)
        self._context = None

    def context(self) -> F.Context:
        if self._context is None:
            self._context = F.Context(self.analysis, self.tools.tools, self.symbols)
        return self._context

    def range(self, start: int, end: int) -> T.Range:
        return T.Range(T.Position(*self.lines.position(start)), T.Position(*self.lines.position(end)))

    def offset(self, position: T.Position) -> int:
        return self.lines.offset(position.line, position.character)


class LashServer(LanguageServer):
    def __init__(self, specs: list[str]) -> None:
        super().__init__("lashflow", __version__)
        self.specs = specs
        self.documents: dict[str, Document] = {}
        # the reloads under way, owned here: a task the loop alone holds may be collected
        # mid-run, and shutdown cancels what is left
        self.reloading: dict[str, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ documents

    async def open(self, uri: str, text: str) -> None:
        path = to_fs_path(uri) or uri
        tools = await load_tools(path, self.specs)
        document = Document(uri, text, tools)
        self.documents[uri] = document
        self.publish(document)

    def changed(self, uri: str) -> None:
        document = self.documents.get(uri)
        if document is None:
            return
        document.update(self.workspace.get_text_document(uri).source)
        self.publish(document)
        self.watch(document)

    def watch(self, document: Document) -> None:
        if document.uri not in self.reloading and document.tools.stale():
            self.reloading[document.uri] = asyncio.get_running_loop().create_task(
                self.reload(document.uri))

    async def reload(self, uri: str) -> None:
        try:
            document = self.documents.get(uri)
            if document is None:
                return
            tools = await load_tools(document.path, self.specs)
            document = self.documents.get(uri)
            if document is not None:
                document.set_tools(tools)
                self.publish(document)
        finally:
            self.reloading.pop(uri, None)

    async def stop_reloads(self) -> None:
        """Cancel the reloads under way and wait for them to end."""
        tasks = list(self.reloading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def located(self, params: Any) -> tuple[Document, F.Context, int] | None:
        """The open document, its features' context and the offset a request points at."""
        document = self.documents.get(params.text_document.uri)
        if document is None:
            return None
        return document, document.context(), document.offset(params.position)

    def publish(self, document: Document) -> None:
        problem = document.tools.problem or document.analysis.problem
        diagnostics = []
        if problem is not None:
            message = problem.message + (f"\nhint: {problem.hint}" if problem.hint else "")
            diagnostics.append(T.Diagnostic(
                range=document.range(problem.start, problem.end), message=message,
                severity=T.DiagnosticSeverity.Error, code=problem.code, source="lashflow"))
        self.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(uri=document.uri, diagnostics=diagnostics))


def build(specs: list[str]) -> LashServer:
    server = LashServer(specs)

    @server.feature(T.SHUTDOWN)
    async def shutdown(ls: LashServer, params: None) -> None:
        await ls.stop_reloads()

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: LashServer, params: T.DidOpenTextDocumentParams) -> None:
        await ls.open(params.text_document.uri, params.text_document.text)

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LashServer, params: T.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LashServer, params: T.DidSaveTextDocumentParams) -> None:
        document = ls.documents.get(params.text_document.uri)
        if document is not None:
            ls.watch(document)

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LashServer, params: T.DidCloseTextDocumentParams) -> None:
        ls.documents.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(T.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: LashServer, params: T.DidChangeWatchedFilesParams) -> None:
        for document in list(ls.documents.values()):
            ls.watch(document)

    @server.feature(T.TEXT_DOCUMENT_COMPLETION,
                    T.CompletionOptions(trigger_characters=[".", "{", ",", "(", '"', " "]))
    def completion(ls: LashServer, params: T.CompletionParams) -> T.CompletionList | None:
        at = ls.located(params)
        if at is None:
            return None
        document, context, offset = at
        items = F.complete(context, offset)
        return T.CompletionList(is_incomplete=False, items=[_completion(i) for i in items])

    @server.feature(T.TEXT_DOCUMENT_HOVER)
    def hover(ls: LashServer, params: T.HoverParams) -> T.Hover | None:
        at = ls.located(params)
        if at is None:
            return None
        document, context, offset = at
        found = F.hover(context, offset)
        if found is None:
            return None
        markdown, occ = found
        return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=markdown),
                       range=document.range(occ.start, occ.end))

    @server.feature(T.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: LashServer, params: T.DefinitionParams) -> T.Location | None:
        at = ls.located(params)
        if at is None:
            return None
        document, context, offset = at
        found = F.definition(context, offset)
        if found is None:
            return None
        file, start, end = found
        if file is None:
            return T.Location(uri=document.uri, range=document.range(start, end))
        line = T.Position(start - 1, 0)
        return T.Location(uri=from_fs_path(file) or file, range=T.Range(line, line))

    @server.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def document_symbols(ls: LashServer, params: T.DocumentSymbolParams
                         ) -> list[T.DocumentSymbol] | None:
        document = ls.documents.get(params.text_document.uri)
        if document is None:
            return None
        kinds = {"process": T.SymbolKind.Function, "type": T.SymbolKind.Struct}
        return [T.DocumentSymbol(name=name, detail=detail, kind=kinds[kind],
                                 range=document.range(start, end),
                                 selection_range=document.range(name_start, name_end))
                for kind, name, detail, start, end, name_start, name_end
                in F.symbols(document.context())]

    @server.feature(T.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: LashServer, params: T.DocumentFormattingParams
                   ) -> list[T.TextEdit] | None:
        document = ls.documents.get(params.text_document.uri)
        if document is None:
            return None
        text = document.analysis.text
        try:
            formatted = format_source(text)
        except (LangError, LashflowError) as exc:
            ls.window_show_message(T.ShowMessageParams(
                type=T.MessageType.Warning, message=f"lashflow fmt: {exc}"))
            return None
        if formatted == text:
            return []
        return [T.TextEdit(range=document.range(0, len(text)), new_text=formatted)]

    @server.feature(T.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(ls: LashServer, params: T.PrepareRenameParams) -> T.Range | None:
        at = ls.located(params)
        if at is None:
            return None
        document, context, offset = at
        occ = F.rename_target(context, offset)
        return document.range(occ.start, occ.end) if occ is not None else None

    @server.feature(T.TEXT_DOCUMENT_RENAME)
    def rename(ls: LashServer, params: T.RenameParams) -> T.WorkspaceEdit | None:
        at = ls.located(params)
        if at is None:
            return None
        document, context, offset = at
        found = F.rename(context, offset, params.new_name)
        if isinstance(found, str):
            raise ValueError(found)
        edits = [T.TextEdit(range=document.range(s, e), new_text=params.new_name)
                 for s, e in found]
        return T.WorkspaceEdit(changes={document.uri: edits})

    return server


def _completion(item: F.Item) -> T.CompletionItem:
    doc = T.MarkupContent(kind=T.MarkupKind.Markdown, value=item.documentation) \
        if item.documentation else None
    return T.CompletionItem(
        label=item.label, kind=_KINDS.get(item.kind), detail=item.detail or None,
        documentation=doc, insert_text=item.snippet or item.text,
        insert_text_format=T.InsertTextFormat.Snippet if item.snippet else None)


def serve(specs: list[str]) -> None:
    """Run the server on stdin/stdout until the client says exit."""
    resolved = [str(Path(s).resolve()) if s.endswith(".py") or "/" in s else s for s in specs]
    build(resolved).start_io()
