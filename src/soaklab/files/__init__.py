"""Files every stage shares: JSON artifacts written atomically (jsonfiles), outputs that never
overwrite inputs (outpaths), the run directory's well-known files (rundir), and the small HTML tables
of the Snakemake report (report)."""
