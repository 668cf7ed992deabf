# make book      : build the rendered book into _build/html
# make test      : ruff, the book, then every test (package, multi-process gloo,
#                  nbval on every notebook, every page in headless Chromium)
# make test-fast : ruff and the package's tests, multi-process ones included:
#                  no book, no browser (a few minutes)
# Each target creates .venv and installs what it needs on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 that this project's machines keep on disk;
# elsewhere pip fetches it (or, failing that, any torch the platform offers).
TORCH_SPEC ?= torch==2.13.0

.PHONY: test test-fast book lint format clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" || $(PY) -m pip install -q torch
	touch $@

$(VENV)/.test: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e ".[test]"
	touch $@

$(VENV)/.book: $(VENV)/.base pyproject.toml
	$(PY) -m pip install -q -e ".[book]"
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
test: lint book
	$(PY) -m pytest -q -ra tests

test-fast: lint
	$(PY) -m pytest -q -ra -m "not book and not browser" tests

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
# are cached (_build/.jupyter_cache): a warm rebuild re-executes nothing.
book: $(VENV)/.book $(MATHJAX)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "Open $(CURDIR)/_build/html/index.html in a browser."

clean:
	rm -rf _build .pytest_cache .hypothesis
