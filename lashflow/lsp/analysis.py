"""What ``lashflow check`` says about a document, kept up to date edit by edit.

The answer is always the one ``check`` gives for the whole text: the first parse error,
else the first link error (declarations, then the bodies in source order, then the main
block). It comes from the same front end (``lashflow.lang``'s parser and ``Linker``);
what is incremental is only how much of the text goes through it again:

* the text is cut into its top-level items (a type, a process, a main-block statement);
* an edit inside one ``type`` or ``process`` declaration that only declarations precede
  re-parses that declaration alone, at its place in the file (the text before it blanked
  to spaces, so offsets are the file's). That gives the whole file's answer when the
  declaration's text tokenizes on its own, its brackets balance and it does not run into
  the end of its text: the grammar's look-aheads then never leave it, and the parser is
  in the same state at the start of every top-level item. Anything else (an unbalanced
  bracket, an unterminated string, an edit in the main block or across items, a changed
  item boundary) parses the whole text again;
* an edit among the main block's statements, after the last declaration, re-parses the
  text from the statement before the edited one to the end (the text before blanked):
  that statement's first token is untouched, so everything before it reads as it did,
  and the tail's first parse error is the whole file's;
* linking checks the declarations again (cheap), then only the edited body (a
  declaration) or only the main block (a tail edit), unless a declaration changed or
  the tools changed.

tests/lsp/test_lsp_incremental.py checks the answer against ``check`` after random edits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lashflow.errors import LashflowError
from lashflow.lang import ast as A
from lashflow.lang.catalog import Catalog
from lashflow.lang.diagnostics import LINK_ERROR, Diagnostic, LangError
from lashflow.lang.format import program_shape
from lashflow.lang.linker import Linker
from lashflow.lang.parser import MAX_SOURCE_CHARS, parse
from lashflow.lang.record import fields_of
from lashflow.lang.tokens import tokenize

_BOUNDARY = frozenset(" \t\r\n;#")
_OPENERS = {"(": ")", "[": "]", "{": "}"}


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One diagnostic, located by character offsets into the current text."""

    code: str
    message: str
    start: int
    end: int
    hint: str | None = None

    @classmethod
    def of(cls, diagnostic: Diagnostic) -> "Problem":
        start = diagnostic.offset or 0
        end = diagnostic.end if diagnostic.end is not None and diagnostic.end > start else start
        return cls(diagnostic.code, diagnostic.message, start, end, diagnostic.hint)

    def moved(self, by: int) -> "Problem":
        return dataclasses.replace(self, start=self.start + by, end=self.end + by)


@dataclasses.dataclass(slots=True)
class Chunk:
    """One top-level item: its current extent, its tree (spans kept current), and the
    first link problem of its body (processes; offsets current too)."""

    start: int
    end: int
    node: Any
    spans: list[A.Span]
    error: Problem | None = None
    output_error: Problem | None = None  # from checking what a process can finish with

    @property
    def declaration(self) -> bool:
        return isinstance(self.node, (A.ProcessDecl, A.TypeDecl))

    def shift(self, by: int) -> None:
        self.start += by
        self.end += by
        for span in self.spans:
            span.start += by
            span.end += by
        if self.error is not None:
            self.error = self.error.moved(by)
        if self.output_error is not None:
            self.output_error = self.output_error.moved(by)


def spans_of(node: Any) -> list[A.Span]:
    """Every distinct span object under ``node`` (some nodes share one)."""
    seen: dict[int, A.Span] = {}
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, A.Span):
            if current is not A.NO_SPAN:
                seen[id(current)] = current
        elif isinstance(current, (list, tuple)):
            todo.extend(current)
        else:
            todo.extend(getattr(current, name) for name in fields_of(current)
                        if name != "source")
    return list(seen.values())


def start_of(node: Any) -> int:
    label = getattr(node, "label", None)
    return label.span.start if label is not None else node.span.start


def first_difference(a: str, b: str) -> tuple[int, int, int]:
    """``(start, old_end, new_end)``: ``a[start:old_end]`` became ``b[start:new_end]``
    (binary search over slices: a few C-speed comparisons, not a loop per character)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    start = lo
    lo, hi = 0, min(len(a), len(b)) - start
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid:] == b[len(b) - mid:]:
            lo = mid
        else:
            hi = mid - 1
    return start, len(a) - lo, len(b) - lo


def _balanced(toks: list[Any]) -> bool:
    stack: list[str] = []
    for tok in toks:
        kind = tok.kind
        if kind in _OPENERS:
            stack.append(_OPENERS[kind])
        elif kind in (")", "]", "}"):
            if not stack or stack.pop() != kind:
                return False
    return not stack


def _internal(source: str, exc: Exception) -> Problem:
    return Problem(LINK_ERROR, f"internal linker error ({type(exc).__name__}: {exc})", 0, 0)


class Analysis:
    """One document's text, its items, and what ``check`` says about it."""

    def __init__(self, text: str, catalog: Catalog) -> None:
        self.text = text
        self.catalog = catalog
        self.chunks: list[Chunk] = []
        self.parsed = False  # the chunks hold the whole text's items
        self.broken: int | None = None  # a chunk whose text does not parse (fast path)
        self.broken_tail: int | None = None  # where a tail that does not parse starts
        self.parse_problem: Problem | None = None
        self.declaration_problem: Problem | None = None
        self.main_problem: Problem | None = None
        self.signature: Any = None
        self.module: A.Module | None = None  # the last tree that parsed
        self.fast_edits = 0  # edits answered without parsing the whole text (for tests)
        self.full()

    # ------------------------------------------------------------------ the answer

    @property
    def problem(self) -> Problem | None:
        """The one diagnostic ``check`` gives for the current text, if any."""
        if self.parse_problem is not None:
            return self.parse_problem
        if self.declaration_problem is not None:
            return self.declaration_problem
        for chunk in self.chunks:  # the linker checks every output before any body
            if chunk.output_error is not None:
                return chunk.output_error
        for chunk in self.chunks:
            if chunk.error is not None:
                return chunk.error
        return self.main_problem

    # ------------------------------------------------------------------ updates

    def update(self, text: str) -> None:
        old = self.text
        if text == old:
            return
        self.text = text
        if self.parsed and len(text) <= MAX_SOURCE_CHARS:
            start, old_end, new_end = first_difference(old, text)
            if self.tail(start):
                return
            if self.broken_tail is not None:  # the items after it are not known
                self.full()
                return
            index = self.chunk_at(start, old_end)
            if index is not None:
                delta = new_end - old_end
                end = self.chunks[index].end + delta
                if not self.fast(index, start, delta, end):
                    self.full(keep=(index, delta, end))
                return
        self.full()

    def set_catalog(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.signature = None  # every body is checked again
        if self.parsed and self.broken is None and self.broken_tail is None:
            self.link_all()

    def full(self, keep: tuple[int, int, int] | None = None) -> None:
        """Parse and link the whole text (what ``check`` does). ``keep``: the edit was
        inside that one declaration; if the text does not parse, the other items are
        kept (shifted), so the next edit there can again be parsed alone."""
        self.parse_problem = None
        try:
            module = parse(self.text)
        except LangError as exc:
            self.fail_parse(Problem.of(exc.diagnostic), keep)
            return
        except LashflowError as exc:  # over the size limit
            self.fail_parse(Problem(exc.code, exc.message, 0, 0), None)
            return
        self.broken = None
        self.broken_tail = None
        items = sorted([*module.types, *module.processes, *module.main], key=start_of)
        self.chunks = [Chunk(start_of(n), n.span.end, n, spans_of(n)) for n in items]
        self.parsed = True
        self.assemble()
        self.link_all()

    def fail_parse(self, problem: Problem, keep: tuple[int, int, int] | None) -> None:
        self.parse_problem = problem
        self.broken_tail = None
        if keep is None:
            self.parsed = False
            self.broken = None
            self.chunks = []
            return
        index, delta, end = keep
        self.shift_after(index, delta, end)
        self.broken = index

    def fast(self, index: int, start: int, delta: int, end: int) -> bool:
        """Re-parse only declaration ``index``, where the edit is; False: the answer
        needs the whole text."""
        text = self.text
        chunk = self.chunks[index]
        if end < len(text) and text[end] not in _BOUNDARY:
            return False
        if chunk.start > 0 and text[chunk.start - 1] not in _BOUNDARY and start == chunk.start:
            return False
        padded = " " * chunk.start + text[chunk.start:end]
        try:
            toks = tokenize(padded)
        except LangError:  # e.g. an unterminated string: it may end in a later item
            return False
        if not _balanced(toks):
            return False
        try:
            module = parse(padded)
        except LangError as exc:
            if len(toks) < 2 or toks[-2].kind != "}":  # something after it could read on
                return False
            self.shift_after(index, delta, end)
            self.broken = index
            self.parse_problem = Problem.of(exc.diagnostic)
            self.fast_edits += 1
            return True
        items: list[A.TypeDecl | A.ProcessDecl] = [*module.types, *module.processes]
        if module.main or len(items) != 1:
            return False
        node = items[0]
        self.shift_after(index, delta, end)
        self.chunks[index] = Chunk(start_of(node), node.span.end, node, spans_of(node))
        self.broken = None
        self.parse_problem = None
        self.fast_edits += 1
        self.assemble()
        self.relink(index)
        return True

    def tail_start(self, start: int) -> tuple[int, int] | None:
        """``(index, offset)``: the chunk the tail re-parse starts with and where, for an
        edit at ``start`` among the main block's statements after every declaration."""
        if self.broken is not None:
            return None
        chunks = self.chunks
        if self.broken_tail is not None:
            first = next((i for i, c in enumerate(chunks) if c.start >= self.broken_tail),
                         len(chunks))
            return (first, self.broken_tail) if start > self.broken_tail else None
        edited = next((i for i, c in enumerate(chunks) if c.end >= start), len(chunks))
        if any(c.declaration for c in chunks[edited:]):
            return None
        index = edited - 1 if edited > 0 and not chunks[edited - 1].declaration else edited
        if index >= len(chunks) or start <= chunks[index].start:
            return None
        return index, chunks[index].start

    def tail(self, start: int) -> bool:
        """Re-parse from the main-block statement before the edit to the end; False: the
        answer needs another path."""
        found = self.tail_start(start)
        if found is None:
            return False
        index, offset = found
        padded = " " * offset + self.text[offset:]
        try:
            module = parse(padded)
        except LangError as exc:
            self.chunks = self.chunks[:index]
            self.broken_tail = offset
            self.parse_problem = Problem.of(exc.diagnostic)
            self.fast_edits += 1
            return True
        except LashflowError:
            return False
        if module.types or module.processes:
            return False
        self.chunks = self.chunks[:index] + [
            Chunk(start_of(n), n.span.end, n, spans_of(n)) for n in module.main]
        self.broken_tail = None
        self.parse_problem = None
        self.fast_edits += 1
        self.assemble()
        self.link_main()
        return True

    def chunk_at(self, start: int, old_end: int) -> int | None:
        """The declaration holding ``[start, old_end]`` if only declarations precede it."""
        for index, chunk in enumerate(self.chunks):
            if not chunk.declaration:
                return None
            if chunk.start <= start and old_end <= chunk.end:
                if self.broken is not None and self.broken != index:
                    return None
                return index
            if chunk.start > start:
                return None
        return None

    def shift_after(self, index: int, delta: int, end: int) -> None:
        if delta:
            for chunk in self.chunks[index + 1:]:
                chunk.shift(delta)
            if self.main_problem is not None:
                self.main_problem = self.main_problem.moved(delta)
        self.chunks[index].end = end

    def assemble(self) -> None:
        nodes = [c.node for c in self.chunks]
        self.module = A.Module(
            self.text, [n for n in nodes if isinstance(n, A.TypeDecl)],
            [n for n in nodes if isinstance(n, A.ProcessDecl)],
            [n for n in nodes if not isinstance(n, (A.TypeDecl, A.ProcessDecl))])

    # ------------------------------------------------------------------ linking

    def signature_of(self) -> Any:
        """What every body is checked against: types and process signatures."""
        assert self.module is not None
        return program_shape((self.module.types, [
            (p.name, p.params, p.signals, p.returns) for p in self.module.processes]))

    def declared(self) -> Linker | None:
        assert self.module is not None
        self.module.source = self.text
        linker = Linker(self.module, self.catalog)
        self.declaration_problem = None
        try:
            linker.declare()
        except LangError as exc:
            self.declaration_problem = Problem.of(exc.diagnostic)
            return None
        except Exception as exc:  # pragma: no cover - a linker bug is still a diagnostic
            self.declaration_problem = _internal(self.text, exc)
            return None
        return linker

    def check_body(self, linker: Linker, chunk: Chunk) -> None:
        chunk.output_error = _problem_of(self.text, linker.infer_output, chunk.node)
        chunk.error = _problem_of(self.text, linker.process_body, chunk.node)

    def link_all(self) -> None:
        self.signature = self.signature_of()
        self.main_problem = None
        for chunk in self.chunks:
            chunk.error = chunk.output_error = None
        linker = self.declared()
        if linker is None:
            return
        for chunk in self.chunks:
            if isinstance(chunk.node, A.ProcessDecl):
                self.check_body(linker, chunk)
        self.check_main(linker)

    def check_main(self, linker: Linker) -> None:
        assert self.module is not None
        self.main_problem = None
        try:
            linker.entry(None, self.module.main, {})
        except LangError as exc:
            self.main_problem = Problem.of(exc.diagnostic)
        except Exception as exc:  # pragma: no cover
            self.main_problem = _internal(self.text, exc)

    def link_main(self) -> None:
        """After a tail edit: the declarations and the main block only (no body changed)."""
        if self.signature is None or self.signature_of() != self.signature:
            self.link_all()
            return
        linker = self.declared()
        if linker is None:
            self.main_problem = None
            return
        self.check_main(linker)

    def relink(self, index: int) -> None:
        """After chunk ``index`` was re-parsed: its body only, if no signature changed."""
        if self.signature_of() != self.signature or self.declaration_problem is not None:
            self.link_all()
            return
        linker = self.declared()
        if linker is None:  # pragma: no cover - same declarations, same answer
            return
        chunk = self.chunks[index]
        if isinstance(chunk.node, A.ProcessDecl):
            self.check_body(linker, chunk)

    # ------------------------------------------------------------------ lookups

    def chunk_containing(self, offset: int) -> Chunk | None:
        for chunk in self.chunks:
            if chunk.start <= offset <= chunk.end:
                return chunk
        return None


def _problem_of(text: str, check: Any, node: Any) -> Problem | None:
    """The diagnostic ``check(node)`` raises, if any."""
    try:
        check(node)
    except LangError as exc:
        return Problem.of(exc.diagnostic)
    except Exception as exc:  # pragma: no cover - a linker bug is still a diagnostic
        return _internal(text, exc)
    return None
