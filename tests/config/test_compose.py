"""Owner YAML composition: inheritance, struct mode, the pinned key list."""

from __future__ import annotations

import pytest

from soaklab.config.compose import available_algos, available_sims, compose, leaf_keys, owner_chain
from soaklab.errors import InvalidInput, SettingError

# docs/settings-contract.md: every key pinned now; a key may not silently appear or vanish.
ALGO_KEYS = {"num_envs", "max_iterations", "batch_size", "updates_per_step", "replay_buffer_size",
             "learning_starts", "gamma", "tau", "actor_lr", "critic_lr", "actor_hidden", "critic_hidden",
             "num_blocks", "save_interval", "seed", "n_step", "obs_normalization", "log_std_min", "log_std_max",
             "warmup_actions", "alpha_init", "compile"}
FLASHSAC_KEYS = {"num_bins", "v_min", "v_max", "actor_update_interval", "noise_zeta_mu", "noise_zeta_max", "use_amp"}
ENV_KEYS = {"seed", "num_threads", "episode_length_s", "motion", "motion_weights", "sampler", "collector_tensor_device"}
TRAINING_KEYS = {"device", "collector_tensor_device", "inference_slot_capacity", "collector_metrics_interval",
                 "replay_ingress_depth", "replay_ingress_slot_rows", "cuda_process_sharing", "sim_backend", "log_dir",
                 "dp_ranks", "dp_collector_cpu_ids", "export_onnx", "no_play", "collector_stream_priority",
                 "mps_learner_thread_percentage", "mps_collector_thread_percentage", "max_wall_minutes", "loggers",
                 "wandb_project", "deterministic"}
KNOB_DEFAULTS = {"inference_slot_capacity": 1, "collector_metrics_interval": 1, "replay_ingress_depth": 2,
                 "replay_ingress_slot_rows": None, "cuda_process_sharing": None}


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_every_pinned_key_is_present_and_no_other(algo, sim):
    cfg = compose(algo, "g1_motion_tracking", sim).config
    assert set(cfg) == {"algo", "env", "training", "task"}
    assert set(cfg["algo"]) == ALGO_KEYS | (FLASHSAC_KEYS if algo == "flashsac" else set())
    assert set(cfg["env"]) == ENV_KEYS
    assert set(cfg["training"]) == TRAINING_KEYS
    assert cfg["training"]["sim_backend"] == sim  # declared by the owner, not the CLI spelling
    assert cfg["algo"]["num_envs"] == 2048 and cfg["algo"]["max_iterations"] == 25000


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_mjwarp_changes_only_collector_metrics_interval_among_runtime_knobs(algo):
    mujoco = compose(algo, "g1_motion_tracking", "mujoco").config["training"]
    mjwarp = compose(algo, "g1_motion_tracking", "mjwarp").config["training"]
    assert {k: mujoco[k] for k in KNOB_DEFAULTS} == KNOB_DEFAULTS
    changed = {k for k in KNOB_DEFAULTS if mujoco[k] != mjwarp[k]}
    assert changed == {"collector_metrics_interval"}
    assert mjwarp["collector_metrics_interval"] == 100


def test_owner_chain_inherits_root_first():
    chain = owner_chain("flashsac", "g1_motion_tracking", "mjwarp")
    assert [p.name for p in chain] == ["base.yaml", "mujoco.yaml", "mjwarp.yaml"]


def test_choices_are_discovered_from_the_tree():
    assert available_algos() == ["flashsac", "sac"]
    assert available_sims("sac", "g1_motion_tracking") == ["mjwarp", "mujoco"]


@pytest.mark.parametrize(("flag", "args"), [
    ("--algo", ("ppo", "g1_motion_tracking", "mujoco")),
    ("--task", ("sac", "cartpole_nope", "mujoco")),
    ("--sim", ("sac", "g1_motion_tracking", "isaac")),
])
def test_unknown_owner_selection_fails_closed(flag, args):
    with pytest.raises(SettingError) as info:
        compose(*args)
    assert info.value.key == flag


def test_overrides_do_not_mutate_shared_defaults():
    compose("sac", "g1_motion_tracking", "mujoco", ["algo.num_envs=8"])
    assert compose("sac", "g1_motion_tracking", "mujoco").config["algo"]["num_envs"] == 2048


def test_owner_file_with_unknown_key_or_bad_yaml_fails_closed(tmp_path, monkeypatch):
    import shutil

    from soaklab.config import compose as compose_mod
    from soaklab.config import owners

    root = tmp_path / "conf"
    shutil.copytree(compose_mod.CONF_ROOT, root)
    (root / "sac/task/g1_motion_tracking/mujoco.yaml").write_text(
        "inherits: base.yaml\ntraining:\n  sim_backend: mujoco\n  inference_slots: 2\n")
    for module in (compose_mod, owners):
        monkeypatch.setattr(module, "CONF_ROOT", root)
    with pytest.raises(InvalidInput) as info:
        compose("sac", "g1_motion_tracking", "mujoco")
    assert "unknown key training.inference_slots" in str(info.value)
    assert "did you mean training.inference_slot_capacity" in str(info.value)
    # YAML that does not parse: one line naming the file and where the parser stopped.
    broken = root / "sac/task/g1_motion_tracking/mujoco.yaml"
    broken.write_text("inherits: base.yaml\ntraining: [sim_backend: mujoco\n  control: {")
    with pytest.raises(InvalidInput) as info:
        compose("sac", "g1_motion_tracking", "mujoco")
    assert str(info.value).startswith(f"{broken}: cannot load owner YAML (while parsing a flow sequence, line 2 "), (
        str(info.value))
    assert "\n" not in str(info.value)


def test_leaf_keys_lists_nested_keys():
    assert leaf_keys({"a": {"b": 1, "c": {"d": 2}}}) == ["a", "a.b", "a.c", "a.c.d"]
