"""The support matrix: each configuration's level, decided here and nowhere else, from the
validation inventory (soaklab.support.inventory; docs/support-matrix.md).

    Refused       the settings contract refuses it on its reference host (the line says why)
    Configured    it resolves and validates against the settings contract
    Tested        configured, and a CI test or a record CI reproduces runs it
    Benchmarked   configured, and a record of it was reproduced within its bands (kept reproduction)
    Recommended   benchmarked, and of its records reproduced and kept: one whose every learning
                  threshold is met on the runs of record, and one that soaked for 30 minutes or more
                  with a clean leak verdict

Tested is what CI proves and Benchmarked what a record proves; a GPU configuration can be
Benchmarked without being Tested, since CI has no GPU. A passing soak on someone's machine promotes
nothing: only evidence committed to the repository counts.

A record file that cannot be read (soaklab.support.inventory) or a kept reproduction whose rows
contradict its verdict is refused for its record only: the row says why, the generator counts it as
an error (`soaklab support-matrix` exits 2 after judging every other record).
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json
from soaklab.records.plan import PROVENANCE, RUNS, Record
from soaklab.records.recheck import checked_verdict, spec_mismatch
from soaklab.records.store import REPRODUCED, spec_disagreement
from soaklab.soak.leak import status_from_trends
from soaklab.support.figures import README, readme_with_table
from soaklab.support.inventory import Evidence, inventory, refused_file, reproduction, snapshots, usable_records

LEVELS = ("Refused", "Configured", "Tested", "Benchmarked", "Recommended")
RECOMMENDED_SOAK_S = 1800.0
MARKDOWN = Path("docs/support-matrix.md")
JSON_OUT = Path("docs/support-matrix.json")


@dataclass(frozen=True)
class Row:
    evidence: Evidence
    level: str
    benchmarked_by: dict[str, Any] | None  # record, date, commit, machine of the kept reproduction
    reasons: tuple[str, ...]  # why it is not one level higher (or why it is refused)
    refused: tuple[str, ...] = ()  # the record files refused while judging it: the generator's errors
    recommended_by: tuple[str, ...] = ()  # Recommended: the records whose thresholds and long soak carry it


def kept_reproduction(record: Record, artifacts: Path) -> tuple[dict[str, Any] | None, str, bool]:
    """The kept reproduction of one machine kind's artifacts when it passed against them as they
    stand now, else why not; and whether the why is a file refused (the generator's error)."""
    kind = artifacts.name
    kept = reproduction(artifacts)
    if kept is None:
        return None, f"record {record.name} ({kind}): no kept reproduction (`soaklab record keep {record.name}`)", False
    provenance = read_json(artifacts / PROVENANCE)
    try:  # its verdict recomputed from its rows, its machine its folder's: a file is anyone's to edit
        verdict = checked_verdict(kept, artifacts / REPRODUCED, folder_machine=provenance.get("machine_kind"))
    except InvalidInput as exc:
        return None, f"record {record.name} ({kind}): its kept reproduction is refused: {exc}", True
    if kept.get("of_record") != {"commit": provenance.get("commit"), "date": provenance.get("date")}:
        return None, f"record {record.name} ({kind}): its kept reproduction is of an earlier record", False
    if verdict != "pass":
        return None, f"record {record.name} ({kind}): its kept reproduction's verdict is {verdict}", False
    # judged against the spec as it stands: every figure it names, with the spec's band (not the file's)
    mismatch = spec_mismatch(record, kept, artifacts / REPRODUCED)
    if mismatch is not None:
        return None, f"record {record.name} ({kind}): its kept reproduction fails against the spec: {mismatch}", False
    return {"record": record.name, "date": kept["date"], "commit": kept["commit"], "dirty": kept.get("dirty"),
            "machine": kept["machine"]}, "", False


def thresholds_met(record: Record, artifacts: Path) -> tuple[bool, str]:
    if not record.thresholds:
        return False, f"record {record.name}: no learning threshold"
    snaps = snapshots(record, artifacts)
    for threshold in record.thresholds:
        key = threshold.figure.key
        values = [(s.get("figures") or {}).get(key) if isinstance(s, dict) else None for s in snaps]
        if any(v is None for v in values):
            return False, f"record {record.name} ({artifacts.name}): {key} not on record"
        if not all(type(v) in (int, float) and math.isfinite(v) for v in values):  # NaN meets no bound
            return False, f"record {record.name} ({artifacts.name}): {key} on record is not a finite number"
        mean = sum(values) / len(values)
        low, high = threshold.low, threshold.high
        if (low is not None and mean < low) or (high is not None and mean > high):
            return False, (f"record {record.name} ({artifacts.name}): {key} = {mean:.3g} on record, "
                           "outside its threshold")
    return True, ""


def long_clean_soak(record: Record, artifacts: Path) -> tuple[bool, str]:
    """Every seed of record soaked long enough and clean. The duration and leak status are taken from
    each run's soak summary of record, the leak status drawn again from its trends, and the snapshot
    must say the same (a file is anyone's to edit)."""
    for run, snap in zip(record.runs, snapshots(record, artifacts), strict=True):
        path = artifacts / RUNS / run.label / "soak_summary.json"
        try:
            summary = read_json(path)
            duration = float(summary["duration_s"])
            status = status_from_trends(summary["resource_summary"]["leak_verdict"]["trends"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return False, f"record {record.name} ({artifacts.name}): {path}: unreadable soak summary ({exc})"
        soak = snap.get("soak") if isinstance(snap, dict) and isinstance(snap.get("soak"), dict) else {}
        if (soak.get("duration_s"), soak.get("leak_status")) != (duration, status):
            return False, (f"record {record.name} ({artifacts.name}): its snapshot's soak "
                           f"({soak.get('duration_s')} s, leak {soak.get('leak_status')}) is not its soak "
                           f"summary's ({duration} s, {status}: {path})")
        if duration < RECOMMENDED_SOAK_S or status != "clean":
            return False, (f"record {record.name} ({artifacts.name}): soaked {duration:.0f} s (leak {status}); "
                           f"Recommended needs >= {RECOMMENDED_SOAK_S:.0f} s, clean")
    return True, ""


def decide(evidence: Evidence) -> Row:
    if evidence.refusal is not None:
        return Row(evidence, "Refused", None, (evidence.refusal,))
    ci_tests = [t for t in evidence.tests if not t.gpu]
    tested = bool(ci_tests or evidence.ci_runs)
    reasons: list[str] = []
    refused: list[str] = []
    benchmarked = None
    sets = []
    for record in evidence.records:
        for artifacts in record.artifact_folders():
            bad = refused_file(artifacts)  # a file that cannot be read: this machine kind's artifacts only
            if bad is not None:
                reasons.append(f"record {record.name} ({artifacts.name}): refused: {bad}")
                refused.append(bad)
                continue
            # artifacts the spec no longer describes (edited after they were made) are no evidence of it
            edited = spec_disagreement(record, artifacts)
            if edited is None:
                if artifacts in record.artifact_sets():
                    sets.append((record, artifacts))
            else:
                reasons.append(f"record {record.name} ({artifacts.name}): {edited}; run `soaklab record update "
                               f"{record.name}`")
    reproduced = []  # the sets a passing kept reproduction backs: only they can carry Recommended
    for record, artifacts in sets:
        kept, why, is_refusal = kept_reproduction(record, artifacts)
        if kept is not None:
            benchmarked = benchmarked or kept
            reproduced.append((record, artifacts))
        else:
            reasons.append(why)
            refused += [why] if is_refusal else []
    reasons += [f"record {r.name}: no artifacts of record yet" for r in evidence.records if not r.has_artifacts()]
    if benchmarked is None:
        if not evidence.records:
            reasons.append("no record")
        if not tested:
            reasons.insert(0, "no CI test or CI-reproduced record")
        return Row(evidence, "Tested" if tested else "Configured", None, tuple(reasons), tuple(refused))
    learned = [thresholds_met(r, a) for r, a in reproduced]
    soaked = [long_clean_soak(r, a) for r, a in reproduced]
    if any(ok for ok, _ in learned) and any(ok for ok, _ in soaked):
        carriers = [r.name for (r, _), (ok, _) in zip(reproduced, learned, strict=True) if ok]
        carriers += [r.name for (r, _), (ok, _) in zip(reproduced, soaked, strict=True) if ok]
        return Row(evidence, "Recommended", benchmarked, (), tuple(refused), tuple(dict.fromkeys(carriers)))
    missing = [why for ok, why in learned + soaked if not ok]
    # then why the other records give nothing (no kept reproduction, a stale one, a spec edited since)
    return Row(evidence, "Benchmarked", benchmarked, tuple(missing + reasons), tuple(refused))


def generate(root: Path) -> list[Row]:
    """Each configuration's row; paths in its lines relative to `root`, so the committed files are the
    same whichever folder the checkout lies in (CI's `--check` compares them)."""
    # absolute forms only: a relative root's "./" would also match inside "../"
    prefixes = tuple(dict.fromkeys(f"{p}{os.sep}" for p in (root.resolve(), root.absolute())))

    def relative(line: str) -> str:
        for prefix in prefixes:
            line = line.replace(prefix, "")
        return line

    return [replace(row, reasons=tuple(map(relative, row.reasons)), refused=tuple(map(relative, row.refused)))
            for row in map(decide, inventory(root))]


def _tested_cell(evidence: Evidence) -> str:
    parts = [f"`{t.node}`" + (" (GPU machine)" if t.gpu else "") for t in evidence.tests]
    parts += list(evidence.ci_runs)
    return "<br>".join(parts) or "—"


def record_cell(row: Row) -> str:
    if row.benchmarked_by:
        b = row.benchmarked_by
        return (f"[{b['record']}](../records/{b['record']}/) reproduced {b['date'][:10]}, "
                f"`{str(b['commit'])[:10]}`{' with changes' if b.get('dirty') else ''}, {b['machine']}")
    return ", ".join(f"[{r.name}](../records/{r.name}/)" for r in row.evidence.records) or "—"


def markdown(rows: list[Row]) -> str:
    counts = {level: sum(r.level == level for r in rows) for level in LEVELS}
    lines = [
        "# Support matrix",
        "",
        "<!-- Generated by `soaklab support-matrix`; CI fails when this file differs from what it writes. -->",
        "",
        "Every algo × task × sim × device × ranks configuration soaklab has an owner config for, at the level",
        "its evidence in this repository supports. Only the generator decides a level (how: "
        "[support-levels.md](support-levels.md)).",
        "",
        "Levels: " + ", ".join(f"{level} {counts[level]}" for level in LEVELS) + ".",
        "",
        "| algo | task | sim | device | ranks | level | tested by | record | not higher because |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        c = row.evidence.combination
        why = "; ".join(row.reasons).replace("|", "\\|") or "—"
        lines.append(f"| {c.algo} | {c.task} | {c.sim} | {c.device} | {c.ranks} | **{row.level}** | "
                     f"{_tested_cell(row.evidence)} | {record_cell(row)} | {why} |")
    return "\n".join(lines) + "\n"


def start_from(rows: list[Row]) -> str:
    """Which configuration to start from, per device: its Recommended rows (and the records with learning
    thresholds that carry them, whose `run` is the configuration to copy), else its Benchmarked ones."""
    parts = []
    for device, where in (("cpu", "On the CPU"), ("cuda", "On the GPU")):
        mine = [r for r in rows if r.evidence.combination.device == device]
        for level in ("Recommended", "Benchmarked"):
            picks = [r for r in mine if r.level == level]
            if not picks:
                continue
            named = "; ".join(
                f"**{c.algo}, {c.task}, {c.sim}, {c.ranks} rank(s)**"
                + "".join(f" ([{name}](records/{name}/record.yaml))" for name in
                          (r.recommended_by if level == "Recommended" else [(r.benchmarked_by or {}).get("record")]))
                for r in picks for c in [r.evidence.combination])
            lead = "Recommended: " if level == "Recommended" else "nothing is Recommended yet; Benchmarked: "
            parts.append(f"{where}, {lead}{named}.")
            break
        else:
            parts.append(f"{where}, nothing is Benchmarked yet.")
    return ("**Which configuration to start from** ([support matrix](docs/support-matrix.md)): " + " ".join(parts)
            + " A record's `run` (algo, task, sim, overrides) is the configuration; `snakemake reproduce --cores 1 "
            "--config reproduce=NAME` reruns it and judges it against the record.")


def as_json(rows: list[Row]) -> dict[str, Any]:
    return {"levels": list(LEVELS), "configurations": [
        {"configuration": r.evidence.combination.key, "level": r.level,
         "tests": [{"node": t.node, "gpu_machine": t.gpu} for t in r.evidence.tests],
         "ci_runs": list(r.evidence.ci_runs), "records": [rec.name for rec in r.evidence.records],
         "benchmarked_by": r.benchmarked_by, "reasons": list(r.reasons)} for r in rows]}


def build(root: Path) -> tuple[dict[Path, str], list[str]]:
    """Every file the inventory decides (the matrix, Markdown and JSON, and the README's records
    table), and the line of each record file refused while deciding them (none: no error)."""
    rows = generate(root)
    _, refused = usable_records(root)
    refused += [line for row in rows for line in row.refused]
    files = {MARKDOWN: markdown(rows), JSON_OUT: json.dumps(as_json(rows), indent=2) + "\n",
             README: readme_with_table(root, start_from(rows))}
    return files, list(dict.fromkeys(refused))


def outputs(root: Path) -> dict[Path, str]:
    return build(root)[0]


def differences(root: Path, expected: dict[Path, str]) -> list[str]:
    """A unified diff of each committed file against what the generator writes now (empty: equal)."""
    lines: list[str] = []
    for rel, text in expected.items():
        path = root / rel
        current = path.read_text() if path.is_file() else ""
        if current != text:
            lines += difflib.unified_diff(current.splitlines(), text.splitlines(), f"{rel} (committed)",
                                          f"{rel} (generated now)", lineterm="")
    return lines
