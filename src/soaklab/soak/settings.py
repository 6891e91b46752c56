"""What `soaklab soak` is asked to do, checked before anything is spawned (DESIGN §3, §9)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from soaklab.config.overrides import parse_overrides
from soaklab.errors import InvalidInput

# The monitor decides these itself; an --extra-override of any of them would let the trainer run
# something other than what the soak JSON says was soaked.
OWNED_KEYS = {
    "algo.num_envs": "use --num-envs",
    "algo.max_iterations": "use --iterations",
    "training.sim_backend": "follows --sim (the owner YAML declares it)",
    "training.log_dir": "use --log-dir",
}
CONSOLE_LOG = "soak-console.log"


@dataclass(frozen=True)
class Budget:
    """The monitor's clock: every value in seconds."""

    min_duration: float
    sample_interval: float
    startup_timeout: float
    stale_progress: float
    post_shutdown_grace: float

    def record(self) -> dict[str, float]:
        return {"min_duration_seconds": self.min_duration, "sample_interval_seconds": self.sample_interval,
                "startup_timeout_seconds": self.startup_timeout, "stale_progress_seconds": self.stale_progress,
                "post_shutdown_grace_seconds": self.post_shutdown_grace}


@dataclass(frozen=True)
class SoakRequest:
    run_config: Path | None
    algo: str | None
    task: str | None
    sim: str | None
    num_envs: int | None
    iterations: int | None
    extra_overrides: tuple[str, ...]
    budget: Budget
    log_dir: Path
    output: Path
    evidence_dir: Path | None

    @property
    def console_log(self) -> Path:
        return self.log_dir / CONSOLE_LOG


def check_budget(values: dict[str, float | None]) -> Budget:
    """Each budget flag is a finite number > 0 (the grace period may be 0)."""
    for flag, value in values.items():
        low_ok = value is not None and (value >= 0 if flag == "post-shutdown-grace-seconds" else value > 0)
        if value is None or not math.isfinite(value) or not low_ok:
            bound = ">= 0" if flag == "post-shutdown-grace-seconds" else "> 0"
            raise InvalidInput(f"--{flag}={value}: expected a finite number of seconds {bound}")
    return Budget(min_duration=values["min-duration-seconds"], sample_interval=values["sample-interval-seconds"],
                  startup_timeout=values["startup-timeout-seconds"],
                  stale_progress=values["stale-progress-seconds"],
                  post_shutdown_grace=values["post-shutdown-grace-seconds"])


def check_extra_overrides(items: list[str]) -> tuple[str, ...]:
    for override in parse_overrides(items):
        if override.key in OWNED_KEYS:
            raise InvalidInput(f"--extra-override {override.text}: {override.key} is owned by `soaklab soak`; "
                               f"{OWNED_KEYS[override.key]}")
    return tuple(items)


def check_log_dir(log_dir: Path) -> None:
    """New or empty: the monitor reads file changes in it as the trainer's liveness."""
    if log_dir.exists() and (not log_dir.is_dir() or any(log_dir.iterdir())):
        raise InvalidInput(f"--log-dir {log_dir}: exists and is not empty; choose a new directory")


def owned_overrides(request: SoakRequest) -> list[str]:
    """The overrides the monitor itself hands the trainer."""
    owned = [f"training.log_dir={request.log_dir}"]
    if request.num_envs is not None:
        owned.append(f"algo.num_envs={request.num_envs}")
    if request.iterations is not None:
        owned.append(f"algo.max_iterations={request.iterations}")
    return owned
