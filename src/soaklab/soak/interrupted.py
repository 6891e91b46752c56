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

A kept dir is outside input: it is adopted only when it is a real directory (no symbolic link in it,
itself included: nothing is followed out of it or written through one) whose run config names the
config of its name. A kept run that the trainer then refuses to resume (exit 2) goes to
`<run dir>.unresumable-<tag>`, a name no soak adopts, so the next soak starts afresh. Nothing
here deletes a run; only an older kept run of the same config without a checkpoint is replaced.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.files.checkpoints import checkpoint_iterations
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import RUN_CONFIG, SEGMENTS

SEGMENT_SOAKS = "soak_segments"  # each interrupted segment's soak JSON, inside the run dir
KEPT_SUFFIX = ".interrupted"
UNRESUMABLE_SUFFIX = ".unresumable"  # a kept run the trainer refused: never adopted (no soak looks for it)
TAG_DIGITS = 12  # of the config hash, in the kept dir's name: enough to tell configs of one run dir apart
_HASH = re.compile(r"^sha256:([0-9a-f]{64})$")


@dataclass(frozen=True)
class Adoption:
    """What a soak found kept for its run dir: the iteration it resumes at (None: it starts afresh)
    and the lines that say what was done with each kept run."""

    resumed_at: int | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kept:
    """Where a failed soak's run went: `adoptable` when the next soak of its config adopts it from
    there; `note` is the soak's line about it."""

    path: Path
    adoptable: bool
    note: str


def config_tag(config_hash: str) -> str:
    match = _HASH.match(config_hash)
    if match is None:  # the soak's own resolved hash; anything else is a bug, not input
        raise ValueError(f"not a config hash: {config_hash!r}")
    return match.group(1)[:TAG_DIGITS]


def interrupted_dir(log_dir: Path, config_hash: str) -> Path:
    """Where a run dir made with `config_hash` is kept after an interrupted soak."""
    return log_dir.with_name(f"{log_dir.name}{KEPT_SUFFIX}-{config_tag(config_hash)}")


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def kept_runs(log_dir: Path) -> list[Path]:
    """Every kept run of this run dir, whatever its config (the legacy `<run dir>.interrupted` too);
    real directories only: a symbolic link under a kept name is never followed."""
    legacy = log_dir.with_name(log_dir.name + KEPT_SUFFIX)
    tagged = re.compile(rf"^{re.escape(legacy.name)}-[0-9a-f]{{{TAG_DIGITS}}}$")
    found = [p for p in log_dir.parent.glob(f"{legacy.name}-*") if tagged.match(p.name) and _real_dir(p)]
    return sorted(found + ([legacy] if _real_dir(legacy) else []))


def _free_name(wanted: Path) -> Path:
    """`wanted`, or `wanted-1`, `wanted-2`, ...: the first name nothing (not even a dangling link) holds."""
    candidate, n = wanted, 0
    while os.path.lexists(candidate):
        n += 1
        candidate = wanted.with_name(f"{wanted.name}-{n}")
    return candidate


def _symlink_in(tree: Path) -> Path | None:
    """The first symbolic link in `tree` (itself included), never following one."""
    if tree.is_symlink():
        return tree
    for root, dirs, files in os.walk(tree, followlinks=False):
        for name in sorted(dirs + files):
            if (Path(root) / name).is_symlink():
                return Path(root) / name
    return None


def _what_is(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    if not path.is_dir():
        return "not a directory"
    return "a kept run this soak does not replace (another config's, one with checkpoints, or one holding a link)"


def _record_segment(log_dir: Path, soak: dict[str, Any]) -> None:
    segments = log_dir / SEGMENT_SOAKS
    if segments.is_symlink():  # the run's own dir; a link there is never written through
        raise OSError(f"{segments}: a symbolic link")
    segments.mkdir(exist_ok=True)
    write_json_atomic(segments / f"soak-{len(list(segments.glob('soak-*.json')))}.json", soak)


def keep_interrupted(log_dir: Path, soak: dict[str, Any], config_hash: str, resumed: bool = False) -> Kept | None:
    """After a failed soak: move a resumable run aside (with this segment's soak JSON) to its config's
    kept dir. None if the run has no checkpoint, completed, or diverged (a NaN or a blown-up physics
    comes back on resume: start afresh). An adopted run (`resumed`) that the trainer refused (exit 2:
    no readable checkpoint, another config) goes to `<run dir>.unresumable-<tag>` instead: kept
    again for adoption, every later soak of this config would fail the same way. A run kept for
    another config, and anything under a kept name that is not a kept run of this config without
    a checkpoint (a file, a symbolic link, a run with checkpoints), is never touched: the run then
    goes to a free name beside it."""
    if not _real_dir(log_dir):
        return None
    if resumed and soak.get("failure_classification") == "trainer_refused":
        _record_segment(log_dir, soak)
        aside = _free_name(log_dir.with_name(f"{log_dir.name}{UNRESUMABLE_SUFFIX}-{config_tag(config_hash)}"))
        log_dir.rename(aside)
        return Kept(aside, False, f"the trainer refused to resume the interrupted run; moved it to {aside}, "
                                  "a name no soak adopts (nothing deleted): the next soak of this config starts afresh")
    summary = soak.get("run_summary") or {}
    if (not checkpoint_iterations(log_dir) or summary.get("status") == "completed"
            or soak.get("failure_classification") in ("non_finite", "diverged")):
        return None
    _record_segment(log_dir, soak)
    target = interrupted_dir(log_dir, config_hash)
    resumes = "the same soak with the same config again resumes it"
    if not os.path.lexists(target):
        log_dir.rename(target)
        return Kept(target, True, f"kept the interrupted run in {target}; {resumes}")
    if (_real_dir(target) and _made_with(target) == config_hash and not checkpoint_iterations(target)
            and _symlink_in(target) is None):
        # The older run of this config, kept without a checkpoint (the soak started afresh beside it).
        # Moved out of the way first: a kill meanwhile leaves both runs, never neither.
        old = _free_name(target.with_name(target.name + ".replaced"))
        target.rename(old)
        log_dir.rename(target)
        shutil.rmtree(old)
        return Kept(target, True, f"kept the interrupted run in {target} (in place of the older run kept there "
                                  f"for this config); {resumes}")
    aside = _free_name(target)  # target is taken: target-1, target-2, ...
    log_dir.rename(aside)
    return Kept(aside, False, f"kept the interrupted run in {aside}: {target} is {_what_is(target)}, "
                              f"left as it is; no soak adopts {aside.name} (rename it to "
                              f"{target.name} to resume it)")


def _kept_entry(path: Path, key: str) -> Any:
    """`key` of the JSON object at `path` inside a kept run, or None where it cannot be read: a link is
    never followed, and anything else wrong is the trainer's to refuse, in its own words."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return read_json(path).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _made_with(kept: Path) -> str | None:
    made_with = _kept_entry(kept / RUN_CONFIG, "config_hash")
    return made_with if isinstance(made_with, str) else None


def _other_sources(kept: Path, sources: str) -> str | None:
    """Why the kept run's last segment ran other training sources than `sources`, or None: the same,
    or a history this cannot read (the trainer's checks then refuse it, in their own words)."""
    segments = _kept_entry(kept / SEGMENTS, "segments")
    if not isinstance(segments, list) or not segments or not isinstance(segments[-1], dict):
        return None
    code = segments[-1].get("code")
    made = code.get("sources_sha256") if isinstance(code, dict) else None
    if not isinstance(made, str):
        return "its run records no code (made by a soaklab older than its code record)"
    if made != sources:  # a crafted digest may hold newlines: said in one line, shortened
        return f"its run was made by other training sources ({' '.join(made.split())[:19]}..., now {sources[:19]}...)"
    return None


def _not_adoptable(kept: Path, config_hash: str) -> str | None:
    """Why the kept dir under this config's name is not adopted (None: it is). Checked before
    anything in it is touched; a refused dir is left exactly as it is."""
    link = _symlink_in(kept)
    if link is not None:
        return (f"{kept}: {'is' if link == kept else f'holds {link},'} a symbolic link; not adopted "
                "(never followed), left where it is")
    if (made := _made_with(kept)) != config_hash:
        return (f"{kept}: its {RUN_CONFIG} names config {made}, not {config_hash} of its name; not adopted, "
                "left where it is")
    return None


def adopt_interrupted(log_dir: Path, config_hash: str, sources: str | None = None) -> Adoption:
    """Before a soak starts: move the run kept for this same configuration back into place.
    Only names, links, run configs and the segment history are looked at here: loading a checkpoint
    (the replay ring: gigabytes on a GPU) is the trainer's, which refuses one made with another
    config or by other code and falls back past a damaged one. Runs kept for other configs are left
    where they are, and the notes say so. `sources`: the training sources' digest this soak runs
    (soaklab.host.run_code.sources_sha256); a kept run whose last segment ran other sources (the code
    was edited since: the workflow replans the soak for that) is moved where no soak adopts it, and
    this soak starts afresh rather than have the trainer refuse it."""
    ours = interrupted_dir(log_dir, config_hash)
    legacy = log_dir.with_name(log_dir.name + KEPT_SUFFIX)
    if not os.path.lexists(ours) and _real_dir(legacy) and _made_with(legacy) == config_hash:
        ours = legacy
    others = [p for p in kept_runs(log_dir) if p != ours]
    notes = [f"{p}: kept for config {made}, not this soak's {config_hash}; left where it is"
             if (made := _made_with(p)) != config_hash else f"{p}: an older kept run of this config; left where it is"
             for p in others]
    if not os.path.lexists(ours):
        if others:
            notes.append(f"no interrupted run of config {config_hash} is kept; starting afresh")
        return Adoption(None, tuple(notes))
    why = _not_adoptable(ours, config_hash) if ours.is_symlink() or ours.is_dir() else \
        f"{ours}: not a directory; not adopted, left where it is"
    if why is not None:
        notes.append(f"{why}; starting afresh")
        return Adoption(None, tuple(notes))
    iterations = checkpoint_iterations(ours)
    if not iterations:
        notes.append(f"{ours}: holds no checkpoint; starting afresh (it stays until this soak is "
                     "interrupted in turn, which keeps its run there instead)")
        return Adoption(None, tuple(notes))
    if sources is not None and (other := _other_sources(ours, sources)) is not None:
        aside = _free_name(log_dir.with_name(f"{log_dir.name}{UNRESUMABLE_SUFFIX}-{config_tag(config_hash)}"))
        ours.rename(aside)
        notes.append(f"{ours}: {other}, and a resume on other code is not the run it continues; moved it to "
                     f"{aside}, a name no soak adopts (nothing deleted); starting afresh")
        return Adoption(None, tuple(notes))
    if log_dir.is_symlink():
        notes.append(f"{log_dir}: a symbolic link; the kept run {ours} is not moved into it, left where it is; "
                     "starting afresh")
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
