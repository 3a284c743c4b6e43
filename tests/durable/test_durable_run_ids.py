"""Run ids drawn many at a time: each is fresh, of the usual form, and a forked child
does not hand out its parent's."""

from __future__ import annotations

import os
import re

from lashflow.durable import run_ids
from lashflow.durable.run_ids import BATCH, new_run_id


def test_ids_are_fresh_and_of_the_usual_form_across_draws() -> None:
    ids = [new_run_id() for _ in range(3 * BATCH + 5)]  # several draws of the pool
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"run_[0-9a-f]{16}", run_id) for run_id in ids)


def test_an_empty_pool_draws_again() -> None:
    run_ids._forget()
    run_id = new_run_id()
    assert re.fullmatch(r"run_[0-9a-f]{16}", run_id)
    assert len(run_ids._pool) == BATCH - 1 and run_id not in run_ids._pool


def test_a_forked_child_does_not_reuse_its_parents_ids() -> None:
    new_run_id()  # the pool holds ids
    held = set(run_ids._pool)
    assert held
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its pool is empty, so it draws its own
        try:
            os.write(write, f"{len(run_ids._pool)} {new_run_id()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    size, child_id = os.read(read, 100).decode().split()
    os.close(read)
    assert size == "0" and child_id not in held
