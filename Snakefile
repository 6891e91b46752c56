# soaklab: one DAG from asset prefetch to validated soak evidence (docs/dag.md).
#
#   snakemake soak --cores 1                                # default CPU run
#   snakemake soak --cores 1 --configfile config/gpu.yaml   # canonical GPU soak
#   snakemake soak --cores 1 -R extract_metrics             # rerun one step (and what follows)
#   snakemake soak --cores 1 --report report.html           # plot, metrics and validation table
#   snakemake sweep --cores 2 --keep-going --configfile config/sweep-cpu.yaml   # many runs, one table
#   snakemake sweep --profile profiles/slurm --configfile config/sweep-cpu.yaml  # the same on Slurm
#
# Every rule calls the `soaklab` CLI with the interpreter running Snakemake, so
# the DAG uses the same environment as `make soak` and `make test`.

import subprocess
import time

# When this invocation started: a comparison older than this was not made by it (onerror).
STARTED = time.time()

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflow/rules/config_checks.smk"


validate(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))


include: "workflow/rules/common.smk"


wildcard_constraints:
    run=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    sim="|".join(SIMS),


report: "workflow/report/workflow.rst"


# Default target: every run in `soak_runs`, soaked, measured and validated.
rule soak:
    default_target: True
    input:
        expand("results/{run}/validation.json", run=config["soak_runs"]),
        expand("results/{run}/wandb.json", run=WANDB_SOAK_RUNS),


# Optional: every soaked run's policy as ONNX (with its parity check) and, a tracking run, evaluated
# from the clip's first frame on each simulator. Needs no screen: `play` adds the video, which needs an
# offscreen GL (EGL or OSMesa) that a headless GPU machine may lack.
rule evaluate:
    input:
        expand("results/{run}/policy.onnx", run=config["soak_runs"]),
        expand("results/{run}/evaluation-{sim}.json", run=TRACKING_SOAK_RUNS, sim=SIMS),


# Optional: `evaluate` and every soaked run's rendered playback.
rule play:
    input:
        rules.evaluate.input,
        expand("results/{run}/play.mp4", run=config["soak_runs"]),
        expand("results/{run}/wandb-play.json", run=WANDB_SOAK_RUNS),


# Every run of every sweep under `sweeps:`, soaked and validated, then one table per sweep
# (results/sweeps/{sweep}/summary.{csv,html,png}). Run with --keep-going so one failed run fails
# only its own branch (docs/sweeps.md).
rule sweep:
    input:
        expand("results/sweeps/{sweep}/summary.csv", sweep=SWEEPS),


# Every record in REPRODUCE (every cpu record, or those named with --config reproduce=NAME) rerun
# through the rules above and compared with its artifacts of record (docs/records.md): the workflow
# fails when a comparison's verdict is `fail`, after writing results/reproduce/{record}/comparison.*.
rule reproduce:
    input:
        expand("results/reproduce/{record}/verdict.txt", record=REPRODUCE),


# Rules that stay on the host running Snakemake under a cluster executor: the assets pull needs the
# network (compute nodes often have none), the rest are targets or read a few small files.
localrules:
    soak,
    play,
    sweep,
    reproduce,
    prefetch_assets,
    sweep_summary,
    compare_record,
    reproduce_verdict,
    bisect,


# The verdict of every run, its figures and where to look, whatever the outcome.
onsuccess:
    shell(summary_command())


onerror:
    shell(summary_command() + " || true")
    # A failed branch keeps sweep_summary from running: write each asked-for sweep's table here, the
    # failed runs marked with their classification.
    # (subprocess, not shell(): the plan is JSON, whose braces shell() would read as placeholders)
    for name in targeted_sweeps():
        subprocess.run(sweep_summary_command(name, *sweep_summary_paths(name)), shell=True, check=False)
    # A reproduction that stopped before its comparison says so (a finished comparison stays as written).
    for name in targeted_records():
        subprocess.run(incomplete_command(name), shell=True, check=False)


include: "workflow/rules/assets.smk"
include: "workflow/rules/config.smk"
include: "workflow/rules/mps.smk"
include: "workflow/rules/soak.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/play.smk"
include: "workflow/rules/sweeps.smk"
include: "workflow/rules/records.smk"
include: "workflow/rules/wandb.smk"
