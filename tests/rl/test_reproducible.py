"""Reproducible learning: two CPU runs with the same seeds are bitwise identical under the
overlapped schedule (update round `it` trains on vector steps up to `it - 1` while the collector
steps vector `it`), however often the learner reads its device-side logs back."""

from __future__ import annotations

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def scalar_series(run_dir, prefixes=("Train/", "Loss/")) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"] if tag.startswith(prefixes)}


def flat_tensors(tree, prefix=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from flat_tensors(value, f"{prefix}/{key}")
    elif isinstance(tree, torch.Tensor):
        yield prefix, tree


TRACED = {"SOAKLAB_TRACE": "1", "SOAKLAB_TRACE_DUMP": "4"}  # step 4: FAST's first update round


def assert_same_final_weights(first, second) -> None:  # noqa: ANN001 - TrainRuns
    wa = dict(flat_tensors(torch.load(first.run_dir / "checkpoints/model_final.pt", weights_only=True)["agent"]))
    wb = dict(flat_tensors(torch.load(second.run_dir / "checkpoints/model_final.pt", weights_only=True)["agent"]))
    assert wa.keys() == wb.keys() and wa
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_same_seeds_same_scalars_and_weights(start_train, cli):
    """A SAC run in the deterministic mode and a default one, traced, are equal (docs/determinism.md):
    on the CPU the mode changes nothing a run computes. (Two FlashSAC runs with the same seeds:
    test_the_log_interval_changes_no_result's pair, a default run and one that differs only in when
    it reads its logs back.)"""
    overrides = ("algo.max_iterations=40", "env.seed=3", "algo.seed=4", "env.num_threads=2")
    first, second = (start_train(*overrides, f"training.deterministic={str(on).lower()}", algo="sac",
                                 name=f"sac-{side}", env_vars=TRACED)
                     for side, on in zip("ab", (True, False), strict=True))
    assert first.wait() == 0 and second.wait() == 0
    a, b = scalar_series(first.run_dir), scalar_series(second.run_dir)
    assert any(tag.startswith("Loss/") for tag in a) and "Train/step_reward" in a
    assert a == b
    assert_same_final_weights(first, second)
    result = cli("diff-runs", first.run_dir, second.run_dir)
    assert result.code == 0, result.out + result.err
    assert "traces equal: 40 steps" in result.out
    assert "series and final weights equal" in result.out


def test_the_log_interval_changes_no_result(start_train):
    """Losses and episode statistics are buffered on the learner's device and read back every
    `collector_metrics_interval` iterations: the values and their steps do not depend on it. The
    FlashSAC pair of the same seeds, a default run (interval 1) beside another, equal to the final
    weights (FlashSAC's same-seeds test)."""
    base = ("algo.max_iterations=30", "env.seed=3", "algo.seed=4", "env.num_threads=2")
    every = start_train(*base, "training.collector_metrics_interval=1", algo="flashsac", name="every")
    batched = start_train(*base, "training.collector_metrics_interval=7", algo="flashsac", name="batched")
    assert every.wait() == 0 and batched.wait() == 0
    # Train/reward/* are the collector's per-interval term means: they do depend on the interval.
    a = {k: v for k, v in scalar_series(every.run_dir).items() if not k.startswith("Train/reward/")}
    b = {k: v for k, v in scalar_series(batched.run_dir).items() if not k.startswith("Train/reward/")}
    assert "Loss/critic" in a and "Train/step_reward" in a
    assert [step for step, _ in a["Train/step_reward"]] == list(range(30))
    assert a == b
    assert_same_final_weights(every, batched)
    for run in (every, batched):
        assert run.manifest["learner_diagnostics"]["schedule"]["update_lag_vectors"] == 1


def test_a_changed_setting_is_named_at_its_first_step_and_tensor(start_train, cli):
    """A critic learning rate 3 % higher: the traces agree up to the first update round (the actions,
    physics and replay of the warm-up), and `soaklab diff-runs` names that round's actor loss (SAC
    updates the critic first) with its values, both runs having saved that step whole."""
    base = ("algo.max_iterations=20", "training.deterministic=true")
    first = start_train(*base, name="s1", env_vars=TRACED)
    second = start_train(*base, "algo.critic_lr=0.000309", name="s2", env_vars=TRACED)
    assert first.wait() == 0 and second.wait() == 0
    assert scalar_series(first.run_dir, ("Loss/",)) != scalar_series(second.run_dir, ("Loss/",))
    result = cli("diff-runs", first.run_dir, second.run_dir)
    assert result.code == 1, result.out + result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("diff-runs: configs differ: algo.critic_lr 0.0003 vs 0.000309 "), lines
    assert lines[1].startswith("diff-runs: first difference: step 4, loss tensor loss/actor ("), lines
    assert lines[2].startswith("  values: 1 of 1 elements differ"), lines
