"""A soak whose trainer was interrupted keeps its run, and the next soak of the same run resumes it
(docs/soak.md, "Interrupted soaks").

Snakemake deletes a failed job's outputs, the run dir among them, before it runs the job again. So a
soak that fails with a resumable checkpoint in its run dir moves the dir aside, to
`<run dir>.interrupted`, beside its own copy of the soak JSON. The next soak aimed at the same run
dir, with the same configuration, moves it back and runs `soaklab train --resume` in it. The run
dir's path, and so its config hash and event identity, are the same as the first time.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from soaklab.files.checkpoints import checkpoint_iterations
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import RUN_CONFIG

SEGMENT_SOAKS = "soak_segments"  # each interrupted segment's soak JSON, inside the run dir


def interrupted_dir(log_dir: Path) -> Path:
    return log_dir.with_name(log_dir.name + ".interrupted")


def keep_interrupted(log_dir: Path, soak: dict[str, Any]) -> Path | None:
    """After a failed soak: move a resumable run aside (with this segment's soak JSON); None if the
    run has no checkpoint, completed, or diverged (a NaN or a blown-up physics comes back on resume:
    start afresh)."""
    summary = soak.get("run_summary") or {}
    if (not checkpoint_iterations(log_dir) or summary.get("status") == "completed"
            or soak.get("failure_classification") in ("non_finite", "diverged")):
        return None
    segments = log_dir / SEGMENT_SOAKS
    segments.mkdir(exist_ok=True)
    write_json_atomic(segments / f"soak-{len(list(segments.glob('soak-*.json')))}.json", soak)
    target = interrupted_dir(log_dir)
    if target.exists():
        shutil.rmtree(target)  # an older interruption of this run: this one holds its newer state
    log_dir.rename(target)
    return target


def adopt_interrupted(log_dir: Path, config_hash: str) -> tuple[int | None, str | None]:
    """Before a soak starts: move an interrupted run of this same configuration back into place.
    Returns (its newest checkpoint's iteration, None) or (None, why it was not adopted).
    Only names are looked at here: loading a checkpoint (the replay ring: gigabytes on a GPU) is the
    trainer's, which refuses one made with another config and falls back past a damaged one."""
    source = interrupted_dir(log_dir)
    if not source.is_dir():
        return None, None
    iterations = checkpoint_iterations(source)
    if not iterations:
        return None, f"{source}: holds no checkpoint; starting afresh"
    try:
        made_with = read_json(source / RUN_CONFIG).get("config_hash")
    except (OSError, ValueError, AttributeError):
        made_with = None
    if made_with != config_hash:
        return None, (f"{source}: made with config {made_with}, this soak's is {config_hash}; "
                      "starting afresh (the interrupted run is left where it is)")
    if log_dir.exists():
        log_dir.rmdir()  # new or empty (checked before): nothing is lost
    source.rename(log_dir)
    return iterations[-1], None


def earlier_segments(log_dir: Path) -> list[dict[str, Any]]:
    """The interrupted segments' soak verdicts, in order, as the resumed soak records them."""
    out = []
    for path in sorted((log_dir / SEGMENT_SOAKS).glob("soak-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        try:
            soak = read_json(path)
        except (OSError, ValueError):
            continue
        out.append({"status": soak.get("status"), "failure_classification": soak.get("failure_classification"),
                    "failure_reason": soak.get("failure_reason"), "duration_s": soak.get("duration_s"),
                    "leak": ((soak.get("resource_summary") or {}).get("leak_verdict") or {}).get("leak"),
                    "completed_iterations": (soak.get("run_summary") or {}).get("completed_iterations")})
    return out
