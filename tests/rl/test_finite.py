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


DEVICES = [pytest.param("cpu"), pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")])]


@pytest.mark.parametrize("device", DEVICES)
def test_the_fused_flags_agree_with_isfinite_on_every_kind_of_value(device):
    """The fused check (x * 0, then an L1 norm) against the plain one, tensor by tensor: NaN and both
    infinities anywhere in a tensor are found; huge finite values, -0.0, empty, integer and bool
    tensors are not. On the CPU the float32-only list takes numpy's path and the mixed one (bfloat16,
    which numpy lacks) the fused ops; on a GPU both take the fused ops."""
    from soaklab.rl.finite import non_finite_flags

    nan, inf = float("nan"), float("inf")
    generator = torch.Generator().manual_seed(0)
    values = [torch.randn(1024, 97, generator=generator) for _ in range(6)]
    values[1][512, 40] = nan
    values[3][-1, -1] = inf
    values[4][0, 0] = -inf
    values += [torch.full((1024,), 3.0e38), torch.tensor([-0.0, 0.0]), torch.zeros(0), torch.arange(3),
               torch.tensor([True, False]), torch.tensor([1.0, nan], dtype=torch.float64),
               torch.tensor([65504.0], dtype=torch.float16), torch.tensor([inf], dtype=torch.bfloat16)]
    values = [v.to(device) for v in values]
    expected = [bool((~torch.isfinite(v)).any()) if v.is_floating_point() else False for v in values]
    assert expected.count(True) == 5  # the test's own plants
    assert non_finite_flags(values).cpu().tolist() == expected
    same_dtype = [v for v in values if v.dtype == torch.float32]
    assert non_finite_flags(same_dtype).cpu().tolist() == [bool((~torch.isfinite(v)).any()) for v in same_dtype]
    assert non_finite_flags([]).tolist() == []
