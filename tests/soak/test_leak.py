"""The leak verdict on constructed sample series: a peak passes, sustained growth fails."""

from __future__ import annotations

from soaklab.soak.leak import BOUNDS, MIB, MIN_SAMPLES, leak_verdict, post_startup


def samples(rss: list[float], eventfds: list[int] | None = None, started_after: int = 0) -> list[dict]:
    out = []
    for i, value in enumerate(rss):
        fds = {"eventfd": (eventfds or [0] * len(rss))[i], "shared_memory": 6, "pipe": 4, "socket": 0, "other": 20}
        out.append({"elapsed_s": float(i), "process_count": 2, "rss_bytes": int(value), "fds": fds,
                    "gpu_memory_bytes": None,
                    "progress": {"iteration": None if i < started_after else i}})
    return out


def test_flat_series_is_clean():
    verdict = leak_verdict(samples([500 * MIB] * 40))
    assert verdict["status"] == "clean" and verdict["leaking"] == []
    assert verdict["trends"]["rss_bytes"]["growth"] == 0
    assert "gpu_memory_bytes" not in verdict["trends"], "no GPU: no trend, not a zero trend"


def test_a_peak_is_normal():
    rss = [500 * MIB] * 40
    rss[20] = 4000 * MIB
    verdict = leak_verdict(samples(rss))
    assert not verdict["leak"]
    assert verdict["trends"]["rss_bytes"]["peak"] == 4000 * MIB


def test_sustained_rss_growth_is_a_leak():
    verdict = leak_verdict(samples([500 * MIB + i * 20 * MIB for i in range(60)]))
    assert verdict["leak"] and verdict["leaking"] == ["rss_bytes"]
    trend = verdict["trends"]["rss_bytes"]
    assert trend["growth"] > trend["bound"] == BOUNDS["rss_bytes"].limit(trend["start"])
    assert trend["slope_per_minute"] > 1000 * MIB


def test_growth_within_the_bound_passes():
    verdict = leak_verdict(samples([500 * MIB + i * MIB for i in range(60)]))
    assert not verdict["leak"] and verdict["trends"]["rss_bytes"]["growth"] > 0


def test_eventfd_growth_is_a_leak():
    verdict = leak_verdict(samples([500 * MIB] * 60, eventfds=[4 + i // 2 for i in range(60)]))
    assert verdict["leaking"] == ["fds.eventfd"]


def test_startup_samples_do_not_count():
    # Memory grows while starting (imports, replay allocation), then stays flat.
    rss = [100 * MIB * i for i in range(10)] + [1000 * MIB] * 40
    window = post_startup(samples(rss, started_after=10))
    assert window[0]["elapsed_s"] >= 10
    assert not leak_verdict(samples(rss, started_after=10))["leak"]


def test_too_few_samples_give_no_verdict():
    verdict = leak_verdict(samples([500 * MIB] * (MIN_SAMPLES - 1)))
    assert verdict["status"] == "insufficient_samples" and verdict["leak"] is False


def test_a_resumed_segment_counts_from_its_own_first_iteration():
    """A resumed segment's samples show the checkpoint's iteration while the trainer restores it
    (start-up: memory grows), then iterations past it: only those count."""
    rss = [100 * MIB * i for i in range(40)] + [4000 * MIB] * 40
    resumed = samples(rss)
    for i, sample in enumerate(resumed):
        sample["progress"]["iteration"] = 2000 if i < 40 else 2000 + i
    assert leak_verdict(resumed)["leak"], "counted from the stale iteration, start-up looks like growth"
    verdict = leak_verdict(resumed, after_iteration=2000)
    assert not verdict["leak"] and verdict["window_start_s"] >= 40
