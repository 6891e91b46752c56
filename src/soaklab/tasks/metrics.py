"""What each task reports per env step, as plain data: reward terms and tracking measures.

Resolution sizes the collector's metrics array from these names before any env is built (no torch
here); each task's env reports exactly these, in this order (its tests check).
"""

from __future__ import annotations

from pathlib import PurePath

from soaklab.catalogue import TASKS
from soaklab.errors import SettingError

# The names are the catalogue's facts (soaklab.catalogue.TASKS).
REWARD_TERMS: dict[str, tuple[str, ...]] = {name: task.reward_terms for name, task in TASKS.items()}

# Per-step measures that are logged but never rewarded (StepResult.metrics). G1: mean distance of the
# tracked bodies from the re-anchored reference (m) and mean joint-angle error (rad).
TRACKING_METRICS: dict[str, tuple[str, ...]] = {name: task.tracking_metrics for name, task in TASKS.items()
                                                 if task.tracking_metrics}

# How episodes ended, per env step: a failure (no bootstrap) or the time limit / clip end.
EPISODE_ENDS = ("episodes/terminated", "episodes/truncated")


def reward_terms(task: str) -> tuple[str, ...]:
    try:
        return REWARD_TERMS[task]
    except KeyError:
        raise SettingError("--task", task, f"must be one of {', '.join(sorted(REWARD_TERMS))}") from None


def tracking_metrics(task: str) -> tuple[str, ...]:
    return TRACKING_METRICS.get(task, ())


def per_clip_metrics(task: str) -> tuple[str, ...]:
    """What a motion library also reports for each clip's block of envs: episode ends and tracking."""
    return (*EPISODE_ENDS, *(f"tracking/{m}" for m in tracking_metrics(task)))


def collector_metrics(task: str, clips: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What the collector averages over its envs and steps and the learner logs as Train/<name>:
    reward terms, episode ends, tracking measures, in that order; with a motion library (`clips`,
    the labels of env.motion's list), then clip/<label>/<measure> for each clip."""
    return (*(f"reward/{t}" for t in reward_terms(task)), *EPISODE_ENDS,
            *(f"tracking/{m}" for m in tracking_metrics(task)),
            *(f"clip/{clip}/{m}" for clip in clips for m in per_clip_metrics(task)))


def clip_labels(motion: object) -> tuple[str, ...]:
    """The labels of a motion library's clips: each clip file's stem (a manifest's clips are
    <name>.npz, so a resolved largebox is labelled largebox); () for a single clip."""
    if not isinstance(motion, list | tuple):
        return ()
    return tuple(PurePath(str(item)).stem for item in motion)
