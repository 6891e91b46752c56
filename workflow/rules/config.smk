# Config resolution under the tensor-runtime settings contract: run_config.json.


rule resolve_config:
    input:
        manifest=rules.prefetch_assets.output.manifest,
        mps=rules.mps_start.output.record,
        code=pkg_sources(*CORE_SOURCES, "config", "settings", "conf", "tasks", "mps"),
    output:
        run_config="results/{run}/run_config.json",
    params:
        args=run_args,
        log_dir="results/{run}/train",
    group:
        "soak_node"
    log:
        "logs/{run}/resolve_config.log",
    benchmark:
        "benchmarks/rules/{run}/resolve_config.tsv"
    shell:
        "{SOAKLAB} config resolve {params.args} training.log_dir={params.log_dir}"
        " --assets-manifest {input.manifest} --mps-record {input.mps} --out {output.run_config} > {log} 2>&1"
