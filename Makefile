# Two commands for a fresh machine:
#   make demo   set up a virtual environment, compile the kernels, run the workflow on the bundled demo data
#               and write its report (report.html)
#   make test   set up the same environment and run the tests
PYTHON ?= python3
VENV ?= .venv
CORES ?= 2

.PHONY: demo test setup

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

# `gpualign compile` compiles every kernel once into numba's cache (~/.cache/gpualign, or NUMBA_CACHE_DIR),
# which the workflow's jobs and `gpualign map` share: a minute or two the first time, seconds afterwards.
demo: setup
	$(VENV)/bin/gpualign compile
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH snakemake --cores $(CORES) --resources gpu=1
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH snakemake --report report.html

test: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH python -m pytest -q
