"""Typing rules for configuration keys outside the tensor-runtime contract.

Overrides are checked against these before they are merged, the same way the
contract checks its knobs: a value of the wrong kind fails closed instead of
being coerced.
"""

from __future__ import annotations

from soaklab.contract.contract import MAX_SEED

# algo.compile (soaklab.rl.agents.compiled says what each scope compiles).
COMPILE_MODES = ("eager", "nets", "update", "auto")

# Keys whose default is null, with the kind a non-null value must have.
NULLABLE_KINDS: dict[str, type] = {
    "env.num_threads": int,
    "env.motion": str,
    "env.motion_weights": list,  # checked whole at resolution (soaklab.config.run_config)
    "training.log_dir": str,
    "training.max_wall_minutes": float,  # a positive number (soaklab.config.ranges)
    "training.dp_ranks": int,
    "training.dp_collector_cpu_ids": list,  # checked whole at resolution (soaklab.contract.ranks)
    "training.mps_learner_thread_percentage": int,
    "training.mps_collector_thread_percentage": int,
}

# Keys that also take a non-empty list of distinct strings (env.motion: a motion library, one clip
# per block of envs; soaklab.tasks.g1_tracking.library).
STR_OR_LIST_KEYS = frozenset({"env.motion"})

# Exact ints that must be >= the given minimum.
INT_MINIMUMS: dict[str, int] = {
    "algo.max_iterations": 1,
    "algo.replay_buffer_size": 1,
    "algo.learning_starts": 0,
    "algo.n_step": 1,
    "algo.actor_hidden": 1,
    "algo.critic_hidden": 1,
    "algo.num_blocks": 1,
    "algo.save_interval": 1,
    "algo.num_bins": 2,
    "algo.actor_update_interval": 1,
    "algo.noise_zeta_max": 1,
    "env.num_threads": 1,
    "task.decimation": 1,  # physics steps per control step
    "training.dp_ranks": 1,
    "training.mps_learner_thread_percentage": 1,
    "training.mps_collector_thread_percentage": 1,
    "env.seed": 0,
    "algo.seed": 0,
}


# Exact ints that must be <= the given maximum (checked with the minimum, before anything is spawned).
INT_MAXIMUMS: dict[str, int] = {
    "env.seed": MAX_SEED,
    "algo.seed": MAX_SEED,
    "training.mps_learner_thread_percentage": 100,
    "training.mps_collector_thread_percentage": 100,
}

# MPS client limits (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per process): only with cuda_process_sharing=mps.
MPS_THREAD_KEYS = ("training.mps_learner_thread_percentage", "training.mps_collector_thread_percentage")

CHOICES: dict[str, tuple[str, ...]] = {
    "env.sampler": ("uniform", "adaptive"),
    "task.action_bounds": ("joint_limits", "motor_scale"),
    "algo.warmup_actions": ("uniform", "policy"),
    "algo.compile": COMPILE_MODES,
    "training.collector_stream_priority": ("default", "high"),
}

# Set by the owner or by resolution; an override of them fails closed with the reason.
DERIVED_KEYS: dict[str, str] = {
    "training.sim_backend": "declared by the --sim owner; choose the owner with --sim",
    "env.collector_tensor_device": "resolved from training.collector_tensor_device; set that instead",
}
