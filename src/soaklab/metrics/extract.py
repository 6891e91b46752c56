"""`soaklab metrics`: last-N window means as JSON, every scalar as CSV, a PNG plot (docs/soak.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.metrics.events import check_tags, current_tags, event_file, metric_schema, read_events, verify_records
from soaklab.metrics.lumps import accumulated_per_iteration
from soaklab.metrics.tags import ACCUMULATED_TAGS, ITERATION_TAG
from soaklab.schemas import validate_artifact

METRICS_SCHEMA_VERSION = 1
# Tags every run logs from its first iterations on (losses once learning starts), in schema 2's
# names: a schema-1 run is read with its tags renamed (soaklab.metrics.tags.V1_RENAMES).
REQUIRED_TAGS = (
    "Perf/total_fps", ITERATION_TAG, "Perf/learner_inference_ms", "Perf/learner_ingress_ms",
    "Perf/learner_update_ms", "Perf/collector_env_step_ms", "Perf/collector_action_wait_ms",
    "Perf/collector_ingress_write_ms", "Train/step_reward", "Replay/size", "Ingress/occupancy", "Loss/critic",
    "Loss/actor",
)
# Logged once the first episode has finished: a short run may legitimately have none.
EPISODE_TAGS = ("Train/mean_reward", "Train/episode_length")
# Expected tags that are absent are reported as null and listed under "missing".
EXPECTED_TAGS = REQUIRED_TAGS + EPISODE_TAGS
# Whether the agent tracks (tasks that log them; null where a task does not): the share of ended
# episodes that ran to the time limit or the clip's end, and the errors on the current frame.
TRACKING = {"timeout_fraction": "Train/timeout_fraction", "episode_length": "Train/episode_length",
            "body_pos_error_m": "Train/tracking/body_pos_error_m",
            "joint_pos_error_rad": "Train/tracking/joint_pos_error_rad"}
# Where an iteration's time goes: the phase breakdown a throughput report quotes.
PHASES = {"learner_inference": "Perf/learner_inference_ms", "learner_ingress": "Perf/learner_ingress_ms",
          "learner_update": "Perf/learner_update_ms", "collector_env_step": "Perf/collector_env_step_ms",
          "collector_action_wait": "Perf/collector_action_wait_ms",
          "collector_ingress_write": "Perf/collector_ingress_write_ms"}


def finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def check_finite(frame: pd.DataFrame, path: Path) -> None:
    """Refuse a run whose series hold a NaN or an infinity (exit 2, naming the first series and step):
    a window mean would hide it, and a run that diverged has no metrics to report."""
    values = frame["value"].to_numpy(dtype=float)
    bad = frame[~np.isfinite(values)]
    if bad.empty:
        return
    first = bad.sort_values(["step", "tag"], kind="stable").iloc[0]
    tags = sorted(set(bad["tag"]))
    raise InvalidInput(f"{path}: series {first['tag']} holds a non-finite value ({first['value']}) at step "
                       f"{int(first['step'])}; {len(tags)} series do ({', '.join(tags[:5])}"
                       f"{', ...' if len(tags) > 5 else ''}): the run diverged")


def windows(frame: pd.DataFrame, last: int) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per tag: mean of its last `last` points (never NaN: a non-finite mean is null and listed)."""
    out: dict[str, dict[str, Any]] = {}
    non_finite: list[str] = []
    for tag, points in frame.groupby("tag", sort=True):
        tail = points.tail(last)
        mean = finite(tail["value"].mean(skipna=False))  # a NaN in the window is not averaged away
        if mean is None:
            non_finite.append(str(tag))
        out[str(tag)] = {"mean": mean, "last": finite(tail["value"].iloc[-1]), "count": len(tail),
                         "first_step": int(tail["step"].iloc[0]), "last_step": int(tail["step"].iloc[-1])}
    return out, non_finite


def phases_ms(frame: pd.DataFrame, values: dict[str, dict[str, Any]], last: int) -> dict[str, float | None]:
    """Each phase's time per iteration: the window mean, or for the collector's lump-logged phases
    (ACCUMULATED_TAGS) their lumps over the iterations they cover, at least the last `last` (a mean
    of rows that are 0 between publications would say 0 or 100 times the truth)."""
    out: dict[str, float | None] = {}
    for name, tag in PHASES.items():
        if tag in ACCUMULATED_TAGS:
            value = accumulated_per_iteration(frame[frame["tag"] == tag], cover=last)
            out[name] = None if value is None else finite(value)
        else:
            out[name] = (values.get(tag) or {}).get("mean")
    return out


def run_facts(run_dir: Path) -> dict[str, Any]:
    summary = read_json(run_dir / "run_summary.json")
    shutdown = (summary.get("runtime_manifest") or {}).get("shutdown") or {}
    if shutdown.get("classification") in ("non_finite", "diverged"):  # no metrics of a diverged run
        raise InvalidInput(f"{run_dir / 'run_summary.json'}: the run ended {shutdown['classification']}: "
                           f"{(shutdown.get('exception') or {}).get('message')}; it has no metrics to report")
    wall, steps = summary.get("training_wall_time_sec"), summary.get("total_env_steps")
    return {"status": summary.get("status"), "completed_iterations": summary.get("completed_iterations"),
            "total_env_steps": steps, "training_wall_time_sec": wall,
            "end_to_end_env_steps_per_sec": steps / wall if steps is not None and wall else None}


def extract_metrics(run_dir: Path, last: int, out: Path, csv: Path | None, plot: Path | None,
                    html: Path | None, legacy: bool) -> dict[str, Any]:
    if last < 1:
        raise InvalidInput(f"--last={last}: expected an integer >= 1")
    if not run_dir.is_dir():
        raise InvalidInput(f"{run_dir}: not a run directory")
    schema = metric_schema(run_dir, legacy)
    path = event_file(run_dir)
    verify_records(path)
    frame, identity = read_events(path)
    check_tags(frame, schema, path)
    if schema == 1:
        frame = current_tags(frame)
    facts = run_facts(run_dir)
    check_finite(frame, path)
    values, non_finite = windows(frame, last)
    expected = EXPECTED_TAGS if schema is not None else ()
    missing = [t for t in expected if t not in values]
    metrics: dict[str, Any] = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "run_dir": str(run_dir),
        "event_file": path.name,
        "run_identity": identity,
        "metric_schema_version": schema,
        "legacy_unversioned": schema is None,
        "last": last,
        "run": facts,
        "metrics": {**values, **dict.fromkeys(missing)},
        "missing": missing,
        "non_finite": non_finite,
        "phases_ms": phases_ms(frame, values, last),
        "tracking": {name: (values.get(tag) or {}).get("mean") for name, tag in TRACKING.items()},
    }
    validate_artifact("metrics", metrics)
    if csv is not None:
        csv.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(csv, index=False)
    if plot is not None:
        from soaklab.metrics.plot import plot_run

        plot_run(frame, plot, title=str(run_dir))
    if html is not None:
        from soaklab.files.report import write_table

        write_table([{"tag": tag, **(v or {"mean": None})} for tag, v in metrics["metrics"].items()], html,
                    f"metrics of {run_dir}", f"means of the last {last} logged iterations; missing: "
                    f"{', '.join(missing) or 'none'}")
    write_json_atomic(out, metrics)
    return metrics
