#!/usr/bin/env bash
# The two-GPU scaling visit of benchmarks/archive/gpu/dp-x2/ (its recorded command): dp_scaling.sh at 2 GPUs.
exec bash "$(dirname "$0")/dp_scaling.sh" 2 "$@"
