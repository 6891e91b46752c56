"""training.deterministic at resolution: what it refuses, in one line and exit 2, before anything is
written (docs/determinism.md, "Refusals")."""

from __future__ import annotations

import json

import pytest

from soaklab.catalogue import BACKENDS
from soaklab.config.compose import compose
from soaklab.config.determinism import check_deterministic
from soaklab.contract.ranks import RankPlan
from soaklab.errors import InvalidInput
from soaklab.host.determinism import installed_versions, lacking, not_exact, version_tuple
from tests.conftest import one_line

OWNER = ("--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco")


@pytest.mark.parametrize(("override", "words"), [
    ("training.dp_ranks=2", "training.dp_ranks=2: the deterministic mode is for one rank (2 resolved here): "
                            "set training.dp_ranks=1 or training.deterministic=false"),
    ("training.max_wall_minutes=5", "training.max_wall_minutes=5: ends a run at a time, not an iteration"),
])
def test_a_setting_that_cannot_be_deterministic_is_one_line_and_exit_2(cli, tmp_path, override, words):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *OWNER, "training.deterministic=true", override, "--out", out)
    assert result.code == 2, result.err
    assert words in one_line(result.err)
    assert not out.exists()


def test_the_mode_on_cpu_mujoco_resolves_and_is_recorded(cli, tmp_path):
    """MuJoCo on the CPU steps each world on one thread in a fixed order: the mode is accepted there
    (docs/determinism.md says why), and the run config records it."""
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *OWNER, "training.deterministic=true", "--out", out)
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["config"]["training"]["deterministic"] is True
    bad = cli("config", "resolve", *OWNER, "training.deterministic=1", "--out", tmp_path / "other.json")
    assert bad.code == 2 and "training.deterministic=1: must be of type bool" in one_line(bad.err)


def test_mjwarp_below_its_deterministic_versions_is_refused_naming_them():
    composed = compose("flashsac", "g1_motion_tracking", "mjwarp", ["training.deterministic=true"])
    old = {"warp-lang": "1.18.2", "mujoco-warp": "4.0.0"}
    with pytest.raises(InvalidInput) as caught:
        check_deterministic(composed, RankPlan(), versions=lambda names: {n: old.get(n) for n in names})
    assert str(caught.value) == (
        "training.deterministic=true: sim mjwarp repeats bit for bit only from warp-lang 1.19.0, mujoco-warp 4.0.0 "
        "on; found warp-lang 1.18.2 (minimum 1.19.0): install those versions or set training.deterministic=false")
    with pytest.raises(InvalidInput, match=r"mujoco-warp not installed \(minimum 4.0.0\)"):
        check_deterministic(composed, RankPlan(), versions=lambda names: {"warp-lang": "1.19.0"})
    # soaklab's contact and constraint sorts fill mujoco_warp 4.0.0's hooks: another release is refused
    with pytest.raises(InvalidInput) as caught:
        check_deterministic(composed, RankPlan(),
                            versions=lambda names: {"warp-lang": "1.19.0", "mujoco-warp": "4.0.1"})
    assert str(caught.value) == (
        "training.deterministic=true: sim mjwarp's deterministic mode installs soaklab's contact and constraint "
        "sorts into the hooks of mujoco-warp 4.0.0 only; found mujoco-warp 4.0.1 (needs 4.0.0): install that "
        "version or set training.deterministic=false")
    check_deterministic(composed, RankPlan(), versions=lambda names: {"warp-lang": "1.19.1", "mujoco-warp": "4.0.0"})
    # the pinned stack, as installed here, has the mode
    assert lacking(BACKENDS["mjwarp"].deterministic, installed_versions(("warp-lang", "mujoco-warp"))) == []
    assert not_exact(BACKENDS["mjwarp"].deterministic_exact, installed_versions(("mujoco-warp",))) == []
    assert version_tuple("1.19.0.dev3+cu12") == (1, 19, 0) and version_tuple("4.0.0rc1") == (4, 0, 0)
