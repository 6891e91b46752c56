"""The update schedule: when the learner acts at random and how many updates each round runs."""

from __future__ import annotations

from soaklab.rl.schedule import UPDATE_LAG_VECTORS, UpdateSchedule


def test_the_first_round_waits_for_learning_starts_and_an_n_step_window():
    s = UpdateSchedule.of(learning_starts=16, updates_per_step=2, n_step=3, warmup_actions="uniform")
    assert s.first_update == 16
    assert [s.updates(it) for it in (0, 15, 16, 17)] == [0, 0, 2, 2]
    assert [s.random_actions(it) for it in (0, 15, 16)] == [True, True, False]
    # No learning_starts: the lag and the n-step window still hold the first round back.
    early = UpdateSchedule.of(learning_starts=0, updates_per_step=1, n_step=3, warmup_actions="uniform")
    assert early.first_update == UPDATE_LAG_VECTORS + 2 and early.updates(early.first_update - 1) == 0


def test_the_policy_acts_from_the_start_when_asked_and_a_held_schedule_never_updates():
    policy = UpdateSchedule.of(learning_starts=16, updates_per_step=1, n_step=1, warmup_actions="policy")
    assert not any(policy.random_actions(it) for it in range(20))
    held = UpdateSchedule.of(learning_starts=16, updates_per_step=4, n_step=1, warmup_actions="uniform",
                             hold_updates=True)
    assert not any(held.updates(it) or held.random_actions(it) for it in range(100))
