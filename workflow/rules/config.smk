# Config resolution under the tensor-runtime settings contract: run_config.json. The one place a
# run is resolved; every later rule (and the trainer) loads this record.


rule resolve_config:
    input:
        manifest=rules.prefetch_assets.output.manifest,
        code=code_of("config resolve"),
    output:
        run_config="results/{run}/run_config.json",
    log:
        "logs/{run}/resolve_config.log",
    benchmark:
        "benchmarks/rules/{run}/resolve_config.tsv"
    group:
        "soak_node"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
        args=run_args,
        log_dir="results/{run}/train",
    shell:
        "{params.soaklab} config resolve {params.args} training.log_dir={params.log_dir}"
        " --assets-manifest {input.manifest} --out {output.run_config} > {log} 2>&1"
