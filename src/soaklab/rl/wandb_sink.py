"""W&B beside TensorBoard: the same scalars at the same steps, written by rank 0's scalar thread.

Offline unless the user set WANDB_MODE, so a run never needs a network or an account (`wandb sync`
uploads later). The run's folder is W&B's usual `wandb/` under WANDB_DIR when set, else under the
run dir. A failure of W&B never ends training: the sink stops, says why on the console when it happens
(one line; the soak monitor reads only `soaklab: error:` lines as failures), and the run summary's
`loggers` section carries that reason. A folder with less than MIN_FREE_BYTES free stops it before a
write could fail half way (W&B's own writer drops records on a full disk without telling the
caller: seen with wandb 0.31 on a full tmpfs).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MIN_FREE_BYTES = 1 << 20
DEFAULT_MODE = "offline"


def wandb_dir(run_dir: Path) -> Path:
    """Where W&B's `wandb/` folder goes: WANDB_DIR (W&B's own variable) when set, else the run dir."""
    return Path(os.environ.get("WANDB_DIR") or run_dir)


def sink_for_run(run_dir: Path, loggers: tuple[str, ...], project: str, config: Mapping[str, Any],
                 resumed_at: int | None) -> WandbSink | None:
    """Rank 0's W&B run, when `training.loggers` names wandb: the resolved run config as its config.
    Name, group and tags follow W&B's own variables (WANDB_NAME, WANDB_RUN_GROUP, WANDB_TAGS; the DAG
    sets them for sweeps and records); the name defaults to the run dir's."""
    if "wandb" not in loggers:
        return None
    name = os.environ.get("WANDB_NAME") or run_dir.name
    if resumed_at is not None:  # a new W&B run per segment: W&B keeps a step only once per run
        name = f"{name}-from-{resumed_at}"
    return WandbSink(run_dir, project, config, name, group=None, tags=())


class WandbSink:
    """One W&B run. Every method is safe to call after a failure: it then does nothing."""

    def __init__(self, run_dir: Path, project: str, config: Mapping[str, Any], name: str,
                 group: str | None, tags: tuple[str, ...]) -> None:
        self.dir = wandb_dir(run_dir)
        self.mode = os.environ.get("WANDB_MODE") or DEFAULT_MODE
        self.stopped: str | None = None
        self.run: Any = None
        self.run_folder: str | None = None
        try:
            import wandb

            self.dir.mkdir(parents=True, exist_ok=True)
            self._check_space()
            # console off: the soak monitor reads the trainer's own console, not W&B's copy of it.
            self.run = wandb.init(project=project, dir=str(self.dir), mode=self.mode, name=name, group=group,
                                  tags=list(tags), config=dict(config), reinit="create_new",
                                  settings=wandb.Settings(console="off", silent=True))
            self.run_folder = str(Path(self.run.dir).parent)
        except Exception as exc:  # W&B failing to start must not stop training either
            self._stop(exc)

    def _check_space(self) -> None:
        free = shutil.disk_usage(self.dir).free
        if free < MIN_FREE_BYTES:
            raise OSError(f"{self.dir} has {free} bytes free (below {MIN_FREE_BYTES}); no space left for W&B")

    def _stop(self, exc: BaseException) -> None:
        self.stopped = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"train: W&B stopped logging ({self.stopped}); training goes on, TensorBoard keeps every scalar",
              file=sys.stderr, flush=True)
        run, self.run = self.run, None
        if run is not None:
            try:
                run.finish(exit_code=1)
            except Exception:  # already failing; the first reason is the one kept
                pass

    def log(self, values: Mapping[str, float | None], step: int) -> None:
        """One step's scalars (the Nones left out, as TensorBoard leaves them out)."""
        if self.run is None:
            return
        try:
            self._check_space()
            self.run.log({tag: value for tag, value in values.items() if value is not None}, step=step)
        except Exception as exc:
            self._stop(exc)

    def finish(self) -> None:
        if self.run is None:
            return
        try:
            self.run.finish()
            self.run = None
        except Exception as exc:
            self._stop(exc)

    def state(self) -> dict[str, Any]:
        """The run summary's line for W&B: where its run is, and whether it stopped and why."""
        return {"state": "stopped" if self.stopped else "ok", "reason": self.stopped, "mode": self.mode,
                "run_folder": self.run_folder}
