"""What `soaklab bench` runs: the backend probe (`backend`, with the finiteness check's cost in
`finite_cost`) and the learner benchmark (`learner`); the CUDA-event and Warp-replay timing loops
(`timing`); and what the benchmark drivers outside the package share: a finished run checked before
it is read (`finished`) and a training under a wall-clock budget (`budgeted`). The drivers themselves
run as files beside their evidence (benchmarks/, scripts/gpu/). Each writes JSON with its command,
machine and commit. No speed figure is ever a timed assertion in a test."""
