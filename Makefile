# The two commands of the README. Each sets up its own virtualenv when missing.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.soaklab-installed

.PHONY: soak test lint setup clean-results

setup: $(STAMP)

# Re-run set-up when the dependency list changes.
$(STAMP): pyproject.toml requirements/cpu.lock scripts/setup-venv.sh
	bash scripts/setup-venv.sh $(VENV)
	touch $(STAMP)

soak: $(STAMP)
	$(VENV)/bin/snakemake soak --cores 1

test: $(STAMP)
	$(VENV)/bin/pytest -n $$(( $$(nproc) + 1 )) --dist loadscope --no-loadscope-reorder --durations=15  # a worker per core and one more (modules longest first: tests/conftest.py), for the time tests spend waiting on subprocesses, Slurm and the soak monitor; each test owns its files and processes; the slowest 15 printed (the CI budget)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests
	bash scripts/lint-workflow.sh $(VENV)

clean-results:
	rm -rf results logs benchmarks/rules .snakemake
