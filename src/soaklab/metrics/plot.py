"""One PNG per run, read at a glance: steady-state throughput with its median, episode return and
length, how episodes end, tracking error, and the two losses, against iteration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

# The first iterations run far faster than the rest (no updates before algo.learning_starts, no
# replay to sample): the throughput panel is scaled to the steady state after this share of the run.
WARMUP_FRACTION = 0.1
WIDTH_IN, DPI = 12.0, 110  # 1,320 px: fits a 1,400 px screen


def steady_state(points: pd.DataFrame) -> pd.DataFrame:
    if points.empty:
        return points
    first, last = points["step"].min(), points["step"].max()
    return points[points["step"] >= first + WARMUP_FRACTION * (last - first)]


def _throughput(ax, frame: pd.DataFrame) -> None:  # noqa: ANN001 - a matplotlib Axes
    points = frame[frame["tag"] == "Perf/total_fps"]
    if points.empty:  # a legacy unversioned run
        points = frame[frame["tag"] == "perf/total_fps"]
    if points.empty:
        return
    steady = steady_state(points)
    median = float(steady["value"].median())
    ax.plot(points["step"], points["value"], linewidth=0.8, label="Perf/total_fps")
    ax.axhline(median, color="tab:red", linewidth=1.2, linestyle="--",
               label=f"steady-state median {median:,.0f} env-steps/s (after the first {WARMUP_FRACTION:.0%})")
    top = float(steady["value"].quantile(0.99))
    ax.set_ylim(0, max(top * 1.25, median * 1.25, 1.0))
    if float(points["value"].max()) > top * 1.25:
        ax.annotate("warm-up (before learning starts) off scale", xy=(0.01, 0.92), xycoords="axes fraction",
                    fontsize=8, color="0.4")


def plot_run(frame: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on CI or the GPU machine
    import matplotlib.pyplot as plt

    panels = [("env steps/s", None),
              ("mean episode return", ["Train/mean_reward"]),
              ("mean episode length (steps)", ["Train/episode_length"]),
              ("time-out share of ended episodes", ["Train/timeout_fraction"]),
              ("tracking error (m, rad)", ["Train/tracking/body_pos_error_m", "Train/tracking/joint_pos_error_rad"]),
              ("critic loss", ["Loss/critic"]),
              ("actor loss", ["Loss/actor"])]
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH_IN, 2.1 * len(panels)), sharex=True)
    for ax, (label, tags) in zip(axes, panels, strict=True):
        if tags is None:
            _throughput(ax, frame)
        for tag in tags or ():
            points = frame[frame["tag"] == tag]
            if not points.empty:
                ax.plot(points["step"], points["value"], label=tag, linewidth=0.8)
        ax.set_ylabel(label, fontsize=9)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(loc="upper right", fontsize=8)
        else:
            ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center")
    axes[-1].set_xlabel("iteration")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
