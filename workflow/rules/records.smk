# Benchmark records (docs/records.md): each record's seeds run through the rules above as ordinary
# runs (rec-<record>-seed<N>); compare_record reads them against the record's artifacts and writes
# the comparison; reproduce_verdict fails the workflow on a `fail`, after the comparison is written.


rule compare_record:
    input:
        record=record_inputs,
        code=code_of("record compare"),
    output:
        comparison="results/reproduce/{record}/comparison.json",
        page=report(
            "results/reproduce/{record}/comparison.html", category="reproduce", caption="../report/comparison.rst"
        ),
    log:
        "logs/reproduce/{record}/compare_record.log",
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
        records=RECORDS_DIR,
    shell:
        "{params.soaklab} record compare {wildcards.record} --records {params.records} --results results"
        " --out {output.comparison} --html {output.page} 2>&1 | tee {log}"


rule reproduce_verdict:
    input:
        comparison=rules.compare_record.output.comparison,
        code=code_of("record verdict"),
    output:
        verdict="results/reproduce/{record}/verdict.txt",
    log:
        "logs/reproduce/{record}/reproduce_verdict.log",
    threads: 1
    resources:
        **LIGHT_RESOURCES,
    params:
        soaklab=SOAKLAB,
    shell:
        "{params.soaklab} record verdict {input.comparison} --out {output.verdict} 2>&1 | tee {log}"


# Optional: the first commit at which a record's reproduction changes, each commit reproduced in a
# worktree of its own with its own environment (docs/records.md, "Bisect"):
#   snakemake bisect --cores 1 --config record=ci-dag good=REV bad=REV
# No output: a bisection keeps its own state (.soaklab/bisect/) and resumes from it when asked again.
rule bisect:
    log:
        "logs/bisect.log",
    params:
        soaklab=SOAKLAB,
        args=lambda wildcards: bisect_args(),
    shell:
        "{params.soaklab} record bisect {params.args} 2>&1 | tee {log}"
