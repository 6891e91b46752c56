"""Reading a run's metrics: the metric schema from run_summary.json, every scalar of its one event file.

Fail closed (exit 2) on what would make numbers ambiguous: no or several event
files, a missing, boolean or unsupported metric_schema_version, legacy tags in a
schema-1 run. Legacy unversioned runs (no metric_schema_version, lower-case
perf/*, timing/* tags) are read only when asked with --legacy-unversioned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from soaklab.errors import InvalidInput

SUPPORTED_SCHEMA = 1
LEGACY_PREFIXES = ("perf/", "timing/")
LEGACY_FLAG = "--legacy-unversioned"


def metric_schema(run_dir: Path, legacy: bool) -> int | None:
    """The run's metric_schema_version (None for a legacy run read with --legacy-unversioned)."""
    path = run_dir / "run_summary.json"
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidInput(f"{path}: missing; metrics are read only from a finished run's directory") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable ({exc})") from None
    if not isinstance(summary, dict) or "metric_schema_version" not in summary:
        if legacy:
            return None
        raise InvalidInput(f"{path}: no metric_schema_version; a legacy unversioned run is read only with "
                           f"{LEGACY_FLAG}")
    version = summary["metric_schema_version"]
    if legacy:
        raise InvalidInput(f"{LEGACY_FLAG}: {path} declares metric_schema_version={json.dumps(version)}; "
                           "drop the flag")
    if isinstance(version, bool) or version != SUPPORTED_SCHEMA:
        raise InvalidInput(f"{path}: metric_schema_version={json.dumps(version)}: unsupported; this soaklab "
                           f"reads version {SUPPORTED_SCHEMA}")
    return version


def event_file(run_dir: Path) -> Path:
    found = sorted(run_dir.glob("events.out.tfevents.*"))
    if not found:
        raise InvalidInput(f"{run_dir}: no TensorBoard event file (events.out.tfevents.*)")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise InvalidInput(f"{run_dir}: {len(found)} event files ({names}); a run writes exactly one")
    return found[0]


def read_scalars(path: Path) -> pd.DataFrame:
    """Every scalar point (no TensorBoard sampling cap) as columns tag, step, wall_time, value."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={SCALARS: 0})
    acc.Reload()
    rows = [(tag, e.step, e.wall_time, e.value) for tag in acc.Tags()[SCALARS] for e in acc.Scalars(tag)]
    frame = pd.DataFrame(rows, columns=["tag", "step", "wall_time", "value"])
    return frame.sort_values(["tag", "step"], kind="stable").reset_index(drop=True)


def check_tags(frame: pd.DataFrame, schema: int | None, path: Path) -> None:
    tags = sorted(frame["tag"].unique())
    if not tags:
        raise InvalidInput(f"{path}: holds no scalars")
    legacy = [t for t in tags if t.startswith(LEGACY_PREFIXES)]
    if schema is not None and legacy:
        raise InvalidInput(f"{path}: legacy tag {legacy[0]} in a metric_schema_version {schema} run; "
                           "the event file does not belong to this run summary")
