# The two quick-start commands (`make demo`, `make test`) install everything they need themselves.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Installs follow a lock kept in the repository, as Airflow asks for reproducible installs (its own
# constraints files cannot be fetched here); `make lock` refreshes it.
CONSTRAINTS := constraints/py3.11.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml devkit/pyproject.toml $(CONSTRAINTS) | sha1sum | cut -c1-12)

# The SageMaker Python SDK's sagemaker-core, for the conformance tests only, in a venv of its own: it pins
# protobuf and importlib-metadata below what Airflow 3.3 needs, so it cannot share Airflow's environment.
SDK_VENV := .venv-sdk
SAGEMAKER_CORE := sagemaker-core==2.27.0
SDK_STAMP := $(SDK_VENV)/.installed-$(shell echo $(SAGEMAKER_CORE) | sha1sum | cut -c1-12)

# The docs (MkDocs Material, the reference from docstrings by mkdocstrings) in a venv of its own, locked.
DOCS_VENV := .venv-docs
DOCS_CONSTRAINTS := constraints/docs.txt
DOCS_STAMP := $(DOCS_VENV)/.installed-$(shell cat $(DOCS_CONSTRAINTS) | sha1sum | cut -c1-12)

# The supported platforms' own pins (constraints/mwaa/<version>/, as MWAA's image repository has them): each gets
# an environment installed the platform's way (tools/platform_env, cached by the hash of its inputs) and runs
# what differs there: the botocore model on the wire, the operators and triggers (task state store or not,
# on_kill or cancellation), one `airflow dags test` that falls back and records the choice, and the fault
# campaign's user actions on a running Airflow (a deferred task marked failed, one cleared, a run marked
# failed: each job stopped, no second job), the task instance tab clicked in the platform's own UI (an unmapped
# and a mapped task), the job's lines in the task log with task logs in CloudWatch, and the shared store;
# a test module a worker, as many workers as the fast layer (most of these are its tests).
# MWAA 3.3.1 shares its Airflow line with the project's lock (.venv, which runs everything): only its botocore differs.
PLATFORMS := mwaa-3.1.6 mwaa-3.2.1 mwaa-3.3.1
DAGS_TEST := "tests/integration/test_dags_test.py::test_dag_falls_back_to_the_second_preference"
USER_ACTIONS := "tests/faults/test_campaign.py::test_users_mark_failed_clear_and_fail_a_run"
# Each line's UI fills the task instance tab's link its own way: the tab is clicked in each, on that Airflow.
TASK_TAB := "tests/faults/test_campaign.py::test_the_task_instance_tab_in_airflow_s_own_ui"
CLOUDWATCH_TASK_LOGS := tests/e2e/test_cloudwatch_task_logs.py
# CloudWatch's metrics on the wire: the query protocol of botocore before 1.42 (MWAA 3.1), JSON 1.0 after.
CLOUDWATCH_METRICS := tests/emulator/test_instance_metrics.py
# The shared store as each line's ObjectStoragePath has it: on Airflow 3.1 (universal-pathlib 0.2) one is also a
# pathlib.Path, which once sent the ledger on S3 to a local "file://s3://..." path; on 3.3 a path keeps the
# filesystem it was made with.
STORE_TESTS := tests/unit/test_object_storage.py tests/unit/test_store_deadlines.py tests/emulator/test_ledger_on_s3.py \
	tests/emulator/test_registry_on_s3.py tests/emulator/test_shared_storage.py tests/emulator/test_store_faults.py
PLATFORM_TESTS := tests/platforms tests/operators tests/triggers tests/unit/test_surface.py tests/unit/test_attempts.py \
	tests/unit/test_dags.py tests/unit/test_hostile_user_files.py tests/unit/test_provider.py $(DAGS_TEST) $(USER_ACTIONS) $(TASK_TAB) \
	$(CLOUDWATCH_TASK_LOGS) $(CLOUDWATCH_METRICS) $(STORE_TESTS)
PLATFORM_TESTS_mwaa-3.3.1 := tests/platforms tests/unit/test_hostile_user_files.py $(DAGS_TEST) $(USER_ACTIONS) $(TASK_TAB) \
	$(CLOUDWATCH_TASK_LOGS) $(CLOUDWATCH_METRICS)

.PHONY: mutation platforms platform-envs process-layer venv demo-venv sdk-venv docs-venv docs lock browser test lint typecheck unit fast demo emulator bench faults stack production-faults clean

venv: $(STAMP)

sdk-venv: $(SDK_STAMP)

$(SDK_STAMP):
	test -x $(SDK_VENV)/bin/python || $(PYTHON) -m venv $(SDK_VENV)
	$(SDK_VENV)/bin/pip install --quiet "$(SAGEMAKER_CORE)"
	rm -f $(SDK_VENV)/.installed-*
	touch $(SDK_STAMP)

docs-venv: $(DOCS_STAMP)

$(DOCS_STAMP): $(DOCS_CONSTRAINTS)
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet mkdocs mkdocs-material mkdocstrings-python --constraint $(DOCS_CONSTRAINTS)
	rm -f $(DOCS_VENV)/.installed-*
	touch $(DOCS_STAMP)

# Warnings are errors: a broken link, a page missing from the nav or a docstring the reference cannot read.
docs: docs-venv
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

# The package and its development kit (devkit/: the emulator, the local stack, the demo), both editable.
$(STAMP): pyproject.toml devkit/pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[s3]" -e ./devkit --group test --constraint $(CONSTRAINTS)
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Re-resolve every dependency to its newest allowed version in a scratch venv and pin the result.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet ".[s3]" ./devkit --group test
	{ sed -n 1,2p $(CONSTRAINTS); .lock-venv/bin/pip freeze --exclude airflow-sm-prefs --exclude airflow-sm-prefs-devkit; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS) && rm -rf .lock-venv

lint: venv
	$(BIN)/ruff check airflow_sm_prefs devkit tests dags benchmarks tools
	$(BIN)/ruff format --check airflow_sm_prefs devkit tests dags benchmarks tools

typecheck: venv
	$(BIN)/mypy

# The pure unit tests alone, on every core: about a minute.
unit: venv
	$(BIN)/pytest -q --numprocesses auto tests/unit

# Every layer that starts no Airflow (unit, triggers, operators and the CLI against the emulator over HTTP): about
# 5 minutes on 2 cores, the one to run before a commit. Its tests mostly wait (on deadlines, the emulator's
# clock, HTTP): at one worker a core it kept 2 cores 31 % busy (8:37), at two a core 61 % (5:08). The platform
# matrix runs its share of these layers the same way.
CORES := $(shell nproc 2>/dev/null || echo 2)
FAST_WORKERS ?= $(shell echo $$(( 2 * $(CORES) )))
fast: venv sdk-venv
	$(BIN)/pytest -q -ra --durations=15 --numprocesses $(FAST_WORKERS) -m "not airflow"

# Debian's chromium for the end-to-end browser test (Playwright drives it; it downloads no browser).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium (sudo apt-get install chromium) for the browser test" >&2; exit 1; fi; }

platforms: $(PLATFORMS:%=platform-%)

# Each platform's environment alone (pip, a core at most), built beside the fast layer in `make test`.
platform-envs: $(PLATFORMS:%=platform-env-%)

# After the project's venv: both pip installs of `-e .` would write the one airflow_sm_prefs.egg-info at once.
platform-env-%: | venv
	@tools/platform_env $* > /dev/null

platform-%:
	@venv=$$(tools/platform_env $*) && \
	echo "== $*: $$($$venv/bin/python -c 'import airflow, botocore; print("Airflow", airflow.__version__, "botocore", botocore.__version__)' 2>/dev/null)" && \
	$$venv/bin/python -m pytest -q -p no:cacheprovider -ra --durations=15 --numprocesses $(FAST_WORKERS) --dist loadfile $(or $(PLATFORM_TESTS_$*),$(PLATFORM_TESTS))

# The layers that start no Airflow first (about 7 minutes), and beside them, as a second make job, the linters,
# the type check, the docs and the platforms' environments (one after another: each is pip or one core at most);
# the SDK's and the docs' venvs are built beside the project's. Then the layers that do start Airflow beside the
# platform matrix, one platform at a time, as two make jobs.
# Until stop 61 the checks ran alone before the fast layer: 6 of the 39 minutes of a clean-clone run (CI13).
# All three test parts at once kept the cores 100 % busy for 18 minutes and starved the fast layer's deadlines:
# it is not worth it. Each keeps its output together (--output-sync); nothing in either depends on how fast the
# other lets it run. Each test part prints its slowest steps (--durations): where the next minute is to be found.
test: browser
	$(MAKE) --no-print-directory --output-sync=target -j2 fast lint typecheck docs platform-envs
	$(MAKE) --no-print-directory --output-sync=target -j2 process-layer platforms

# One test module per worker (a module shares one stack), the longest started first (tests/conftest.py,
# SLOWEST_FIRST): a worker more than the cores, as a stack of Airflow processes mostly waits.
PROCESS_WORKERS ?= $(shell echo $$(( $(CORES) + 1 )))
process-layer: venv
	$(BIN)/pytest -q -ra --durations=30 --numprocesses $(PROCESS_WORKERS) --dist loadfile --no-loadscope-reorder -m airflow

# The demo needs the runtime and the development kit, not the test group (linters, Playwright, Celery): a venv
# `make test` installed already holds both.
DEMO_STAMP := $(VENV)/.demo-installed-$(shell cat pyproject.toml devkit/pyproject.toml $(CONSTRAINTS) | sha1sum | cut -c1-12)

demo-venv: $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml devkit/pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -e $(STAMP) || { $(BIN)/pip install --quiet --upgrade pip && \
		$(BIN)/pip install --quiet -e ".[s3]" -e ./devkit --constraint $(CONSTRAINTS); }
	rm -f $(VENV)/.demo-installed-*
	touch $(DEMO_STAMP)

demo: demo-venv
	$(BIN)/airflow-sm-prefs demo --project-dir .

# One-line mutations of the pure core ([tool.mutmut] in pyproject.toml names the modules), each run against the
# unit tests that cover it; fails when more than 10 % survive. Over 30 minutes on 2 cores (docs/development.md); not part of `make test`.
mutation: venv
	$(BIN)/pip install --quiet "mutmut==3.8.1" --constraint $(CONSTRAINTS)
	rm -rf mutants
	$(BIN)/mutmut run > /dev/null
	$(BIN)/python tools/mutation_summary.py --mutmut $(BIN)/mutmut

# The fault campaign alone (make test runs it too); about 6 minutes. Rewrites its column of docs/reliability.md.
faults: venv
	SM_PREFS_REAL_CLOCK_SHARDS=50 SM_PREFS_RELIABILITY_REPORT=docs/reliability.md $(BIN)/pytest -q -ra tests/faults

# The production topology (PostgreSQL, Redis, CeleryExecutor, 2 workers, 2 triggerers, the emulator) on
# 127.0.0.1 until Ctrl-C; PostgreSQL and Redis come from Debian's packages (installed when missing, as root).
stack: venv
	$(BIN)/python -m tests.production.stack .stack

# The fault campaign on that topology (make test runs it too). Rewrites its column of docs/reliability.md.
production-faults: venv
	SM_PREFS_REAL_CLOCK_SHARDS=50 SM_PREFS_RELIABILITY_REPORT=docs/reliability.md $(BIN)/pytest -q -ra \
	  tests/production/test_production_campaign.py tests/production/test_real_clock_on_production.py

# Not part of `make test`: about 105 minutes on 2 cores. Results go to docs/performance.md by hand.
bench: venv
	$(BIN)/python -m benchmarks.emulator_describe
	$(BIN)/python -m benchmarks.triggers_at_scale --output artifacts/triggers_at_scale.md
	$(BIN)/python -m benchmarks.triggerer_at_scale --tasks 1000 --window 180 --output artifacts/triggerer_at_scale.md
	$(BIN)/python -m benchmarks.triggerer_at_scale --tasks 1000 --window 180 --production \
	  --output artifacts/triggerer_at_scale_production.md
	$(BIN)/python -m benchmarks.start_latency --repeats 3 --patience 60 --output artifacts/start_latency.md
	$(BIN)/python -m benchmarks.log_streaming --jobs 200 --window 240 --output artifacts/log_streaming.md
	$(BIN)/python -m benchmarks.long_log --output artifacts/long_log.md
	$(BIN)/python -m benchmarks.report_at_scale --output artifacts/report_at_scale.md

emulator: venv
	$(BIN)/airflow-sm-prefs emulator --scenario gpu-shortage --port 8907

clean:
	rm -rf $(VENV) $(SDK_VENV) $(DOCS_VENV) site .lock-venv .pytest_cache .mypy_cache .ruff_cache artifacts .demo .stack
