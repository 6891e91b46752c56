"""A comparison's or a kept reproduction's verdict, recomputed from its rows instead of read from its
`verdict` field (docs/records.md, "Evidence is recomputed").

A JSON file is anyone's to edit. So whatever reads a verdict from one (`record verdict`, `record keep`,
the support matrix, CI) recomputes it:
- each row's verdict from the numbers the row carries, where it carries them: an exact row's two
  sides, a ratio row's medians and band, a bootstrap row's seeds, interval and tolerance;
- the file's verdict from its rows: `fail` if any row fails, `not_comparable` only where the two
  machine kinds, the versions or the host's numerics profile really differ, else `pass`;
- the learning figures' `statistics` from the bootstrap rows.
A file with no rows, a row whose stated verdict its own numbers contradict, or a verdict its rows do
not give is refused with one line naming the file and the field.

A kept reproduction is then judged against its record's spec as it stands (`spec_mismatch`): the
figures and their bands come from record.yaml, not from the file. One that lacks a figure the spec
names (or a seed's bitwise rows), carries another rule, band or tolerance than the spec's, or whose
numbers the spec's band or tolerance does not pass, promotes nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.records.plan import SPEC, Figure, Record

ROW_VERDICTS = ("pass", "fail", "not_comparable")
INTERVAL_DIGITS = 9  # a stored interval is the recomputed one to this many significant digits


def _number(value: Any) -> float | None:
    """A finite int or float, else None (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    low, high = _number(value[0]), _number(value[1])
    return None if low is None or high is None or low > high else (low, high)


def _seeds(value: Any) -> list[float] | None:
    if not isinstance(value, list) or not value:
        return None
    numbers = [_number(v) for v in value]
    return None if any(n is None for n in numbers) else numbers  # type: ignore[return-value]


def _exact(row: dict[str, Any]) -> str | None:
    """An exact row passes only where it carries its two sides, they are the same and no difference is
    named (a row without sides would hold by None == None)."""
    if "record" not in row or "now" not in row:
        return "fail"
    return "fail" if row["record"] != row["now"] or row.get("detail") else None


def _ratio(row: dict[str, Any]) -> str | None:
    record, now, band = _number(row.get("record")), _number(row.get("now")), row.get("band")
    if record is None or now is None:
        return "fail"  # a figure missing from a run (its sides are lists with a None) never passes
    if band is None:
        return None  # kept before rows carried their band: the row's own verdict stands
    bounds = _pair(band)
    if bounds is None:
        return "fail"
    ratio = now / record if record else math.inf
    return "pass" if bounds[0] <= ratio <= bounds[1] else "fail"


def _bootstrap(row: dict[str, Any]) -> str | None:
    if _number(row.get("record")) is None or _number(row.get("now")) is None:
        return "fail"
    if "interval" not in row and "tolerance" not in row:
        return None  # kept before rows carried their interval: the row's own verdict stands
    interval, tolerance = _pair(row.get("interval")), _number(row.get("tolerance"))
    if interval is None or tolerance is None or tolerance < 0:
        return "fail"
    now, record = _seeds(row.get("now_seeds")), _seeds(row.get("record_seeds"))
    if now is not None and record is not None:
        from soaklab.records.compare import bootstrap_interval

        again = bootstrap_interval(now, record)
        if any(not math.isclose(a, b, rel_tol=10 ** -INTERVAL_DIGITS, abs_tol=1e-12)
               for a, b in zip(again, interval, strict=True)):
            return "fail"  # an interval its own seeds do not give
    low, high = interval
    return "fail" if low > tolerance or high < -tolerance else "pass"


RULES = {"exact": _exact, "ratio": _ratio, "bootstrap": _bootstrap}


def row_verdict(row: Any, where: str) -> str:
    """One row's verdict, recomputed where its numbers allow; refused where they contradict it."""
    if not isinstance(row, dict) or row.get("rule") not in RULES or row.get("verdict") not in ROW_VERDICTS:
        raise InvalidInput(f"{where}: not a comparison row (rule one of {', '.join(RULES)}, verdict one of "
                           f"{', '.join(ROW_VERDICTS)})")
    stated = row["verdict"]
    recomputed = RULES[row["rule"]](row)
    if "held" in row:  # whether a bitwise row held: its sides say, judged or not (a judged row: its verdict)
        if row["rule"] != "exact":
            raise InvalidInput(f"{where}.held: only a bitwise (rule exact) row says whether it held")
        held = recomputed is None if stated == "not_comparable" else stated == "pass"
        if row["held"] is not held:
            raise InvalidInput(f"{where}.held: says {row['held']!r}, its own sides give {held!r}")
    if stated == "not_comparable":
        if row["rule"] == "bootstrap":
            raise InvalidInput(f"{where}.verdict: not_comparable, but learning figures are judged on any machine")
        return stated
    if recomputed is not None and recomputed != stated:
        raise InvalidInput(f"{where}.verdict: says {stated}, its own numbers give {recomputed}")
    return stated


def _differ(doc: dict[str, Any], field: str) -> bool:
    sides = doc.get(field) or {}
    return isinstance(sides, dict) and sides.get("record") != sides.get("now")


def checked_verdict(doc: Any, path: Path | str, folder_machine: str | None = None) -> str:
    """The verdict of a comparison JSON or a kept reproduction, recomputed from its rows; refused
    (InvalidInput, one line naming the file and the field) where the file says otherwise.
    `folder_machine`: a kept reproduction must name the machine kind of the folder it lies in."""
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path}: not a JSON object")
    stated = doc.get("verdict")
    rows = doc.get("figures")
    if stated == "incomplete":  # the DAG's onerror: nothing was compared, and it says why
        if not doc.get("reason"):
            raise InvalidInput(f"{path}: reason: an incomplete comparison names why")
        if rows or doc.get("bits") is not None:  # rows would be listed under its verdict as if compared
            raise InvalidInput(f"{path}: {'figures' if rows else 'bits'}: an incomplete comparison compared nothing")
        return stated
    if not isinstance(rows, list) or not rows:
        raise InvalidInput(f"{path}: figures: none; a verdict stands on at least one compared figure")
    verdicts = [row_verdict(row, f"{path}: figures[{i}] ({row.get('name') if isinstance(row, dict) else '?'})")
                for i, row in enumerate(rows)]
    machine = doc.get("machine")
    if folder_machine is not None:
        named = machine.get("now") if isinstance(machine, dict) else machine
        if named != folder_machine:
            raise InvalidInput(f"{path}: machine: {named!r}, but it lies in the artifacts of {folder_machine!r}")
    if "not_comparable" in verdicts:
        if not (_differ(doc, "machine") or _differ(doc, "versions") or doc.get("host_lacks")):
            raise InvalidInput(f"{path}: verdict: not_comparable rows, yet the machine kind, versions and "
                               "numerics profile are the record's")
        recomputed = "not_comparable"
    else:
        recomputed = "fail" if "fail" in verdicts else "pass"
    if stated != recomputed:
        raise InvalidInput(f"{path}: verdict: says {stated!r}, its rows give {recomputed!r}")
    if doc.get("bits") is not None:  # the bitwise rows' outcome, judged or (not_comparable) only held
        held = [row.get("held") if v == "not_comparable" else v == "pass"
                for row, v in zip(rows, verdicts, strict=True) if row["rule"] == "exact"]
        expected = None if not held or None in held else ("equal" if all(held) else "differ")
        if doc["bits"] != expected:
            raise InvalidInput(f"{path}: bits: says {doc['bits']!r}, its exact rows give {expected!r}")
        first = doc.get("first_difference")
        if expected == "equal" and first:  # compare names a first difference only where series or weights differ
            raise InvalidInput(f"{path}: bits: says 'equal', yet its first_difference names one ({first!r:.80})")
    statistical = [v for row, v in zip(rows, verdicts, strict=True) if row["rule"] == "bootstrap"]
    if "statistics" in doc:
        expected = ("fail" if "fail" in statistical else "pass") if statistical else None
        if doc["statistics"] != expected:
            raise InvalidInput(f"{path}: statistics: says {doc['statistics']!r}, its bootstrap rows give {expected!r}")
    return recomputed


def _figure_mismatch(figure: Figure, row: dict[str, Any]) -> str | None:
    """Where one row falls short of its figure as the spec gives it, or None."""
    if row.get("rule") != figure.rule:
        return f"rule: {row.get('rule')!r}, the spec's is {figure.rule!r}"
    record, now = _number(row.get("record")), _number(row.get("now"))
    if record is None or now is None:
        return "the figure is missing from a run"
    if figure.rule == "ratio":
        assert figure.band is not None
        low, high = figure.band
        if "band" in row and _pair(row["band"]) != (low, high):
            return f"band: {row['band']}, the spec's is [{low}, {high}]"
        ratio = now / record if record else math.inf
        return None if low <= ratio <= high else f"now / record = {ratio:.4g}, outside the spec's band [{low}, {high}]"
    assert figure.tolerance is not None
    tolerance = figure.tolerance * abs(record) if figure.relative else figure.tolerance
    if "tolerance" in row:  # its interval was judged against it (checked_verdict)
        stated = _number(row["tolerance"])
        if stated is None or not math.isclose(stated, tolerance, rel_tol=1e-9, abs_tol=1e-12):
            return f"tolerance: {row['tolerance']}, the spec's gives {tolerance:.6g}"
        return None
    # Kept before rows carried their interval: only the means are left. The interval holds their
    # difference, so a difference within the tolerance passes; beyond it, nothing shows it passes.
    if abs(now - record) > tolerance:
        return (f"mean now - record = {now - record:.4g}, beyond the spec's tolerance +-{tolerance:.4g}, and the "
                "row carries no interval")
    return None


def spec_mismatch(record: Record, doc: dict[str, Any], path: Path | str) -> str | None:
    """Where a kept reproduction (its verdict checked by checked_verdict) falls short of the record's
    spec as it stands, one line naming the file and the figure; None where every figure the spec names
    is there and passes under the spec's band or tolerance (and, for a bitwise record, each seed's rows)."""
    from soaklab.records.compare import exact_row_names

    rows: dict[str, list[dict[str, Any]]] = {}
    for row in doc.get("figures") or []:
        if isinstance(row, dict):
            rows.setdefault(str(row.get("name")), []).append(row)
    spec = f"records/{record.name}/{SPEC}"
    wanted = [(name, None) for run in record.runs for name in exact_row_names(run.label)] if record.exact else []
    wanted += [(figure.key, figure) for figure in record.figures]
    for name, figure in wanted:
        found = rows.get(name, [])
        if not found:
            return f"{path}: figures: no row of {name}, which {spec} compares"
        if len(found) > 1:
            return f"{path}: figures: {name} has {len(found)} rows"
        if figure is None:
            why = None if found[0].get("rule") == "exact" else f"rule: {found[0].get('rule')!r}, the spec's is 'exact'"
        else:
            why = _figure_mismatch(figure, found[0])
        if why is not None:
            return f"{path}: figures ({name}): {why} ({spec})"
    return None
