"""Every benchmark: what `soaklab bench` runs (backend, learner), the timing loops (timing), and the
benchmark drivers run as modules (`python -m soaklab.bench.<name>`): the learning curves, the GPU
phase breakdowns, the scaling and lever tables, the CPU overhead probe, the GPU warm-up. Each writes
JSON (and a PNG where a curve says more) with its command, machine and commit; the evidence lives
under benchmarks/, apart from this code. No speed figure is ever a timed assertion in a test."""
