#!/usr/bin/env bash
# The workflow's lint, as CI runs it: snakefmt formatting, then `snakemake --lint` with one finding
# allowed, the conda/container one (every rule runs the project's one environment; README, "The DAG").
set -uo pipefail
venv=${1:-.venv}
"$venv/bin/snakefmt" --check Snakefile workflow/ || { echo "lint-workflow: run: $venv/bin/snakefmt Snakefile workflow/"; exit 1; }
out=$("$venv/bin/snakemake" --lint 2>&1)
status=$?
findings=$(grep -E '^\s+\* ' <<<"$out" | grep -v 'Specify a conda environment or container for each rule' || true)
if [ -n "$findings" ] || { [ $status -ne 0 ] && ! grep -q '^Lints for' <<<"$out"; }; then
    echo "$out"
    echo "lint-workflow: snakemake --lint found more than the conda/container lint (above)"
    exit 1
fi
echo "lint-workflow: snakefmt clean; snakemake --lint: only the conda/container lint ($(grep -c 'Specify a conda' <<<"$out") rules)"
