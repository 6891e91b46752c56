# CUDA MPS: a "not requested" record, or, for a run with training.cuda_process_sharing: mps,
# the live soaklab-recorded daemon of its GPU, started here if none runs. The daemon is not the
# run's: it outlives the DAG until `soaklab mps stop`.


def _sharing(wildcards):
    value = (run_of(wildcards).get("overrides") or {}).get("training.cuda_process_sharing")
    return shlex.quote(json.dumps(value))


rule mps_start:
    input:
        code=pkg_sources(*CORE_SOURCES, "mps", "settings/contract.py"),
    output:
        record="results/{run}/mps.json",
    params:
        sharing=_sharing,
    group:
        "soak_node"  # on a cluster: mps_start, resolve_config and train_soak share a node
    log:
        "logs/{run}/mps_start.log",
    benchmark:
        "benchmarks/rules/{run}/mps_start.tsv"
    shell:
        "{SOAKLAB} mps ensure --cuda-process-sharing {params.sharing} --out {output.record} > {log} 2>&1"
