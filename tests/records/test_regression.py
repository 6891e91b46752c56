"""The regression verdict over a history: a slow drift each step's band missed is flagged, a jump
beyond the window's spread is flagged, noise is quiet, a noisy figure warns and never fails."""

from __future__ import annotations

import random

from soaklab.records import regression

BAND = (0.9, 1.1)


def test_a_drift_inside_each_steps_band_is_flagged():
    values = [100_000.0 * 0.96 ** n for n in range(4)]  # -4 % three times: each step inside [0.9, 1.1]
    assert all(BAND[0] <= b / a <= BAND[1] for a, b in zip(values, values[1:], strict=False))
    verdict = regression.judge(values, "env_steps_per_s", BAND)
    assert verdict.verdict == "regression" and abs(verdict.z) <= regression.Z_LIMIT  # the drift rule caught it
    assert verdict.drift < BAND[0] and "newest / first of window 0.885" in verdict.detail
    # the same drift in a time is a regression too (a time up), and an improvement the other way
    assert regression.judge([10.0 / v * 1e4 for v in values], "iteration_ms", BAND).verdict == "regression"
    assert regression.judge(values, "iteration_ms", BAND).verdict == "improvement"


def test_noise_is_quiet_and_a_jump_is_flagged():
    rng = random.Random(0)
    noise = [100_000.0 * (1 + rng.uniform(-0.02, 0.02)) for _ in range(12)]
    for end in range(3, 13):
        assert regression.judge(noise[:end], "env_steps_per_s", BAND).verdict == "ok", noise[:end]
    jump = regression.judge([*noise[:6], 80_000.0], "env_steps_per_s", BAND)
    assert jump.verdict == "regression" and jump.z < -regression.Z_LIMIT
    # the window is the last WINDOW earlier points: an old outlier ages out of it
    assert len(regression.judge([50_000.0, *noise[:6]], "env_steps_per_s", BAND).window) == regression.WINDOW


def test_a_noisy_figure_warns_and_too_few_points_give_no_verdict():
    values = [30.0, 29.0, 20.0]
    assert regression.judge(values, "env_steps_per_s", (0.95, 1.05), noisy=True).verdict == "warn"
    assert regression.judge(values, "env_steps_per_s", (0.95, 1.05)).verdict == "regression"
    assert regression.judge([30.0, 20.0], "env_steps_per_s", BAND).verdict == "too_few"
    assert regression.overall(["ok", "warn", "too_few"]) == "warn"
    assert regression.overall(["warn", "regression"]) == "fail" and regression.overall(["ok"]) == "pass"
