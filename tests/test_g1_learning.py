"""scripts/gpu/g1_learning.py, the G1 learning benchmark (learning.sh, tracking.sh): its curves, read
from a real TensorBoard event file written under the collector's own tag names: a motion library's run
gets each clip's time-out share and body error, which the run-wide figures blend, in its JSON points
and in its plot."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from soaklab.config.compose import compose
from soaklab.metrics.tags import ITERATION_TAG
from soaklab.tasks.metrics import collector_metrics
from tests.conftest import REPO

# A driver run as a file from scripts/gpu/, not a module of the package: loaded by its path.
_spec = importlib.util.spec_from_file_location("g1_learning", REPO / "scripts" / "gpu" / "g1_learning.py")
assert _spec is not None and _spec.loader is not None
g1_learning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(g1_learning)
RUN_DEFAULTS, clip_curve_keys, clips_of, curves = (g1_learning.RUN_DEFAULTS, g1_learning.clip_curve_keys,
                                                   g1_learning.clips_of, g1_learning.curves)
plot, run_defaults, window_mean = g1_learning.plot, g1_learning.run_defaults, g1_learning.window_mean

CLIPS = ("largebox", "crawl_slope")


def write_run(run_dir: Path, clips: tuple[str, ...]) -> None:
    """Three iterations: largebox's episodes all end by time-out, crawl_slope's one in four."""
    run_dir.mkdir()
    (run_dir / "run_config.json").write_text(json.dumps({"config": {"algo": {"num_envs": 8}}}))
    names = collector_metrics("g1_motion_tracking", clips)
    writer = SummaryWriter(str(run_dir))
    for step in range(3):
        wall = 1000.0 + step
        writer.add_scalar(ITERATION_TAG, 1000.0, step, walltime=wall)
        writer.add_scalar("Train/timeout_fraction", 0.7, step, walltime=wall)
        writer.add_scalar("Train/tracking/body_pos_error_m", 0.05, step, walltime=wall)
        for clip, (terminated, truncated, error) in zip(clips, ((0.0, 0.02, 0.03), (0.03, 0.01, 0.1)),
                                                        strict=False):
            for name, value in ((f"clip/{clip}/episodes/terminated", terminated),
                                (f"clip/{clip}/episodes/truncated", truncated),
                                (f"clip/{clip}/tracking/body_pos_error_m", error)):
                assert name in names  # the tags the runner logs, not names of this test's own
                writer.add_scalar(f"Train/{name}", value, step, walltime=wall)
    writer.close()


def test_a_library_run_gets_each_clips_time_out_share_and_body_error(tmp_path: Path) -> None:
    write_run(tmp_path / "run", CLIPS)
    points, num_envs = curves(tmp_path / "run")
    assert num_envs == 8 and len(points) == 3
    assert clips_of(points) == sorted(CLIPS)
    assert window_mean(points, "clip/largebox/timeout_fraction") == pytest.approx(1.0)
    assert window_mean(points, "clip/crawl_slope/timeout_fraction") == pytest.approx(0.25)
    assert window_mean(points, "clip/crawl_slope/body_pos_error_m") == pytest.approx(0.1)
    assert window_mean(points, "timeout_fraction") == pytest.approx(0.7)
    record = {"curve": points, "num_envs": num_envs, "label": "library", "train_command": "soaklab train"}
    plot(record, tmp_path / "library.png")
    assert (tmp_path / "library.png").stat().st_size > 0


def test_a_one_clip_run_has_no_per_clip_figures(tmp_path: Path) -> None:
    write_run(tmp_path / "run", ())
    points, _ = curves(tmp_path / "run")
    assert clips_of(points) == [] and clip_curve_keys(clips_of(points)) == []
    assert all(not key.startswith("clip/") for key in points[0])


@pytest.mark.parametrize("given", [[], ["algo.save_interval=4000"], ["algo.max_iterations=10", "algo.save_interval=5"]])
def test_the_benchmarks_own_settings_yield_to_the_callers(given: list[str]) -> None:
    """The caller may ask for checkpoints along the run (a success-against-minutes table): the
    composed train command gives each key once, which resolution insists on, and the caller's wins."""
    overrides = [*run_defaults(given), *given]
    cfg = compose("flashsac", "g1_motion_tracking", "mujoco", overrides).config
    mine = dict(o.split("=", 1) for o in given)
    for key, default in RUN_DEFAULTS.items():
        section, name = key.split(".")
        assert str(cfg[section][name]) == mine.get(key, default)
