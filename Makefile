VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# Strands Agents pins mcp<2.2 and the dev tools need mcp>=2.3 (the MCP route): its adapter's
# tests run in an environment of their own, resolved as a user's `agent-unit[strands]` is.
STRANDS_VENV ?= .venv-strands
# Arize Phoenix, the OpenTelemetry backend the telemetry test sends spans to, pins its own versions
# of the SDK and of web frameworks: it runs from an environment of its own (~850 MB).
PHOENIX_VENV ?= .venv-phoenix

# The suite runs in parallel worker processes (pytest-xdist). Most tests wait on a server, a
# subprocess or a browser rather than on the CPU, so twice the cores keeps both cores busy. A
# module stays in one worker (`--dist loadscope`), so its module-scoped server or browser starts once.
WORKERS ?= 4

.PHONY: demo test check matrix bench conformance observability

# One environment for everything: the runtime, the CLI and the test tools.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

$(STRANDS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(STRANDS_VENV)
	$(STRANDS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(STRANDS_VENV)/bin/python -m pip install --quiet -e ".[strands]" pytest pytest-asyncio pytest-timeout
	touch $@

$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --quiet "arize-phoenix==20.26.1"
	touch $@

demo: $(VENV)/.installed  ## the refund example: pause, restart in a new process, resume
	$(PY) examples/refund/main.py

test: $(VENV)/.installed $(STRANDS_VENV)/.installed $(PHOENIX_VENV)/.installed  ## lint, types, then every test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy
	$(STRANDS_VENV)/bin/python -m pytest -p no:cacheprovider tests/adapters/test_adapter_strands.py
	$(PY) -m pytest -n $(WORKERS) --dist loadscope

check: $(VENV)/.installed  ## the quick tier: lint, types and the tests that need no server, browser or build
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -n $(WORKERS) --dist loadscope -m "not slow"

matrix: $(VENV)/.installed  ## examples/universal: every framework on every host (builds every preset: slow)
	$(PY) examples/universal/matrix.py

bench: $(VENV)/.installed  ## benchmarks side by side with the peers (see BENCHMARKS.md and bench/*/README.md)
	$(PY) bench/run.py
	$(PY) bench/http/run.py
	$(PY) bench/otel_cost.py --write

observability: $(VENV)/.installed $(PHOENIX_VENV)/.installed  ## a run's trace in Phoenix, screenshotted for the README
	$(PY) scripts/phoenix_screenshot.py

conformance: $(VENV)/.installed  ## the A2A TCK and the MCP conformance suite against a running server (A2A_TCK=<checkout>; see bench/conformance/run.sh)
	PYTHON=$(PY) bench/conformance/run.sh
