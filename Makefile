# d2o developer targets. `make test` is what CI runs (.ci/run).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
MPIEXEC := $(BIN)/mpiexec

# Overridable subsets: make test TESTS=tests/test_x.py NPROCS="1 2"
TESTS  ?=
NPROCS ?= 1 2 3 4
# The table-driven numpy tests, the views, halo and program tests also run in the other lazy
# mode at every rank count and without MPI (issue 32): every element-wise call deferred where
# a stage runs the default, ``lazy`` off (D2O_LAZY=0) where it defers everything (LAZY_NPROCS).
# Empty when TESTS names a subset.
ifeq ($(strip $(TESTS)),)
LAZY_TESTS ?= tests/test_numpy_namespace.py tests/test_views.py tests/test_halo.py tests/test_programs.py
endif
# Per-stage wall-clock guard (seconds) around each pytest run.
STAGE_TIMEOUT ?= 900
PYTEST_OPTS ?= -x -q -p no:cacheprovider --timeout=150
DEMO ?= examples/wiener_filter.py
DEMO_NPROCS ?= 2

LINT_PATHS := d2o tests examples benchmarks tools docs/conf.py docs/_scripts

# Where ranks > 0 write their output (read by tests/_mpi_runner.py).
export D2O_MPI_LOGDIR ?= $(CURDIR)/.mpi-logs
# A collective stalled this long (seconds) in a test under mpiexec prints where every rank is
# and aborts the job (d2o's watchdog), before pytest-timeout's --timeout=150 would fire.
export D2O_HANG_TIMEOUT ?= 100

export OMP_NUM_THREADS := 1
# Each stage starts fresh processes (one per rank): let them reuse compiled bytecode (an
# environment's PYTHONDONTWRITEBYTECODE=1 cost each ~4 s of compiling the suite and d2o).
export PYTHONDONTWRITEBYTECODE :=
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1

# A failed pip install removes .venv/bin/python, so the next make retries it.
.DELETE_ON_ERROR:

.PHONY: venv lint format test test-lane-a test-lane-b test-serial test-docs test-mpi test-scale test-wheel docs demo bench clean

venv: $(BIN)/python

$(BIN)/python: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[mpi,test]"
	@touch $@

# The docs extras (Sphinx, numpydoc, MyST), installed into the same venv on first `make docs`
# and again whenever the venv is refreshed.
DOCS_STAMP := $(VENV)/.docs-extras

$(DOCS_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[docs]"
	@touch $@

# Directories that may not exist yet are skipped so lint works on a partial tree.
lint: venv
	@echo "==> lint: ruff check + ruff format --check + mypy + lint-imports (the layers)"
	$(BIN)/ruff check $(wildcard $(LINT_PATHS))
	$(BIN)/ruff format --check $(wildcard $(LINT_PATHS))
	$(BIN)/mypy
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format $(wildcard $(LINT_PATHS))
	$(BIN)/ruff check --fix $(wildcard $(LINT_PATHS))

# The stages that keep one core busy run two at a time (two lanes; each lane's output
# shows when it ends), then the MPI stages from 2 ranks on, which take every core.
test: venv $(DOCS_STAMP)
	@echo "==> two lanes at once (one core each; each lane's output shows when it ends):"
	@echo "    [lint, doctests, docs, mpiexec -n 1] and [without MPI, wheel]"
	@$(MAKE) --no-print-directory -j2 --output-sync=recurse test-lane-a test-lane-b
	@$(MAKE) --no-print-directory test-mpi NPROCS="$(filter-out 1,$(NPROCS))"
	@echo "==> all test stages passed"

test-lane-a: venv $(DOCS_STAMP)
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test-docs
	@$(MAKE) --no-print-directory docs
	@$(MAKE) --no-print-directory test-mpi NPROCS="$(filter 1,$(NPROCS))"

test-lane-b: venv
	@$(MAKE) --no-print-directory test-serial
	@$(MAKE) --no-print-directory test-wheel

test-serial: venv
	@echo "==> tests without MPI (D2O_MPI=0)"
	D2O_MPI=0 timeout -k 10 $(STAGE_TIMEOUT) $(BIN)/python -m pytest $(PYTEST_OPTS) $(TESTS)
ifneq ($(strip $(LAZY_TESTS)),)
	@echo "==> without MPI, every element-wise call deferred (D2O_LAZY=1): $(LAZY_TESTS)"
	D2O_MPI=0 D2O_LAZY=1 timeout -k 10 $(STAGE_TIMEOUT) $(BIN)/python -m pytest $(PYTEST_OPTS) $(LAZY_TESTS)
endif

# The docstrings' and the docs pages' examples, without MPI and under mpiexec -n 2 (they are
# written to print the same on any number of processes; not in checked mode, whose extra
# argument check shows in the trace examples), and the paper listings' outputs that the docs
# show (docs/_listings, recorded under mpiexec; the docs build itself never runs MPI).
DOCTESTS := --doctest-modules --doctest-glob='*.md' d2o $(wildcard docs/*.md)

test-docs: venv
	@echo "==> doctests without MPI (D2O_MPI=0)"
	D2O_MPI=0 timeout -k 10 $(STAGE_TIMEOUT) $(BIN)/python -m pytest $(PYTEST_OPTS) $(DOCTESTS)
	@echo "==> doctests under mpiexec -n 2"
	timeout -k 10 $(STAGE_TIMEOUT) $(MPIEXEC) -n 2 $(BIN)/python -m mpi4py tests/_mpi_runner.py \
	  $(PYTEST_OPTS) --timeout-method=thread $(DOCTESTS)
	@echo "==> the paper listings' outputs shown in the docs"
	timeout -k 10 $(STAGE_TIMEOUT) $(BIN)/python docs/_scripts/listings.py --check

# The MPI stages on CHECKED_NPROCS ranks run in d2o's checked mode (global arguments are
# compared across ranks); the others in the default, unchecked mode that users run (checked
# mode costs every operation an agreement and a digest: measured at -n 4, 22 % of a stage).
CHECKED_NPROCS ?= 1 2
# The MPI stages on LAZY_NPROCS ranks defer every element-wise call (D2O_LAZY=1: `lazy_min`
# 0, so the suite's small arrays take the deferred, fused path); the others run the default
# (`lazy` on from 524288 elements: the suite's arrays run eagerly).
LAZY_NPROCS ?= 1 3
# More ranks than cores (3 and 4 on a 2-core machine): MPICH's waits busy-poll, so a rank
# waiting in a collective spins on the core that the rank it waits for needs.
# MPIR_CVAR_ENABLE_HEAVY_YIELD=1 (a waiting rank sleeps) shortens these stages on a machine
# loaded by other work but lengthened the 3-rank stage on the idle one (419 s against 294 s
# for fewer tests): off by default, `make test OVERSUBSCRIBED_ENV=MPIR_CVAR_ENABLE_HEAVY_YIELD=1`.
# From 3 ranks on, tests/conftest.py also thins the dtype sweeps (each keeps its widest and
# narrowest floating dtype); the full sweeps run without MPI and at 1 and 2 ranks
# (D2O_TESTS_ALL_DTYPES=1: at every rank count).  See docs/development.md.
OVERSUBSCRIBED_ENV ?=
# Each rank bound to one core (hydra places them round-robin): a rank that waits then stays
# beside the same rank instead of migrating (measured at -n 4, four test files: 41-43 s
# against 46-47 s unbound).  MPI_BIND= leaves the placement to the kernel; where hydra
# cannot bind (it then refuses to launch), the stages run unbound.
MPI_BIND ?= -bind-to core
# (getconf, not nproc: nproc counts OMP_NUM_THREADS, which this Makefile sets to 1)
NCORES ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
test-mpi: venv
	@set -e; bind="$(MPI_BIND)"; \
	if [ -n "$$bind" ] && ! $(MPIEXEC) $$bind -n 1 true >/dev/null 2>&1; then \
	  echo "==> mpiexec $$bind fails here: the ranks run unbound"; bind=; fi; \
	for n in $(NPROCS); do \
	  extra=; [ $$n -le $(NCORES) ] || extra="$(OVERSUBSCRIBED_ENV)"; \
	  chk=0; case " $(CHECKED_NPROCS) " in *" $$n "*) chk=1;; esac; \
	  lazy=; other=1; case " $(LAZY_NPROCS) " in *" $$n "*) lazy=1; other=0;; esac; \
	  for files in all $(if $(strip $(LAZY_TESTS)),pair); do \
	  if [ $$files = all ]; then tests="$(TESTS)"; mode=$${lazy:+D2O_LAZY=1}; \
	    echo "==> tests under mpiexec -n $$n ($$([ $$chk = 1 ] && echo checked || echo unchecked) mode$${lazy:+, every element-wise call deferred})$${extra:+ ($$extra: more ranks than cores)}"; \
	  else tests="$(LAZY_TESTS)"; mode=D2O_LAZY=$$other; \
	    echo "==> under mpiexec -n $$n, $$([ $$other = 1 ] && echo every element-wise call deferred || echo lazy off) (D2O_LAZY=$$other): $$tests"; fi; \
	  env $$extra D2O_CHECK_ARGS=$$chk $$mode timeout -k 10 $(STAGE_TIMEOUT) $(MPIEXEC) $$bind -n $$n $(BIN)/python -m mpi4py tests/_mpi_runner.py \
	    $(PYTEST_OPTS) --timeout-method=thread $$tests \
	    || { rc=$$?; \
	         if [ ! -e "$$D2O_MPI_LOGDIR/reported" ]; then \
	           for f in "$$D2O_MPI_LOGDIR"/rank*.log; do [ -e "$$f" ] || continue; \
	             echo "===== tail of $$f ====="; tail -n 40 "$$f"; done; \
	         fi; \
	         echo "==> FAILED under mpiexec -n $$n (exit $$rc)"; exit $$rc; }; \
	  done; \
	done

# The core, the numpy namespace and the communication table at 16 processes (issue 30);
# outside `make test`: 16 ranks oversubscribe a 2-core machine many times over.
SCALE_NPROCS ?= 16
SCALE_TESTS ?= tests/test_core.py tests/test_numpy_namespace.py tests/test_comm_table.py \
  tests/test_costmodel.py tests/test_memory_table.py
test-scale: venv
	@echo "==> tests under mpiexec -n $(SCALE_NPROCS): $(SCALE_TESTS)"
	extra=; [ $(SCALE_NPROCS) -le $(NCORES) ] || extra="$(OVERSUBSCRIBED_ENV)"; \
	env $$extra D2O_CHECK_ARGS=1 timeout -k 10 3600 $(MPIEXEC) -n $(SCALE_NPROCS) $(BIN)/python -m mpi4py \
	  tests/_mpi_runner.py $(PYTEST_OPTS) --timeout=900 --timeout-method=thread $(SCALE_TESTS)

# The release round trip: build the sdist and, from it, the wheel; twine-check both; install
# the wheel with its `mpi` extra (numpy, mpi4py, mpich from PyPI) into a fresh virtual
# environment and run tools/wheel_smoke.py under that environment's mpiexec -n 2 from a
# temporary directory, so that the installed wheel is imported, not the source tree.
# Kept fast: the build uses the venv's setuptools (no isolated build environments; `build`
# still checks build-system.requires) and pip skips byte-compiling what it installs.
test-wheel: venv
	@echo "==> wheel: build, twine check, install into a fresh venv, mpiexec -n 2"
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/python -m build --no-isolation --outdir "$$tmp/dist" . >"$$tmp/build.log" 2>&1 \
	  || { cat "$$tmp/build.log"; exit 1; }; \
	$(BIN)/twine check --strict "$$tmp"/dist/*; \
	$(PYTHON) -m venv --without-pip "$$tmp/venv"; \
	$(BIN)/pip --python "$$tmp/venv/bin/python" install -q --no-compile "$$(ls "$$tmp"/dist/*.whl)[mpi]"; \
	cp tools/wheel_smoke.py "$$tmp/"; cd "$$tmp"; \
	env -u PYTHONPATH -u D2O_MPI timeout -k 10 $(STAGE_TIMEOUT) \
	  venv/bin/mpiexec -n 2 venv/bin/python wheel_smoke.py >out.txt; \
	printf '%s\n' 'rank 0 of 2: rows 0:2, sum 200.9384' 'rank 1 of 2: rows 2:4, sum 200.9384' >expected.txt; \
	diff -u expected.txt out.txt || { echo "==> FAILED: unexpected output of the installed wheel"; exit 1; }; \
	cat expected.txt

# The documentation site, warnings as errors, never MPI; -E re-reads every page so that no
# warning of an earlier build is skipped.  Open docs/_build/html/index.html.
docs: $(DOCS_STAMP)
	@echo "==> docs: sphinx-build -W into docs/_build/html"
	D2O_MPI=0 $(BIN)/sphinx-build -W --keep-going -E -q -b html docs docs/_build/html
	@echo "==> docs built: docs/_build/html/index.html"

demo: venv
	@echo "==> demo: mpiexec -n $(DEMO_NPROCS) $(DEMO)"
	$(MPIEXEC) -n $(DEMO_NPROCS) $(BIN)/python $(DEMO)

# Every benchmark, run plainly: each launches its own mpiexec runs (1 and 2 processes where
# its tables show both), prints its tables and writes docs/_data/bench/NAME.json, from which
# `make docs` generates the performance page.  make bench BENCH="core sort" runs a subset.
BENCH ?= $(patsubst benchmarks/bench_%.py,%,$(wildcard benchmarks/bench_*.py))

bench: venv
	@echo "==> benchmarks: $(BENCH)"
	@set -e; for b in $(BENCH); do \
	  echo "--> benchmarks/bench_$$b.py"; $(BIN)/python benchmarks/bench_$$b.py; \
	done
	@echo "==> written: docs/_data/bench/*.json (commit them; make docs shows them)"

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis .mpi-logs .ruff_cache .mypy_cache out docs/_build docs/_generated
	@echo "(the virtual environment is kept; rm -rf $(VENV) to rebuild it)"
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
