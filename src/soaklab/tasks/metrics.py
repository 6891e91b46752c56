"""What each task reports per env step, as plain data: reward terms and tracking measures.

Resolution sizes the collector's metrics array from these names before any env is built (no torch
here); each task's env reports exactly these, in this order (its tests check).
"""

from __future__ import annotations

from soaklab.errors import SettingError

REWARD_TERMS: dict[str, tuple[str, ...]] = {
    "g1_motion_tracking": ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel",
                           "action_rate", "joint_limit", "undesired_contacts"),
    "cartpole_swingup": ("upright", "centered", "control"),
}

# Per-step measures that are logged but never rewarded (StepResult.metrics). G1: mean distance of the
# tracked bodies from the re-anchored reference (m) and mean joint-angle error (rad).
TRACKING_METRICS: dict[str, tuple[str, ...]] = {
    "g1_motion_tracking": ("body_pos_error_m", "joint_pos_error_rad"),
}

# How episodes ended, per env step: a failure (no bootstrap) or the time limit / clip end.
EPISODE_ENDS = ("episodes/terminated", "episodes/truncated")


def reward_terms(task: str) -> tuple[str, ...]:
    try:
        return REWARD_TERMS[task]
    except KeyError:
        raise SettingError("--task", task, f"must be one of {', '.join(sorted(REWARD_TERMS))}") from None


def tracking_metrics(task: str) -> tuple[str, ...]:
    return TRACKING_METRICS.get(task, ())


def collector_metrics(task: str) -> tuple[str, ...]:
    """What the collector averages over its envs and steps and the learner logs as Train/<name>:
    reward terms, episode ends, tracking measures, in that order."""
    return (*(f"reward/{t}" for t in reward_terms(task)), *EPISODE_ENDS,
            *(f"tracking/{m}" for m in tracking_metrics(task)))
