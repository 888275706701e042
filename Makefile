# v4hw — set-up and entry points. Every target installs what it needs first:
# a virtual environment with the pinned packages (requirements.txt), and Icarus Verilog.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: all setup demo bench-muon test regress coverage test-fast test-fpga test-cocotb test-golden durations soak verilog regmap waves clean help fpga fpga-synth

all: help

help:
	@echo "make demo       generate the tile, run a decode step of the 3-layer deepseek-v4 through it (Verilator)"
	@echo "make bench-muon Muon NoC on a 4x4 mesh: latency/throughput sweeps, CSV + PNG (Verilator)"
	@echo "make test       the whole regression: golden, Amaranth simulator, cocotb on Icarus and Verilator"
	@echo "make test SHARD=k/N  shard k of N of make test (whole build groups; a CI matrix, docs/testing.md)"
	@echo "make regress    everything make test runs, and the long checks (a fresh pip install, ...)"
	@echo "make test-fast  golden, planner, Amaranth-simulator and formal tests only, on every core"
	@echo "make test-fpga  the FPGA flow's checks only (synthesis smoke, constraints)"
	@echo "make test-cocotb the cocotb tier of make test only (Icarus and Verilator)"
	@echo "make soak       each block's random tests over SEEDS=1000 new seeds, many a simulation (BLOCKS=ma,va,mc,muon,tile)"
	@echo "make soak HOURS=8  make test's selection round after round with new seeds (or ROUNDS=1 SOAK_MINUTES=60)"
	@echo "make coverage   line and toggle coverage of the Verilator runs, per block (build/coverage/)"
	@echo "make durations  run make test and record each test's time (tests/data/durations.json)"
	@echo "make test-golden the golden attention + MoE datapath tests only (seconds)"
	@echo "make verilog    write build/v4hw_ma.v (default parameters)"
	@echo "make regmap     regenerate the committed register-map files"
	@echo "make fpga       ULX3S-85F bitstream of each block (yosys, nextpnr, ecppack; long)"
	@echo "make fpga-ma    the same for one block (fpga-va, ...)"
	@echo "make fpga-synth yosys resource estimates of each block for ECP5 and UltraScale+"
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

# tclsh checks the Vivado script against a stub (tests/test_fpga_constraints.py).
TCLSH := $(shell command -v tclsh 2>/dev/null)
.tcl:
ifeq ($(TCLSH),)
	@if command -v apt-get >/dev/null 2>&1; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    echo "installing Tcl (apt-get install tcl)"; \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq tcl >/dev/null; \
	else \
	    echo "error: tclsh is not installed and apt-get is not available; install Tcl 8.6"; \
	    echo "with your system's package manager, then rerun make."; \
	    exit 1; \
	fi
endif

# verilator_coverage (Debian's verilator; the simulations use the pinned wheel's, which lacks
# it) and lcov's genhtml, for `make coverage` and `make regress` (whose coverage test reports
# a coverage run end to end).
COVERAGE_TOOLS := $(and $(shell command -v verilator_coverage 2>/dev/null),$(shell command -v genhtml 2>/dev/null))
.coverage-tools:
ifeq ($(COVERAGE_TOOLS),)
	@if command -v apt-get >/dev/null 2>&1; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    echo "installing verilator_coverage and genhtml (apt-get install verilator lcov)"; \
	    $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends verilator lcov >/dev/null; \
	else \
	    echo "error: verilator_coverage and genhtml are not installed and apt-get is not"; \
	    echo "available; install Verilator's tools and lcov, then rerun make."; \
	    exit 1; \
	fi
endif

setup: $(STAMP) .icarus .tcl

demo: setup
	$(BIN)/v4hw demo

bench-muon: setup
	$(BIN)/v4hw bench muon

# The regression runs on up to four cores (pytest-xdist): its simulations are single
# threaded, and builds of one configuration are shared through a lock (sim/runner.py).
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

# SHARD=k/N (make test, make regress, make test-cocotb, ...): run shard k of N only, through
# pytest-split, each shard whole simulator builds (sim/shards.py; one CI machine a shard).
SHARD_ARGS = $(if $(SHARD),--splits $(word 2,$(subst /, ,$(SHARD))) --group $(word 1,$(subst /, ,$(SHARD))))
define check_shard
	@case "$(SHARD)" in "") ;; [1-9]/[1-9]|[1-9]/[1-9][0-9]|[1-9][0-9]/[1-9][0-9]) ;; \
	    *) echo "error: SHARD must be k/N with 1 <= k <= N (e.g. SHARD=2/3), not '$(SHARD)'" >&2; exit 2;; esac
endef

# `make test` leaves out the tests marked `regress` (long checks that need a network or
# minutes of their own); `make regress` runs everything.
test: setup
	$(check_shard)
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not regress" $(SHARD_ARGS)

regress: setup .coverage-tools
	$(check_shard)
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal $(SHARD_ARGS)

# The FPGA flow's checks (marker `fpga`: yosys synthesis smoke, constraints) and the
# tests recorded at 2 s or more (marker `slow`, tests/conftest.py) are in `make test`;
# `make test-fast` leaves them out.
test-fast: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not cocotb and not regress and not fpga and not slow"

test-fpga: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "fpga and not regress"

test-cocotb: setup
	$(check_shard)
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "cocotb and not regress" $(SHARD_ARGS)

# The order of a run comes from tests/data/durations.json (tests/conftest.py): rerecord it
# when tests were added or got much longer or shorter.
# pytest-split keeps its own copy (node id: seconds) in build/, out of the tree.
# It also records each test's processor seconds, its own and its subprocesses' (sim/cputime.py:
# build/cputime.jsonl, summed per file at the end): a budget for an idle machine is planned
# from those, which the load of a shared machine does not change.
durations: setup
	rm -f build/cputime.jsonl; mkdir -p build/pytest-split
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not regress" --store-durations \
	    --durations-path=build/pytest-split/stored.json -p sim.cputime; \
	    status=$$?; $(BIN)/python -m sim.cputime build/cputime.jsonl --top 40; exit $$status

# Line and toggle coverage (sim/coverage.py): the Verilator runs of COVERAGE_ARGS (default:
# make test's cocotb tests but Icarus's) on coverage builds of their own
# (build/sim/*-verilator-cov-*), then merged and reported per block into build/coverage/
# (text, LCOV and HTML; BLOCKS="mc muon" reports those only). The report comes even when a
# test failed; the exit status is then the tests'. The same runs sample the functional
# coverage (sim/fcov.py, V4HW_FCOV=1), reported per block after the lines and toggles and in
# build/coverage/functional.txt. FCOV_ONLY=1: the functional coverage alone, on the normal
# builds (no coverage build, much faster).
COVERAGE_ARGS ?= -m "cocotb and not regress" -k "not icarus"
coverage: setup .coverage-tools
	$(if $(FCOV_ONLY),,V4HW_COVERAGE=1) V4HW_FCOV=1 $(BIN)/python -m pytest -n $(TEST_JOBS) \
	    --dist worksteal $(COVERAGE_ARGS); status=$$?; \
	    $(BIN)/python -m sim.coverage $(if $(FCOV_ONLY),--functional,$(BLOCKS)) || exit 1; \
	    exit $$status

# make soak [SEEDS=1000] [BLOCKS=ma,va,mc,muon,tile] [TESTS=ma.gemm_random,...] [SOAK_JOBS=cores]
# [SOAK_MINUTES=]: each block's random cocotb test over SEEDS new seeds on Verilator, many
# seeds per simulator process, SOAK_JOBS processes at a time; a summary per test, the rerun
# command of each failing seed, JUnit XML in build/soak/soak.xml (sim/soak.py). With
# SOAK_MINUTES no simulation starts after that time.
# make soak HOURS=8 (or ROUNDS=1 SOAK_MINUTES=60, SOAK_ARGS=<pytest arguments>): the rounds
# form, make test's selection again and again with a new V4HW_SEED_SALT each round; every
# failure in build/soak/failures.jsonl with its seed and rerun command.
SEEDS ?= 1000
SOAK_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
soak: setup
ifneq ($(strip $(HOURS)$(ROUNDS)$(SOAK_ARGS)),)
	$(BIN)/python -m sim.soak $(if $(HOURS),--hours $(HOURS),--minutes $(or $(SOAK_MINUTES),60)) \
	    --jobs $(TEST_JOBS) $(if $(SOAK_ARGS),-- $(SOAK_ARGS))
else
	$(BIN)/python -m sim.soak --seeds $(SEEDS) --jobs $(SOAK_JOBS) \
	    $(if $(BLOCKS),--blocks "$(BLOCKS)") $(if $(TESTS),--tests "$(TESTS)") \
	    $(if $(SOAK_MINUTES),--minutes $(SOAK_MINUTES))
endif

test-golden: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_golden_attn*.py

verilog: setup
	$(BIN)/v4hw verilog ma -o build/v4hw_ma.v

regmap: setup
	$(BIN)/v4hw regmap --update

# Place and route is long (minutes for small blocks, much longer for P=8) and the machine
# is shared: one run at a time, at low priority. The first run of each YoWASP tool
# compiles it into ~/.cache/YoWASP (about 30 s each); later runs start at once.
# Blocks with only the kernel interface stand alone on a board (the MC's client channels
# do not), so `make fpga` builds those; `make fpga-synth` estimates every block.
FPGA_BLOCKS := ma va
SYNTH_BLOCKS := ma va mc

fpga: setup
	for block in $(FPGA_BLOCKS); do nice -n 10 $(BIN)/v4hw build $$block --board ulx3s-85f || exit 1; done

# One block: make fpga-ma, make fpga-va
fpga-%: setup
	nice -n 10 $(BIN)/v4hw build $* --board ulx3s-85f

fpga-synth: setup
	for block in $(SYNTH_BLOCKS); do for target in ecp5 xcup; do \
	    nice -n 10 $(BIN)/v4hw synth $$block --target $$target || exit 1; done; done

clean:
	rm -rf build sim_build .pytest_cache
