"""The soak JSON's context: what a deterministic run adds to it (docs/determinism.md)."""

from __future__ import annotations

import jsonschema
import torch

from soaklab.records.snapshot import machine_kind
from soaklab.schemas import load_schema
from soaklab.soak.context import determinism_context


def test_a_deterministic_runs_context_names_the_cuda_its_kind_names():
    context = determinism_context()
    assert context == {"enabled": True, "cuda": torch.version.cuda}  # None on a CPU build of torch
    schema = load_schema("soak")["properties"]["context"]["properties"]["determinism"]
    jsonschema.validate(context, schema)
    jsonschema.validate(None, schema)  # a default run's
    gpus = [{"name": "NVIDIA H200", "driver": "570.124.06", "uuid": "GPU-0"}]
    assert machine_kind({"gpus": gpus, "determinism": {**context, "cuda": "12.8"}}, "gpu") == \
        "gpu: NVIDIA H200 x1, driver 570.124.06, CUDA 12.8, deterministic"
