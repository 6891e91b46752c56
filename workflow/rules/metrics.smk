# Metric extraction and artifact validation: cheap, rerun alone with -R extract_metrics.


rule extract_metrics:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        code=code_of("metrics"),
    output:
        metrics=DERIVED["metrics"],
        csv=DERIVED["csv"],
        plot=report(DERIVED["plot"], category="{run}", caption="../report/metrics_plot.rst"),
        table=report(DERIVED["table"], category="{run}", caption="../report/metrics_table.rst"),
    log:
        "logs/{run}/extract_metrics.log",
    benchmark:
        "benchmarks/rules/{run}/extract_metrics.tsv"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
        last=20,
    shell:
        "{params.soaklab} metrics {input.train} --last {params.last} --out {output.metrics} --csv {output.csv}"
        " --plot {output.plot} --html {output.table} > {log} 2>&1"


rule validate_artifacts:
    input:
        soak=rules.train_soak.output.soak,
        train=rules.train_soak.output.train,
        run_config=rules.resolve_config.output.run_config,
        metrics=rules.extract_metrics.output.metrics,
        code=code_of("validate"),
    output:
        validation=DERIVED["validation"],
        table=report(DERIVED["validation_table"], category="{run}", caption="../report/validation.rst"),
    log:
        "logs/{run}/validate_artifacts.log",
    benchmark:
        "benchmarks/rules/{run}/validate_artifacts.tsv"
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
    shell:
        "{params.soaklab} validate --soak {input.soak} --run-dir {input.train} --metrics {input.metrics}"
        " --run-config {input.run_config} --out {output.validation} --html {output.table} > {log} 2>&1"
