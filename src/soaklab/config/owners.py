"""Which owners exist: the algorithms, tasks and sims of the catalogue (soaklab.catalogue), and where
the owner YAML tree (package data) holds defaults for them.

Every pairing the catalogue allows is an owner: any algorithm, on any task, on each backend the task
steps on. The tree's files are optional layers: a plug-in (or a new entry) runs on the shared defaults
and its entry's own `defaults` YAML alone. Standard library only: the command line lists the owners
as choices without loading any YAML.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from soaklab.catalogue import ALGORITHMS, TASKS

CONF_ROOT = Path(str(resources.files("soaklab") / "config" / "defaults"))
SHARED = "_shared"


def available_algos() -> list[str]:
    return sorted(ALGORITHMS)


def available_tasks(algo: str) -> list[str]:
    return sorted(TASKS) if algo in ALGORITHMS else []


def available_sims(algo: str, task: str) -> list[str]:
    return sorted(TASKS[task].backends) if algo in ALGORITHMS and task in TASKS else []


def every_task() -> list[str]:
    return sorted(TASKS)


def every_sim() -> list[str]:
    return sorted({s for t in TASKS.values() for s in t.backends})


def algo_defaults(algo: str) -> Path | None:
    """The YAML of `algo`'s defaults: the tree's, else its catalogue entry's, else none."""
    tree = CONF_ROOT / algo / "config.yaml"
    named = ALGORITHMS[algo].defaults
    return tree if tree.is_file() else Path(named) if named else None


def task_defaults(task: str) -> Path | None:
    """The YAML defining `task`'s keys: the one its catalogue entry names (in the task's folder,
    src/soaklab/tasks/<folder>/defaults.yaml for a built-in), else none."""
    named = TASKS[task].defaults
    return Path(named) if named else None


def owner_file(algo: str, task: str, sim: str) -> Path | None:
    """The tree's most specific owner file of (algo, task, sim), where there is one."""
    path = CONF_ROOT / algo / "task" / task / f"{sim}.yaml"
    return path if path.is_file() else None
