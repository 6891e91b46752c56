"""What the workflow plans with before soaklab is importable: sweeps expanded into runs (sweeps) and
each rule's code inputs (codedeps).

The Snakefile loads these modules by path (workflow/rules/common.smk, `_standalone`), before it
knows the environment is complete: each imports the standard library only (records/plan, loaded the
same way, also Snakemake's own PyYAML and jsonschema), never soaklab; tests/test_structure.py checks
every module common.smk loads that way.
"""
