# Two commands on a fresh machine: `make demo` and `make test` (README Quickstart).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench docs sample-traces large-dataset browser-setup spark-setup app fuzz

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/traceq demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The app's browser test drives Debian's chromium; this installs the package when missing.
browser-setup:
	bash tests/browser/setup.sh

# The Spark engine test runs pyspark in local mode on Debian's Java; this installs the JRE when
# missing.
spark-setup:
	bash tests/spark/setup.sh

# pytest exits 5 when it collects no test; that is not a failure of the build. Two workers
# (pytest-xdist), a test file per worker, so a file's fixtures (the Spark JVM, the app server)
# stay in one process; the suite's time and where it goes: docs/PERFORMANCE.md, "Test suite
# time".
# traceq's bytecode is compiled first: an editable install has none, and where
# PYTHONDONTWRITEBYTECODE is set no import caches it, so every CLI process the tests start
# would compile the package again (~0.25 s each; a pip install compiles it once).
test: lint browser-setup spark-setup
	$(BIN)/python -m compileall -q traceq > /dev/null
	$(BIN)/python -m pytest -n 2 --dist loadfile || [ $$? -eq 5 ]

# The postmortem app: pick a bundled scenario, a dataset or upload files (or: traceq app DATASET).
app: setup
	$(BIN)/traceq app

# The reader fuzz tests at length (500 mutated samples per reader family; docs/RELIABILITY.md).
fuzz: setup
	TRACEQ_FUZZ=long $(BIN)/python -m pytest -q tests/test_hostile_fuzz.py

bench: setup
	$(BIN)/python bench/otlp_json_ingest.py

docs: setup
	$(BIN)/python -m traceq.schema > docs/SCHEMA.md
	$(BIN)/python -m traceq.docs > docs/VIEWS.md

# Regenerates sample_traces/ bit for bit (seed 1; see docs/SYNTH.md).
sample-traces: setup
	$(BIN)/python -m traceq.synth.samples sample_traces

# The benchmark dataset: 1 M requests, > 50 M output tokens, streamed to /tmp/traceq-large.
large-dataset: setup
	$(BIN)/traceq synth large -o /tmp/traceq-large
