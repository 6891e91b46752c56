"""A reproduction against its record: one row per figure, a verdict, the first difference.

Rules (docs/records.md):
- exact (cpu records): each seed's Train/ and Loss/ series, its final weights' digest and its
  validation checks equal bit for bit; a mismatch names the first series and step that differ.
- ratio: the median over seeds now / on record inside the figure's band (timing figures).
- bootstrap: the 95 % percentile-bootstrap interval of (mean now - mean on record) over seeds; the
  figure differs when the whole interval lies beyond +-tolerance. A Mann-Whitney rank test's p is
  printed beside it (with three seeds a side it cannot go below 0.1, so it informs, not decides).
A reproduction on another machine kind or other versions of the compared packages is
`not_comparable`: its bitwise and timing rows are listed, not judged. Its learning figures
(bootstrap rows: distributions over the seeds) are judged all the same, and their verdict is the
comparison's `statistics`: a host that cannot run the record's numerics profile still learns whether
the runtime learns as it did. `host_lacks` says why a host could not run the profile (one line).
"""

from __future__ import annotations

import statistics
from typing import Any

from soaklab.records.plan import DETERMINISTIC_KIND, Figure, Record

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # the interval, and so the verdict, is a function of the figures alone


def first_difference(record: dict[str, list[list[float]]], now: dict[str, list[list[float]]]
                     ) -> dict[str, Any] | None:
    """The earliest (step, series) where two sets of series differ: a value, a missing point or a
    missing series; ties at one step go to the first series by name."""
    best: dict[str, Any] | None = None
    for tag in sorted(set(record) | set(now)):
        a, b = dict(map(tuple, record.get(tag, []))), dict(map(tuple, now.get(tag, [])))
        for step in sorted(set(a) | set(b)):
            if a.get(step) != b.get(step) or (step in a) != (step in b):
                if best is None or step < best["step"]:
                    best = {"series": tag, "step": int(step), "record": a.get(step), "now": b.get(step)}
                break
    return best


def _points(series: dict[str, list[list[float]]] | None) -> str:
    series = series or {}
    return f"{len(series)} series, {sum(len(v) for v in series.values()):,} points"


def exact_row_names(label: str) -> tuple[str, str, str]:
    """The names of one seed's bitwise rows: its series, its final weights, its validation checks."""
    return f"Train/ and Loss/ series ({label})", f"final weights ({label})", f"validation checks ({label})"


def exact_rows(label: str, record: dict[str, Any], now: dict[str, Any]) -> tuple[list[dict[str, Any]], dict | None]:
    """One seed's bitwise rows (series, weights, validation) and its first difference."""
    diff = first_difference(record.get("series") or {}, now.get("series") or {})
    series_name, weights_name, checks_name = exact_row_names(label)
    rows = [{
        "name": series_name, "rule": "exact",
        "record": _points(record.get("series")), "now": _points(now.get("series")),
        "verdict": "pass" if diff is None else "fail",
        "detail": None if diff is None else (f"first difference: {diff['series']} at step {diff['step']}: "
                                             f"{diff['record']!r} on record, {diff['now']!r} now"),
    }]
    same_weights = record.get("weights_sha256") == now.get("weights_sha256")
    rows.append({"name": weights_name, "rule": "exact", "record": record.get("weights_sha256"),
                 "now": now.get("weights_sha256"), "verdict": "pass" if same_weights else "fail", "detail": None})
    rec_checks, now_checks = record.get("validation") or [], now.get("validation") or []
    changed = [n for (n, p) in now_checks if [n, p] not in rec_checks] + \
              [n for (n, p) in rec_checks if [n, p] not in now_checks]
    rows.append({
        "name": checks_name, "rule": "exact",
        "record": f"{sum(p for _, p in rec_checks)}/{len(rec_checks)} passed",
        "now": f"{sum(p for _, p in now_checks)}/{len(now_checks)} passed",
        "verdict": "pass" if rec_checks == now_checks else "fail",
        "detail": None if rec_checks == now_checks else f"differ: {', '.join(dict.fromkeys(changed)) or 'order'}",
    })
    if diff is not None:
        diff = {"run": label, **diff}
    elif not same_weights:
        diff = {"run": label, "series": None, "step": None, "weights": "final weights differ"}
    return rows, diff


def ratio_row(figure: Figure, record: list[float | None], now: list[float | None]) -> dict[str, Any]:
    assert figure.band is not None
    low, high = figure.band
    row: dict[str, Any] = {"name": figure.key, "rule": "ratio", "band": [low, high]}
    if None in record or None in now or not record or not now:
        return {**row, "record": record, "now": now, "verdict": "fail",
                "detail": "the figure is missing from a run (not logged, or the run too short)"}
    rec, cur = statistics.median(record), statistics.median(now)  # type: ignore[type-var]
    ratio = cur / rec if rec else float("inf")
    return {**row, "record": rec, "now": cur, "ratio": ratio,
            "verdict": "pass" if low <= ratio <= high else "fail",
            "detail": f"now / record = {ratio:.3f} (medians over {len(now)} and {len(record)} seeds), "
                      f"band [{low}, {high}]"}


def bootstrap_interval(now: list[float], record: list[float]) -> tuple[float, float]:
    """The percentile-bootstrap interval of mean(now) - mean(record), resampling each side apart."""
    import numpy as np
    from scipy import stats

    if len(now) < 2 or len(record) < 2 or (len(set(now)) == 1 and len(set(record)) == 1):
        point = statistics.fmean(now) - statistics.fmean(record)
        return point, point
    result = stats.bootstrap((np.asarray(now), np.asarray(record)),
                             lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
                             paired=False, vectorized=True, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                             method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def rank_test_p(now: list[float], record: list[float]) -> float | None:
    from scipy import stats

    if len(now) < 2 or len(record) < 2 or len(set(now) | set(record)) == 1:
        return None
    return float(stats.mannwhitneyu(now, record, alternative="two-sided").pvalue)


def bootstrap_row(figure: Figure, record: list[float | None], now: list[float | None]) -> dict[str, Any]:
    assert figure.tolerance is not None
    row: dict[str, Any] = {"name": figure.key, "rule": "bootstrap"}
    if None in record or None in now or not record or not now:
        return {**row, "record": record, "now": now, "verdict": "fail",
                "detail": "the figure is missing from a run (not logged, or the run too short)"}
    rec = [float(v) for v in record if v is not None]
    cur = [float(v) for v in now if v is not None]
    tolerance = figure.tolerance * abs(statistics.fmean(rec)) if figure.relative else figure.tolerance
    low, high = bootstrap_interval(cur, rec)
    p = rank_test_p(cur, rec)
    differs = low > tolerance or high < -tolerance
    return {**row, "record": statistics.fmean(rec), "now": statistics.fmean(cur), "record_seeds": rec,
            "now_seeds": cur, "interval": [low, high], "tolerance": tolerance, "rank_test_p": p,
            "verdict": "fail" if differs else "pass",
            "detail": f"mean now - record: {CONFIDENCE:.0%} interval [{low:.4g}, {high:.4g}] against "
                      f"+-{tolerance:.4g}; rank test p={'n/a' if p is None else f'{p:.3g}'}"}


def host_lacks(now: list[dict[str, Any]]) -> str | None:
    """Why the reproducing host could not run the record's numerics profile, or None when it could."""
    return next((snap["host_lacks"] for snap in now if snap.get("host_lacks")), None)


def comparability(provenance: dict[str, Any], now: list[dict[str, Any]]) -> str | None:
    """Why the reproduction cannot be judged bit for bit against the record, or None when it can."""
    lacking = host_lacks(now)
    if lacking:
        return f"this host cannot run the record's numerics profile: {lacking}"
    for snap in now:
        if snap["machine_kind"] != provenance["machine_kind"]:
            why = (": a deterministic GPU record's bits hold on the GPU model, driver and CUDA its kind names"
                   if DETERMINISTIC_KIND in provenance["machine_kind"] else "")
            return f"machine kind {snap['machine_kind']!r}, the record's is {provenance['machine_kind']!r}{why}"
        for name, version in snap["versions"].items():
            if version != provenance["versions"].get(name):
                return f"{name} {version}, the record's is {provenance['versions'].get(name)}"
    return None


def changes(record: Record, now: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Settings of the reproduced runs that differ from the record's spec (record_overrides): an A/B
    of a change, named in the comparison."""
    found: dict[str, Any] = {}
    for run in record.runs:
        asked = (now.get(run.label) or {}).get("overrides") or {}
        spec = run.run.get("overrides") or {}
        found.update({k: v for k, v in asked.items() if spec.get(k) != v})
        found.update({k: None for k in spec if k not in asked})
    return found


def tree_dirty(flags: list[bool | None]) -> bool | None:
    """Whether any run ran a tree with uncommitted changes; None where git could not say for any."""
    return None if all(flag is None for flag in flags) else any(bool(flag) for flag in flags)


def compare(record: Record, provenance: dict[str, Any], recorded: dict[str, dict[str, Any]],
            now: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The comparison of a reproduction (`now`, snapshots by seed label) with the record."""
    labels = [run.label for run in record.runs]
    rows: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    if record.exact:
        for label in labels:
            seed_rows, diff = exact_rows(label, recorded[label], now[label])
            rows += seed_rows
            first = first or diff
    for figure in record.figures:
        rec = [recorded[label]["figures"].get(figure.key) for label in labels]
        cur = [now[label]["figures"].get(figure.key) for label in labels]
        rows.append((ratio_row if figure.rule == "ratio" else bootstrap_row)(figure, rec, cur))
    reason = comparability(provenance, [now[label] for label in labels])
    statistical = [row for row in rows if row["rule"] == "bootstrap"]
    # whether the bitwise rows held, said even where they are not judged: on another GPU model of the
    # same architecture (H100 against H200) this is the measurement the pairing's reason rests on. A
    # row not judged keeps it as `held` (soaklab.records.recheck checks both against the rows' sides).
    exact = [row["verdict"] == "pass" for row in rows if row["rule"] == "exact"]
    bits = None if not exact else ("equal" if all(exact) else "differ")
    if reason is not None:
        for row in rows:
            if row["rule"] == "exact":
                row["held"] = row["verdict"] == "pass"
            if row["rule"] != "bootstrap":  # bits and speeds belong to a machine kind; distributions do not
                row["verdict"] = "not_comparable"
        verdict = "not_comparable"
    else:
        verdict = "fail" if any(row["verdict"] == "fail" for row in rows) else "pass"
    statistics = ("fail" if any(row["verdict"] == "fail" for row in statistical) else "pass") if statistical else None
    return {
        "record": record.name,
        "verdict": verdict,
        "reason": reason,
        "host_lacks": host_lacks([now[label] for label in labels]),
        "bits": bits,
        "statistics": statistics,
        "machine": {"record": provenance["machine_kind"], "now": now[labels[0]]["machine_kind"]},
        "versions": {"record": provenance["versions"], "now": now[labels[0]]["versions"]},
        "commit": {"record": provenance.get("commit"), "now": now[labels[0]].get("commit")},
        # a tree with uncommitted changes (a GPU visit runs the working tree) says so beside its commit
        "dirty": {"record": provenance.get("dirty"), "now": tree_dirty([now[label].get("dirty") for label in labels])},
        "runs": {label: now[label]["run"] for label in labels},
        "changes": changes(record, now),
        "figures": rows,
        "first_difference": first,
    }
