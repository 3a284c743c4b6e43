"""Completion, hover, go to definition, document symbols and rename, computed from an
``Analysis`` (the tree and what check says), the ``Index`` of names in it and the tools
the file links against. Plain functions over offsets; the server turns them into
protocol messages."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timezone
from typing import Any

from lashflow.json_text import ascii_compact, pretty
from lashflow.lang import ast as A
from lashflow.lang.durations import deadline_seconds, duration_seconds
from lashflow.lang.printer import print_type
from lashflow.lang.tokens import RESERVED, tokenize
from lashflow.lang.diagnostics import LangError
from lashflow.lsp.analysis import Analysis
from lashflow.lsp.symbols import Cache, Index, Occurrence

BUILTIN_SIGNATURES: dict[str, tuple[str, str]] = {
    "len": ("len(value) -> int", "Length of a string, list, tuple or record."),
    "empty": ("empty(value) -> bool", "True for an empty string, list, tuple or record."),
    "keys": ("keys(record) -> list", "The record's keys, in insertion order."),
    "values": ("values(record) -> list", "The record's values, in insertion order."),
    "trim": ("trim(text) -> str", "The text without the whitespace around it."),
    "to_string": ("to_string(value) -> str", "The value as text."),
    "to_int": ("to_int(value) -> int", "A number or numeric text as an integer (truncated)."),
    "to_float": ("to_float(value) -> float", "A number or numeric text as a float."),
    "json_parse": ("json_parse(text) -> any", "The value a JSON text holds."),
    "contains": ("contains(haystack, needle) -> bool",
                 "A substring of a string, an item of a list, a key of a record."),
    "starts_with": ("starts_with(text, prefix) -> bool", "Whether text starts with prefix."),
    "ends_with": ("ends_with(text, suffix) -> bool", "Whether text ends with suffix."),
    "split": ("split(text, separator) -> list", 'The parts; `split(s, "")` gives characters.'),
    "join": ("join(list, separator) -> str", "The items as text, separated."),
    "find": ("find(text, needle, start = 0) -> int | null",
             "Where needle first occurs at or after start, or null."),
    "grep_text": ("grep_text(text, needle) -> list", "The lines of text that hold needle."),
    "slice": ("slice(value, start, end) -> any", "Part of a string or a list."),
    "push": ("push(list, item) -> list", "A new list: list with item at the end."),
    "range": ("range(end) | range(start, end) | range(start, end, step) -> list",
              "Integers (at most 1,000,000 of them)."),
    "ceil_div": ("ceil_div(a, b) -> int", "a / b rounded up."),
    "floor_div": ("floor_div(a, b) -> int", "a / b rounded down."),
    "format": ("format(template, values...) -> str",
               "`{}` takes the next value, `{0}` one by position, `{{`/`}}` are braces."),
    "validate": ("validate(value, type) -> any",
                 "value if it fits a `Type { ... }` value, else the run fails."),
    "wait_signal": ('wait_signal("name") -> any',
                    "Park until the named signal arrives (inside a process)."),
    "signal_run": ('signal_run(handle, "name", payload)', "Send a signal to a child run."),
}
KEYWORDS = ["if", "else", "for", "in", "while", "break", "continue", "finish", "fail", "yield",
            "wake", "print", "cancel", "await", "start", "sleep for", "sleep until", "let",
            "process", "type", "signals", "and", "or", "not", "true", "false", "null", "Type",
            "@label"]

_SIGNAL_ARG = re.compile(r"wait_signal\(\s*[\"']([A-Za-z0-9_]*)$")
_START = re.compile(r"\bstart\s+([A-Za-z_]\w*)?$")
_MEMBER = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\.([A-Za-z_]\w*)?$")
_PARTIAL = re.compile(r"[A-Za-z_]\w*$")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolInfo:
    module: str
    name: str
    description: str
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    file: str | None = None
    line: int | None = None

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}"

    def fields(self) -> list[tuple[str, dict[str, Any], bool]]:
        return schema_fields(self.input_schema)

    def signature(self) -> str:
        args = ", ".join(f"{name}: {schema_text(s)}{'' if req else '?'}"
                         for name, s, req in self.fields())
        return f"{self.qualified}({{ {args} }}) -> {schema_text(self.output_schema)}" if args \
            else f"{self.qualified}(...) -> {schema_text(self.output_schema)}"


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """One completion: ``snippet`` is in the protocol's snippet syntax when set."""

    label: str
    kind: str  # "tool" "field" "function" "process" "variable" "keyword" "module" "signal"
    detail: str = ""
    documentation: str = ""
    snippet: str | None = None
    text: str | None = None


def schema_fields(schema: dict[str, Any] | None) -> list[tuple[str, dict[str, Any], bool]]:
    if not schema or not isinstance(schema.get("properties"), dict):
        return []
    required = set(schema.get("required") or [])
    props = schema["properties"]
    ordered = sorted(props, key=lambda k: (k not in required, list(props).index(k)))
    return [(name, props[name], name in required) for name in ordered]


def schema_text(schema: dict[str, Any] | None) -> str:
    """A JSON schema in the language's type words, short: ``str``, ``list[int]``..."""
    if not schema:
        return "any"
    if "anyOf" in schema:
        return " | ".join(schema_text(s) for s in schema["anyOf"])
    kind = schema.get("type")
    words = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
             "null": "null", "object": "dict"}
    if kind == "array":
        return f"list[{schema_text(schema.get('items'))}]"
    if isinstance(kind, list):
        return " | ".join(words.get(k, str(k)) for k in kind)
    if "enum" in schema:
        return " | ".join(ascii_compact(v) for v in schema["enum"])
    return words.get(kind, "any") if isinstance(kind, str) else "any"


def tool_markdown(tool: ToolInfo) -> str:
    parts = [f"```lash\n{tool.signature()}\n```"]
    if tool.description:
        parts.append(tool.description)
    for title, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
        parts.append(f"**{title} schema**\n```json\n{pretty(schema)}\n```")
    if tool.file:
        parts.append(f"defined in `{tool.file}` line {tool.line}")
    return "\n\n".join(parts)


def tool_snippet(tool: ToolInfo) -> str:
    fields = [name for name, _, required in tool.fields() if required] or \
        [name for name, _, _ in tool.fields()]
    if not fields:
        return f"{tool.name}($1)"
    inner = ", ".join(f"{name}: ${{{i}:{name}}}" for i, name in enumerate(fields, 1))
    return f"{tool.name}({{ {inner} }})"


# --------------------------------------------------------------------------- context


class Context:
    """The document as the features see it: text, analysis, index and tools."""

    def __init__(self, analysis: Analysis, tools: dict[tuple[str, str], ToolInfo],
                 cache: Cache | None = None) -> None:
        self.analysis = analysis
        self.text = analysis.text
        self.tools = tools
        self.modules = {module for module, _ in tools}
        module = analysis.module
        self.index = Index(analysis.chunks, module, self.text, self.modules,
                           {} if cache is None else cache) if module is not None else None

    def process_at(self, offset: int) -> A.ProcessDecl | None:
        chunk = self.analysis.chunk_containing(offset)
        return chunk.node if chunk is not None and isinstance(chunk.node, A.ProcessDecl) else None

    def occurrence(self, offset: int) -> Occurrence | None:
        return self.index.at(offset) if self.index is not None else None


# --------------------------------------------------------------------------- completion


def complete(ctx: Context, offset: int) -> list[Item]:
    text = ctx.text
    line_start = text.rfind("\n", 0, offset) + 1
    before = text[line_start:offset]
    m = _SIGNAL_ARG.search(before)
    if m:
        proc = ctx.process_at(offset)
        return [Item(s.name, "signal", print_type(s.type)) for s in (proc.signals if proc else [])]
    m = _START.search(before)
    if m:
        return [process_item(p) for p in ctx.analysis.module.processes] \
            if ctx.analysis.module else []
    m = _MEMBER.search(before)
    if m and m.group(1) in ctx.modules:
        return [Item(t.name, "tool", t.signature(), tool_markdown(t), snippet=tool_snippet(t))
                for (module, _), t in sorted(ctx.tools.items()) if module == m.group(1)]
    if m:  # a field of a value: nothing known to offer
        return []
    fields = record_fields(ctx, offset)
    if fields is not None:
        return fields
    return general(ctx, offset)


def process_item(p: A.ProcessDecl) -> Item:
    args = ", ".join(f"{q.name}: ${{{i}:{q.name}}}" for i, q in enumerate(p.params, 1))
    return Item(p.name, "process", process_signature(p), snippet=f"{p.name}({args})")


def process_signature(p: A.ProcessDecl) -> str:
    text = f"process {p.name}(" + ", ".join(f"{q.name}: {print_type(q.type)}"
                                           for q in p.params) + ")"
    if p.signals:
        text += " signals { " + ", ".join(f"{s.name}: {print_type(s.type)}"
                                         for s in p.signals) + " }"
    if p.returns is not None:
        text += f" -> {print_type(p.returns)}"
    return text


def _open_brackets(text: str, offset: int, start: int) -> list[tuple[int, Any]] | None:
    """The raw tokens from ``start`` (where the top-level item begins) to ``offset`` and
    the indexes of the brackets still open there (None inside a string or comment, where
    nothing is completed)."""
    try:
        toks = tokenize(text[start:offset])[:-1]
    except LangError:
        return None
    stack: list[int] = []
    for i, tok in enumerate(toks):
        if tok.kind in ("(", "[", "{"):
            stack.append(i)
        elif tok.kind in (")", "]", "}") and stack:
            stack.pop()
    return [(i, toks) for i in stack]


def record_fields(ctx: Context, offset: int) -> list[Item] | None:
    """Fields of the input record of the tool call (or the parameters of the ``start``)
    whose ``{...}`` (or ``(...)``) the cursor is in, at a key position."""
    text = ctx.text
    partial = _PARTIAL.search(text, 0, offset)
    at = partial.start() if partial and partial.end() == offset else offset
    chunk = ctx.analysis.chunk_containing(at)
    opened = _open_brackets(text, at, chunk.start if chunk is not None and chunk.start <= at else 0)
    if not opened:
        return None
    toks = opened[0][1]
    if not toks or toks[-1].kind not in ("{", ",", "("):
        return None
    inner = opened[-1][0]
    keys: list[str] = []
    chain = [i for i, _ in opened]
    position = len(chain) - 1
    while position > 0 and toks[chain[position]].kind == "{" and chain[position] >= 2 \
            and toks[chain[position] - 1].kind == ":" and toks[chain[position - 1]].kind == "{":
        keys.insert(0, str(toks[chain[position] - 2].value))
        position -= 1
    brace = chain[position]
    given = _keys_given(toks, inner)
    if toks[brace].kind == "(" and brace >= 2 and toks[brace - 2].kind == "IDENT" \
            and toks[brace - 2].value == "start" and not keys:
        proc = ctx.analysis.module.process(str(toks[brace - 1].value)) \
            if ctx.analysis.module else None
        if proc is None:
            return None
        return [Item(p.name, "field", print_type(p.type), text=f"{p.name}: ")
                for p in proc.params if p.name not in given]
    if toks[brace].kind != "{" or brace < 4 or toks[brace - 1].kind != "(":
        return None
    op = toks[brace - 2]
    path = _path_before(toks, brace - 3)
    tool = ctx.tools.get((path, str(op.value))) if path else None
    if tool is None:
        return None
    schema = tool.input_schema
    for key in keys:
        schema = (schema or {}).get("properties", {}).get(key)
    return [Item(name, "field", schema_text(s) + ("" if req else " (optional)"),
                 s.get("description", "") if isinstance(s, dict) else "", text=f"{name}: ")
            for name, s, req in schema_fields(schema) if name not in given]


def _keys_given(toks: list[Any], opener: int) -> set[str]:
    found, depth = set(), 0
    for i in range(opener + 1, len(toks)):
        kind = toks[i].kind
        if kind in ("(", "[", "{"):
            depth += 1
        elif kind in (")", "]", "}"):
            depth -= 1
        elif kind == ":" and depth == 0 and i > opener + 1:
            found.add(str(toks[i - 1].value))
    return found


def _path_before(toks: list[Any], dot: int) -> str | None:
    """``a.b`` when ``toks[dot]`` is the `.` after it."""
    if dot < 1 or toks[dot].kind != ".":
        return None
    parts = []
    i = dot - 1
    while i >= 0 and toks[i].kind == "IDENT":
        parts.append(str(toks[i].value))
        if i >= 1 and toks[i - 1].kind == ".":
            i -= 2
        else:
            break
    return ".".join(reversed(parts)) or None


def general(ctx: Context, offset: int) -> list[Item]:
    items: list[Item] = []
    proc = ctx.process_at(offset)
    scope = proc.name if proc is not None else "main"
    if ctx.index is not None:
        items += [Item(name, "variable") for name in ctx.index.names_in(scope)]
    items += [Item(module, "module", f"{sum(m == module for m, _ in ctx.tools)} tools")
              for module in sorted({m.split(".")[0] for m in ctx.modules})]
    items += [Item(name, "function", sig, doc, snippet=f"{name}($1)")
              for name, (sig, doc) in sorted(BUILTIN_SIGNATURES.items())]
    items += [Item(word, "keyword") for word in KEYWORDS]
    return items


# --------------------------------------------------------------------------- hover


def hover(ctx: Context, offset: int) -> tuple[str, Occurrence] | None:
    occ = ctx.occurrence(offset)
    if occ is None:
        return None
    if occ.kind == "tool":
        tool = ctx.tools.get((occ.scope, occ.name))
        return (tool_markdown(tool), occ) if tool else None
    if occ.kind == "builtin":
        sig, doc = BUILTIN_SIGNATURES.get(occ.name, (occ.name, ""))
        return f"```lash\n{sig}\n```\n\n{doc}", occ
    if occ.kind == "process":
        decl = ctx.index.processes.get(occ.name) if ctx.index else None
        return (f"```lash\n{process_signature(decl)}\n```", occ) if decl else None
    if occ.kind == "type":
        type_decl = ctx.index.types.get(occ.name) if ctx.index else None
        return (f"```lash\ntype {type_decl.name} = {print_type(type_decl.type, decl=True)}\n```",
                occ) if type_decl else None
    if occ.kind == "duration":
        return duration_text(occ), occ
    if occ.kind == "signal":
        return f"signal `{occ.name}` of process `{occ.scope}`", occ
    binding = ctx.index.binding(occ) if ctx.index else None
    where = ""
    if binding is not None:
        node = binding.node
        if isinstance(node, A.Param):
            where = f": parameter of process `{occ.scope}`, `{print_type(node.type)}`"
        else:
            line = ctx.text.count("\n", 0, binding.start) + 1
            where = f", first set on line {line}"
    return f"variable `{occ.name}`{where}", occ


def duration_text(occ: Occurrence) -> str:
    value = occ.node.value
    try:
        if occ.name == "for":
            seconds = duration_seconds(value)
            return f"`sleep for`: {_seconds(seconds)}"
        moment = datetime.fromtimestamp(deadline_seconds(value), tz=timezone.utc)
        return f"`sleep until`: {moment.isoformat().replace('+00:00', 'Z')}"
    except (ValueError, OverflowError, OSError) as exc:
        return f"not a valid {'duration' if occ.name == 'for' else 'deadline'}: {exc}"


def _seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g} milliseconds"
    for unit, size in (("hours", 3600), ("minutes", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}" + (f" ({seconds:g} seconds)")
    return f"{seconds:g} seconds"


# --------------------------------------------------------------------------- definition


def definition(ctx: Context, offset: int) -> tuple[str | None, int, int] | None:
    """``(file or None for this document, start, end)`` or, for a tool, ``(file, line, 0)``."""
    occ = ctx.occurrence(offset)
    if occ is None:
        return None
    if occ.kind == "tool":
        tool = ctx.tools.get((occ.scope, occ.name))
        if tool is None or tool.file is None or tool.line is None:
            return None
        return tool.file, tool.line, 0
    if occ.kind in ("variable", "process", "type", "signal") and ctx.index is not None:
        binding = ctx.index.binding(occ)
        if binding is not None:
            return None, binding.start, binding.end
    return None


# --------------------------------------------------------------------------- rename


def rename_target(ctx: Context, offset: int) -> Occurrence | None:
    occ = ctx.occurrence(offset)
    return occ if occ is not None and occ.kind == "variable" else None


def rename(ctx: Context, offset: int, new_name: str) -> list[tuple[int, int]] | str:
    """The ranges to replace, or why not."""
    occ = rename_target(ctx, offset)
    if occ is None or ctx.index is None:
        return "only a local variable or parameter can be renamed here"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", new_name) or new_name in RESERVED:
        return f"`{new_name}` is not a name a variable can have"
    if new_name in ctx.index.names_in(occ.scope) or new_name in ctx.index.processes:
        return f"`{new_name}` is already used here"
    return [(o.start, o.end) for o in ctx.index.variables(occ.scope, occ.name)]


# --------------------------------------------------------------------------- symbols


def symbols(ctx: Context) -> list[tuple[str, str, str, int, int, int, int]]:
    """``(kind, name, detail, start, end, name_start, name_end)`` of each declaration."""
    out: list[tuple[str, str, str, int, int, int, int]] = []
    if ctx.index is None:
        return out
    for occ in ctx.index.declarations():
        node = occ.node
        chunk = ctx.analysis.chunk_containing(occ.start)
        start, end = (chunk.start, chunk.end) if chunk is not None else (occ.start, occ.end)
        detail = process_signature(node) if occ.kind == "process" else \
            print_type(node.type, decl=True)
        out.append((occ.kind, occ.name, detail, start, end, occ.start, occ.end))
    return out

