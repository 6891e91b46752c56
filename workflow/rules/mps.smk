# CUDA MPS: a "not requested" record, or, for a run resolved with training.cuda_process_sharing: mps,
# the live soaklab-recorded daemon of its GPU, started here if none runs. The daemon is not the
# run's: it outlives the DAG until `soaklab mps stop`.


rule mps_start:
    input:
        run_config=rules.resolve_config.output.run_config,
        code=code_of("mps ensure"),
    output:
        record="results/{run}/mps.json",
    log:
        "logs/{run}/mps_start.log",
    benchmark:
        "benchmarks/rules/{run}/mps_start.tsv"
    group:
        "soak_node"  # on a cluster: resolve_config, mps_start and train_soak share a node
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
    shell:
        "{params.soaklab} mps ensure --run-config {input.run_config} --out {output.record} > {log} 2>&1"
