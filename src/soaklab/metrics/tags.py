"""Tag names the trainer writes and the metrics reader looks for (no imports: the trainer reads this).

Namespaces: Perf/ (throughput and phase times, all in ms), Train/ (rewards, episodes, tracking),
Loss/ (optimised losses only), Agent/ (agent state that is not a loss: temperature, Q level, reward
scale), Replay/ and Ingress/ (the runtime's counters). METRIC_SCHEMA_VERSION names this layout.
"""

# 2: Perf/iteration_time (s) became Perf/iteration_ms; alpha_value, q_mean and reward_scale moved
# from Loss/ to Agent/. Version 1 runs are read with their tags renamed (V1_RENAMES).
METRIC_SCHEMA_VERSION = 2
SUPPORTED_SCHEMAS = (1, 2)

ITERATION_TAG = "Perf/iteration_ms"
# With data parallelism rank 0 logs each iteration's scalars combined over the ranks: these are
# summed (counts, the aggregate env-step rate); every other tag is the mean over the ranks.
SUMMED_OVER_RANKS = frozenset({"Perf/total_fps", "Replay/size", "Replay/update_rows", "Ingress/backpressure_waits"})
# The collector's phase times reach the learner's log in lumps: a row carries the time spent since the
# collector's previous publication (on the GPU about every 100 iterations, 0 in between), so their
# steady-state figure is the sum over a window divided by its iterations, never a median.
ACCUMULATED_TAGS = ("Perf/collector_env_step_ms", "Perf/collector_ingress_write_ms", "Perf/collector_action_wait_ms")
# Agent diagnostics that are not losses; every other diagnostic is Loss/<name>.
AGENT_TAGS = {"alpha_value": "Agent/alpha", "q_mean": "Agent/q_mean", "reward_scale": "Agent/reward_scale"}

# Schema 1 tag -> (schema 2 tag, factor applied to its values).
V1_RENAMES = {
    "Perf/iteration_time": (ITERATION_TAG, 1e3),
    "Loss/alpha_value": ("Agent/alpha", 1.0),
    "Loss/q_mean": ("Agent/q_mean", 1.0),
    "Loss/reward_scale": ("Agent/reward_scale", 1.0),
}

# The run identity (config hash, run dir) the trainer writes into its event file as text, so that
# `soaklab validate` can bind the file to its run.
IDENTITY_TAG = "soaklab/run_identity"
# The resolved run config, as JSON text, for TensorBoard's text tab.
RUN_CONFIG_TAG = "soaklab/run_config"


def diagnostic_tag(name: str) -> str:
    return AGENT_TAGS.get(name, f"Loss/{name}")
