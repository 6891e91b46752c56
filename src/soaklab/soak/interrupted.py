"""A soak whose trainer was interrupted keeps its run, and the next soak of the same run and config
resumes it (docs/soak.md, "Interrupted soaks").

Snakemake deletes a failed job's outputs, the run dir among them, before it runs the job again. So a
soak that fails with a resumable checkpoint in its run dir moves the dir aside, beside its own copy
of the soak JSON, to `<run dir>.interrupted-<the first 12 hex digits of its config hash>`: a kept run
belongs to its config, and runs kept for different configs of one run dir stay side by side. The
next soak aimed at the same run dir with the same config moves its run back and runs `soaklab train
--resume` in it. The run dir's path, and so its config hash and event identity, are the same as the
first time. `<run dir>.interrupted` (the name before the config was in it) is still adopted when its
run config names this soak's config.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.files.checkpoints import checkpoint_iterations
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import RUN_CONFIG

SEGMENT_SOAKS = "soak_segments"  # each interrupted segment's soak JSON, inside the run dir
KEPT_SUFFIX = ".interrupted"
TAG_DIGITS = 12  # of the config hash, in the kept dir's name: enough to tell configs of one run dir apart
_HASH = re.compile(r"^sha256:([0-9a-f]{64})$")


@dataclass(frozen=True)
class Adoption:
    """What a soak found kept for its run dir: the iteration it resumes at (None: it starts afresh)
    and the lines that say what was done with each kept run."""

    resumed_at: int | None
    notes: tuple[str, ...] = ()


def config_tag(config_hash: str) -> str:
    match = _HASH.match(config_hash)
    if match is None:  # the soak's own resolved hash; anything else is a bug, not input
        raise ValueError(f"not a config hash: {config_hash!r}")
    return match.group(1)[:TAG_DIGITS]


def interrupted_dir(log_dir: Path, config_hash: str) -> Path:
    """Where a run dir made with `config_hash` is kept after an interrupted soak."""
    return log_dir.with_name(f"{log_dir.name}{KEPT_SUFFIX}-{config_tag(config_hash)}")


def kept_runs(log_dir: Path) -> list[Path]:
    """Every kept run of this run dir, whatever its config (the legacy `<run dir>.interrupted` too)."""
    legacy = log_dir.with_name(log_dir.name + KEPT_SUFFIX)
    tagged = re.compile(rf"^{re.escape(legacy.name)}-[0-9a-f]{{{TAG_DIGITS}}}$")
    found = [p for p in log_dir.parent.glob(f"{legacy.name}-*") if tagged.match(p.name) and p.is_dir()]
    return sorted(found + ([legacy] if legacy.is_dir() else []))


def keep_interrupted(log_dir: Path, soak: dict[str, Any], config_hash: str) -> tuple[Path, bool] | None:
    """After a failed soak: move a resumable run aside (with this segment's soak JSON) to its config's
    kept dir. Returns (where, whether it replaced an older run kept there for this same config: a
    soak that started afresh beside one with no checkpoint); None if the run has no checkpoint,
    completed, or diverged (a NaN or a blown-up physics comes back on resume: start afresh). A run
    kept for another config is never touched."""
    summary = soak.get("run_summary") or {}
    if (not checkpoint_iterations(log_dir) or summary.get("status") == "completed"
            or soak.get("failure_classification") in ("non_finite", "diverged")):
        return None
    segments = log_dir / SEGMENT_SOAKS
    segments.mkdir(exist_ok=True)
    write_json_atomic(segments / f"soak-{len(list(segments.glob('soak-*.json')))}.json", soak)
    target = interrupted_dir(log_dir, config_hash)
    replaced = target.exists()
    if replaced:  # moved out of the way first: a kill meanwhile leaves both runs, never neither
        old = target.with_name(target.name + ".replaced")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    log_dir.rename(target)
    if replaced:
        shutil.rmtree(old)
    return target, replaced


def _made_with(kept: Path) -> str | None:
    try:
        made_with = read_json(kept / RUN_CONFIG).get("config_hash")
    except (OSError, ValueError, AttributeError):
        return None
    return made_with if isinstance(made_with, str) else None


def adopt_interrupted(log_dir: Path, config_hash: str) -> Adoption:
    """Before a soak starts: move the run kept for this same configuration back into place.
    Only names and run configs are looked at here: loading a checkpoint (the replay ring: gigabytes
    on a GPU) is the trainer's, which refuses one made with another config and falls back past a
    damaged one. Runs kept for other configs are left where they are, and the notes say so."""
    ours = interrupted_dir(log_dir, config_hash)
    legacy = log_dir.with_name(log_dir.name + KEPT_SUFFIX)
    if not ours.is_dir() and legacy.is_dir() and _made_with(legacy) == config_hash:
        ours = legacy
    others = [p for p in kept_runs(log_dir) if p != ours]
    notes = [f"{p}: kept for config {made}, not this soak's {config_hash}; left where it is"
             if (made := _made_with(p)) != config_hash else f"{p}: an older kept run of this config; left where it is"
             for p in others]
    if not ours.is_dir():
        if others:
            notes.append(f"no interrupted run of config {config_hash} is kept; starting afresh")
        return Adoption(None, tuple(notes))
    iterations = checkpoint_iterations(ours)
    if not iterations:
        notes.append(f"{ours}: holds no checkpoint; starting afresh (it stays until this soak is "
                     "interrupted in turn, which keeps its run there instead)")
        return Adoption(None, tuple(notes))
    if log_dir.exists():
        log_dir.rmdir()  # new or empty (checked before): nothing is lost
    ours.rename(log_dir)
    notes.append(f"moved the interrupted run of this config back from {ours} to {log_dir}")
    return Adoption(iterations[-1], tuple(notes))


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
