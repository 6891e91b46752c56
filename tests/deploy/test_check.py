"""What lets `soaklab deploy-check` reproduce `soaklab evaluate` from the file alone: its reset draws
and quaternion arithmetic are the task's, bit for bit, and it loads no task code (docs/export.md).
The end-to-end checks run on real exports: tests/policy/test_export.py (cart-pole, refusals) and
tests/policy/test_evaluate.py (G1 against evaluate, the swapped-joint refusal)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from soaklab.deploy import observe
from soaklab.deploy.check import Uniform
from soaklab.deploy.contract import tiling_error
from soaklab.tasks.g1_tracking import quat
from soaklab.tasks.rng import ManagerRng


@pytest.mark.parametrize("seed", [0, 1, 2 ** 32 - 1])
def test_the_reset_draws_are_the_env_rngs(seed):
    """Shapes and bounds as the G1 reset draws them (joints, root x/y, yaw), in that order."""
    theirs, ours = ManagerRng(seed), Uniform(seed)
    for shape, half in (((6, 29), 0.1), ((6, 2), 0.05), ((6,), 0.1), ((3, 2), 0.0)):
        assert np.array_equal(theirs.uniform(shape, -half, half).numpy(), ours(shape, -half, half))


@pytest.mark.parametrize("n", [1, 6, 64])
def test_the_quaternion_arithmetic_is_the_tasks(n):
    """Rotations of vectors (fused multiply-adds in the cross products, as torch's CPU kernel),
    products, 6D rotations and gravity in the body frame: equal bits."""
    rng = np.random.RandomState(n)
    q = rng.randn(n, 4).astype(np.float32)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    p, v = q[::-1].copy(), rng.randn(n, 3).astype(np.float32)
    tq, tp, tv = torch.from_numpy(q), torch.from_numpy(p), torch.from_numpy(v)
    assert np.array_equal(quat.quat_apply_inverse(tq, tv).numpy(), observe.quat_apply_inverse(q, v))
    assert np.array_equal(quat.quat_mul(tq, tp).numpy(), observe.quat_mul(q, p))
    assert np.array_equal(quat.matrix_6d(tq).numpy(), observe.matrix_6d(q))
    assert np.array_equal(quat.projected_gravity_z(tq).numpy(), observe.gravity_z(q))


def test_tiling_names_the_first_gap_or_overlap():
    def blocks(*spans: tuple[int, int]) -> dict:
        return {"dim": 6, "blocks": [{"name": f"b{i}", "start": a, "stop": b} for i, (a, b) in enumerate(spans)]}

    assert tiling_error(blocks((0, 2), (2, 6))) is None
    assert tiling_error(blocks((0, 2), (3, 6))) == "block b1 starts at 3, not 2: a gap"
    assert tiling_error(blocks((0, 3), (2, 6))) == "block b1 starts at 2, not 3: an overlap"
    assert tiling_error(blocks((0, 2), (2, 2), (2, 6))) == "block b1 is empty ([2, 2))"
    assert tiling_error(blocks((0, 2), (2, 5))) == "the blocks cover [0, 5), the observation has 6"


def test_the_check_loads_no_task_code_nor_torch():
    """The import rule (tests/test_structure.py) as the interpreter sees it, transitively."""
    code = ("import sys, soaklab.deploy.check; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('soaklab.tasks', "
            "'soaklab.policy', 'soaklab.rl', 'soaklab.catalogue', 'soaklab.config'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_readable_contract_is_compared_by_value_and_type_and_parsed_safely(tmp_path):
    """The sidecar beside an ONNX: 5.0 is not the contract's 5, a duplicated key or a nesting deep
    enough to exhaust the parser is a one-line refusal (deploy-check exits 2), never a traceback."""
    from soaklab.deploy.contract import sidecar, sidecar_difference

    policy = tmp_path / "p.v2.onnx"
    readable = sidecar(policy)
    assert readable.name == "p.v2.contract.json"
    readable.write_text(json.dumps({"observation": {"dim": 5, "blocks": [1, 2]}}))
    assert sidecar_difference(policy, {"observation": {"blocks": [1, 2], "dim": 5}}) is None  # key order alone
    readable.write_text(json.dumps({"observation": {"dim": 5.0, "blocks": [1, 2]}}))
    assert "first at observation.dim" in sidecar_difference(policy, {"observation": {"dim": 5, "blocks": [1, 2]}})
    for text, words in (('{"a": 1, "a": 2}', "appears twice"), ("[" * 200_000 + "]" * 200_000, "nested deeper")):
        readable.write_text(text)
        found = sidecar_difference(policy, {"a": 1})
        assert found is not None and "unreadable beside p.v2.onnx" in found and words in found, found
