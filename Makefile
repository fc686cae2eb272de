# Two commands do everything on a fresh machine:
#   make demo   set up, migrate the bundled example, train it on 2 CPU processes,
#               and print the original's and the migrated run's losses side by side
#   make test   set up and run the whole test suite (what CI runs: .ci/run)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup setup-deepspeed demo test lint format bench docs clean

setup: $(STAMP)

# The optional DeepSpeed extra, for the ZeRO tests (tests/runtime/test_deepspeed.py
# skips without it). Not part of `setup`: building its sdist took about 60 s in a
# fresh venv, which CI's time budget has no room for. DS_BUILD_OPS=0: no kernels.
setup-deepspeed: setup
	DS_BUILD_OPS=0 $(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,deepspeed]'

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt torch
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/python examples/demo.py

# One pytest worker per core (pytest-xdist), each test file on one worker: the
# files' module fixtures start their torchrun jobs once, and a worker waiting on a
# job leaves its core to the other. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= auto

test: setup lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=30

lint: setup
	$(BIN)/black --check accel_migrate tests bench examples
	$(BIN)/ruff check accel_migrate tests bench examples

format: setup
	$(BIN)/black accel_migrate tests bench examples
	$(BIN)/ruff check --fix accel_migrate tests bench examples

docs: setup
	$(BIN)/python -m accel_migrate.docgen

bench: setup
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache
