"""Ensemble networks: each member computes what its single-network counterpart would."""

from __future__ import annotations

import torch
from torch import nn

from soaklab.rl.agents.nets import EnsembleBatchNorm, EnsembleLinear, EnsembleRMSNorm, ResidualTrunk, project_rows


def test_ensemble_linear_is_one_linear_per_member():
    torch.manual_seed(0)
    layer = EnsembleLinear(3, 5, 4)
    x = torch.randn(3, 7, 5)
    out = layer(x)
    for m in range(3):
        torch.testing.assert_close(out[m], nn.functional.linear(x[m], layer.weight[m], layer.bias[m]))


def test_ensemble_batchnorm_matches_batchnorm1d_in_train_and_eval():
    torch.manual_seed(0)
    ours = EnsembleBatchNorm(2, 6)
    refs = [nn.BatchNorm1d(6) for _ in range(2)]
    for _ in range(4):  # running statistics follow torch's (momentum 0.1, unbiased variance)
        x = torch.randn(2, 16, 6) * 3 + 1
        out = ours(x)
        for m in range(2):
            torch.testing.assert_close(out[m], refs[m](x[m]))
    ours.eval()
    x = torch.randn(2, 5, 6)
    for m in range(2):
        refs[m].eval()
        torch.testing.assert_close(ours(x)[m], refs[m](x[m]))
        torch.testing.assert_close(ours.running_var[m, 0], refs[m].running_var)


def test_ensemble_rmsnorm_matches_rmsnorm():
    torch.manual_seed(0)
    ours, ref = EnsembleRMSNorm(1, 8), nn.RMSNorm(8, eps=1e-6)
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(ours(x)[0], ref(x[0]))


def test_a_shared_input_reaches_every_member_and_members_differ():
    torch.manual_seed(0)
    trunk = ResidualTrunk(2, 6, 8, 2, 3)
    x = torch.randn(5, 6)
    out = trunk(x)
    assert out.shape == (2, 5, 3)
    torch.testing.assert_close(out, trunk(x.expand(2, 5, 6)))
    assert not torch.allclose(out[0], out[1])  # independently initialised members


def test_zero_head_starts_at_zero_and_projection_makes_unit_rows():
    trunk = ResidualTrunk(2, 6, 8, 1, 4, zero_head=True)
    assert torch.count_nonzero(trunk(torch.randn(3, 6))) == 0
    weights = trunk.hidden_weights()
    assert len(weights) == 3  # embed, expand, project; the head stays free
    project_rows(weights)
    for w in weights:
        torch.testing.assert_close(w.norm(dim=-1), torch.ones(w.shape[:-1]))
