"""A record's files: read back for a comparison, rewritten from fresh runs by `soaklab record update`.

The update runs the record's seeds through the workflow (the same rules as any run, forced from
config resolution on), and only when Snakemake finished and every run passed does it write the
record: into a new folder beside the old one, swapped in at the end, under an exclusive lock on the
spec. A failed, refused or cancelled update leaves the record as it was.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.records import snapshot
from soaklab.records.plan import PROVENANCE, RUNS, SNAPSHOT, SPEC, Record, RecordError, load_record, workflow_run_check
from soaklab.records.recheck import spec_mismatch

# A passing reproduction kept beside the record: the evidence of its Benchmarked level in the support
# matrix (soaklab.support), valid while the record it reproduced stands.
REPRODUCED = "reproduced.json"

# Run outputs kept beside each snapshot, as evidence a person can open (the soak JSON without its
# per-second samples).
KEPT = ("run_config.json", "metrics.json", "validation.json")


def load(records: Path, name: str) -> Record:
    """The record `name` under `records`, checked (exit 2 with the record and field named)."""
    folder = records / name
    if not folder.is_dir():
        known = sorted(p.name for p in records.iterdir() if p.is_dir()) if records.is_dir() else []
        raise InvalidInput(f"{folder}: no such record (records: {', '.join(known) or 'none'})")
    try:
        return load_record(folder, workflow_run_check(records.resolve().parent))
    except RecordError as exc:
        raise InvalidInput(str(exc)) from None


def artifacts_for(record: Record, machine_kind: str | None) -> Path:
    """The artifacts to compare a run on `machine_kind` with: that kind's, else the first set (the
    comparison then says not_comparable, naming both kinds)."""
    sets = record.artifact_sets()
    if not sets:
        raise InvalidInput(f"records/{record.name}: no artifacts of record yet; make them with "
                           f"`soaklab record update {record.name}`")
    if machine_kind is not None and record.artifacts_of(machine_kind) in sets:
        return record.artifacts_of(machine_kind)
    return sets[0]


def spec_disagreement(record: Record, folder: Path) -> str | None:
    """Where record.yaml no longer describes the artifacts of record in `folder` (a spec edited after
    its runs were made: another algo, iteration count or seed set), one line; None where it does."""
    spec = record.folder / SPEC
    made_seeds = sorted(p.name for p in (folder / RUNS).iterdir() if p.is_dir()) if (folder / RUNS).is_dir() else []
    if made_seeds != sorted(run.label for run in record.runs):
        return (f"{spec}: seeds: {', '.join(r.label for r in record.runs)}, but {folder} holds runs of "
                f"{', '.join(made_seeds) or 'none'}")
    for run in record.runs:
        path = folder / RUNS / run.label / "run_config.json"
        try:
            made = read_json(path)
            made_overrides = {k: v for k, v in (made.get("overrides") or {}).items() if k != "training.log_dir"}
        except (OSError, ValueError, AttributeError) as exc:
            return f"{path}: unreadable ({exc})"
        for key in ("algo", "task", "sim"):
            if made.get(key) != run.run.get(key):
                return f"{spec}: run.{key}: {run.run.get(key)!r}, but {path} was made with {made.get(key)!r}"
        asked = run.run.get("overrides") or {}
        for key in sorted(set(asked) | set(made_overrides)):
            if key not in made_overrides or key not in asked or asked[key] != made_overrides[key]:
                return (f"{spec}: run.overrides.{key}: {asked.get(key, 'unset')!r}, but {path} was made with "
                        f"{made_overrides.get(key, 'unset')!r}")
    return None


def require_spec_agrees(record: Record, folder: Path) -> None:
    disagreement = spec_disagreement(record, folder)
    if disagreement is not None:
        raise InvalidInput(f"{disagreement}; the spec and its artifacts of record disagree: run "
                           f"`soaklab record update {record.name}`")


def read_recorded(record: Record, machine_kind: str | None = None, check_spec: bool = True
                  ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The provenance and each seed's snapshot of the record's artifacts for `machine_kind`; refused
    where the spec no longer describes them (`record update` remakes them; it reads them unchecked)."""
    folder = artifacts_for(record, machine_kind)
    if check_spec:
        require_spec_agrees(record, folder)
    try:
        provenance = read_json(folder / PROVENANCE)
        snaps = {run.label: read_json(folder / RUNS / run.label / SNAPSHOT)
                 for run in record.runs}
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{folder}: unreadable artifacts ({exc})") from None
    for label, snap in snaps.items():
        if snap.get("snapshot_version") != snapshot.SNAPSHOT_VERSION:
            raise InvalidInput(f"{folder}/{RUNS}/{label}/{SNAPSHOT}: snapshot_version "
                               f"{snap.get('snapshot_version')!r}; this soaklab reads {snapshot.SNAPSHOT_VERSION}")
    return provenance, snaps


def kind_of(snaps: dict[str, dict[str, Any]]) -> str:
    return next(iter(snaps.values()))["machine_kind"]


def take_all(record: Record, results: Path) -> dict[str, dict[str, Any]]:
    return {run.label: snapshot.take(record, run, results) for run in record.runs}


@contextmanager
def locked(record: Record) -> Iterator[None]:
    """One update of a record at a time: an exclusive lock on its spec, refused when held."""
    with open(record.folder / SPEC, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InvalidInput(f"records/{record.name}: another `soaklab record update` holds it; "
                               "wait for it to end") from None
        yield


def provenance_of(record: Record, snaps: dict[str, dict[str, Any]], command: list[str]) -> dict[str, Any]:
    first = next(iter(snaps.values()))
    return {"record": record.name, "commit": first["commit"], "dirty": first["dirty"],
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command, "machine_kind": first["machine_kind"], "versions": first["versions"],
            "runs": {label: snap["run"] for label, snap in snaps.items()}}


def write_record(record: Record, snaps: dict[str, dict[str, Any]], results: Path, command: list[str]) -> None:
    """Write the record's artifacts of this machine kind from finished runs: the new runs/ folder is
    complete before it replaces the old one."""
    target = record.artifacts_of(kind_of(snaps))
    target.mkdir(parents=True, exist_ok=True)
    fresh = target / f".{RUNS}.new"
    stale = target / f".{RUNS}.old"
    for leftover in (fresh, stale):
        shutil.rmtree(leftover, ignore_errors=True)
    for run in record.runs:
        folder = fresh / run.label
        folder.mkdir(parents=True)
        write_json_atomic(folder / SNAPSHOT, snaps[run.label])
        for name in KEPT:
            shutil.copyfile(results / run.name / name, folder / name)
        soak = read_json(results / run.name / "soak.json")
        soak.pop("samples", None)
        write_json_atomic(folder / "soak_summary.json", soak)
    current = target / RUNS
    if current.exists():
        current.rename(stale)
    fresh.rename(current)
    (target / REPRODUCED).unlink(missing_ok=True)  # it reproduced the record this one replaces
    write_json_atomic(target / PROVENANCE, provenance_of(record, snaps, command))
    shutil.rmtree(stale, ignore_errors=True)


def run_workflow(record: Record, cores: int, directory: Path | None, extra: list[str]) -> None:
    """The record's seeds through the workflow, forced from config resolution on."""
    root = record.folder.resolve().parent.parent
    targets = [f"results/{name}/validation.json" for name in record.run_names]
    command = [sys.executable, "-m", "snakemake", *targets, "-s", str(root / "Snakefile"), "--cores", str(cores),
               "--forcerun", "resolve_config", "--rerun-incomplete", "--config", f"reproduce={record.name}",
               *(["--directory", str(directory)] if directory else []), *extra]
    print(f"record {record.name}: running {len(targets)} run(s): {' '.join(record.run_names)}", flush=True)
    try:
        code = subprocess.run(command, check=False).returncode
    except KeyboardInterrupt:
        raise RuntimeFailure(f"record {record.name}: interrupted; the record is unchanged") from None
    if code != 0:
        raise RuntimeFailure(f"record {record.name}: the workflow failed (exit {code}); the record is unchanged")


def update(records: Path, name: str, cores: int, directory: Path | None, extra: list[str], argv: list[str]
           ) -> tuple[Record, dict[str, Any] | None]:
    """Rerun the record's seeds and rewrite the record (its provenance naming `argv`, the command as
    typed); the comparison of the new record with the old one (None for a first record)."""
    from soaklab.records.compare import changes, compare

    record = load(records, name)
    with locked(record):
        run_workflow(record, cores, directory, extra)
        results = (directory or Path.cwd()) / "results"
        snaps = take_all(record, results)
        same_kind = record.artifacts_of(kind_of(snaps)) in record.artifact_sets()
        old = read_recorded(record, kind_of(snaps), check_spec=False) if same_kind else None
        changed = changes(record, snaps)
        if changed:
            raise InvalidInput(f"record {name}: the runs differ from the spec in {', '.join(sorted(changed))} "
                               "(record_overrides?); change record.yaml instead; the record is unchanged")
        failed = [label for label, snap in snaps.items() if snap["soak"]["status"] != "passed"]
        if failed:
            raise RuntimeFailure(f"record {name}: the soak of {failed[0]} did not pass; the record is unchanged")
        lacking = next((snap["host_lacks"] for snap in snaps.values() if snap.get("host_lacks")), None)
        if lacking:  # its set would hold another arithmetic than the profile the spec names
            raise InvalidInput(f"record {name}: this host cannot run the record's numerics profile: {lacking}; "
                               "the record is unchanged")
        write_record(record, snaps, results, ["soaklab", *argv])
        # The runs are the record now (their evidence copied into it): left in results/ they would
        # make the next reproduce compare the record with itself instead of rerunning it.
        for run in record.run_names:
            shutil.rmtree(results / run, ignore_errors=True)
    return record, (compare(record, old[0], old[1], snaps) if old else None)


def keep(records: Path, name: str, comparison: dict[str, Any]) -> Path:
    """Keep a reproduction of record `name` in the record's folder: only a complete, passing one of
    the record as it stands now, made without record_overrides."""
    record = load(records, name)
    where = f"record {name}"
    if comparison.get("record") != name:
        raise InvalidInput(f"{where}: the comparison is of record {comparison.get('record')!r}")
    if comparison["verdict"] != "pass":
        raise InvalidInput(f"{where}: the comparison's verdict is {comparison['verdict']}; only a pass is kept")
    if comparison.get("changes"):
        raise InvalidInput(f"{where}: the reproduction changed {', '.join(sorted(comparison['changes']))} "
                           "(record_overrides): an A/B is not a reproduction")
    with locked(record):
        machine = (comparison.get("machine") or {}).get("now")
        if machine is not None and record.artifacts_of(machine) in record.artifact_folders():
            require_spec_agrees(record, record.artifacts_of(machine))
        if machine is None or record.artifacts_of(machine) not in record.artifact_sets():
            raise InvalidInput(f"{where}: the comparison ran on {machine!r}, a machine kind the record has no "
                               "artifacts of")
        provenance, _ = read_recorded(record, machine)
        mismatch = spec_mismatch(record, comparison, "the comparison")
        if mismatch is not None:  # the figures and bands are the spec's, not the file's
            raise InvalidInput(f"{where}: {mismatch}")
        if (comparison.get("commit") or {}).get("record") != provenance.get("commit"):
            raise InvalidInput(f"{where}: the comparison is against an earlier record "
                               f"(commit {(comparison.get('commit') or {}).get('record')}); reproduce it again")
        kept = {"record": name, "verdict": "pass",
                "date": comparison.get("date") or datetime.now(UTC).isoformat(timespec="seconds"),
                "commit": (comparison.get("commit") or {}).get("now"),
                "dirty": (comparison.get("dirty") or {}).get("now"),
                "machine": (comparison.get("machine") or {}).get("now"),
                "versions": (comparison.get("versions") or {}).get("now"),
                "of_record": {"commit": provenance.get("commit"), "date": provenance.get("date")},
                "runs": comparison.get("runs"),
                # whole rows: the matrix recomputes each verdict from the numbers (records/recheck.py)
                "figures": comparison["figures"]}
        path = record.artifacts_of(machine) / REPRODUCED
        write_json_atomic(path, kept)
    return path
