# The soak: the real trainer under the monitor. A failed soak fails the DAG; Snakemake then
# removes soak.json and the run dir, so the monitor also copies its evidence under logs/. The
# monitor's progress lines go to the terminal as well as the log (tee; the shell's pipefail keeps
# the monitor's exit status). The run's metrics and validation go first: they were derived from the
# soak this one replaces, and a failed soak must not leave them standing as a pass.


rule train_soak:
    input:
        run_config=rules.resolve_config.output.run_config,
        mps=rules.mps_start.output.record,
        # the monitor, and the trainer it spawns (`soaklab train`)
        code=code_of("soak", "train"),
    output:
        soak="results/{run}/soak.json",
        train=directory("results/{run}/train"),
    log:
        "logs/{run}/train_soak.log",
    benchmark:
        "benchmarks/rules/{run}/train_soak.tsv"
    group:
        "soak_node"
    # The trainer takes the cores its physics threads are set to (all of them by default) and, for a
    # GPU run, one GPU per data-parallel rank (resources.gpu; default training.dp_ranks, else 1); a
    # cluster executor schedules it by these.
    threads: train_threads
    resources:
        gpu=lambda wc: run_of(wc).get("resources", {}).get("gpu", soak_gpus(wc)),
        mem_mb=lambda wc: run_of(wc).get("resources", {}).get("mem_mb", 16000),
        runtime=lambda wc: run_of(wc).get("resources", {}).get("runtime_minutes", soak_runtime_minutes(wc)),
    params:
        soaklab=SOAKLAB,
        flags=_soak_flags,
        evidence="logs/{run}/soak_evidence",
        derived=derived_of,
        wandb_env=wandb_env_of,
    # trap '' TERM: a scheduler ending the job (Slurm's requeue, preemption, scancel) sends SIGTERM to
    # every process in it. The soak's own handler replaces the ignore; this shell and tee keep it, so
    # the job lasts until the soak has kept its checkpointed run and exited 75, and tee still logs the
    # soak's last lines (docs/sweeps.md, "Preemption and requeue").
    shell:
        "trap '' TERM; rm -rf {params.evidence} {params.derived} && "
        "{params.wandb_env}{params.soaklab} soak --run-config {input.run_config} {params.flags} --log-dir {output.train}"
        " --output {output.soak} --evidence-dir {params.evidence} 2>&1 | tee {log}"
