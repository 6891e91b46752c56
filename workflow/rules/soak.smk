# The soak: the real trainer under the monitor. A failed soak fails the DAG; Snakemake then
# removes soak.json and the run dir, so the monitor also copies its evidence under logs/.


def _soak_flags(wildcards):
    flags = []
    for key, value in run_of(wildcards)["soak"].items():  # the config schema requires every key
        flags += [f"--{key.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(f) for f in flags)


rule train_soak:
    input:
        run_config=rules.resolve_config.output.run_config,
        code=pkg_sources(*CORE_SOURCES, "config", "settings", "conf", "tasks", "sim", "rl", "soak", "hostinfo.py",
                         "capture.py"),
    output:
        soak="results/{run}/soak.json",
        train=directory("results/{run}/train"),
    params:
        flags=_soak_flags,
        evidence="logs/{run}/soak_evidence",
    group:
        "soak_node"
    log:
        "logs/{run}/train_soak.log",
    benchmark:
        "benchmarks/rules/{run}/train_soak.tsv"
    shell:
        "rm -rf {params.evidence} && "
        "{SOAKLAB} soak --run-config {input.run_config} {params.flags} --log-dir {output.train}"
        " --output {output.soak} --evidence-dir {params.evidence} > {log} 2>&1"
