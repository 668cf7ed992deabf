# make book      : build the rendered book into _build/html (needs npm once, for MathJax)
# make test      : ruff; the strict book build (every page executed once) beside
#                  the package's tests; then nbval over the notebooks the build
#                  executed (no page runs twice), the rendered HTML, every page in
#                  headless Chromium (needs chromium); the slowest ten tests,
#                  pages and cells; one closing line
# make expected  : rewrite tests/expected_outputs/ from the last build's executed
#                  notebooks (executes nothing); review with git diff
# make lab       : the book as live notebooks in JupyterLab (jupytext, ipywidgets)
# make test-fast : ruff and the tests most likely to catch a broken builder,
#                  transport or page helper (under 5 minutes on 2 cores)
# make test-gpu  : every test that needs a CUDA GPU (marker gpu): CUDA tensors,
#                  NCCL, symmetric memory; without a GPU each says it was skipped
# Each target creates .venv and installs what it needs on first use, after
# checking that the machine has what pip cannot install (python3's venv, npm,
# chromium): a missing one stops the target at once, saying what to install.

PYTHON ?= python3
# bash, so that a piped recipe fails when its first command does
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# pip, quiet: no progress, no setuptools banner about editable installs
PIP := PYTHONWARNINGS=ignore $(PY) -m pip
# The torch the book was written against (pip's CPU or CUDA wheel for the
# platform; failing that, any torch the platform offers).
TORCH_SPEC ?= torch==2.13.0

# MathJax is served from the build, not a CDN: the rendered book (and the
# browser test) must work offline. npm is the registry that ships it.
MATHJAX_VERSION ?= 3.2.2
MATHJAX := _build/mathjax/mathjax/tex-chtml.js

.PHONY: test test-fast test-gpu book fresh-book lab lint format clean expected needs-python needs-npm needs-chromium

# What pip cannot install, checked before anything starts.
needs-python:
	@$(PYTHON) -c "import venv, ensurepip" 2>/dev/null || { echo "make: $(PYTHON) with its venv module is needed to create $(VENV) (Debian: apt-get install python3-venv)" >&2; exit 1; }
needs-npm:
	@command -v npm >/dev/null 2>&1 || test -f $(MATHJAX) || { echo "make: npm is needed once, to unpack MathJax for the book (Debian: apt-get install npm)" >&2; exit 1; }
needs-chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { echo "make test: chromium is needed for the browser test (Debian: apt-get install chromium); make test-fast runs without it" >&2; exit 1; }

$(VENV)/.base: | needs-python
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_SPEC)" || $(PIP) install -q torch
	touch $@

$(VENV)/.test: $(VENV)/.base pyproject.toml
	$(PIP) install -q -e ".[test]"
	touch $@

$(VENV)/.book: $(VENV)/.base pyproject.toml
	$(PIP) install -q -e ".[book]"
	touch $@

# JupyterLab opens every .md page of the book as a notebook (jupytext's
# default viewer, set in the venv's lab settings) on the venv's Python.
$(VENV)/.lab: $(VENV)/.base pyproject.toml tools/lab_settings.json
	$(PIP) install -q -e ".[lab]"
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/lab_settings.json $(VENV)/share/jupyter/lab/settings/overrides.json
	touch $@

lint: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# pytest-xdist workers (tests that start processes are independent: each
# worker has its own pools, stores and /dev/shm names). Work units
# (--dist loadgroup, tests/worksplit.py): a test file stays on one worker, so
# its pools of gloo processes (1 to 8 of them, a torch import each) start
# once, not once per worker; test_dist.py is split by world size (no pool
# starts twice); each torchrun job of test_torchfr_jobs.py and test_faults.py
# is a unit of its own. The longest units start first and the torchrun jobs
# come last, so the workers end together; the report prints each worker's
# seconds.
JOBS ?= 2
REPORTS := _build/junit
PYTEST := $(PY) -m pytest -q -ra -n $(JOBS) --dist loadgroup

# `make test`, each page executed once:
# 1. the strict build on a cleared execution cache (warnings and cell errors
#    fail it), alone on the machine: the pages measure this machine, and a
#    loaded one bends what they measure;
# 2. every test but the one-page nbval file, on $(JOBS) pytest-xdist workers:
#    the package's tests, tests/test_build.py (a throwaway book of its own),
#    and what reads the build: nbval over the notebooks it executed
#    (tests/test_outputs.py: every page ran without error, every cell tagged
#    nbval-check-output printed its expected output), no machine path in the
#    HTML (tests/test_rendered.py), every page in Chromium (tests/test_browser.py);
# 3. the slowest ten tests, pages and cells, and `summary: N passed, N failed`.
# A failed build does not stop the tests; the target fails at the end.
# pytest tests/test_notebooks.py -k PAGE runs one page under nbval itself.
test: needs-python needs-npm needs-chromium lint $(VENV)/.test $(VENV)/.book $(VENV)/.lab $(MATHJAX)
	rm -rf _build/.jupyter_cache _build/.doctrees _build/html _build/jupyter_execute _build/answers _build/reports $(REPORTS)
	mkdir -p $(REPORTS)
	@status=0; \
	$(MAKE) --no-print-directory book || { status=1; echo "make test: the book build failed (above); the tests run all the same"; }; \
	$(PYTEST) --junitxml=$(REPORTS)/tests.xml --ignore=tests/test_notebooks.py tests || status=1; \
	$(PY) tests/report.py $(REPORTS)/tests.xml || status=1; \
	exit $$status

fresh-book:
	rm -rf _build/.jupyter_cache _build/.doctrees _build/html _build/jupyter_execute _build/answers _build/reports $(REPORTS)
	$(MAKE) book

# The expected outputs of the cells tagged nbval-check-output, from the
# notebooks the last `make book` or `make test` executed: nothing runs again.
expected: $(VENV)/.test $(VENV)/.book
	$(PY) tests/outputs.py expected

# What a broken builder, transport or page helper fails first, chosen by CPU
# seconds measured per file (pytest per file, under time): every builder proved
# by the verifier (test_verify), run against the NumPy oracle on the local
# transport (test_local) and costed (test_cost, test_pat_and_two_level); a toy
# algorithm registered and taken through every consumer (test_toy_algorithm);
# every collective and algorithm on 4 gloo processes and on shared memory
# (test_dist, its p=4 and shm cases); the layering rule (test_layers); the
# pages' helpers: drawings, figure records, exercises' checkers, the output
# check (test_viz, test_figrecord, test_exercises*, test_outputs, test_rendered).
FAST_FILES := test_verify test_local test_cost test_pat_and_two_level test_toy_algorithm test_dist \
	test_layers test_viz test_figrecord test_outputs test_rendered \
	$(patsubst tests/%.py,%,$(wildcard tests/test_exercises*.py))
FAST := $(FAST_FILES:%=tests/%.py) -k "not test_dist.py or matches_torch_distributed and 4- or shared_memory_transport_matches_torch_distributed and 4"

test-fast: lint
	rm -rf $(REPORTS)/fast && mkdir -p $(REPORTS)/fast
	@status=0; \
	$(PYTEST) --junitxml=$(REPORTS)/fast/fast.xml -m "not book and not browser" $(FAST) || status=1; \
	$(PY) tests/report.py $(REPORTS)/fast/fast.xml || status=1; \
	exit $$status

test-gpu: $(VENV)/.test
	$(PY) -m pytest -q -ra -m gpu tests


$(MATHJAX): | needs-npm
	rm -rf _build/mathjax && mkdir -p _build/mathjax/mathjax
	cd _build/mathjax && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar xzf mathjax-$(MATHJAX_VERSION).tgz
	cd _build/mathjax/package/es5 && cp -r tex-chtml.js input output ui a11y ../../mathjax/
	rm -rf _build/mathjax/package _build/mathjax/mathjax-$(MATHJAX_VERSION).tgz

# Strict: warnings are errors, references nitpicky. Notebooks execute once and
# are cached (_build/.jupyter_cache): a warm rebuild re-executes nothing. A
# page whose execution failed fails every build until it executes
# (_ext/execution.py), which prints each page it executes and its seconds.
# IPYTHONDIR: every page's kernel runs _ipython's startup files, which make
# each PNG record its smallest font for the browser test, and record what each
# cell sets (numbers) in _build/answers for the hidden-answer test (the package
# itself installs nothing on import).
book: $(VENV)/.book $(MATHJAX)
	set -o pipefail; IPYTHONDIR=$(CURDIR)/_ipython $(VENV)/bin/jupyter-book build . -q --warningiserror --nitpick --keep-going 2>&1 \
	  | { grep --line-buffered -v "Kernel is running over TCP without encryption" || true; }
	@echo "Open $(CURDIR)/_build/html/index.html in a browser."

# The book as live notebooks: double-click a chapter or lab to run it.
lab: $(VENV)/.lab
	$(VENV)/bin/jupyter lab --notebook-dir=$(CURDIR) intro.md

clean:
	rm -rf _build .pytest_cache .hypothesis
