# The optional `play` target (docs/export.md): each soaked run's policy as ONNX with its parity
# check, and a rendered playback with its contact sheet in the report; a tracking run's policy is
# also evaluated from the clip's first frame (docs/learning.md). Soaks never render: this runs only
# when asked for, after the run's soak.


rule export_policy:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        code=code_of("export"),
    output:
        onnx="results/{run}/policy.onnx",
        parity="results/{run}/policy.parity.json",
    log:
        "logs/{run}/export_policy.log",
    benchmark:
        "benchmarks/rules/{run}/export_policy.tsv"
    threads: 1
    resources:
        **PLAY_RESOURCES,
    params:
        soaklab=SOAKLAB,
    shell:
        "{params.soaklab} export {input.train} --out {output.onnx} > {log} 2>&1"


rule play_policy:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        code=code_of("play"),
    output:
        video=report("results/{run}/play.mp4", category="{run}", caption="../report/play_video.rst"),
        sheet=report("results/{run}/play.png", category="{run}", caption="../report/play_sheet.rst"),
        record="results/{run}/play.json",
    log:
        "logs/{run}/play_policy.log",
    benchmark:
        "benchmarks/rules/{run}/play_policy.tsv"
    threads: 1
    resources:
        **PLAY_RESOURCES,
    params:
        soaklab=SOAKLAB,
        seconds=config["play"]["seconds"],
    shell:
        "{params.soaklab} play {input.train} --out {output.video} --seconds {params.seconds} > {log} 2>&1"


# On each backend: the run's own and, sim-to-sim, the other one. MuJoCo Warp steps on warp's CPU
# device where there is no GPU (soaklab.sim.mjwarp), so a CPU machine judges both.
rule evaluate_policy:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        code=code_of("evaluate"),
    output:
        json="results/{run}/evaluation-{sim}.json",
        html=report(
            "results/{run}/evaluation-{sim}.html",
            category="{run}",
            caption="../report/evaluation.rst",
        ),
    log:
        "logs/{run}/evaluate_policy-{sim}.log",
    benchmark:
        "benchmarks/rules/{run}/evaluate_policy-{sim}.tsv"
    threads: 1
    resources:
        **PLAY_RESOURCES,
    params:
        soaklab=SOAKLAB,
        episodes=config["play"]["evaluation_episodes"],
    shell:
        "{params.soaklab} evaluate {input.train} --sim {wildcards.sim} --episodes {params.episodes} "
        "--out {output.json} --html {output.html} > {log} 2>&1"
