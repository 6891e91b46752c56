"""The finiteness watch (soaklab.rl.finite); a real soak that diverges: tests/soak/test_non_finite.py."""

from __future__ import annotations

import pytest
import torch

from soaklab.rl.finite import FiniteWatch, NonFinite


def test_the_first_non_finite_value_is_named_at_once_on_the_cpu():
    watch = FiniteWatch(torch.device("cpu"))
    watch.check(0, {"observation": torch.zeros(4, 3)}, terms={"alive": torch.ones(4)})
    with pytest.raises(NonFinite) as found:
        watch.check(1, {"observation": torch.zeros(4, 3), "reward": torch.tensor([0.0, float("nan")])},
                    terms={"alive": torch.ones(2), "action_rate": torch.tensor([float("inf"), 0.0])})
    # the term comes before its sum: the NaN sum is its consequence
    assert (found.value.iteration, found.value.tensor, found.value.term) == (1, "reward", "action_rate")
    assert str(found.value) == "non-finite reward (term action_rate) at iteration 1"


def test_deferred_flags_are_read_together_and_name_the_earliest():
    """A GPU's way (no read per step), run on the CPU's tensors: nothing is raised until drain()."""
    watch = FiniteWatch(torch.device("cpu"))
    watch.deferred = True
    watch.check(3, {"action": torch.zeros(2)})
    watch.check(4, {"action": torch.tensor([float("nan"), 0.0])})
    watch.flags(5, (("loss/critic", None),), torch.tensor([True]))
    assert len(watch.pending) == 3
    with pytest.raises(NonFinite, match="non-finite action at iteration 4"):
        watch.drain()
    assert watch.pending == []


def test_a_report_round_trips_and_a_torn_one_reads_as_none(tmp_path):
    path = tmp_path / "non_finite.json"
    NonFinite(7, "reward", "upright").write(path)
    again = NonFinite.read(path)
    assert again is not None and str(again) == "non-finite reward (term upright) at iteration 7"
    path.write_text('{"iteration": ')
    assert NonFinite.read(path) is None
