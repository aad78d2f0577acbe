# PACCP — one Makefile for the whole project.
#   make demo   build everything (installing what is missing) and run the main job: the three systems and
#               their comparison (PACCP Fig. 4, SoftBW's share, MPTCP BG/WC's guarantee, the over-commit
#               comparison) in parallel, then one HTML report
#   make test   build everything and run every test (cargo + pytest + lints + the docs site)
#   make docs   the documentation site in site/ (strict: a broken link or anchor fails it)
#   make bench  speed figures as JSON
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV    := .venv
PY      := $(VENV)/bin/python
PACCP   := $(VENV)/bin/paccp
STAMPS  := .stamps
RUST_SRC := $(shell find crates -name '*.rs' -o -name 'Cargo.toml' 2>/dev/null) Cargo.toml
DEMO_OUT ?= out/demo

DEMO_JOBS := fig4a fig4c softbw-share mptcp-bg compare-overcommit

.PHONY: help setup system-deps build demo test test-rust test-py lint docs fmt bench crosscheck guest clean

help:
	@echo "make demo   - install what is missing, build, run the three systems and their comparison, one report"
	@echo "make test   - install what is missing, build, run every test (Rust, Python, datapath, lints, docs)"
	@echo "make docs   - the documentation site in site/ (mkdocs build --strict; results pages regenerated)"
	@echo "make bench  - speed figures (JSON) of the engine, the datapath and the ledger"
	@echo "make crosscheck - the engine vs ns-3 3.44 (installs the ns3 wheel) and vs the kernel (root)"
	@echo "make guest  - the QEMU guest's kernel + initramfs (cached in .cache/guest; docs/kvm-guest.md)"

# --- set-up -----------------------------------------------------------------
$(STAMPS)/system-deps: tools/install-system-deps.sh
	@mkdir -p $(STAMPS)
	bash tools/install-system-deps.sh
	@touch $@

$(STAMPS)/venv: pyproject.toml | $(STAMPS)/system-deps
	@mkdir -p $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'maturin>=1.5,<2'
	@touch $@

# Builds the Rust extension in release mode and installs the package with its dependencies.
$(STAMPS)/build: $(STAMPS)/venv $(RUST_SRC)
	. $(VENV)/bin/activate && maturin develop --release --extras dev,ray --quiet
	@touch $@

system-deps: $(STAMPS)/system-deps
setup: $(STAMPS)/build
build: $(STAMPS)/build

# --- main job ---------------------------------------------------------------
# Each job runs at full size in its own process, two at a time; a rerun skips complete jobs (rm -rf the
# directory to start again). Ends with $(DEMO_OUT)/report.html and a verdict line per job.
demo: build
	$(PACCP) reproduce $(DEMO_JOBS) --out $(DEMO_OUT) --workers 2

# --- tests ------------------------------------------------------------------
test: build test-rust test-py lint docs

# The release profile's optimisation without its link-time optimisation (profile test-release in
# Cargo.toml): each test binary was otherwise linked with thin LTO on one code-generation unit.
test-rust: build
	cargo test --workspace --profile test-release --quiet

# Two parts (docs/howto/testing.md): the tests not marked serial spread over the cores, then the serial
# ones (root datapath, service processes, browsers; tests/conftest.py) one at a time on a machine the
# suite leaves to them. The second part runs even if the first failed; either failing fails the target.
PYTEST_WORKERS ?= auto
test-py: build
	$(VENV)/bin/pytest -q -rs -m 'not serial' -n $(PYTEST_WORKERS) --dist worksteal; parallel=$$?; \
	$(VENV)/bin/pytest -q -rs -m serial && exit $$parallel

lint: build
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --release --quiet -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) tools/module_cycles.py

# The results pages come from the committed copy of one full reproduction (docs/results/data); after a
# new one: paccp reproduce all --out DIR && paccp docs results DIR
docs: build
	$(PACCP) docs results docs/results/data --out docs/results
	$(VENV)/bin/mkdocs build --strict --quiet

fmt:
	cargo fmt --all
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: build
	$(PACCP) bench
	$(PACCP) bench ledger

# Not part of `make test`: installs the ns-3 wheel on first use; the kernel side needs root.
crosscheck: build
	$(PY) -c 'import ns3' 2>/dev/null || $(PY) -m pip install --quiet 'ns3==3.44.post0'
	$(VENV)/bin/pytest -q tests/test_crosscheck_fxprr.py  # FxPrr vs Linux's formula (skipped in make test without ns3)
	flock /tmp/paccp-datapath.lock $(PACCP) crosscheck --out out/crosscheck

# The QEMU guest's boot files (docs/kvm-guest.md): Debian's cloud kernel + an initramfs built here,
# cached under .cache/guest/<digest of the inputs>/ (paccp testbed kvm-guest builds it on first use too).
guest: build
	$(PY) -m paccp.datapath.guest.image

clean:
	rm -rf target $(VENV) $(STAMPS) out site .cache/guest
