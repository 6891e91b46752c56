"""One PNG per run: throughput, episode return, how episodes end, tracking error and losses
against iteration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def plot_run(frame: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on CI or the GPU machine
    import matplotlib.pyplot as plt

    panels = [("throughput (env steps/s)", ["Perf/total_fps", "perf/total_fps"]),
              ("mean episode return", ["Train/mean_reward"]),
              ("share of episodes ending by time-out", ["Train/timeout_fraction"]),
              ("tracking error (m, rad)", ["Train/tracking/body_pos_error_m", "Train/tracking/joint_pos_error_rad"]),
              ("losses", sorted(t for t in frame["tag"].unique() if t.startswith("Loss/")
                                and t.split("/", 1)[1] in ("critic", "actor")))]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 13), sharex=True)
    for ax, (label, tags) in zip(axes, panels, strict=True):
        for tag in tags:
            points = frame[frame["tag"] == tag]
            if not points.empty:
                ax.plot(points["step"], points["value"], label=tag, linewidth=0.8)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(loc="best", fontsize=8)
        else:
            ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center")
    axes[-1].set_xlabel("iteration")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
