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
# subprocess or a browser rather than on the CPU: with 4 workers on 2 cores the suite used
# ~1,370 s of CPU in a ~1,170 s run, 60% of what the cores give, so three times the cores. A
# module stays in one worker (`--dist loadscope`), so its module-scoped server or browser starts once.
# Modules go to the workers in collection order (`--no-loadscope-reorder`): tests/conftest.py puts
# the heaviest first, so the run does not end with one worker busy on a long module.
WORKERS ?= 6
PARALLEL := -n $(WORKERS) --dist loadscope --no-loadscope-reorder

# Bytecode is written and read. An environment that sets PYTHONDONTWRITEBYTECODE (this machine's does)
# made every process compile from source whatever it imported, every time, as uv installs no
# bytecode: pytest's collection took 30 s of CPU in each worker instead of 12, each server a test
# starts paid again, and importing PydanticAI took 3.3 s instead of 1.7.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test types strands check matrix bench conformance observability

# uv installs the environments: it downloads in parallel and keeps a cache that works, so a
# clean clone installs in about a minute where pip took three. It is pinned as the dev extra
# pins it (the Vercel CLI's builder runs it); pip stays in each environment, upgraded as
# before, because builds vendor with the environment's own pip.
UV := $(VENV)/bin/uv
UV_PIN := uv==0.10.11

$(UV):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(UV_PIN)"

# One environment for everything: the runtime, the CLI and the test tools.
$(VENV)/.installed: pyproject.toml | $(UV)
	$(UV) pip install --quiet --python $(PY) --upgrade pip -e ".[dev]"
	touch $@

$(STRANDS_VENV)/.installed: pyproject.toml | $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(STRANDS_VENV)
	$(UV) pip install --quiet --python $(STRANDS_VENV)/bin/python --upgrade pip -e ".[strands]" pytest pytest-asyncio pytest-timeout
	touch $@

$(PHOENIX_VENV)/.installed: | $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(PHOENIX_VENV)
	$(UV) pip install --quiet --python $(PHOENIX_VENV)/bin/python "arize-phoenix==20.26.1"
	touch $@

demo: $(VENV)/.installed  ## the refund example: pause, restart in a new process, resume
	$(PY) examples/refund/main.py

# The type check and the Strands tests (a minute or two each on a clean clone) run beside the
# suite, not before it: their output is printed once the suite ends, and any failure fails the target.
# The suite prints its 30 slowest tests: where to look when it grows slow.
test: $(VENV)/.installed $(STRANDS_VENV)/.installed $(PHOENIX_VENV)/.installed  ## lint, then types, the Strands tests and every other test side by side
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@log=$$(mktemp); \
	$(MAKE) --no-print-directory -j2 --output-sync=target types strands >"$$log" 2>&1 & beside=$$!; \
	$(PY) -m pytest $(PARALLEL) --durations=30; suite=$$?; \
	wait $$beside; checks=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$suite -eq 0 ] && [ $$checks -eq 0 ]

types: $(VENV)/.installed  ## mypy --strict
	$(PY) -m mypy

strands: $(STRANDS_VENV)/.installed  ## the Strands adapter's tests, in their own environment
	$(STRANDS_VENV)/bin/python -m pytest -p no:cacheprovider tests/adapters/test_adapter_strands.py

check: $(VENV)/.installed  ## the quick tier: lint, types and the tests that need no server, browser or build
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest $(PARALLEL) -m "not slow"

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
