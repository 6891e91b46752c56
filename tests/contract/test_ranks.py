"""Rank resolution (soaklab.contract.ranks): ranks from visible GPUs or training.dp_ranks, refusals."""

from __future__ import annotations

import pytest

from soaklab.contract.ranks import RankPlan, resolve_ranks
from soaklab.errors import SettingError

CPUS = tuple(range(8))


def plan(configured=None, cpu_ids=None, request="cuda", learner="cuda:0", gpus=2, sharing=None, cpus=CPUS):
    return resolve_ranks(configured, cpu_ids, request, learner, gpus, sharing, cpus)


def test_one_rank_per_visible_gpu_by_default():
    p = plan()
    assert (p.world_size, p.backend, p.collector_cpu_ids) == (2, "nccl", ((0, 1, 2, 3), (4, 5, 6, 7)))
    assert p.run_dir_suffix() == "_gpux2"


def test_an_explicit_ordinal_or_one_rank_stays_single():
    assert plan(request="cuda:1", learner="cuda:1") == RankPlan()
    assert plan(configured=1).world_size == 1 and plan(configured=1).run_dir_suffix() == ""


def test_cpu_ranks_use_gloo():
    p = plan(configured=2, request="cpu", learner="cpu", gpus=0)
    assert (p.world_size, p.backend, p.run_dir_suffix()) == (2, "gloo", "_cpux2")


@pytest.mark.parametrize(("kwargs", "key", "says"), [
    ({"configured": 3}, "training.dp_ranks", "more ranks than GPUs: 2 GPU(s) are visible"),
    ({"configured": 2, "request": "cuda:0"}, "training.dp_ranks", "names one GPU"),
    ({"sharing": "mps"}, "training.cuda_process_sharing", "mps is single-GPU"),
    ({"cpu_ids": [[0, 1]]}, "training.dp_collector_cpu_ids", "a list of 2 CPU id lists"),
    ({"cpu_ids": [[0], [99]]}, "training.dp_collector_cpu_ids", "CPU 99 is not usable"),
    ({"cpu_ids": [[0], []]}, "training.dp_collector_cpu_ids", "non-empty list of CPU ids"),
    ({"configured": 4, "request": "cpu", "learner": "cpu", "cpus": (0, 1)}, "training.dp_ranks",
     "each rank's collector needs a core"),
    ({"configured": 2, "request": "mps", "learner": "mps"}, "training.dp_ranks", "a cuda or cpu learner"),
])
def test_refusals_name_the_setting(kwargs, key, says):
    with pytest.raises(SettingError) as err:
        plan(**kwargs)
    assert str(err.value).startswith(key) and says in str(err.value)


def test_explicit_cpu_ids_are_kept():
    assert plan(cpu_ids=[[0, 2], [1, 3]]).collector_cpu_ids == ((0, 2), (1, 3))
