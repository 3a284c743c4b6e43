"""The Lashlang syntax tree: plain typed records (``lashflow.lang.record``: dataclass-like,
cheap to define) with source spans.

Spans are ``(start, end)`` character offsets into the module source; diagnostics turn
them into 1-based line/column. Effectful nodes carry a ``site`` id: a hash of the node's
place in the tree (its index path and kind, see ``lashflow.lang.sites``), so editing text
elsewhere in the file does not change it. The runtime builds step keys from it.
"""

from __future__ import annotations

from typing import Union

from lashflow.lang.record import field, record


@record(hashable=True)  # hashable: a shared default
class Span:
    start: int
    end: int


NO_SPAN = Span(0, 0)


# --------------------------------------------------------------------------- types


@record
class TypeName:
    """A scalar name (``str``, ``int`` ...) or a named/dotted reference (``User``)."""

    name: str
    span: Span = NO_SPAN


@record
class TypeNull:
    span: Span = NO_SPAN


@record
class TypeStringLiteral:
    """A bare string in type position: a one-member enum."""

    value: str
    span: Span = NO_SPAN


@record
class TypeField:
    name: str
    type: "TypeExpr"
    optional: bool = False
    span: Span = NO_SPAN


@record
class TypeObject:
    fields: list[TypeField]
    span: Span = NO_SPAN


@record
class TypeEnum:
    members: list[str]
    span: Span = NO_SPAN


@record
class TypeList:
    item: "TypeExpr"
    span: Span = NO_SPAN


@record
class TypeUnion:
    members: list["TypeExpr"]
    span: Span = NO_SPAN


@record
class TypeProcess:
    input: "TypeExpr"
    output: "TypeExpr"
    span: Span = NO_SPAN


@record
class TypeTriggerHandle:
    item: "TypeExpr"
    span: Span = NO_SPAN


TypeExpr = Union[
    TypeName, TypeNull, TypeStringLiteral, TypeObject, TypeEnum, TypeList, TypeUnion,
    TypeProcess, TypeTriggerHandle,
]


# --------------------------------------------------------------------------- expressions


@record
class Null:
    span: Span = NO_SPAN


@record
class Bool:
    value: bool
    span: Span = NO_SPAN


@record
class Number:
    value: float
    span: Span = NO_SPAN


@record
class String:
    value: str
    span: Span = NO_SPAN


@record
class Name:
    """A variable, a module root (``tools``) or a process reference. ``local``: set by
    the linker where a variable named like a process or module may already be assigned,
    so the read takes the variable (unknown if unset), not the global."""

    name: str
    span: Span = NO_SPAN
    local: bool = False


@record
class TupleLit:
    items: list["Expr"]
    span: Span = NO_SPAN


@record
class ListLit:
    items: list["Expr"]
    span: Span = NO_SPAN


@record
class CompFor:
    var: str
    iterable: "Expr"
    span: Span = NO_SPAN


@record
class CompIf:
    cond: "Expr"
    span: Span = NO_SPAN


@record
class Comprehension:
    element: "Expr"
    clauses: list[Union[CompFor, CompIf]]
    span: Span = NO_SPAN


@record
class RecordLit:
    """Ordered ``(key, value)`` pairs as written (duplicates kept; runtime dedups)."""

    entries: list[tuple[str, "Expr"]]
    span: Span = NO_SPAN


@record
class Field:
    obj: "Expr"
    name: str
    span: Span = NO_SPAN


@record
class Index:
    obj: "Expr"
    index: "Expr"
    span: Span = NO_SPAN


@record
class BuiltinCall:
    name: str
    args: list["Expr"]
    span: Span = NO_SPAN


@record
class ReceiverCall:
    """``receiver.operation(args)``: a host (tool) operation; one journaled attempt.

    ``module`` is filled by the linker with the resolved module path (``"tools"``,
    ``"billing"``) or left ``None`` when the receiver is a runtime value (a process
    parameter of resource type).
    """

    receiver: "Expr"
    operation: str
    args: list["Expr"]
    span: Span = NO_SPAN
    site: str = ""
    module: str | None = None


@record
class Await:
    expr: "Expr"
    span: Span = NO_SPAN
    site: str = ""


@record
class Unwrap:
    """Postfix ``?`` on a result wrapper."""

    expr: "Expr"
    span: Span = NO_SPAN


@record
class Unary:
    op: str  # "-" or "not" ("!" is normalised to "not")
    operand: "Expr"
    span: Span = NO_SPAN


@record
class Binary:
    op: str  # "+ - * / % == != < <= > >= and or" ("&&"/"||" normalised)
    left: "Expr"
    right: "Expr"
    span: Span = NO_SPAN


@record
class Ternary:
    cond: "Expr"
    then: "Expr"
    otherwise: "Expr"
    span: Span = NO_SPAN


@record
class Start:
    process: str
    args: list[tuple[str, "Expr"]]
    span: Span = NO_SPAN
    site: str = ""


@record
class Sleep:
    mode: str  # "for" or "until"
    value: "Expr"
    span: Span = NO_SPAN
    site: str = ""


@record
class WaitSignal:
    name: str
    span: Span = NO_SPAN
    site: str = ""


@record
class SignalRun:
    run: "Expr"
    name: str
    payload: "Expr"
    span: Span = NO_SPAN
    site: str = ""


@record
class TypeLiteral:
    """``Type { ... }``: evaluates to ``{"$lash_type": <json schema>}``."""

    type: TypeObject
    span: Span = NO_SPAN


Expr = Union[
    Null, Bool, Number, String, Name, TupleLit, ListLit, Comprehension, RecordLit, Field, Index,
    BuiltinCall, ReceiverCall, Await, Unwrap, Unary, Binary, Ternary, Start, Sleep, WaitSignal,
    SignalRun, TypeLiteral,
]


# --------------------------------------------------------------------------- statements


@record
class Label:
    title: str
    description: str | None = None
    span: Span = NO_SPAN


@record
class FieldStep:
    name: str
    span: Span = NO_SPAN


@record
class IndexStep:
    index: "Expr"
    span: Span = NO_SPAN


@record
class Assign:
    name: str
    steps: list[Union[FieldStep, IndexStep]]
    value: "Expr"
    span: Span = NO_SPAN
    label: Label | None = None


@record
class Block:
    body: list["Stmt"]
    span: Span = NO_SPAN


@record
class If:
    cond: "Expr"
    then: Block
    otherwise: Union[Block, "If", None] = None
    span: Span = NO_SPAN
    label: Label | None = None


@record
class For:
    var: str
    iterable: "Expr"
    body: Block
    span: Span = NO_SPAN
    label: Label | None = None


@record
class While:
    cond: "Expr"
    body: Block
    span: Span = NO_SPAN
    label: Label | None = None


@record
class Break:
    span: Span = NO_SPAN
    label: Label | None = None


@record
class Continue:
    span: Span = NO_SPAN
    label: Label | None = None


@record
class ValueStmt:
    """``finish`` / ``fail`` / ``yield`` / ``wake`` / ``print`` / ``cancel`` with an operand."""

    kind: str  # "finish" "fail" "yield" "wake" "print" "cancel"
    value: "Expr"
    span: Span = NO_SPAN
    label: Label | None = None
    site: str = ""


@record
class ExprStmt:
    expr: "Expr"
    span: Span = NO_SPAN
    label: Label | None = None


Stmt = Union[Assign, If, For, While, Break, Continue, ValueStmt, ExprStmt]

# The expressions that are effects: each is handed to the host, journaled and replayed
# (a tool call, await, start, sleep, wait_signal, signal). The one definition: the
# compiler's purity test, the site ids and the graph's batches all ask it.
EFFECTS = (ReceiverCall, Await, Start, Sleep, WaitSignal, SignalRun)


# --------------------------------------------------------------------------- declarations


@record
class Param:
    name: str
    type: TypeExpr
    span: Span = NO_SPAN


@record
class TypeDecl:
    name: str
    type: TypeExpr
    span: Span = NO_SPAN


@record
class ProcessDecl:
    name: str
    params: list[Param]
    signals: list[Param]
    returns: TypeExpr | None
    body: Block
    span: Span = NO_SPAN
    label: Label | None = None


@record
class Module:
    """A parsed file: declarations (hoisted) and the main block, in source order."""

    source: str
    types: list[TypeDecl] = field(default_factory=list)
    processes: list[ProcessDecl] = field(default_factory=list)
    main: list[Stmt] = field(default_factory=list)

    def process(self, name: str) -> ProcessDecl | None:
        for decl in self.processes:
            if decl.name == name:
                return decl
        return None
