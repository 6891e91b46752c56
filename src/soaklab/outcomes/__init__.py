"""What runs produced, read from their files: each DAG run's outcome (runs), a sweep's table
(sweep_summary) and a soak's artifacts against the pass table (validation). None of it imports the
runtime."""
