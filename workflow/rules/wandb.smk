# W&B (docs/loggers.md): for a run with wandb among its training.loggers, the DAG's verdict, metric
# window and validation go into the training's W&B run (soak target), and, when the play target runs,
# the ONNX policy, the play video and the evaluations too. A W&B failure is written down, never a
# failed rule; the page is the run's W&B folders and its `wandb sync` line in the report.


rule wandb_summary:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        validation=DERIVED["validation"],
        code=code_of("wandb summary"),
    output:
        record="results/{run}/wandb.json",
        page=report("results/{run}/wandb.html", category="{run}", caption="../report/wandb.rst"),
    log:
        "logs/{run}/wandb_summary.log",
    benchmark:
        "benchmarks/rules/{run}/wandb_summary.tsv"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
    shell:
        "{params.soaklab} wandb summary {input.train} --run {wildcards.run} --results results/{wildcards.run}"
        " --logs logs/{wildcards.run} --out {output.record} --html {output.page} > {log} 2>&1"


rule wandb_play:
    input:
        unpack(wandb_played),
        summary=rules.wandb_summary.output.record,
        train=rules.train_soak.output.train,
        code=code_of("wandb summary"),
    output:
        record="results/{run}/wandb-play.json",
    log:
        "logs/{run}/wandb_play.log",
    benchmark:
        "benchmarks/rules/{run}/wandb_play.tsv"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
        evaluations=lambda wc, input: " ".join(
            f"--evaluation {path}" for key, path in input.items() if key.startswith("evaluation_")
        ),
    shell:
        "{params.soaklab} wandb summary {input.train} --run {wildcards.run} --results results/{wildcards.run}"
        " --logs logs/{wildcards.run} {params.evaluations} --artifact {input.onnx} --artifact {input.video}"
        " --out {output.record} > {log} 2>&1"
