# Two commands do everything on a fresh machine:
#   make demo   set up, migrate the bundled example, train it on 2 CPU processes,
#               and print the original's and the migrated run's losses side by side
#   make test   set up and run the whole test suite (what CI runs: .ci/run)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup setup-deepspeed demo test test-deepspeed lint format bench docs clean

setup: $(STAMP)

# The optional DeepSpeed extra, for the ZeRO tests, in an environment of its own
# (.venv-deepspeed): the main one stays as a user without the extra has it, so the
# tests there check that everything but --strategy deepspeed works without it.
# DS_BUILD_OPS=0: no kernels (the runtime steps the script's torch optimizer).
DS_VENV ?= .venv-deepspeed
DS_STAMP := $(DS_VENV)/.installed
DEEPSPEED_TESTS := tests/runtime/test_deepspeed.py tests/runtime/test_deepspeed_user.py \
	tests/runtime/test_cpu_offload.py tests/parity/test_parity_deepspeed.py

setup-deepspeed: $(DS_STAMP)

$(DS_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(DS_VENV)
	$(DS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DS_VENV)/bin/python -m pip install --quiet -c constraints.txt torch
	DS_BUILD_OPS=0 $(DS_VENV)/bin/python -m pip install --quiet -c constraints.txt -e '.[dev,deepspeed]'
	touch $(DS_STAMP)

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
	$(MAKE) test-deepspeed

# The ZeRO lane: the DeepSpeed tests again, in the environment that has DeepSpeed
# (in the main one they skip, saying so).
test-deepspeed: setup-deepspeed
	$(DS_VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=10 $(DEEPSPEED_TESTS)

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
	rm -rf $(VENV) $(DS_VENV) demo-out .pytest_cache
