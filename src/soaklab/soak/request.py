"""What `soaklab soak` is asked to do, checked before anything is spawned (docs/soak.md)."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from soaklab.config.overrides import parse_overrides
from soaklab.errors import InvalidInput
from soaklab.files.rundir import CONSOLE_LOG, check_new_or_empty, check_path_shape

# The monitor decides these itself; an --extra-override of any of them would let the trainer run
# something other than what the soak JSON says was soaked. (Keys nobody may override, such as
# training.sim_backend, are refused for everyone by soaklab.config.keys.DERIVED_KEYS.)
OWNED_KEYS = {
    "algo.num_envs": "use --num-envs",
    "algo.max_iterations": "use --iterations",
    "training.log_dir": "use --log-dir",
}


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


def check_log_dir(log_dir: Path, flag: str = "--log-dir") -> None:
    """New or empty: the monitor reads file changes in it as the trainer's liveness."""
    check_new_or_empty(flag, log_dir)


# The soak JSON, the console log copy and the run's records need little, but a soak must not run for
# half an hour and then fail to write them: this much must be free where they go.
MIN_EVIDENCE_FREE_BYTES = 16 << 20


def _free_bytes(path: Path) -> int:
    probe = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return shutil.disk_usage(probe).free


def _inside(a: Path, b: Path) -> bool:
    """a is b or lies under it (paths resolved, links followed)."""
    a, b = a.resolve(), b.resolve()
    return a == b or a.is_relative_to(b)


def check_outputs(request: SoakRequest) -> None:
    """Every output checked before anything is spawned: shapes, overlaps and free space."""
    check_log_dir(request.log_dir)
    check_path_shape("--output", request.output, want_dir=False)
    if _inside(request.output, request.log_dir):
        raise InvalidInput(f"--output {request.output}: inside --log-dir {request.log_dir} (the trainer's run dir); "
                           "write the soak JSON elsewhere")
    if request.run_config is not None and request.output.resolve() == request.run_config.resolve():
        raise InvalidInput(f"--output {request.output}: is the --run-config input; choose another path")
    places = [("--output", request.output.parent)]
    if request.evidence_dir is not None:
        ev = request.evidence_dir
        check_path_shape("--evidence-dir", ev, want_dir=True)
        if _inside(ev, request.log_dir) or _inside(request.log_dir, ev):
            raise InvalidInput(f"--evidence-dir {ev}: overlaps --log-dir {request.log_dir}; the evidence is a copy "
                               "of the run's records and must live apart from them")
        if _inside(request.output, ev):
            raise InvalidInput(f"--output {request.output}: inside --evidence-dir {ev}; the evidence copy would "
                               "overwrite it")
        places.append(("--evidence-dir", ev))
    for flag, place in places:
        free = _free_bytes(place)
        if free < MIN_EVIDENCE_FREE_BYTES:
            raise InvalidInput(f"{flag} {place}: only {free >> 10} KiB free; a soak needs at least "
                               f"{MIN_EVIDENCE_FREE_BYTES >> 20} MiB there for its JSON and evidence")
