"""Small HTML tables for `snakemake --report` and a browser (metrics and validation of each run).

Read at a glance: a pass/fail colour per row where the rows are checks, long hashes shortened with
the full value on hover, and a width that fits a 1,400 px screen.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

# sha256 digests, bare or prefixed, anywhere in a cell.
HASH = re.compile(r"(sha256:)?([0-9a-f]{64})")
STYLE = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1f2328;
       max-width: 1350px; }
h3 { margin: 0 0 4px 0; } p.verdict { margin: 0 0 16px 0; font-weight: 600; }
.passed-all { color: #1a7f37; } .failed-any { color: #cf222e; }
table { border-collapse: collapse; width: 100%; table-layout: auto; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td { overflow-wrap: anywhere; max-width: 520px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.pass td.flag { background: #dafbe1; color: #1a7f37; font-weight: 600; }
tr.fail td { background: #ffebe9; } tr.fail td.flag { color: #cf222e; font-weight: 700; }
abbr { text-decoration: underline dotted; cursor: help; }
"""


def _cell(column: str, value: Any) -> tuple[str, str]:
    """A cell's HTML and its class. JSON for everything but plain strings and numbers, so null, []
    and strings stay distinguishable; the `passed` column reads yes or no."""
    if column == "passed" and isinstance(value, bool):
        return ("yes" if value else "no"), "flag"
    if isinstance(value, bool):
        return ("true" if value else "false"), ""
    if isinstance(value, int | float):
        text = f"{value:,.6g}" if isinstance(value, float) else f"{value:,}"
        return html.escape(text), "num"
    text = value if isinstance(value, str) else json.dumps(value)
    escaped = html.escape(text)
    return HASH.sub(lambda m: f'<abbr title="{m.group(0)}">{m.group(1) or ""}{m.group(2)[:8]}…{m.group(2)[-4:]}</abbr>',
                    escaped), ""


def table_html(rows: list[dict[str, Any]], title: str, verdict: str | None = None, figure: str | None = None) -> str:
    """The page: a title, an optional verdict line and figure (an image path relative to the page),
    one row per item (coloured by its `passed`)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        klass = "" if "passed" not in row else (' class="pass"' if row["passed"] else ' class="fail"')
        cells = []
        for column in columns:
            text, cell_class = _cell(column, row.get(column))
            cells.append(f'<td class="{cell_class}">{text}</td>' if cell_class else f"<td>{text}</td>")
        body.append(f"<tr{klass}>{''.join(cells)}</tr>")
    verdict_line = ""
    if verdict is not None:
        good = all(row.get("passed", True) for row in rows)
        verdict_line = f'<p class="verdict {"passed-all" if good else "failed-any"}">{html.escape(verdict)}</p>'
    image = ("" if figure is None else
             f'<p><img src="{html.escape(figure)}" alt="{html.escape(title)}" style="max-width:100%"></p>')
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h3>{html.escape(title)}</h3>{verdict_line}{image}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></body></html>\n")


def write_table(rows: list[dict[str, Any]], path: Path, title: str, verdict: str | None = None,
                figure: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table_html(rows, title, verdict, figure))
