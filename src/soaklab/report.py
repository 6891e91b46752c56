"""Small HTML tables for `snakemake --report` (metrics and validation of each run)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd


def write_table(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    # Cells hold JSON so that null, [] and strings stay distinguishable in the report.
    frame = pd.DataFrame([{k: v if isinstance(v, str | int | float | bool) else json.dumps(v)
                           for k, v in row.items()} for row in rows])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
                    f"<body><h3>{html.escape(title)}</h3>{frame.to_html(index=False, na_rep='null')}</body></html>\n")
