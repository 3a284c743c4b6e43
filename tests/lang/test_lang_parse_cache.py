"""The parse cache: a later process decodes the tree instead of parsing (without loading
Lark), gets exactly what ``parse`` gives, and any change of source, lashflow version or
front-end file, or any damage to an entry, falls back to parsing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lashflow
from lashflow.lang import LangError, parse
from lashflow.lang import cache
from lashflow.lang.cache import cached_parse, entry_path, fingerprint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lash_corpus import programs  # noqa: E402

ORACLE = Path(__file__).resolve().parents[1] / "conformance" / "oracle_corpus.json"

SOURCE = """
type Order = { id: str, items: list[dict], total: float }

process greet(name: str, n: int, order: Order) signals { go: any } {
  r = { a: "x\\u00e9", "b c": [name, null, true, 2.5, -3] }
  x = await tools.echo({ text: name })?
  i = 0
  while i < n { i = i + 1 }
  g = wait_signal("go")
  finish { r: r, x: x, i: i }
}
"""


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("LASHFLOW_CACHE_DIR", str(folder))
    return folder


def test_a_new_process_decodes_the_tree_without_loading_lark(cache_dir: Path) -> None:
    assert cached_parse(SOURCE) == parse(SOURCE)
    assert entry_path(SOURCE).is_file()
    probe = ("import sys, json; from lashflow.lang.cache import cached_parse; "
             "m = cached_parse(sys.stdin.read()); "
             "print(json.dumps({'lark': 'lark' in sys.modules, 'tree': repr(m)}))")
    done = subprocess.run([sys.executable, "-c", probe], input=SOURCE, capture_output=True,
                          text=True, check=True, env=dict(os.environ))
    seen = json.loads(done.stdout)
    assert seen == {"lark": False, "tree": repr(parse(SOURCE))}


def test_every_corpus_program_comes_back_equal(cache_dir: Path) -> None:
    stored = 0
    corpus = [source for _, source in programs()]
    corpus += [entry["source"] for entry in json.loads(ORACLE.read_text(encoding="utf-8"))]
    for source in corpus:
        try:
            expected = parse(source)
        except LangError:
            continue
        cached_parse(source)
        stored += entry_path(source).is_file()
        assert cached_parse(source) == expected
    assert stored > 300


def test_each_source_has_its_own_entry(cache_dir: Path) -> None:
    other = SOURCE.replace("greet", "hello")
    assert entry_path(other) != entry_path(SOURCE)
    cached_parse(SOURCE)
    assert cached_parse(other).processes[0].name == "hello"
    assert cached_parse(SOURCE).processes[0].name == "greet"


def test_a_new_lashflow_version_reads_no_old_entry(cache_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cached_parse(SOURCE)
    before = entry_path(SOURCE)
    monkeypatch.setattr(cache, "_fingerprint", None)
    monkeypatch.setattr(lashflow, "__version__", lashflow.__version__ + ".post1")
    assert entry_path(SOURCE) != before
    before.write_bytes(b"damaged")  # were it read, it would be ignored; it is not read
    assert cached_parse(SOURCE) == parse(SOURCE)
    assert entry_path(SOURCE).is_file()


def test_an_edited_front_end_file_changes_the_fingerprint(tmp_path: Path) -> None:
    folder = tmp_path / "lang"
    folder.mkdir()
    (folder / "parser.py").write_text("x = 1\n")
    (folder / "notes.txt").write_text("ignored")
    grammar = tmp_path / "lashlang.lark"
    grammar.write_text("start: X\n")
    first = fingerprint("1.0", folder, grammar)
    assert fingerprint("1.0", folder, grammar) == first
    (folder / "notes.txt").write_text("still ignored")
    assert fingerprint("1.0", folder, grammar) == first
    (folder / "parser.py").write_text("x = 22\n")
    second = fingerprint("1.0", folder, grammar)
    assert second != first
    os.utime(grammar, ns=(1, 1))
    assert fingerprint("1.0", folder, grammar) != second
    assert fingerprint("1.1", folder, grammar) != fingerprint("1.0", folder, grammar)


def _damage(path: Path, kind: str) -> None:
    data = path.read_bytes()
    head, _, body = data.partition(b"\n")

    def signed(new_body: bytes) -> bytes:
        return hashlib.sha256(new_body).hexdigest().encode() + b"\n" + new_body

    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "flipped":  # a changed name whose checksum no longer matches
        path.write_bytes(head + b"\n" + body.replace(b'"greet"', b'"gr33t"'))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "unknown node":  # checksum right, shape wrong
        path.write_bytes(signed(body.replace(b'["ProcessDecl"', b'["os.system"')))
    elif kind == "missing field":
        path.write_bytes(signed(body.replace(b'["Span",', b'["Span",1,', 1)))
    elif kind == "not a module":
        path.write_bytes(signed(b'["String","x",["Span",0,1]]'))
    elif kind == "object":
        path.write_bytes(signed(b'{"Module": 1}'))
    elif kind == "not json":
        path.write_bytes(signed(b"\xff\xfe not json"))


@pytest.mark.parametrize("kind", ["truncated", "flipped", "empty", "unknown node",
                                  "missing field", "not a module", "object", "not json"])
def test_a_damaged_entry_is_ignored_and_replaced(cache_dir: Path, kind: str) -> None:
    cached_parse(SOURCE)
    path = entry_path(SOURCE)
    good = path.read_bytes()
    _damage(path, kind)
    assert path.read_bytes() != good
    assert cached_parse(SOURCE) == parse(SOURCE)
    assert path.read_bytes() == good


def test_an_unusable_cache_folder_only_costs_the_parse(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LASHFLOW_CACHE_DIR", str(blocker / "cache"))
    assert cached_parse(SOURCE) == parse(SOURCE)
    assert cached_parse(SOURCE) == parse(SOURCE)


def test_parse_errors_are_raised_as_before_and_never_stored(cache_dir: Path) -> None:
    bad = "process p() { x = }"
    with pytest.raises(LangError) as direct:
        parse(bad)
    with pytest.raises(LangError) as through:
        cached_parse(bad)
    assert through.value.diagnostic == direct.value.diagnostic
    assert not entry_path(bad).exists()


def test_the_default_folder_is_the_users_cache(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.delenv("LASHFLOW_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "lashflow"
    monkeypatch.setenv("LASHFLOW_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_without_a_home_folder_nothing_is_written(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.delenv("LASHFLOW_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no home: "~" stays
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError):
        cache.cache_dir()
    assert cached_parse(SOURCE) == parse(SOURCE)
    assert list(tmp_path.iterdir()) == []
