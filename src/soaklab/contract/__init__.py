"""The tensor-runtime settings contract: knobs, devices, layout, memory budget
(docs/settings-contract.md).

A leaf: pure functions of configuration values and a host description (no torch, no tasks, no
probing). Later stages receive only the frozen values resolved here.
"""
