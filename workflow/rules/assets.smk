# Asset prefetch: the G1 scene and motion clip, verified against the manifest.


def _assets_flags():
    assets = config.get("assets") or {}
    flags = []
    if assets.get("source"):
        flags += ["--source", assets["source"]]
    if assets.get("clip"):
        flags += ["--clip", assets["clip"]]
    if assets.get("clip_wheel"):
        flags += ["--clip-wheel", assets["clip_wheel"]]
    if assets.get("motion"):
        flags += ["--motion", assets["motion"]]
    return " ".join(shlex.quote(f) for f in flags)


rule prefetch_assets:
    input:
        code=pkg_sources(*CORE_SOURCES, "assets"),
    output:
        manifest="results/assets/manifest.json",
    params:
        flags=_assets_flags(),
    log:
        "logs/assets/prefetch_assets.log",
    benchmark:
        "benchmarks/rules/assets/prefetch_assets.tsv"
    shell:
        "{SOAKLAB} assets pull --robot g1 {params.flags} --manifest {output.manifest} > {log} 2>&1"
