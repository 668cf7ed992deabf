# make book      : build the rendered book into _build/html
# make test      : ruff, the book with every page executed anew (the notebooks'
#                  test), then every test (package, multi-process gloo, every
#                  page in headless Chromium)
# make lab       : the book as live notebooks in JupyterLab (jupytext, ipywidgets)
# make test-fast : ruff and the package's tests, multi-process ones included:
#                  no book, no browser (a few minutes)
# make test-gpu  : every test that needs a CUDA GPU (marker gpu): CUDA tensors,
#                  NCCL, symmetric memory; without a GPU each says it was skipped
# Each target creates .venv and installs what it needs on first use.

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

.PHONY: test test-fast test-gpu book fresh-book lab lint format clean

$(VENV)/.base:
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

# The notebook and browser tests need the book's dependencies and the built
# book (tests/test_browser.py opens every page of _build/html), so `test`
# builds it first; a warm build re-executes nothing.
# The strict build executes every page (warnings and cell errors fail it), so
# `test` clears the execution cache first and leaves nbval (`-m book`, one
# page at a time: pytest tests/test_notebooks.py -k PAGE) out: each page runs once.
# tests/test_build.py (`book`, but a throwaway book of its own) checks that a
# failed page fails every build, however often it is rerun.
test: lint fresh-book $(VENV)/.lab
	$(PY) -m pytest -q -ra tests/test_build.py
	$(PY) -m pytest -q -ra -m "not book" tests

fresh-book:
	rm -rf _build/.jupyter_cache _build/.doctrees _build/html _build/jupyter_execute _build/reports
	$(MAKE) book

test-fast: lint
	$(PY) -m pytest -q -ra -m "not book and not browser" tests

test-gpu: $(VENV)/.test
	$(PY) -m pytest -q -ra -m gpu tests

# MathJax is served from the build, not a CDN: the rendered book (and the
# browser test) must work offline. npm is the registry that ships it.
MATHJAX_VERSION ?= 3.2.2
MATHJAX := _build/mathjax/mathjax/tex-chtml.js

$(MATHJAX):
	rm -rf _build/mathjax && mkdir -p _build/mathjax/mathjax
	cd _build/mathjax && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar xzf mathjax-$(MATHJAX_VERSION).tgz
	cd _build/mathjax/package/es5 && cp -r tex-chtml.js input output ui a11y ../../mathjax/
	rm -rf _build/mathjax/package _build/mathjax/mathjax-$(MATHJAX_VERSION).tgz

# Strict: warnings are errors, references nitpicky. Notebooks execute once and
# are cached (_build/.jupyter_cache): a warm rebuild re-executes nothing. A
# page whose execution failed fails every build until it executes
# (_ext/execution.py), which prints each page it executes and its seconds.
# IPYTHONDIR: every page's kernel runs _ipython's startup file, which makes
# each PNG record its smallest font for the browser test (the package itself
# installs nothing on import).
book: $(VENV)/.book $(MATHJAX)
	set -o pipefail; IPYTHONDIR=$(CURDIR)/_ipython $(VENV)/bin/jupyter-book build . -q --warningiserror --nitpick --keep-going 2>&1 \
	  | { grep --line-buffered -v "Kernel is running over TCP without encryption" || true; }
	@echo "Open $(CURDIR)/_build/html/index.html in a browser."

# The book as live notebooks: double-click a chapter or lab to run it.
lab: $(VENV)/.lab
	$(VENV)/bin/jupyter lab --notebook-dir=$(CURDIR) intro.md

clean:
	rm -rf _build .pytest_cache .hypothesis
