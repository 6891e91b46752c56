"""The run's loggers (`training.loggers`, `training.wandb_project`), checked before anything runs.

TensorBoard is always among them: the DAG's metric extraction and validation read its event file.
W&B (`wandb`) logs beside it, on rank 0 only, offline unless the user set WANDB_MODE
(soaklab.rl.wandb_sink; docs/loggers.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from soaklab.errors import SettingError

LOGGERS = ("tensorboard", "wandb")
REQUIRED = "tensorboard"
# W&B's own rule for a project name (wandb.sdk.wandb_settings.Settings.validate_project, 0.31):
# at most 128 characters, none of these. A blank name is refused here too: W&B would file the run
# under a project named by whitespace.
PROJECT_MAX = 128
PROJECT_FORBIDDEN = "/\\#?%:"
EXTRA_HINT = "pip install 'soaklab[wandb]'"


def check_loggers(training: Mapping[str, Any]) -> None:
    """The composed config's logger keys: known names, no repeats, TensorBoard kept, a project name
    W&B accepts. Pure: the package's presence is the host's question (require_logger_packages)."""
    loggers = training.get("loggers")
    key = "training.loggers"
    if not isinstance(loggers, list | tuple) or not all(isinstance(name, str) for name in loggers):
        raise SettingError(key, loggers, f"must be a list of logger names ({', '.join(LOGGERS)})")
    unknown = [name for name in loggers if name not in LOGGERS]
    if unknown:
        raise SettingError(key, list(loggers), f"unknown logger {unknown[0]!r}; expected names from "
                           f"{', '.join(LOGGERS)}")
    if len(set(loggers)) != len(loggers):
        raise SettingError(key, list(loggers), "names a logger twice")
    if REQUIRED not in loggers:
        raise SettingError(key, list(loggers), f"must include {REQUIRED} (the DAG's metrics and validation read "
                           f"its event file); add the others beside it, e.g. [{REQUIRED}, wandb]")
    project = training.get("wandb_project")
    key = "training.wandb_project"
    if not isinstance(project, str) or not project.strip():
        raise SettingError(key, project, "must be a non-empty project name")
    if len(project) > PROJECT_MAX:
        raise SettingError(key, project, f"W&B refuses project names over {PROJECT_MAX} characters "
                           f"(this one has {len(project)})")
    bad = sorted({c for c in project if c in PROJECT_FORBIDDEN})
    if bad:
        raise SettingError(key, project, f"W&B refuses project names containing {' '.join(bad)} "
                           f"(none of {' '.join(PROJECT_FORBIDDEN)} may appear)")


def require_logger_packages(loggers: tuple[str, ...] | list[str]) -> None:
    """A logger asked for on a host without its package: refused before anything is spawned."""
    if "wandb" in loggers and importlib.util.find_spec("wandb") is None:
        raise SettingError("training.loggers", list(loggers),
                           f"wandb is not installed on this host; {EXTRA_HINT}, or drop wandb from the list")
