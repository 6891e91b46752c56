# Sweeps (docs/sweeps.md): every run of a `sweeps:` entry soaked like any other run, then one table.
# sweep_summary runs when every branch of the sweep succeeded; under --keep-going a failed branch
# never lets it run, so the workflow's error handler (Snakefile: onerror) writes the same table with
# the failed runs marked and classified.


rule sweep_summary:
    input:
        validations=lambda wc: expand("results/{run}/validation.json", run=sweep_of(wc).run_names),
        code=code_of("sweep-summary"),
    output:
        csv="results/sweeps/{sweep}/summary.csv",
        html=report("results/sweeps/{sweep}/summary.html", category="sweeps", caption="../report/sweep_table.rst"),
        plot=report("results/sweeps/{sweep}/summary.png", category="sweeps", caption="../report/sweep_plot.rst"),
    log:
        "logs/sweeps/{sweep}/sweep_summary.log",
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        command=lambda wc, output: sweep_summary_command(wc.sweep, output.csv, output.html, output.plot),
    shell:
        "{params.command} > {log} 2>&1"
