#!/usr/bin/env python3
"""How far healthy runs stay from the `loss_exploded` rule (soaklab.rl.diverged; docs/runtime.md,
"Diverged runs"): per run dir and Loss/ series, its reference (the median |value| of its first
LOSS_REFERENCE logged values) and the largest later |value| over it, against 10^LOSS_ORDERS.

    .venv/bin/python scripts/loss_margin.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from soaklab.metrics.events import event_file, read_scalars
from soaklab.rl.diverged import LOSS_ORDERS, LOSS_PREFIX, LOSS_REFERENCE


def main() -> int:
    worst = 0.0
    for run_dir in map(Path, sys.argv[1:]):
        frame = read_scalars(event_file(run_dir))
        for tag in sorted(t for t in frame["tag"].unique() if t.startswith(LOSS_PREFIX)):
            rows = frame[frame["tag"] == tag].sort_values("step")
            steps, values = rows["step"].tolist(), rows["value"].tolist()
            if len(values) <= LOSS_REFERENCE:
                continue
            reference = statistics.median(abs(v) for v in values[:LOSS_REFERENCE])
            ratio, step = max((abs(v) / reference, s) for s, v in zip(steps[LOSS_REFERENCE:],
                                                                       values[LOSS_REFERENCE:], strict=True))
            worst = max(worst, ratio)
            print(f"{run_dir} {tag}: {len(values)} values, reference {reference:.3g}, "
                  f"largest ratio {ratio:.3g} at iteration {step}")
    print(f"largest ratio {worst:.3g} against the threshold 10^{LOSS_ORDERS}: "
          f"a margin of {10 ** LOSS_ORDERS / worst:.3g}x" if worst else "no loss series")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
