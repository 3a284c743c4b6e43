"""Completion keys: derived, stable, signed, and one answer for every bad key."""

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lashflow.tools import CompletionKey, KeyRing, derive_key, new_secret, verify_key

SECRET = bytes(range(32))
OTHER = bytes(range(1, 33))


def test_key_shape_and_stability():
    key = derive_key(SECRET, "run-1", "a1b2:0:3")
    assert isinstance(key, CompletionKey) and isinstance(key, str) and key.startswith("lfk_")
    assert derive_key(SECRET, "run-1", "a1b2:0:3") == key  # every attempt, retry and replay
    assert verify_key(SECRET, key) == ("run-1", "a1b2:0:3")
    assert derive_key(SECRET, "run-1", "a1b2:0:4") != key
    assert derive_key(SECRET, "run-2", "a1b2:0:3") != key
    assert derive_key(OTHER, "run-1", "a1b2:0:3") != key


def test_secret_must_be_256_bits():
    with pytest.raises(ValueError):
        derive_key(b"short", "r", "s")
    with pytest.raises(ValueError):
        KeyRing(b"x" * 31)
    assert len(new_secret()) == 32 and new_secret() != new_secret()


def test_bad_keys_all_get_none():
    key = derive_key(SECRET, "run-1", "s:0")
    body, mac = key[4:].split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    other_payload = base64.urlsafe_b64encode(json.dumps(["run-2", payload[1]]).encode()).rstrip(b"=").decode()
    flipped = mac[:-1] + ("A" if mac[-1] != "A" else "B")
    bad = [
        "", "lfk_", "lfk_.", "lfk_abc", key[:-1], key[:-5], key + "A", key + "=", "LFK_" + key[4:],
        f"lfk_{other_payload}.{mac}",  # another run's id under this MAC
        f"lfk_{body}.{flipped}",
        derive_key(OTHER, "run-1", "s:0"),  # a key of another database
        "lfk_" + "A" * 10000, key.replace(".", ".."), None, 42, b"lfk_x",
    ]
    for candidate in bad:
        assert verify_key(SECRET, candidate) is None, candidate


def test_keyring_roundtrip():
    ring = KeyRing(SECRET)
    key = ring.key_for("r", "s")
    assert ring.verify(key) == ("r", "s") and key == derive_key(SECRET, "r", "s")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_any_ids_round_trip(run_id, step_key):
    key = derive_key(SECRET, run_id, step_key)
    assert verify_key(SECRET, key) == (run_id, step_key)
    assert verify_key(OTHER, key) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=4, max_value=200), st.integers(min_value=0, max_value=255))
def test_any_single_byte_change_is_refused(position, replacement):
    key = derive_key(SECRET, "run-x", "site:1")
    position = position % len(key)
    if position < 4:
        return
    mutated = key[:position] + chr(replacement) + key[position + 1:]
    if mutated != key:
        assert verify_key(SECRET, mutated) is None
