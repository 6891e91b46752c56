"""Every checkpoint soaklab reads is data (soaklab.files.checkpoints.load_weights): the one loader,
weights_only after the size checks, and a file holding anything else refused in one line, unrun."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from soaklab.errors import InvalidInput
from soaklab.files.checkpoints import load_weights
from soaklab.rl.resume import host_rng_state, save_atomic
from tests.conftest import REPO
from tests.rl.conftest import craft

LOADER = REPO / "src" / "soaklab" / "files" / "checkpoints.py"


def unpickling_calls(source: str) -> list[int]:
    """The lines that call torch.load, pickle.load(s) or np.load(..., allow_pickle=True)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)):
            continue
        owner, name = node.func.value.id, node.func.attr
        allow = any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                    for k in node.keywords)
        if (owner == "torch" and name == "load") or (owner == "pickle" and name in ("load", "loads")) \
                or (owner in ("np", "numpy") and name == "load" and allow):
            found.append(node.lineno)
    return found


def test_the_loader_is_the_one_place_that_unpickles():
    elsewhere = {f"{path.relative_to(REPO)}:{line}" for path in (REPO / "src").rglob("*.py") if path != LOADER
                 for line in unpickling_calls(path.read_text())}
    assert elsewhere == set(), "load checkpoints with soaklab.files.checkpoints.load_weights"
    assert len(unpickling_calls(LOADER.read_text())) == 1


def test_the_unpickling_finder_finds_each_kind():
    assert unpickling_calls("torch.load(p, weights_only=True)\npickle.loads(b)\nnp.load(p, allow_pickle=True)\n"
                            "np.load(p, allow_pickle=False)\nnp.load(p)\n") == [1, 2, 3]


def test_a_checkpoint_that_is_not_plain_data_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "marker"
    crafted = craft(tmp_path / "model_final.pt", marker, iteration=3, agent={})
    with pytest.raises(InvalidInput) as refused:
        load_weights(crafted)
    assert str(refused.value) == (f"{crafted}: not plain data (it names io.open, which no soaklab checkpoint "
                                  "holds); refused, nothing in it ran")
    assert not marker.exists()


def test_the_state_a_resume_saves_is_plain_data(tmp_path):
    """The host RNGs (NumPy's included) come back whole through the loader."""
    saved = host_rng_state()
    save_atomic({"host_rng": saved}, tmp_path / "learner_1.pt")
    loaded = load_weights(Path(tmp_path / "learner_1.pt"))["host_rng"]
    assert torch.equal(loaded["torch"], saved["torch"]) and torch.equal(loaded["numpy"]["keys"], saved["numpy"]["keys"])
    assert loaded["python"] == saved["python"]
