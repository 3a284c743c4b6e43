"""What a project's configuration says about its runs: a process's default queue, key
and priority, for runs submitted without a queue of their own (issue 31).

```toml
[tool.lashflow.processes.handle_order]      # pyproject.toml or lashflow.toml
queue = "orders"
key = "customer-{customer.id}"              # from the run's input
priority = 2

[tool.lashflow.processes."*"]               # every other run of the project
queue = "default"
```

The project is the nearest folder at or above the ``.lash`` file holding one of those
files (as for ``[tool.lashflow] tools``). ``key`` is a template: each ``{a.b}`` is the
input's field ``a``, then its field ``b``, written as text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import QueueInvalid
from ..tools.loading import lashflow_tables, project_dir

_FIELD = re.compile(r"\{([^{}]*)\}")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")


@dataclass(frozen=True, slots=True)
class QueueDefault:
    """A process's queue as its project declares it (``where``: the file that says so)."""

    queue: str
    key: str | None
    priority: int | None
    where: str

    def key_for(self, data: Any) -> str | None:
        """The key template filled from the run's input; a field it lacks is an error."""
        if self.key is None:
            return None
        return _FIELD.sub(lambda found: _field(found.group(1), data, self), self.key)


def _field(path: str, data: Any, default: QueueDefault) -> str:
    value = data
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise QueueInvalid(f"the key {default.key!r} ({default.where}) names the input's "
                               f"{path!r}, which this run's input does not have")
    if isinstance(value, (dict, list)):
        raise QueueInvalid(f"the key {default.key!r} ({default.where}): the input's {path!r} "
                           "is not text or a number")
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def queue_default(lash_file: str | os.PathLike[str], process: str | None
                  ) -> QueueDefault | None:
    """The queue a run of ``process`` in this file enters when none is asked for."""
    project = project_dir(Path(lash_file).parent)
    if project is None:
        return None
    for path, table in lashflow_tables(project):
        processes = table.get("processes")
        if processes is None:
            continue
        where = f"{path} [tool.lashflow.processes]"
        if not isinstance(processes, dict):
            raise QueueInvalid(f"{where} must be a table of processes")
        entry = processes.get(process) if process else None
        if entry is None:
            entry = processes.get("*")
        if entry is not None:
            return _checked(entry, f"{where} {process or '*'}")
    return None


def _checked(entry: Any, where: str) -> QueueDefault:
    if not isinstance(entry, dict) or not isinstance(entry.get("queue"), str):
        raise QueueInvalid(f"{where}: give at least queue = \"NAME\"")
    unknown = set(entry) - {"queue", "key", "priority"}
    if unknown:
        raise QueueInvalid(f"{where}: unknown setting {sorted(unknown)[0]!r} (queue, key, "
                           "priority)")
    key, priority = entry.get("key"), entry.get("priority")
    if key is not None and (not isinstance(key, str)
                            or not all(_PATH.match(f) for f in _FIELD.findall(key))):
        raise QueueInvalid(f"{where}: key {key!r} is text with {{field.path}} parts from the "
                           "input, like \"customer-{customer.id}\"")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise QueueInvalid(f"{where}: priority must be a whole number")
    return QueueDefault(entry["queue"], key, priority, where)


__all__ = ["QueueDefault", "queue_default"]
