"""What programs mean: the AST the parser builds for each rule of the grammar."""

from __future__ import annotations

import pytest

from lashflow.lang import ast as A
from lashflow.lang import parse


def first(source: str) -> A.Stmt:
    return parse(source).main[0]


def value_of(source: str) -> A.Expr:
    stmt = first(source)
    assert isinstance(stmt, (A.Assign, A.ValueStmt)), stmt
    return stmt.value


# ---------------------------------------------------------------- lexical structure

@pytest.mark.parametrize("literal,expected", [
    ('"a\\nb\\t\\"c\\\\"', 'a\nb\t"c\\'),
    ('"\\q\\u0041"', "qu0041"),
    ("'it\\'s'", "it's"),
    ("'say \"hi\"'", 'say "hi"'),
    ('"""line1\\n"quoted"\nline2"""', 'line1\n"quoted"\nline2'),
    ("'''a''b'''", "a''b"),
    ('r"C:\\new"', "C:\\new"),
    ("r'C:\\t'", "C:\\t"),
    ('r"""a\\n"b"""', 'a\\n"b'),
    ("R'''x'''", "x"),
    ('"multi\nline"', "multi\nline"),
    ('"# not a comment // nor this"', "# not a comment // nor this"),
    ('""', ""),
])
def test_string_forms(literal: str, expected: str) -> None:
    node = value_of(f"x = {literal}")
    assert isinstance(node, A.String) and node.value == expected


def test_rust_style_raw_string_is_ident_then_comment() -> None:
    module = parse('x = r#"a"#')
    node = module.main[0].value
    assert isinstance(node, A.Name) and node.name == "r"


@pytest.mark.parametrize("text,value", [("3.", 3.0), ("007", 7.0), ("2.50", 2.5), ("0", 0.0)])
def test_numbers(text: str, value: float) -> None:
    node = value_of(f"x = {text}")
    assert isinstance(node, A.Number) and node.value == value


def test_comments_semicolons_and_no_newline_meaning() -> None:
    module = parse("# c\nx = 1; y = 2 // c2\nlet z = x + y;;\nx = 1 y = 2 finish x + y")
    kinds = [type(s).__name__ for s in module.main]
    assert kinds == ["Assign", "Assign", "Assign", "Assign", "Assign", "ValueStmt"]


def test_unicode_whitespace_is_whitespace() -> None:
    assert len(parse("x\u00a0=\u20031\u3000y = 2").main) == 2


# ---------------------------------------------------------------- 2.4 item 1: assignment

@pytest.mark.parametrize("source,name", [
    ("finish = 1", "finish"), ("while = 2", "while"), ("start = 5", "start"),
    ("let = 3", "let"), ("type = 1", "type"), ("process = 1", "process"),
    ("trigger = 1", "trigger"), ("break = 1", "break"), ("sleep = 1", "sleep"),
])
def test_contextual_word_assignment(source: str, name: str) -> None:
    stmt = first(source)
    assert isinstance(stmt, A.Assign) and stmt.name == name and not stmt.steps


def test_path_assignment_steps() -> None:
    stmt = first('state.groups[g].counts[1] = 5')
    assert isinstance(stmt, A.Assign) and stmt.name == "state"
    kinds = [type(s).__name__ for s in stmt.steps]
    assert kinds == ["FieldStep", "IndexStep", "FieldStep", "IndexStep"]
    assert stmt.steps[0].name == "groups"


def test_keyword_keys_in_assignment_paths() -> None:
    stmt = first('r.if.finish["x y"] = 1')
    assert isinstance(stmt, A.Assign)
    assert [getattr(s, "name", None) for s in stmt.steps] == ["if", "finish", None]


def test_index_with_brackets_inside_is_still_assignment() -> None:
    stmt = first("x[f([1, 2])[0]] = 3")
    assert isinstance(stmt, A.Assign) and len(stmt.steps) == 1


def test_equality_is_not_assignment() -> None:
    stmt = first("x == 1")
    assert isinstance(stmt, A.ExprStmt) and isinstance(stmt.expr, A.Binary)


def test_let_is_optional_sugar() -> None:
    stmt = first("let r.a = 1")
    assert isinstance(stmt, A.Assign) and stmt.name == "r" and stmt.span.start == 0


# ---------------------------------------------------------------- 2.4 item 2: contextual words

def test_contextual_words_are_variables_in_expressions() -> None:
    module = parse("w = while false { }")
    assert isinstance(module.main[0].value, A.Name) and module.main[0].value.name == "while"
    assert isinstance(module.main[1], A.ExprStmt) and isinstance(module.main[1].expr, A.Bool)
    assert isinstance(module.main[2].expr, A.RecordLit)


def test_finish_over_newline_takes_the_next_expression() -> None:
    stmt = first("finish\nx")
    assert isinstance(stmt, A.ValueStmt) and isinstance(stmt.value, A.Name)


def test_keywords_as_record_keys_and_fields() -> None:
    node = value_of('x = { if: 1, for: 2, null: 3, finish: 4, "a b": 5 }')
    assert isinstance(node, A.RecordLit)
    assert [k for k, _ in node.entries] == ["if", "for", "null", "finish", "a b"]
    field = value_of("x = r.print")
    assert isinstance(field, A.Field) and field.name == "print"


def test_record_keeps_duplicate_entries_in_order() -> None:
    node = value_of("x = {a: 1, b: 2, a: 4}")
    assert [k for k, _ in node.entries] == ["a", "b", "a"]


# ---------------------------------------------------------------- 2.4 item 4: `?`

def test_question_is_ternary_when_a_colon_follows() -> None:
    node = value_of('x = n > 10 ? "big" : n > 5 ? "mid" : "small"')
    assert isinstance(node, A.Ternary) and isinstance(node.otherwise, A.Ternary)


def test_ternary_then_branch_nests() -> None:
    node = value_of("x = a ? b ? c : d : e")
    assert isinstance(node, A.Ternary) and isinstance(node.then, A.Ternary)


@pytest.mark.parametrize("source", [
    "x = r?", "x = r? + 1", "x = [r?, 2]", "x = f(r?)", "x = { a: r? }", "x = (r?)",
    "x = r?\nfinish x", "x = a?.b", "x = a?[0]",
])
def test_question_is_unwrap_otherwise(source: str) -> None:
    module = parse(source)
    found = [n for n in _nodes(module.main[0]) if isinstance(n, A.Unwrap)]
    assert found, source


def test_await_unwrap_nests_as_await_of_unwrap() -> None:
    node = value_of("x = await tools.read({})?")
    assert isinstance(node, A.Await) and isinstance(node.expr, A.Unwrap)
    assert isinstance(node.expr.expr, A.ReceiverCall)


def test_negative_number_after_question_is_ternary() -> None:
    node = value_of("x = r ? -1 : 2")
    assert isinstance(node, A.Ternary)


# ---------------------------------------------------------------- 2.4 item 5: postfix across lines

def test_index_continues_across_newline() -> None:
    module = parse("y = x\n[0]")
    assert len(module.main) == 1 and isinstance(module.main[0].value, A.Index)


def test_call_continues_across_newline() -> None:
    node = value_of("y = foo\n(x)")
    assert isinstance(node, A.BuiltinCall) and node.name == "foo"


def test_paren_after_non_identifier_starts_a_statement() -> None:
    module = parse("y = 1\n(x)")
    assert len(module.main) == 2
    module = parse("y = f(1)\n(x)")
    assert len(module.main) == 2


def test_minus_on_next_line_is_binary() -> None:
    module = parse("x = 1\n-2")
    assert len(module.main) == 1 and isinstance(module.main[0].value, A.Binary)


def test_list_after_block_is_a_new_statement() -> None:
    module = parse("if c { }\n[1]")
    assert isinstance(module.main[1], A.ExprStmt) and isinstance(module.main[1].expr, A.ListLit)


# ---------------------------------------------------------------- 2.4 items 6-8

def test_start_forms() -> None:
    node = value_of("h = start p(a: 1, b: [2],)")
    assert isinstance(node, A.Start) and node.process == "p"
    assert [k for k, _ in node.args] == ["a", "b"]
    var = value_of("x = start")
    assert isinstance(var, A.Name) and var.name == "start"
    module = parse("x = [start, 1]")
    assert isinstance(module.main[0].value.items[0], A.Name)


def test_sleep_forms() -> None:
    node = value_of('x = sleep for "5s"')
    assert isinstance(node, A.Sleep) and node.mode == "for"
    node = value_of("x = sleep until t + 1")
    assert isinstance(node, A.Sleep) and node.mode == "until"
    assert isinstance(node.value, A.Binary)


def test_type_literal_and_type_as_variable() -> None:
    node = value_of('T = Type { a: int?, b: list[str], c: enum["x", "y"], d: str | null }')
    assert isinstance(node, A.TypeLiteral)
    fields = node.type.fields
    assert fields[0].optional and isinstance(fields[1].type, A.TypeList)
    assert isinstance(fields[2].type, A.TypeEnum) and fields[2].type.members == ["x", "y"]
    assert isinstance(fields[3].type, A.TypeUnion)
    var = value_of("x = Type")
    assert isinstance(var, A.Name) and var.name == "Type"


def test_signal_forms() -> None:
    module = parse('process p() { d = wait_signal("decision") }\nsignal_run(h, "go", { a: 1 })')
    wait = module.processes[0].body.body[0].value
    assert isinstance(wait, A.WaitSignal) and wait.name == "decision"
    send = module.main[0].expr
    assert isinstance(send, A.SignalRun) and send.name == "go"
    assert isinstance(send.payload, A.RecordLit)
    grouped = parse('process p() { d = wait_signal(("x")) }').processes[0].body.body[0].value
    assert isinstance(grouped, A.WaitSignal) and grouped.name == "x"


# ---------------------------------------------------------------- expressions

def test_precedence() -> None:
    node = value_of("x = not a == b")
    assert isinstance(node, A.Binary) and node.op == "==" and isinstance(node.left, A.Unary)
    node = value_of("x = -x.y")
    assert isinstance(node, A.Unary) and isinstance(node.operand, A.Field)
    node = value_of("x = await a + b")
    assert isinstance(node, A.Binary) and isinstance(node.left, A.Await)
    node = value_of("x = a || b && c")
    assert node.op == "or" and node.right.op == "and"
    node = value_of("x = 1 < 2 < 3")
    assert node.op == "<" and isinstance(node.left, A.Binary)
    node = value_of("x = !a")
    assert isinstance(node, A.Unary) and node.op == "not"
    node = value_of("x = 10 - 2 - 3")
    assert isinstance(node.left, A.Binary)


def test_tuples() -> None:
    assert isinstance(value_of('x = 1, "x"'), A.TupleLit)
    one = value_of("x = (1,)")
    assert isinstance(one, A.TupleLit) and len(one.items) == 1
    empty = value_of("x = ()")
    assert isinstance(empty, A.TupleLit) and not empty.items
    assert isinstance(value_of("x = (1)"), A.Number)
    assert isinstance(value_of("x = 1,"), A.TupleLit)
    idx = value_of("x = m[1, 2]")
    assert isinstance(idx, A.Index) and isinstance(idx.index, A.TupleLit)
    stmt = first('print 1, "a"')
    assert isinstance(stmt, A.ValueStmt) and isinstance(stmt.value, A.TupleLit)


def test_tuple_item_swallows_the_next_line() -> None:
    module = parse("x = 1,\ny")
    assert len(module.main) == 1 and len(module.main[0].value.items) == 2


def test_comprehension() -> None:
    node = value_of("x = [i * 2 for i in range(5) if i > 1 for j in xs if j]")
    assert isinstance(node, A.Comprehension)
    kinds = [type(c).__name__ for c in node.clauses]
    assert kinds == ["CompFor", "CompIf", "CompFor", "CompIf"]


def test_receiver_calls_and_module_paths() -> None:
    node = value_of("x = workspace.default.read_file({ path: 'a' })")
    assert isinstance(node, A.ReceiverCall) and node.operation == "read_file"
    assert isinstance(node.receiver, A.Field) and node.receiver.name == "default"


def test_binary_operator_normalisation() -> None:
    assert value_of("x = a && b").op == "and"
    assert value_of("x = a || b").op == "or"


# ---------------------------------------------------------------- declarations

def test_process_declaration_full() -> None:
    module = parse("process approve(req: str, t: Tools,) signals { decision: any, } "
                   "-> dict { finish req }")
    decl = module.processes[0]
    assert [p.name for p in decl.params] == ["req", "t"]
    assert [s.name for s in decl.signals] == ["decision"]
    assert isinstance(decl.returns, A.TypeName) and decl.returns.name == "dict"


def test_arrow_may_have_space() -> None:
    decl = parse("process p() - > int { finish 1 }").processes[0]
    assert isinstance(decl.returns, A.TypeName) and decl.returns.name == "int"


@pytest.mark.parametrize("text,cls", [
    ("str | null", A.TypeUnion), ('"a"', A.TypeStringLiteral), ("null", A.TypeNull),
    ("Process<int, str>", A.TypeProcess), ("list[list[int]]", A.TypeList),
    ("cron.Tick", A.TypeName), ("{ a: int? }", A.TypeObject), ("Type { a: int }", A.TypeObject),
    ('enum["a"]', A.TypeEnum), ("list.x", A.TypeName),
])
def test_type_declarations(text: str, cls: type) -> None:
    decl = parse(f"type X = {text}").types[0]
    assert isinstance(decl.type, cls)


@pytest.mark.parametrize("alias,name", [
    ("string", "str"), ("integer", "int"), ("number", "float"), ("boolean", "bool"),
    ("object", "dict"), ("any", "any"),
])
def test_scalar_aliases_are_normalised(alias: str, name: str) -> None:
    assert parse(f"type X = {alias}").types[0].type.name == name


def test_labels_attach_to_statements_and_processes() -> None:
    module = parse('@label(title: "Load", description: "reads")\nx = 1\n'
                   '@label(title: "W",)\nprocess w() {\n  @label(title: "Done")\n  finish 1\n}')
    assert module.main[0].label.title == "Load" and module.main[0].label.description == "reads"
    decl = module.processes[0]
    assert decl.label.title == "W"
    assert decl.body.body[0].label.title == "Done"


def test_declarations_hoisted_and_main_in_order() -> None:
    module = parse("x = 1\nprocess p() { finish 1 }\ny = 2\ntype T = int\nz = 3")
    assert [s.name for s in module.main] == ["x", "y", "z"]
    assert module.process("p") is not None and module.types[0].name == "T"


def test_spans_are_character_offsets() -> None:
    module = parse('x = "é"\ny = 1')
    assert module.main[1].span.start == 8


def _nodes(node: object):
    from lashflow.lang.sites import nodes

    return list(nodes(node))


@pytest.mark.parametrize("source,count", [
    ("#only a comment", 0), ("x //c", 1), ("x #c\ny", 2), ("a//b\nc", 2), ("  ;;  ", 0),
    ("xr\"a\"", 2), ("return", 1), ("r1 = 2", 1),
])
def test_comments_and_identifiers_tokenize(source: str, count: int) -> None:
    assert len(parse(source).main) == count
