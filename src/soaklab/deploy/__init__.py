"""A policy run from its ONNX file alone (`soaklab deploy-check`, docs/export.md): the contract read
from the file's metadata and checked, observations built and actions applied from its description
on plain MuJoCo, episodes judged as `soaklab evaluate` judges them.

It imports onnx, onnxruntime, mujoco, numpy and jsonschema, and of soaklab only its errors, the JSON
reader and the schemas: no task, policy or runtime code (tests/test_structure.py), so what it
reproduces, another program can reproduce from the contract too.
"""
