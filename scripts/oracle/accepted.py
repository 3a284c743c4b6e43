"""The differences from the original that lashflow keeps on purpose (docs/adr/0025 lists
them, with the reason for each). ``accepted_class`` names the class a difference belongs
to, or returns None: then it is a divergence to fix. Each rule looks at both outcomes and,
where it must, at what lashflow's own front end sees in the program.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Callable

import quirks

Outcome = dict[str, Any]

# What the original prints for 2^63 and 2^64 (one too low), and what lashflow prints.
_BOUNDARY_TEXT = {"9223372036854775807": "9223372036854775808",
                  "18446744073709551615": "18446744073709552000"}


def _message(o: Outcome) -> str:
    return str(o.get("message") or "")


def _numbers_as_one(message: str) -> str:
    """Number types as one, and out of unions (lashflow joins ``int | float`` to
    ``float`` and keeps the other members' order)."""
    message = re.sub(r"\b(int|float|number)\b", "NUM", message)
    return re.sub(r"NUM \| |( \| NUM)+\b", "", message)  # number members of a union dropped


def _walk(node: Any) -> Any:
    return quirks.walk(node)


def _module(source: str) -> Any:
    return quirks.parsed(source)


def _plus_not_a_number(source: str) -> bool:
    """lashflow's linker types some ``+`` as text, a list or unknown: the original's
    linker types every ``+`` as a number."""
    from lashflow.lang import ast as A
    from lashflow.lang import types as T
    from lashflow.lang.catalog import Catalog
    from lashflow.lang.linker import Linker

    module = _module(source)
    if module is None:
        return False
    seen: list[bool] = []

    class Watching(Linker):
        def binary(self, e: A.Binary, env: Any) -> T.SType:
            result = super().binary(e, env)
            if e.op == "+" and result not in (T.INT, T.FLOAT):
                seen.append(True)
            return result

    operations = sorted({n.operation for n in _walk(module) if isinstance(n, A.ReceiverCall)})
    try:
        Watching(module, Catalog.permissive({"tools": operations or ["noop"]})).run()
    except Exception:  # noqa: BLE001 - a program that does not link still told us
        pass
    if seen:
        return True
    return any(isinstance(n, A.Binary) and n.op == "+" and any(
        isinstance(side, (A.ListLit, A.TupleLit, A.Comprehension)) for side in (n.left, n.right))
        for n in _walk(module))


def _indexes_empty_literal(source: str) -> bool:
    from lashflow.lang import ast as A

    module = _module(source)
    return module is not None and any(
        isinstance(n, A.Index) and isinstance(n.obj, (A.ListLit, A.TupleLit)) and not n.obj.items
        for n in _walk(module))


def original_panics(ref: Outcome, new: Outcome, source: str) -> bool:
    return ref.get("outcome") == "panic"


def plus_typed_number(ref: Outcome, new: Outcome, source: str) -> bool:
    ref_says = (ref.get("outcome") == "link_error" and re.search(r"\bfloat\b", _message(ref))
                and _message(ref) != _message(new))
    if ref_says and _plus_not_a_number(source):
        return True
    if new.get("outcome") != "link_error" or not _plus_not_a_number(source):
        return False
    original = _message(ref) if ref.get("outcome") == "link_error" else None
    return quirks.link_as_original(source, frozenset(["plus-typed-number"])) == original


def boundary_integers_one_too_low(ref: Outcome, new: Outcome, source: str) -> bool:
    from outcomes import differs  # noqa: PLC0415 - sibling module

    # a process value or a JSON parser's text beside the number: those classes too; the
    # number's digits split into characters: joined again on both sides
    ref = _chars_joined(_json_errors_as_one(_without_process_refs(ref)))
    if not any(low in json.dumps(ref) for low in _BOUNDARY_TEXT):
        return False
    # each place lashflow writes the exact number (or, inside JSON text, 2^64 as any float
    # beyond u64: an exponent) may be one where the original wrote its saturated one, or
    # one where both agree (2^64 as a plain float's text): try each choice
    exact = {**{e: low for low, e in _BOUNDARY_TEXT.items()},
             "1.8446744073709552e19": "18446744073709551615"}
    theirs = json.dumps(_chars_joined(new))
    places = [m for m in re.finditer("|".join(map(re.escape, exact)), theirs)][:10]
    for chosen in itertools.product((False, True), repeat=len(places)):
        text, shift = theirs, 0
        for m, swap in zip(places, chosen):
            if swap:
                low = exact[m.group()]
                text = text[:m.start() + shift] + low + text[m.end() + shift:]
                shift += len(low) - len(m.group())
        if differs(ref, _json_errors_as_one(json.loads(text)), source) is None:
            return True
    return False


def empty_list_item_typed_null(ref: Outcome, new: Outcome, source: str) -> bool:
    if ref.get("outcome") != "link_error":
        return False
    message = _message(ref)
    if new.get("outcome") == "link_error" and message.replace("list[null]", "list[any]") == _message(new):
        return True
    return bool(re.search(r"\bnull\b", message)) and _indexes_empty_literal(source)


def int_and_float_typing(ref: Outcome, new: Outcome, source: str) -> bool:
    if ref.get("outcome") != "link_error":
        return False
    if "return type is incompatible: expected int, got float" in _message(ref):
        return True
    if (new.get("outcome") == "link_error"
            and _numbers_as_one(_message(ref)) == _numbers_as_one(_message(new))):
        return True
    return False


def lashflow_limits(ref: Outcome, new: Outcome, source: str) -> bool:
    if new.get("outcome") == "limit_exceeded":
        return True
    return ref.get("outcome") == "timeout" and new.get("outcome") in ("timeout", "skipped")


_JSON_ERROR_TEXT = re.compile(r'invalid json: [^"\\]*')


def _json_errors_as_one(v: Any) -> Any:
    """Each parser's text after ``invalid json: `` made one, also inside printed JSON."""
    if isinstance(v, str):
        return _JSON_ERROR_TEXT.sub("invalid json: ...", v)
    if isinstance(v, list):
        return [_json_errors_as_one(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_errors_as_one(x) for k, x in v.items()}
    return v


def json_parser_text(ref: Outcome, new: Outcome, source: str) -> bool:
    """The text after ``invalid json: `` (a run's error, or a child's failure as a
    value) comes from each side's own JSON parser."""
    from outcomes import differs  # noqa: PLC0415 - sibling module

    if "invalid json: " not in json.dumps(ref):
        return False
    # a process value printed beside it differs too (process-value-without-refs)
    # (normalised on both sides alike: printed JSON is rewritten with its keys sorted)
    return differs(_json_errors_as_one(_without_process_refs(ref)),
                   _json_errors_as_one(_without_process_refs(new)), source) is None


def sleep_checked_when_linked(ref: Outcome, new: Outcome, source: str) -> bool:
    return ("sleep failed" in _message(ref) or "invalid duration" in _message(ref)
            or (new.get("outcome") == "link_error" and re.match(r"invalid (duration|deadline)",
                                                                  _message(new)) is not None))


def signal_name_located(ref: Outcome, new: Outcome, source: str) -> bool:
    return (ref.get("outcome") == new.get("outcome") == "parse_error"
            and _message(ref) == _message(new)
            and "non-literal signal name" in _message(ref))


def _unwraps_an_unwrapped_await(source: str) -> bool:
    from lashflow.lang import ast as A

    module = _module(source)
    return module is not None and any(
        isinstance(n, A.Unwrap) and isinstance(n.expr, A.Await) and isinstance(n.expr.expr, A.Unwrap)
        for n in _walk(module))


def _awaits_a_twice_unwrapped_call(source: str) -> bool:
    from lashflow.lang import ast as A

    module = _module(source)
    return module is not None and any(
        isinstance(n, A.Await) and isinstance(n.expr, A.Unwrap) and isinstance(n.expr.expr, A.Unwrap)
        for n in _walk(module))


def outer_unwrap_kept(ref: Outcome, new: Outcome, source: str) -> bool:
    """``(await call?)?``: the original drops the outer ``?``; lashflow applies it. And
    ``await call??``: the original unwraps the call's result once before awaiting it (a
    value that is no handle: its ``?`` then fails); lashflow awaits, then unwraps twice."""
    if ref.get("outcome") in ("finished", "continued") and _unwraps_an_unwrapped_await(source):
        return True
    return (ref.get("outcome") == "runtime_error" and _message(ref).startswith("`?` ")
            and _awaits_a_twice_unwrapped_call(source))


def resource_field_read_at_link(ref: Outcome, new: Outcome, source: str) -> bool:
    """``tools.nope`` read as a field: lashflow refuses it when linking (its type is known
    then), wherever it is; the original only if and when the run reaches it (``can't
    read ... from resource``), so its outcome is whatever the run does until then."""
    return (new.get("outcome") == "link_error"
            and re.match(r"cannot access `\.[^`]*` on opaque host descriptor", _message(new)) is not None)


def literal_over_union_variable(ref: Outcome, new: Outcome, source: str) -> bool:
    """The original refuses a string literal stored (alone, inside a list or tuple, or as
    a branch of ``? :``) over a variable or element whose inferred type is a union
    (``x = true ? 1 : 0.5`` then ``x = "a"``), but not over one of a single type:
    lashflow lets a variable take a new value of any type."""
    return (ref.get("outcome") == "link_error" and new.get("outcome") != "link_error"
            and re.match(r"expected [^,]* \| [^,]*, got incompatible literal", _message(ref)) is not None)


# the original's content hashes inside a process value written as JSON text, at any depth
# of JSON text inside JSON text (each level escapes the quotes once more: `q` matches them)
_PROCESS_REF_TEXT = re.compile(
    r'(?P<q>\\*)"host_requirements_ref(?P=q)":(?P=q)"[^"\\]*(?P=q)",'
    r'|(?P<r>\\*)"module_ref(?P=r)":(?P=r)"[^"\\]*(?P=r)",'
    r'|,(?P<s>\\*)"process_ref(?P=s)":\{(?P=s)"component(?P=s)":(?P=s)"[0-9a-f]*(?P=s)",'
    r'(?P=s)"pos(?P=s)":\d+\}')


def _without_process_refs(v: Any) -> Any:
    if isinstance(v, str):
        if "$lash_process" not in v:
            return v
        v = _PROCESS_REF_TEXT.sub("", v)
        try:  # printed JSON whose process value's fields are not text (each was awaited)
            inner = json.loads(v)
        except ValueError:
            return v
        if not isinstance(inner, (dict, list)):
            return v
        return json.dumps(_without_process_refs(inner), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)
    if isinstance(v, list):
        return [_without_process_refs(x) for x in v]
    if isinstance(v, dict):
        if "$lash_process" in v and "process_name" in v:  # (its fields may be awaited)
            return {k: x for k, x in v.items() if k in ("$lash_process", "process_name")}
        return {k: _without_process_refs(x) for k, x in v.items()}
    return v


def process_value_without_refs(ref: Outcome, new: Outcome, source: str) -> bool:
    """A process used as a value (or printed, or written as text): the original adds
    content hashes of its own build."""
    from outcomes import differs  # noqa: PLC0415 - sibling module

    if "$lash_process" not in json.dumps(ref):
        return False
    # a started child's id beside it is that class too: both normalised at once
    return differs(_handle_ids_as_one(_without_process_refs(ref)),
                   _handle_ids_as_one(_without_process_refs(new)), source) is None


_HANDLE_ID_TEXT = re.compile(r'("__handle__":"process","id":")[^"]*"')
# a child run's id read as text (`h.id`): the original's `run/0`, lashflow's `run/<parent>:<key>`
_CHILD_ID_TEXT = re.compile(r"\brun/(?:\d+\b|[0-9a-f]+(?::[0-9A-Za-z._-]+)+)")


def _handle_ids_as_one(v: Any) -> Any:
    if isinstance(v, str):
        v = _HANDLE_ID_TEXT.sub(r'\1..."', v) if '"__handle__"' in v else v
        return _CHILD_ID_TEXT.sub("run/...", v) if "run/" in v else v
    if isinstance(v, list):
        return [_handle_ids_as_one(x) for x in v]
    if isinstance(v, dict):
        if "__handle__" in v and "id" in v:
            return {**v, "id": "..."}
        return {k: _handle_ids_as_one(x) for k, x in v.items()}
    return v


def child_id_from_step_key(ref: Outcome, new: Outcome, source: str) -> bool:
    """A started process's handle names the child run by the start's step key (the same
    on every replay); the original's host counts its children."""
    from outcomes import differs  # noqa: PLC0415 - sibling module

    if "__handle__" not in json.dumps(ref) and "run/" not in json.dumps(ref):
        return False
    return differs(_handle_ids_as_one(_json_errors_as_one(ref)),
                   _handle_ids_as_one(_json_errors_as_one(new)), source) is None


def undeclared_signal_refused(ref: Outcome, new: Outcome, source: str) -> bool:
    """``wait_signal("n")`` in a process that declares its signals, none of them ``n``:
    lashflow refuses it when linking; the original waits for a signal that cannot come."""
    return (new.get("outcome") == "link_error" and ref.get("outcome") != "link_error"
            and re.match(r"process `[^`]*` declares no signal `", _message(new)) is not None)


def process_input_never_fits(ref: Outcome, new: Outcome, source: str) -> bool:
    """A process with no parameter or several, passed or finished as a value, fits no
    ``Process<I, O>`` type in the original (not even its own): lashflow checks its input
    and output types as it does for a process of one parameter."""
    return (ref.get("outcome") == "link_error" and "Process<" in _message(ref)
            and quirks.link_as_original(source, frozenset(["process-input-never-fits"]))
            == _message(ref))


def _chars_joined(v: Any) -> Any:
    """A list of one-character texts (what ``split(s, "")`` gives) as the one text."""
    if isinstance(v, list):
        if v and all(isinstance(x, str) and len(x) <= 1 for x in v):
            return "".join(v)
        return [_chars_joined(x) for x in v]
    if isinstance(v, dict):
        return {k: _chars_joined(x) for k, x in v.items()}
    if isinstance(v, str) and v.startswith("[") and '"' in v:
        try:
            parsed = json.loads(v)
        except ValueError:
            return v
        joined = _chars_joined(parsed)
        # only text that held split characters is rewritten (dumping re-spells numbers)
        return json.dumps(joined) if joined != parsed else v
    return v


# name -> rule; the names are the ones docs/adr/0025 uses
CLASSES: dict[str, Callable[[Outcome, Outcome, str], bool]] = {
    "original-panics": original_panics,
    "empty-list-item-typed-null": empty_list_item_typed_null,
    "plus-typed-number": plus_typed_number,
    "boundary-integers-one-too-low": boundary_integers_one_too_low,
    "int-and-float-typing": int_and_float_typing,
    "lashflow-limits": lashflow_limits,
    "json-parser-text": json_parser_text,
    "sleep-checked-when-linked": sleep_checked_when_linked,
    "signal-name-located": signal_name_located,
    "outer-unwrap-kept": outer_unwrap_kept,
    "resource-field-read-at-link": resource_field_read_at_link,
    "literal-over-union-variable": literal_over_union_variable,
    "process-value-without-refs": process_value_without_refs,
    "child-id-from-step-key": child_id_from_step_key,
    "undeclared-signal-refused": undeclared_signal_refused,
    "process-input-never-fits": process_input_never_fits,
}


def accepted_class(ref: Outcome, new: Outcome, source: str) -> str | None:
    """The ADR class that explains the difference between two outcomes, if any: a rule's,
    or else the first of the original's typing defects that, put back into lashflow's
    linker (alone or with others of them), makes it report the original's link error."""
    for name, rule in CLASSES.items():
        if rule(ref, new, source):
            return name
    if ref.get("outcome") == "link_error":
        return quirks.explaining_quirk(source, _message(ref))
    return None
