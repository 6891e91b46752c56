# Asset prefetch: the G1 scene and motion clip, verified against the manifest.


rule prefetch_assets:
    input:
        code=code_of("assets pull"),
    output:
        manifest="results/assets/manifest.json",
    log:
        "logs/assets/prefetch_assets.log",
    benchmark:
        "benchmarks/rules/assets/prefetch_assets.tsv"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
        flags=_assets_flags(),
    shell:
        "{params.soaklab} assets pull --robot g1 {params.flags} --manifest {output.manifest} > {log} 2>&1"
