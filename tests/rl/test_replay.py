"""The replay ring: rows present only, n-step windows along each env's stream."""

from __future__ import annotations

import pytest
import torch

from soaklab.contract.layout import Layout, TaskSpaces
from soaklab.rl.replay import ReplayRing


def test_replay_samples_only_rows_present():
    layout = Layout(spaces=TaskSpaces(1, 1, 1), num_envs=4, capacity=1, depth=1, slot_rows=4, num_metrics=1)
    ring = ReplayRing(100, layout.row_width, layout.row_slices(), torch.device("cpu"), seed=0)
    rows = torch.arange(10, dtype=torch.float32)[:, None].expand(10, layout.row_width).clone()
    ring.add(rows)
    assert int(ring.size_t) == ring.size == 10
    seen = ring.sample(5000)["obs"][:, 0]
    assert set(seen.long().tolist()) == set(range(10))  # uniform over the present rows, none beyond


def test_peek_rows_are_the_rows_the_next_samples_draw_and_draw_nothing():
    """What a trace records of an update round (soaklab.rl.trace): the start rows of the next samples,
    from a copy of the sampling generator; the ring's own draws stay where they were."""
    layout = Layout(spaces=TaskSpaces(1, 1, 1), num_envs=4, capacity=1, depth=1, slot_rows=4, num_metrics=1)
    ring = ReplayRing(16, layout.row_width, layout.row_slices(), torch.device("cpu"), seed=5)
    for start in (0, 10, 20):  # 30 rows into 16: the ring has wrapped
        ring.add(torch.arange(start, start + 10, dtype=torch.float32)[:, None].expand(10, layout.row_width).clone())
    peeked = ring.peek_rows(8, 2)
    assert peeked.shape == (2, 8)
    for expected in peeked:
        assert torch.equal(ring.sample(8)["obs"][:, 0], ring.storage[expected, 0])
    assert ring.peek_rows(8, 0).shape == (0, 8)


N = 3  # envs per vector step: env e's next row lies N rows on


def stream(steps: int, rewards: torch.Tensor, terminated: set[tuple[int, int]], truncated: set[tuple[int, int]],
           capacity: int = 1000, n_step: int = 3, gamma: float = 0.5) -> tuple[ReplayRing, dict[str, slice]]:
    """A ring fed `steps` vector steps of N envs; obs = 100 t + e, next_obs = 100 (t + 1) + e."""
    layout = Layout(spaces=TaskSpaces(1, 1, 1), num_envs=N, capacity=1, depth=1, slot_rows=N, num_metrics=1)
    sl = layout.row_slices()
    ring = ReplayRing(capacity, layout.row_width, sl, torch.device("cpu"), seed=0, stride=N, n_step=n_step,
                      gamma=gamma)
    for t in range(steps):
        rows = torch.zeros(N, layout.row_width)
        for e in range(N):
            rows[e, sl["obs"]] = 100 * t + e
            rows[e, sl["next_obs"]] = 100 * (t + 1) + e
            rows[e, sl["reward"]] = rewards[t, e]
            rows[e, sl["terminated"]] = float((t, e) in terminated)
            rows[e, sl["truncated"]] = float((t, e) in truncated)
        ring.add(rows)
    return ring, sl


def expected(t: int, e: int, rewards, terminated, truncated, n: int, gamma: float) -> tuple[float, int, float, bool]:
    """(n-step return, bootstrap next_obs, discount, terminated) computed by hand."""
    total = 0.0
    for k in range(n):
        total += gamma ** k * float(rewards[t + k, e])
        if (t + k, e) in terminated or (t + k, e) in truncated or k == n - 1:
            return total, 100 * (t + k + 1) + e, gamma ** (k + 1), (t + k, e) in terminated
    raise AssertionError


@pytest.mark.parametrize("capacity", [1000, 20])  # 20: the ring has wrapped, windows cross its end
def test_n_step_windows_follow_each_env_and_stop_at_its_episode_end(capacity):
    steps, n, gamma = 12, 3, 0.5
    rewards = torch.arange(steps * N, dtype=torch.float32).reshape(steps, N) % 7 + 1
    terminated, truncated = {(4, 0), (9, 2)}, {(6, 1), (7, 0)}
    ring, sl = stream(steps, rewards, terminated, truncated, capacity=capacity, n_step=n, gamma=gamma)
    batch = ring.sample(4000)
    oldest = steps * N - ring.size  # stream position of the oldest row kept (t * N + e)
    seen = set()
    for obs, reward, next_obs, discount, term in zip(batch["obs"][:, 0].tolist(), batch["reward"][:, 0].tolist(),
                                                    batch["next_obs"][:, 0].tolist(),
                                                    batch["discount"][:, 0].tolist(),
                                                    batch["terminated"][:, 0].tolist(), strict=True):
        t, e = divmod(int(obs), 100)
        assert t * N + e >= oldest and t <= steps - n, "only rows present with a whole window after them"
        want = expected(t, e, rewards, terminated, truncated, n, gamma)
        assert (reward, int(next_obs), discount, bool(term)) == pytest.approx(want), (t, e)
        seen.add((t, e))
    assert len(seen) == (steps - n + 1) * N - oldest  # every eligible row is drawn


def test_one_step_sampling_is_the_plain_transition():
    rewards = torch.ones(5, N)
    ring, _ = stream(5, rewards, set(), set(), n_step=1, gamma=0.9)
    batch = ring.sample(100)
    assert (batch["next_obs"] - batch["obs"] == 100).all()
    assert torch.allclose(batch["discount"], torch.full((100, 1), 0.9)) and (batch["reward"] == 1).all()


def test_a_ring_smaller_than_the_windows_samples_shorter_ones():
    ring = ReplayRing(8, 4, {}, torch.device("cpu"), seed=0, stride=N, n_step=3)
    assert (ring.n_step_requested, ring.n_step) == (3, 2)  # 8 rows hold two vectors of 3 envs
    assert ReplayRing(2, 4, {}, torch.device("cpu"), seed=0, stride=N, n_step=3).n_step == 1
    with pytest.raises(ValueError, match="n_step=0"):
        ReplayRing(8, 4, {}, torch.device("cpu"), seed=0, stride=N, n_step=0)
