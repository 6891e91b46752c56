"""Which owners exist: the algorithms, tasks and sims of the owner YAML tree (package data).

Standard library only: the command line lists them as choices without loading any YAML.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

CONF_ROOT = Path(str(resources.files("soaklab") / "config" / "defaults"))
SHARED = "_shared"


def available_algos() -> list[str]:
    return sorted(p.name for p in CONF_ROOT.iterdir() if (p / "config.yaml").is_file() and p.name != SHARED)


def available_tasks(algo: str) -> list[str]:
    root = CONF_ROOT / algo / "task"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def available_sims(algo: str, task: str) -> list[str]:
    root = CONF_ROOT / algo / "task" / task
    return sorted(p.stem for p in root.glob("*.yaml") if p.stem != "base")


def every_task() -> list[str]:
    return sorted({t for a in available_algos() for t in available_tasks(a)})


def every_sim() -> list[str]:
    return sorted({s for a in available_algos() for t in available_tasks(a) for s in available_sims(a, t)})
