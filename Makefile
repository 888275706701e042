# v4hw — set-up and entry points. Every target installs what it needs first:
# a virtual environment with the pinned packages (requirements.txt), and Icarus Verilog.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: all setup demo test test-fast test-golden verilog regmap waves clean help

all: help

help:
	@echo "make demo       generate the MA, run a 128x128x128 int8 and a bf16 tile under Verilator"
	@echo "make test       the whole regression: golden, Amaranth simulator, cocotb on Icarus and Verilator"
	@echo "make test-fast  golden and Amaranth-simulator tests only (seconds)"
	@echo "make test-golden the golden attention + MoE datapath tests only (seconds)"
	@echo "make verilog    write build/v4hw_ma.v (default parameters)"
	@echo "make regmap     regenerate the committed register-map files"
	@echo "make clean      remove build output (keeps the virtual environment)"

# The environment is rebuilt only when the pinned requirements change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Icarus comes from the system's packages: install it with apt-get when it is missing.
ICARUS := $(shell command -v iverilog 2>/dev/null)
.icarus:
ifeq ($(ICARUS),)
	@if command -v apt-get >/dev/null 2>&1; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    echo "installing Icarus Verilog (apt-get install iverilog)"; \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq iverilog >/dev/null; \
	else \
	    echo "error: iverilog (Icarus Verilog 11 or newer) is not installed and apt-get is not"; \
	    echo "available; install it with your system's package manager, then rerun make."; \
	    exit 1; \
	fi
endif

setup: $(STAMP) .icarus

demo: setup
	$(BIN)/v4hw demo

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not cocotb"

test-golden: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_golden_attn*.py

verilog: setup
	$(BIN)/v4hw verilog ma -o build/v4hw_ma.v

regmap: setup
	$(BIN)/v4hw regmap --update

clean:
	rm -rf build sim_build .pytest_cache
