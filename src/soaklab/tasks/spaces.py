"""Observation/action widths of each task, and the replay row they imply (docs/assets-and-tasks.md).

Settings resolution needs these widths (the memory budget) before any env is
built, so they live here as plain data; each task's tests check its env
against this table.
"""

from __future__ import annotations

from soaklab.contract.layout import TaskSpaces
from soaklab.errors import SettingError

TASK_SPACES: dict[str, TaskSpaces] = {
    "g1_motion_tracking": TaskSpaces(actor_obs=160, critic_obs=286, action=29),
    # cos/sin of the pole angle, cart position, cart and pole velocity; one force.
    "cartpole_swingup": TaskSpaces(actor_obs=5, critic_obs=5, action=1),
}


def task_spaces(task: str) -> TaskSpaces:
    try:
        return TASK_SPACES[task]
    except KeyError:
        raise SettingError("--task", task, f"must be one of {', '.join(sorted(TASK_SPACES))}") from None
