"""The run dir's rules (soaklab.files.rundir): a new run's dir is claimed when it is named."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from soaklab.files.rundir import next_run_dir


def _named(root: str) -> str:
    return str(next_run_dir("sac", "cartpole_swingup", "mujoco", root=Path(root)))


def test_runs_started_together_each_get_a_dir_of_their_own(tmp_path):
    """Four processes name a new run's dir at once: four dirs, each made and empty, none shared (the
    name is claimed by mkdir, not picked as the first that does not exist yet)."""
    (tmp_path / "sac-cartpole_swingup-mujoco-1").mkdir()  # taken before: skipped
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        named = pool.map(_named, [str(tmp_path)] * 4)
    assert len(set(named)) == 4, named
    assert sorted(Path(p).name for p in named) == [f"sac-cartpole_swingup-mujoco-{n}" for n in (0, 2, 3, 4)]
    assert all(Path(p).is_dir() and not any(Path(p).iterdir()) for p in named)
