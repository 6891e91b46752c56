"""The regression verdict over a record's history (docs/records.md, "Regression verdict").

For each figure judged by a band (the ratio rule: timings, GPU throughput), the newest point of a
machine kind is judged against the points before it on the same machine kind and the same run (the
spec's run: and seeds:; a record rewritten for another run starts a new window). Points of machine
kinds that cannot be compared are never pooled.

Two tests, either of which flags:
- **z-score** (as Conbench judges a benchmark run against its history): z = (newest - mean) / sd
  over the lookback window, the last WINDOW earlier points, needing at least MIN_EARLIER of them;
  |z| > Z_LIMIT flags. The spread is floored at SPREAD_FLOOR of the mean: a window of points that
  happen to agree to the last digit (a set and the reproduction kept from it) judges by the floor,
  not by a zero.
- **drift**: newest / first point of the window outside the figure's own band. Each step may have
  stayed inside the band (throughput -4 % three times) while the sum left it.

A flag in the figure's worse direction (throughput down, a time up) is a `regression`, in the better
one an `improvement`. A figure the spec marks `noisy` (a shared machine's timing) gets `warn` instead
of `regression`: it is shown, and fails nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

WINDOW = 5
MIN_EARLIER = 2
Z_LIMIT = 5.0
SPREAD_FLOOR = 0.01
# The figures a larger value of is better; every other band-judged figure is a time (lower is better).
HIGHER_IS_BETTER = frozenset({"env_steps_per_s"})
RULE = (f"z-score of the newest point against the last {WINDOW} earlier points of its machine kind and run "
        f"(at least {MIN_EARLIER}; |z| > {Z_LIMIT:g}, the spread floored at {SPREAD_FLOOR:.0%} of the mean), and "
        "drift: newest / first point of that window outside the figure's band")


@dataclass(frozen=True)
class Verdict:
    verdict: str  # regression | improvement | warn | ok | too_few
    detail: str
    z: float | None = None
    drift: float | None = None  # newest / first of the window
    window: tuple[float, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "detail": self.detail, "z": self.z, "drift": self.drift,
                "window": list(self.window)}


def judge(values: list[float], name: str, band: tuple[float, float], noisy: bool = False) -> Verdict:
    """The newest of `values` (in time order, one machine kind and run) against those before it."""
    if not values:
        return Verdict("too_few", "no point of this machine kind and run carries the figure")
    newest, earlier = values[-1], values[:-1][-WINDOW:]
    if len(earlier) < MIN_EARLIER:
        return Verdict("too_few", f"{len(earlier)} earlier point(s) on this machine kind; the verdict needs "
                                  f"{MIN_EARLIER}", window=tuple(earlier))
    mean = statistics.fmean(earlier)
    spread = max(statistics.stdev(earlier), SPREAD_FLOOR * abs(mean))
    z = (newest - mean) / spread if spread else 0.0
    drift = newest / earlier[0] if earlier[0] else float("inf")
    up_is_good = name.split("@")[0] in HIGHER_IS_BETTER
    flags = []
    if abs(z) > Z_LIMIT:
        flags.append((z > 0) == up_is_good)
    if not band[0] <= drift <= band[1]:
        flags.append((drift > 1) == up_is_good)
    detail = (f"newest {newest:.6g} against {len(earlier)} earlier (mean {mean:.6g}, sd {spread:.3g}): z {z:+.2f}; "
              f"newest / first of window {drift:.3f}, band [{band[0]}, {band[1]}]")
    if not flags:
        return Verdict("ok", detail, z, drift, tuple(earlier))
    if all(flags):
        return Verdict("improvement", detail, z, drift, tuple(earlier))
    return Verdict("warn" if noisy else "regression", detail + (" (a noisy figure: warns only)" if noisy else ""),
                   z, drift, tuple(earlier))


def overall(verdicts: list[str]) -> str:
    """A record's verdict from its figures': fail on a regression, warn on a noisy one, else pass."""
    return "fail" if "regression" in verdicts else "warn" if "warn" in verdicts else "pass"
