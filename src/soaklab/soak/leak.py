"""The leak verdict (docs/soak.md): after start-up, nothing may keep growing.

A peak is normal; sustained growth is a leak. The post-startup window is every
sample after the trainer's first finished iteration, less the first 20% of them
(allocator warm-up, kernel and compile caches, lazy imports). Over that window
each series gets a least-squares slope (per minute) and a growth: the median of
its last quarter minus the median of its first quarter, so one spike at either
end cannot decide the verdict. Growth beyond the bound below fails the soak as
resource_leak:

| series | bound on growth |
|---|---|
| process_count | 2 processes |
| rss_bytes | 256 MiB + 25% of the first-quarter median |
| gpu_memory_bytes | 512 MiB + 10% of the first-quarter median |
| fds.<class> (eventfd, shared_memory, pipe, socket, other) | 8 descriptors |

With fewer than MIN_SAMPLES post-startup samples no trend is computed and the
verdict says so (insufficient_samples); it is not a leak.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from soaklab.soak.sampler import FD_CLASSES

MIB = 1 << 20
WARMUP_FRACTION = 0.2
MIN_SAMPLES = 8


@dataclass(frozen=True)
class Bound:
    absolute: float
    relative: float = 0.0

    def limit(self, start: float) -> float:
        return self.absolute + self.relative * abs(start)

    def describe(self) -> str:
        return f"{self.absolute:g}" + (f" + {self.relative:.0%} of start" if self.relative else "")


BOUNDS: dict[str, Bound] = {
    "process_count": Bound(2),
    "rss_bytes": Bound(256 * MIB, 0.25),
    "gpu_memory_bytes": Bound(512 * MIB, 0.10),
    **{f"fds.{cls}": Bound(8) for cls in FD_CLASSES},
}


def series_value(sample: dict[str, Any], name: str) -> float | None:
    if name.startswith("fds."):
        return float(sample["fds"][name.split(".", 1)[1]])
    value = sample.get(name)
    return None if value is None else float(value)


def slope_per_minute(times: list[float], values: list[float]) -> float:
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    var = sum((t - mean_t) ** 2 for t in times)
    if var == 0:
        return 0.0
    return 60.0 * sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / var


def post_startup(samples: list[dict[str, Any]], after_iteration: int = 0) -> list[dict[str, Any]]:
    """The samples after the trainer's first finished iteration (past `after_iteration`: a resumed
    segment starts there), less the first WARMUP_FRACTION of them."""
    started = [s for s in samples
               if (s["progress"].get("iteration") or 0) > after_iteration and s["process_count"] > 0]
    return started[int(len(started) * WARMUP_FRACTION):]


def trend(window: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    points = [(s["elapsed_s"], v) for s in window if (v := series_value(s, name)) is not None]
    if len(points) < MIN_SAMPLES:
        return None
    times, values = [p[0] for p in points], [p[1] for p in points]
    quarter = max(len(values) // 4, 1)
    start, end = statistics.median(values[:quarter]), statistics.median(values[-quarter:])
    bound = BOUNDS[name]
    growth = end - start
    return {"slope_per_minute": slope_per_minute(times, values), "start": start, "end": end, "growth": growth,
            "bound": bound.limit(start), "bound_rule": bound.describe(), "peak": max(values),
            "leak": growth > bound.limit(start)}


def leak_verdict(samples: list[dict[str, Any]], after_iteration: int = 0) -> dict[str, Any]:
    window = post_startup(samples, after_iteration)
    trends = {name: t for name in BOUNDS if (t := trend(window, name)) is not None}
    if not trends:
        return {"status": "insufficient_samples", "leak": False, "window_samples": len(window),
                "min_samples": MIN_SAMPLES, "leaking": [], "trends": {}}
    leaking = sorted(name for name, t in trends.items() if t["leak"])
    return {"status": "leak" if leaking else "clean", "leak": bool(leaking), "window_samples": len(window),
            "window_start_s": window[0]["elapsed_s"], "window_end_s": window[-1]["elapsed_s"],
            "min_samples": MIN_SAMPLES, "leaking": leaking, "trends": trends}


def status_from_trends(trends: dict[str, dict[str, Any]]) -> str:
    """A leak verdict's status drawn again from its trends (each growth against its bound), for a
    soak whose samples were not kept (a record's soak summary)."""
    if not trends:
        return "insufficient_samples"
    return "leak" if any(float(t["growth"]) > float(t["bound"]) for t in trends.values()) else "clean"
