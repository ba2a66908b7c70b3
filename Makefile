# p4hub: two commands set everything up on a fresh Debian/Ubuntu machine (as root):
#   make run    bring up the default rack and train on it (TOPO=leafspine: a fabric)
#   make test   the whole test suite
#   make sim    simulate a 32-worker leaf-spine (sim/scenarios/default.toml; no root needed)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
APT_PACKAGES := mininet iproute2 iptables nftables bridge-utils ethtool iputils-ping net-tools tcpdump iperf3 \
                psmisc procps python3-venv python3-dev gcc
# Mininet comes from Debian; the venv sees it through a .pth file appended after
# its own site-packages so pinned PyPI packages always win.
MININET_DIR := /usr/lib/python3/dist-packages

.PHONY: all run cli test unit lint docs bench sim reproduce xcheck stop clean distclean deps apt venv torch

all: run

deps: apt venv

apt: $(STAMPS)/apt
$(STAMPS)/apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
	@mkdir -p $(STAMPS) && touch $@

# make sim (and make reproduce) run no Mininet and need no root: on their own on the command line, the venv
# does not wait on the apt packages (installing them is what needs root)
VENV_NEEDS := $(STAMPS)/apt
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out sim reproduce,$(MAKECMDGOALS)),)
VENV_NEEDS :=
endif
endif

venv: $(STAMPS)/venv
$(STAMPS)/venv: requirements.txt pyproject.toml setup.py hosts/_kernels.c hosts/_pbox_kernels.c | $(VENV_NEEDS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -r requirements.txt
	# -e . also compiles hosts/_kernels.c (+ _pbox_kernels.c) in place (setup.py; gcc and python3-dev above)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -c 'import site,sys; open(site.getsitepackages()[0]+"/zz_debian_mininet.pth","w").write("$(MININET_DIR)\n")'
	@mkdir -p $(STAMPS) && touch $@

# PyTorch (CPU) is pinned in requirements.txt; `make torch` is kept as an alias.
torch: venv

# TOPO=leafspine: a 2x4 leaf-spine fabric with one spine (p4hub.experiments.run --topo)
TOPO ?= rack

run: deps stop
	$(PY) -m p4hub.experiments.run --topo $(TOPO) $(RUN_ARGS)

cli: deps stop
	$(PY) -m p4hub.experiments.run --cli --topo $(TOPO) $(RUN_ARGS)

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, Material theme) into build/site. Strict: a broken
# link or anchor, a missing page or a page left out of the nav fails the build.
# NO_MKDOCS_2_WARNING: Material's end-of-life notice, printed on every build.
docs: deps
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --clean

# `make test` runs the root tests too (network namespaces, Mininet): without root it stops
# here, before installing or running anything, rather than fail those tests one by one.
# RUN_UID is the user id checked (a seam for tests/unit/test_root_guard.py).
RUN_UID ?= $(shell id -u)
ifneq ($(filter test,$(MAKECMDGOALS)),)
ifneq ($(RUN_UID),0)
$(error make test needs root (Mininet, network namespaces): run it as root, or `make unit` for the tests that need none)
endif
endif

unit: deps
	$(PY) -m pytest -q -m "not root" $(PYTEST_ARGS)

test: deps lint docs
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: deps stop
	$(PY) -m bench.run_all

# The simulator (p4hub-sim): a table, then logs/sim-<name>-<time>/sim.json and sim.png.
# Options: SIM_ARGS='--tier F -j 2 --seed 1'; any scenario: .venv/bin/p4hub-sim FILE.toml
sim: venv
	$(PY) -m p4hub.sim sim/scenarios/default.toml $(SIM_ARGS)

# The seed papers' experiments in the simulator (docs/reproductions.md): NAME=p3 (or
# p3-ina, phub, psld, switchml, bytescheduler) regenerates one row in a few minutes; no
# NAME runs them all (the long run, about an hour on 2 cores). Tables to stdout, JSON and
# PNG to logs/reproduce-<time>/ (REPRODUCE_ARGS='--figures': into docs/figures/).
reproduce: venv
	$(PY) -m p4hub.sim.reproduce $(NAME) $(REPRODUCE_ARGS)

# Cross-check against real p4c-bm2-ss, simple_switch and p4c's STF runner (not part of
# `make test`): source your p4c/BMv2 install's env.sh first. Exit 2 if they are missing.
# Report: build/xcheck/report.json. Options: XCHECK_ARGS='-j 2 --timeout 120 --only NAME'.
# Then a bounded differential fuzz run (XCHECK_FUZZ random programs from seed XCHECK_SEED,
# XCHECK_FUZZ=0: none; report build/xcheck/fuzz/fuzz-report.json).
XCHECK_FUZZ ?= 40
XCHECK_SEED ?= 1
xcheck: deps
	$(PY) -m p4lite.xcheck $(XCHECK_ARGS)
	@if [ "$(XCHECK_FUZZ)" != "0" ]; then \
	  $(PY) -m p4lite.xcheck -j 2 --fuzz $(XCHECK_FUZZ) --seed $(XCHECK_SEED) $(XCHECK_FUZZ_ARGS); fi

# Only what p4hub made (topologies/cleanup.py): never Mininet's `mn -c`, which also deletes
# every /tmp/*.log and /tmp/*.out and everyone's Mininet nodes. Needs no venv (clean runs it).
STOP_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
stop:
	-@$(STOP_PY) -m p4hub.topologies.cleanup

clean: stop
	rm -rf build logs pcaps *.pcap bench/results .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true

distclean: clean
	rm -rf $(VENV) $(STAMPS) *.egg-info
