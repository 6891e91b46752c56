"""A record's history as one self-contained HTML page (inline SVG plots, no file beside it): the
regression verdict, one plot per figure over the points (a series per machine kind, each kind's band
around its set of record drawn), the points, and `git log --oneline` between them."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

from soaklab.files.jsonfiles import write_json_atomic, write_text_atomic
from soaklab.files.report import STYLE

MARKERS = {"set": "o", "kept": "s", "ci": "^"}
COLOURS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#57606a", "#e16f24", "#1b7c83")
VERDICT_CLASS = {"regression": "fail", "warn": "warn", "improvement": "pass", "ok": "pass", "too_few": ""}
EXTRA_STYLE = """
tr.warn td { background: #fff8c5; } .svg svg { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: 6px 8px; margin: 4px 0 12px 0; white-space: pre-wrap; font-size: 12px; }
h2 { margin: 24px 0 6px 0; } .note { color: #57606a; }
"""


def _label(point: dict[str, Any]) -> str:
    commit = str(point.get("commit") or "?")[:7] + ("+" if point.get("dirty") else "")
    return f"{commit}\n{str(point.get('date') or '')[:10]}"


def _band(figure: dict[str, Any], reference: float) -> tuple[float, float] | None:
    if figure.get("band"):
        low, high = figure["band"]
        return reference * low, reference * high
    if figure.get("tolerance") is not None:
        tolerance = figure["tolerance"] * abs(reference) if figure.get("relative") else figure["tolerance"]
        return reference - tolerance, reference + tolerance
    return None


def plot_svg(doc: dict[str, Any], figure: dict[str, Any]) -> str:
    """One figure over the points: x is the point's place in time, a series per machine kind; each
    point of a kind carries the band of the set of record in force for that kind then."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "soaklab"  # the same history draws the same SVG
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: a tenth of the bytes of glyph paths
    import matplotlib.pyplot as plt

    key = figure["key"]
    points = doc["points"]
    kinds = list(dict.fromkeys(str(p.get("machine")) for p in points))
    fig, ax = plt.subplots(figsize=(10, 3.4), dpi=80)
    for n, kind in enumerate(kinds):
        colour = COLOURS[n % len(COLOURS)]
        mine = [(i, p) for i, p in enumerate(points) if str(p.get("machine")) == kind and key in p["figures"]]
        if not mine:
            continue
        ax.plot([i for i, _ in mine], [p["figures"][key] for _, p in mine], "-", color=colour, alpha=0.5, lw=1)
        for source, marker in MARKERS.items():
            these = [(i, p["figures"][key]) for i, p in mine if p["source"] == source]
            if these:
                ax.plot(*zip(*these, strict=True), marker, color=colour, mfc="white" if source != "set" else colour,
                        ms=6, label=f"{kind} ({source})")
        reference = None
        for i, p in mine:
            if p["source"] == "set":
                reference = p["figures"][key]
            band = _band(figure, reference) if reference is not None else None
            if band:
                ax.fill_between([i - 0.4, i + 0.4], *band, color=colour, alpha=0.12, lw=0)
    ax.set_xticks(range(len(points)), [_label(p) for p in points], fontsize=7)
    ax.set_xlim(-0.6, max(len(points), 1) - 0.4)
    ax.set_title(key + (" (noisy)" if figure.get("noisy") else ""), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = out.getvalue()
    return svg[svg.index("<svg"):]


def _table(header: list[str], rows: list[tuple[str, list[str]]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(f'<tr class="{klass}">' + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
                   for klass, cells in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _shown(value: Any) -> str:
    return "—" if value is None else f"{value:,.6g}" if isinstance(value, float) else str(value)


def page(doc: dict[str, Any]) -> str:
    name = html.escape(doc["record"])
    verdict = doc["regression"]
    parts = [f"<h3>History of record {name}</h3>",
             f'<p class="verdict">regression verdict: {html.escape(verdict["verdict"])}</p>',
             f'<p class="note">{html.escape(verdict["rule"])}. Machine kinds are judged apart, never pooled; '
             "a figure marked noisy warns and never fails. "
             + (f"As of its newest point, {html.escape(str(doc['as_of']))}" if doc["as_of"] else "No point yet")
             + f"; written by <code>soaklab record history {name}</code>.</p>"]
    rows = [(VERDICT_CLASS.get(v["verdict"], ""), [kind, key, v["verdict"], v["detail"]])
            for kind, judged in verdict["machines"].items() for key, v in judged["figures"].items()]
    if rows:
        parts.append(_table(["machine kind", "figure", "verdict", "detail"], rows))
    else:
        parts.append('<p class="note">No figure of this record is judged by a band: nothing to judge.</p>')
    parts.append("<h2>Figures over commits</h2>")
    if not doc["points"]:
        parts.append('<p class="note">No set or reproduction stored yet.</p>')
    else:
        parts.append('<p class="note">Filled circles: sets of record; hollow squares: kept reproductions; '
                     "triangles: CI's reproductions. The shaded bar at each point: the band (or tolerance) around "
                     "the set of record its machine kind had then.</p>")
        for figure in doc["figures"]:
            parts.append(f'<div class="svg">{plot_svg(doc, figure)}</div>')
    keys = [f["key"] for f in doc["figures"]]
    parts.append("<h2>Points</h2>")
    parts.append('<p class="note">run: a hash of the spec\'s run: and seeds: when the point was stored; the '
                 "verdict's window holds the points of the newest point's run only.</p>")
    parts.append(_table(["date", "commit", "source", "machine kind", "run", "bits", *keys, "stored"], [
        ("", [str(p.get("date") or "")[:19], str(p.get("commit") or "?")[:10] + (" (dirty)" if p.get("dirty") else ""),
              p["source"], str(p.get("machine")), p["run"], _shown(p.get("bits")),
              *[_shown(p["figures"].get(k)) for k in keys], p["stored"]]) for p in doc["points"]]))
    parts.append("<h2>Commits between points</h2>")
    for entry in doc["log"]:
        title = f"{str(entry['from'])[:10]}..{str(entry['to'])[:10]}"
        body = "\n".join(entry["lines"]) + (f"\n… and {entry['more']} more" if entry["more"] else "")
        parts.append(f"<p><code>{html.escape(title)}</code>"
                     + (f' <span class="note">{html.escape(entry["note"])}</span>' if entry["note"] else "")
                     + "</p>" + (f"<pre>{html.escape(body)}</pre>" if entry["lines"] else ""))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>history of {name}</title>"
            f"<style>{STYLE}{EXTRA_STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def write(doc: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    out_json, out_html = folder / f"{doc['record']}.json", folder / f"{doc['record']}.html"
    write_json_atomic(out_json, doc)
    write_text_atomic(out_html, page(doc))
    return out_json, out_html
