# The two quick-start commands (`make demo`, `make test`) install everything they need themselves.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: venv browser test lint typecheck unit demo emulator bench faults clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check src tests dags benchmarks
	$(BIN)/ruff format --check src tests dags benchmarks

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q

# Debian's chromium for the end-to-end browser test (Playwright drives it; it downloads no browser).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium (sudo apt-get install chromium) for the browser test" >&2; exit 1; fi; }

test: lint typecheck browser
	$(BIN)/pytest -q -ra

demo: venv
	$(BIN)/airflow-sm-prefs demo --project-dir .

# The fault campaign alone (make test runs it too); about 4 minutes. Rewrites docs/reliability.md.
faults: venv
	SM_PREFS_RELIABILITY_REPORT=docs/reliability.md $(BIN)/pytest -q -ra tests/faults

# Not part of `make test`: about 75 minutes on 2 cores. Results go to docs/performance.md by hand.
bench: venv
	$(BIN)/python benchmarks/emulator_describe.py
	$(BIN)/python benchmarks/triggers_at_scale.py --output artifacts/triggers_at_scale.md
	$(BIN)/python benchmarks/triggerer_at_scale.py --tasks 1000 --window 180 --output artifacts/triggerer_at_scale.md
	$(BIN)/python benchmarks/start_latency.py --repeats 3 --patience 60 --output artifacts/start_latency.md

emulator: venv
	$(BIN)/airflow-sm-prefs emulator --scenario gpu-shortage --port 8907

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache artifacts .demo
