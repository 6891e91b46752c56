"""soaklab: reproducible long-run soak benchmarks of off-policy RL runtimes."""
__version__ = "0.1.0"
