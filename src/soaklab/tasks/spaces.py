"""Observation/action widths of each task, and the replay row they imply (docs/assets-and-tasks.md).

Settings resolution needs these widths (the memory budget) before any env is
built, so they live here as plain data; each task's tests check its env
against this table.
"""

from __future__ import annotations

from soaklab.catalogue import TASKS
from soaklab.contract.layout import TaskSpaces
from soaklab.errors import SettingError

# The widths are the catalogue's facts (soaklab.catalogue.TASKS).
TASK_SPACES: dict[str, TaskSpaces] = {name: TaskSpaces(actor_obs=t.actor_obs, critic_obs=t.critic_obs, action=t.action)
                                      for name, t in TASKS.items()}


def task_spaces(task: str) -> TaskSpaces:
    try:
        return TASK_SPACES[task]
    except KeyError:
        raise SettingError("--task", task, f"must be one of {', '.join(sorted(TASK_SPACES))}") from None
