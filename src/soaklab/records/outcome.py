"""A comparison written down: its JSON, its page in the report's style, its verdict in a few lines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.report import write_table

VERDICTS = ("pass", "fail", "not_comparable", "incomplete")


def _shown(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else value


def page_rows(comparison: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for row in comparison["figures"]:
        shown = {"figure": row["name"], "rule": row["rule"], "record": _shown(row.get("record")),
                 "now": _shown(row.get("now")), "verdict": row["verdict"], "detail": row.get("detail")}
        if row["verdict"] in ("pass", "fail"):
            shown["passed"] = row["verdict"] == "pass"
        rows.append(shown)
    return rows


def headline(comparison: dict[str, Any]) -> str:
    line = f"record {comparison['record']}: {comparison['verdict']}"
    if comparison.get("reason"):
        line += f" ({comparison['reason']})"
    if comparison["verdict"] == "not_comparable" and comparison.get("bits"):
        line += f"; bits, listed and not judged: {comparison['bits']}"
    if comparison["verdict"] == "not_comparable" and comparison.get("statistics"):
        line += f"; learning figures judged over the seeds: {comparison['statistics']}"
    first = comparison.get("first_difference")
    if first and first.get("series"):
        line += f"; first difference: {first['series']} at step {first['step']} ({first['run']})"
    elif first:
        line += f"; {first['run']}: {first.get('weights')}"
    return line


def write_comparison(comparison: dict[str, Any], out: Path, html: Path | None) -> None:
    write_json_atomic(out, comparison)
    if html is not None:
        machine = comparison.get("machine") or {}
        write_table(page_rows(comparison), html, f"reproduction of record {comparison['record']}",
                    f"{headline(comparison)}. Machine now: {machine.get('now')}; on record: {machine.get('record')}")


def verdict_lines(comparison: dict[str, Any]) -> list[str]:
    lines = [headline(comparison)]
    for row in comparison["figures"]:
        if row["verdict"] != "pass":
            detail = row.get("detail") or f"{row.get('record')} on record, {row.get('now')} now"
            # a bitwise row not judged still says whether it held (compare's `held`)
            held = "" if "held" not in row else ", held" if row["held"] is True else ", differs"
            lines.append(f"  {row['verdict']}{held}: {row['name']}: {detail}")
    return lines


def read_comparison(path: Path) -> dict[str, Any]:
    """A comparison JSON whose verdict its own rows give (soaklab.records.recheck), else exit 2."""
    from soaklab.records.recheck import checked_verdict

    try:
        comparison = read_json(path)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable comparison ({exc})") from None
    if not isinstance(comparison, dict) or comparison.get("verdict") not in VERDICTS:
        raise InvalidInput(f"{path}: not a comparison (verdict one of {', '.join(VERDICTS)})")
    checked_verdict(comparison, path)
    return comparison


def mark_incomplete(record: str, out: Path, reason: str) -> None:
    """A reproduction that stopped before its comparison: the comparison says so, and its time is
    set to the epoch so that the next run of the workflow remakes it rather than trusting it."""
    write_json_atomic(out, {"record": record, "verdict": "incomplete", "reason": reason, "figures": [],
                            "first_difference": None})
    os.utime(out, (0, 0))
