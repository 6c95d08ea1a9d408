# workbench: `make lab` opens the tutorials in JupyterLab, `make test` runs every check.
# Both create .venv when it is missing and keep it up to date. Installs are skipped when nothing
# they depend on changed (stamp files in .venv), so a second run starts at once.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PORT ?= 8888
IP ?= 127.0.0.1
LAB_ARGS ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=

BIN := $(VENV)/bin
PY := $(BIN)/python
# constraints.txt pins torch==2.13.0 so that no dependency can pull in another (multi-GB) build.
PIP_INSTALL := $(PY) -m pip install --progress-bar off -c constraints.txt
STAMP := $(VENV)/.workbench-stamp
EXT := extensions/jupyterlab-workbench
SANITIZE := notebooks/nbval_sanitize.cfg
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

# The extension is reinstalled when one of its sources changes (not its tests or build outputs).
EXT_SOURCES := $(filter-out $(EXT)/ui-tests/% $(EXT)/scripts/%,$(wildcard $(shell \
	git ls-files -co --exclude-standard -- $(EXT) 2>/dev/null || \
	find $(EXT) \( -name node_modules -o -name lib -o -name labextension -o -name .yarn \) \
	-prune -o -type f -print 2>/dev/null)))

# Recipes find the venv's tools first (the extension's scripts call jupyter, jlpm, node...).
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: help lab test dev lint lint-imports test-python test-notebooks test-ext chromium bench \
	format clean distclean test-asan test-asan-fast asan-build test-numpy-path test-llamacpp

help:
	@echo "make lab      start JupyterLab on notebooks/ (IP=$(IP) PORT=$(PORT), LAB_ARGS=...)"
	@echo "make test     lint, import layers, pytest, notebooks (nbval), extension tests"
	@echo "make dev      only create/update $(VENV) with the dev and lab extras and the extension"
	@echo "make lint | lint-imports | test-python | test-notebooks | test-ext   parts of make test"
	@echo "make test-numpy-path | test-asan-fast   parts of make test; make test-asan: more of it"
	@echo "make test-llamacpp  build llama-cpp-python once, check converted GGUF files in llama.cpp"
	@echo "make bench    install the reference packages and run the benchmarks (BENCH_ARGS=...)"
	@echo "make format   ruff --fix and ruff format"
	@echo "make chromium install Debian's chromium for the UI tests (root) or say how"
	@echo "make clean    remove build outputs and caches; make distclean also removes $(VENV)"

# --- environment ---------------------------------------------------------------------------

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP)-lab: pyproject.toml constraints.txt | $(PY)
	$(PIP_INSTALL) -e '.[lab]'
	@touch $@

$(STAMP)-dev: pyproject.toml constraints.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev,lab]'
	@touch $@ $(STAMP)-lab

# Not on PyPI, so not in the lab extra: installed from its folder once it has a pyproject.toml.
# Its build hook skips the npm build when a labextension is already there, so the old one is
# removed first: this recipe only runs when the extension's sources changed.
$(STAMP)-ext: $(EXT_SOURCES) | $(STAMP)-lab
	@if [ -f $(EXT)/pyproject.toml ]; then \
		rm -rf $(EXT)/jupyterlab_workbench/labextension; \
		echo "$(PIP_INSTALL) ./$(EXT)"; $(PIP_INSTALL) ./$(EXT); \
	else \
		echo "$(EXT)/pyproject.toml not found: JupyterLab extension not installed"; \
	fi
	@touch $@

dev: $(STAMP)-dev $(STAMP)-ext

# Reference packages for the model benchmarks (never imported by workbench). ultralytics,
# segment-anything and timm depend on torchvision, which cannot load beside torch 2.13: they go
# in without their dependencies (the benchmarks stub torchvision, as the golden scripts do);
# everything else they need comes with the `bench` extra.
$(STAMP)-bench: pyproject.toml constraints.txt | $(STAMP)-dev
	$(PIP_INSTALL) -e '.[dev,lab,bench]'
	$(PIP_INSTALL) --no-deps ultralytics ultralytics-thop segment-anything timm
	@touch $@

# --- the two commands ----------------------------------------------------------------------

lab: $(STAMP)-lab $(STAMP)-ext
	@mkdir -p notebooks
	$(BIN)/jupyter lab notebooks/ --ip=$(IP) --port=$(PORT) $(ALLOW_ROOT) $(LAB_ARGS)

# Every part runs even when an earlier one fails (a broken extension build fails test-ext only);
# the summary names the failed parts.
# pytest on tests/ goes last so that its summary line closes the output.
TEST_PARTS := lint test-ext test-notebooks test-asan-fast test-numpy-path test-python

test: $(STAMP)-dev
	@$(PY) -m benchmarks.machine
	@failed=""; \
	for part in $(TEST_PARTS); do \
		echo "=== make $$part"; \
		$(MAKE) --no-print-directory $$part || failed="$$failed $$part"; \
	done; \
	if [ -n "$$failed" ]; then echo "=== make test failed:$$failed"; exit 1; fi

# All five run; lint fails if any of them does. mypy checks typed use of the public API
# through the shipped stubs (workbench/*.pyi; errors inside the package's own modules are
# not its subject: --follow-imports=silent), in tests/typing and in the tutorials' code cells.
lint: $(STAMP)-dev
	@rc=0; \
	echo "ruff check ."; $(BIN)/ruff check . || rc=1; \
	echo "ruff format --check ."; $(BIN)/ruff format --check . || rc=1; \
	echo "mypy tests/typing"; $(BIN)/mypy --follow-imports=silent --ignore-missing-imports \
		--no-incremental --cache-dir=/dev/null tests/typing || rc=1; \
	echo "mypy notebooks/*.ipynb"; $(PY) tests/typing/notebook_types.py || rc=1; \
	$(MAKE) --no-print-directory lint-imports || rc=1; \
	exit $$rc

# grimp, behind lint-imports, walks the package's folder, and backends/ and kernels/ only join
# it when installed: check a copy laid out like the wheel (lint-imports puts its cwd first on
# sys.path, so the copy is what it imports).
LAYOUT := build/lint-imports
lint-imports: $(STAMP)-dev
	@rm -rf $(LAYOUT) && mkdir -p $(LAYOUT)
	@cp -R workbench $(LAYOUT)/workbench
	@cp -R backends $(LAYOUT)/workbench/backends
	@cp -R kernels $(LAYOUT)/workbench/kernels
	cd $(LAYOUT) && $(abspath $(BIN))/lint-imports --no-cache --config $(CURDIR)/pyproject.toml

# CUDA kernels are compiled with nvcc --ptx by pytest itself wherever nvcc exists.
test-python: $(STAMP)-dev
	$(PY) -m pytest $(PYTEST_ARGS)

# The op tables on the numpy path (the fallback of platforms without the compiled kernels);
# test-python runs them on the native kernels.
NUMPY_PATH_TESTS := tests/test_ops_elementwise.py tests/test_ops_reduce.py tests/test_fused.py \
	tests/test_autograd.py tests/notebook/test_memory.py
test-numpy-path: $(STAMP)-dev
	WORKBENCH_NATIVE=0 $(PY) -m pytest -q -p no:cacheprovider $(NUMPY_PATH_TESTS)

# The native CPU kernels under AddressSanitizer and UBSan: the variant this CPU runs, built with
# WORKBENCH_SANITIZE=1 into $(ASAN_DIR) and imported from there (WORKBENCH_NATIVE_DIR) instead
# of the normal build. The interpreter is not instrumented, so libasan must be preloaded; leak
# checks are off (the interpreter's own allocations would drown them). make test runs the fast
# subset (the native property tests, pooling, the row ops' and relu's backward, the LLM kernels,
# the batched quantized products, the native copies and the storage type), make test-asan the op
# tables too.
ASAN_DIR := build/asan
ASAN_FAST_TESTS := tests/test_native_elementwise.py tests/test_native_pool.py tests/test_native_conv.py \
	tests/test_native_conv_direct.py tests/test_native_rows_backward.py tests/models/llm/test_llm_ops.py \
	tests/test_native_relu_backward.py tests/quantized/test_qmatmul_batch.py tests/test_native_copy.py \
	tests/notebook/test_memory.py tests/test_native_reduce.py
ASAN_TESTS := $(ASAN_FAST_TESTS) tests/test_ops_elementwise.py tests/test_ops_reduce.py \
	tests/test_fused.py tests/test_native_attention.py tests/quantized/test_qdot.py \
	tests/quantized/test_qdot_small_batch.py tests/test_native_optim.py
ASAN_RUN = LD_PRELOAD=$$($${CC:-gcc} -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
	UBSAN_OPTIONS=print_stacktrace=1 WORKBENCH_NATIVE_DIR=$(ASAN_DIR)/workbench/backends/cpu \
	$(PY) -m pytest -q -p no:cacheprovider

asan-build: $(STAMP)-dev
	@variant=$$($(PY) -c "from workbench.backends.cpu import native; \
		print(native.info()['variant'] or 'base')"); \
	echo "building the $$variant kernels with ASan/UBSan into $(ASAN_DIR)"; \
	WORKBENCH_SANITIZE=1 WORKBENCH_NATIVE_VARIANTS=$$variant \
		$(PY) setup.py -q build_ext -b $(ASAN_DIR) -t $(ASAN_DIR)/tmp; \
	ls $(ASAN_DIR)/workbench/backends/cpu/_native_$$variant.*.so >/dev/null 2>&1 || { \
		echo "asan-build: the $$variant kernels did not build (see above): the sanitizer" \
			"run would test nothing"; exit 1; }

test-asan: asan-build
	$(ASAN_RUN) $(ASAN_TESTS)

test-asan-fast: asan-build
	$(ASAN_RUN) $(ASAN_FAST_TESTS)

# pytest exits 5 when it collects nothing (e.g. notebooks without code cells): not a failure.
test-notebooks: $(STAMP)-dev
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
		cmd="$(PY) -m pytest --nbval-lax --nbval-current-env"; \
		if [ -f $(SANITIZE) ]; then cmd="$$cmd --sanitize-with $(SANITIZE)"; fi; \
		echo "$$cmd notebooks/"; $$cmd notebooks/; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no notebook cells to check"; rc=0; fi; \
		exit $$rc; \
	else \
		echo "no notebooks in notebooks/"; \
	fi

test-ext: $(STAMP)-dev $(STAMP)-ext
	@if [ -f $(EXT)/scripts/test.sh ]; then \
		$(MAKE) --no-print-directory chromium && bash $(EXT)/scripts/test.sh; \
	else \
		echo "$(EXT)/scripts/test.sh not found: no extension tests"; \
	fi

# The UI tests drive Debian's /usr/bin/chromium (Playwright's own browser downloads fail here).
chromium:
	@if [ -x /usr/bin/chromium ]; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the UI tests"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update && apt-get install -y chromium; \
	else \
		echo "The JupyterLab extension's UI tests need /usr/bin/chromium."; \
		echo "Install Debian's package as root: apt-get update && apt-get install -y chromium"; \
	fi

# The converter's GGUF files in llama.cpp (not in make test: llama-cpp-python compiles
# llama.cpp from source, minutes). The wheel is built once into $(LLAMACPP_WHEELS), with
# portable AVX2 flags (llama.cpp's native build crashed on an AVX-512/AMX Xeon).
LLAMACPP_VERSION := 0.3.36
LLAMACPP_WHEELS := build/wheels
LLAMACPP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMACPP_WHEEL = $(wildcard $(LLAMACPP_WHEELS)/llama_cpp_python-$(LLAMACPP_VERSION)-*.whl)
test-llamacpp: $(STAMP)-dev
	@if [ -z "$(LLAMACPP_WHEEL)" ]; then \
		echo "building llama-cpp-python $(LLAMACPP_VERSION) into $(LLAMACPP_WHEELS)"; \
		CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" MAKEFLAGS=-j$$(nproc) $(PY) -m pip wheel --no-deps \
			-c constraints.txt llama-cpp-python==$(LLAMACPP_VERSION) -w $(LLAMACPP_WHEELS); \
	fi
	$(PIP_INSTALL) $(LLAMACPP_WHEELS)/llama_cpp_python-$(LLAMACPP_VERSION)-*.whl
	$(PY) -m pytest -q -p no:cacheprovider tests/models/llm/test_llamacpp_compat.py $(PYTEST_ARGS)

# --- the rest ------------------------------------------------------------------------------

bench: $(STAMP)-dev $(STAMP)-bench
	@if [ -f benchmarks/__main__.py ]; then \
		echo "$(PY) -m benchmarks $(BENCH_ARGS)"; $(PY) -m benchmarks $(BENCH_ARGS); \
	elif [ -f benchmarks/run.py ]; then \
		echo "$(PY) benchmarks/run.py $(BENCH_ARGS)"; $(PY) benchmarks/run.py $(BENCH_ARGS); \
	else \
		echo "no benchmarks/__main__.py or benchmarks/run.py yet"; \
	fi

format: $(STAMP)-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf build dist .pytest_cache .ruff_cache .import_linter_cache ./*.egg-info
	rm -rf $(EXT)/lib $(EXT)/jupyterlab_workbench/labextension $(EXT)/tsconfig.tsbuildinfo
	find . \( -path ./$(VENV) -o -name node_modules -o -path ./.git \) -prune -o \
		\( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(EXT)/node_modules
