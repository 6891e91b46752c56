"""Observation/action widths of each task, and the replay row they imply (DESIGN §7).

Settings resolution needs these widths (the memory budget) before any env is
built, so they live here as plain data; each task's tests check its env
against this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from soaklab.errors import SettingError


@dataclass(frozen=True)
class TaskSpaces:
    actor_obs: int
    critic_obs: int
    action: int

    @property
    def replay_row_width(self) -> int:
        """Floats per replay row: obs | next_obs | critic | next_critic | action | reward | terminated | truncated."""
        return 2 * self.actor_obs + 2 * self.critic_obs + self.action + 3


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
