# d2o developer targets. `make test` is what CI runs (.ci/run).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
MPIEXEC := $(BIN)/mpiexec

# Overridable subsets: make test TESTS=tests/test_x.py NPROCS="1 2"
TESTS  ?=
NPROCS ?= 1 2 3 4
# Per-stage wall-clock guard (seconds) around each pytest run.
STAGE_TIMEOUT ?= 900
PYTEST_OPTS ?= -x -q -p no:cacheprovider --timeout=150
DEMO ?= examples/wiener_filter.py
DEMO_NPROCS ?= 2

LINT_PATHS := d2o tests examples benchmarks tools

# Where ranks > 0 write their output (read by tests/_mpi_runner.py).
export D2O_MPI_LOGDIR ?= $(CURDIR)/.mpi-logs

export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1

# A failed pip install removes .venv/bin/python, so the next make retries it.
.DELETE_ON_ERROR:

.PHONY: venv lint format test test-serial test-mpi demo bench clean

venv: $(BIN)/python

$(BIN)/python: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[mpi,test]"
	@touch $@

# Directories that may not exist yet are skipped so lint works on a partial tree.
lint: venv
	@echo "==> lint: ruff check + ruff format --check"
	$(BIN)/ruff check $(wildcard $(LINT_PATHS))
	$(BIN)/ruff format --check $(wildcard $(LINT_PATHS))

format: venv
	$(BIN)/ruff format $(wildcard $(LINT_PATHS))
	$(BIN)/ruff check --fix $(wildcard $(LINT_PATHS))

test: venv
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test-serial
	@$(MAKE) --no-print-directory test-mpi
	@echo "==> all test stages passed"

test-serial: venv
	@echo "==> tests without MPI (D2O_MPI=0)"
	D2O_MPI=0 timeout -k 10 $(STAGE_TIMEOUT) $(BIN)/python -m pytest $(PYTEST_OPTS) $(TESTS)

# The MPI stages run in d2o's checked mode: global arguments are compared across ranks.
test-mpi: venv
	@set -e; for n in $(NPROCS); do \
	  echo "==> tests under mpiexec -n $$n"; \
	  D2O_CHECK_ARGS=1 timeout -k 10 $(STAGE_TIMEOUT) $(MPIEXEC) -n $$n $(BIN)/python -m mpi4py tests/_mpi_runner.py \
	    $(PYTEST_OPTS) --timeout-method=thread $(TESTS) \
	    || { rc=$$?; \
	         if [ ! -e "$$D2O_MPI_LOGDIR/reported" ]; then \
	           for f in "$$D2O_MPI_LOGDIR"/rank*.log; do [ -e "$$f" ] || continue; \
	             echo "===== tail of $$f ====="; tail -n 40 "$$f"; done; \
	         fi; \
	         echo "==> FAILED under mpiexec -n $$n (exit $$rc)"; exit $$rc; }; \
	done

demo: venv
	@echo "==> demo: mpiexec -n $(DEMO_NPROCS) $(DEMO)"
	$(MPIEXEC) -n $(DEMO_NPROCS) $(BIN)/python $(DEMO)

bench: venv
	@echo "==> benchmarks"
	@set -e; for f in $(wildcard benchmarks/bench_*.py); do \
	  echo "--> $$f"; $(BIN)/python $$f; \
	done

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis .mpi-logs .ruff_cache out
	@echo "(the virtual environment is kept; rm -rf $(VENV) to rebuild it)"
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
