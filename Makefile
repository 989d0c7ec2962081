# mrckit: the two set-up commands of README.md, `make test` and `make demo`, each do the whole
# set-up on a fresh Debian 12 machine run as root. Every step is idempotent and skips itself when
# its output is already up to date.

SHELL      := /bin/bash
PYTHON     ?= python3
VENV       := .venv
VPY        := $(VENV)/bin/python
STAMPS     := .stamps
MULTIARCH  := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
BPF_SRC    := $(wildcard ebpf/*.bpf.c)
BPF_HDR    := $(wildcard ebpf/include/*.h) $(wildcard ebpf/host/*.h ebpf/host/*.c)
BPF_OUT    := controller/mrckit/bpf/obj
BPF_OBJ    := $(patsubst ebpf/%.bpf.c,$(BPF_OUT)/%.bpf.o,$(BPF_SRC))
CLANG      ?= clang
BPF_CFLAGS := -O2 -g -target bpf -Wall -Werror -I ebpf/include -I/usr/include/$(MULTIARCH)

# Debian packages the toolkit and its tests use, and one command that proves each is present.
APT_PKGS   := clang llvm libbpf-dev bpftool iproute2 ethtool tcpdump tshark python3-venv \
              python3-pip gcc make util-linux kmod libisal-dev
APT_CHECK  := clang llvm-strip bpftool ip ethtool tcpdump tshark nsenter gcc
P4RT_VENV  := .venv-p4rt
# The package build (setup.py) runs `make bpf native` with DEPS= and its own output paths: a
# build compiles, it never installs Debian packages.
DEPS       ?= deps

NATIVE_SRC := $(wildcard native/src/*.c)
NATIVE_HDR := $(wildcard native/include/*.h) $(BPF_HDR)
NATIVE_LIB := controller/mrckit/endpoint/native/libmrcep.so
# -ffp-contract=off: the congestion window must round exactly as the Python reference does.
NATIVE_CFLAGS := -O2 -g -Wall -Werror -fPIC -shared -ffp-contract=off -I native/include -I ebpf/include

.PHONY: all setup deps venv bpf native bpffs lint test test-under-load demo p4 bench experiments clean p4rt-shell \
        docs docs-gen docs-samples docs-traffic docs-bench

all: setup
setup: deps venv bpf native bpffs p4rt-shell

# The native MRC endpoint (docs/endpoint.md), loaded by mrckit.endpoint.native through ctypes.
native: $(NATIVE_LIB)
$(NATIVE_LIB): $(NATIVE_SRC) $(NATIVE_HDR) | $(DEPS)
	@mkdir -p $(dir $@)
	gcc $(NATIVE_CFLAGS) $(NATIVE_SRC) -lisal -lpthread -o $@

deps: $(STAMPS)/apt
$(STAMPS)/apt:
	@mkdir -p $(STAMPS)
	@missing=""; for c in $(APT_CHECK); do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	 [ -f /usr/include/bpf/libbpf.h ] || missing="$$missing libbpf-dev"; \
	 [ -f /usr/include/isa-l/crc.h ] || missing="$$missing libisal-dev"; \
	 $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	 if [ -n "$$missing" ]; then \
	   echo "installing Debian packages (missing:$$missing)"; \
	   export DEBIAN_FRONTEND=noninteractive; \
	   echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections; \
	   apt-get update -qq && apt-get install -y -qq --no-install-recommends $(APT_PKGS) >/dev/null; \
	 fi
	@touch $@

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml setup.py | deps
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	@touch $@

# p4runtime-shell pins protobuf<3.21, so it lives in its own virtualenv and runs as its own
# process (design section 9).
p4rt-shell: $(P4RT_VENV)/.installed
$(P4RT_VENV)/.installed: | deps
	@[ -x $(P4RT_VENV)/bin/python ] || $(PYTHON) -m venv $(P4RT_VENV)
	$(P4RT_VENV)/bin/python -m pip install -q --upgrade pip
	$(P4RT_VENV)/bin/python -m pip install -q 'p4runtime-shell>=0.0.3'
	@touch $@

bpf: $(BPF_OBJ)
$(BPF_OUT)/%.bpf.o: ebpf/%.bpf.c $(BPF_HDR) | $(DEPS)
	@mkdir -p $(BPF_OUT)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

bpffs:
	@mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf

# Static checks, configured in pyproject.toml: ruff (bug-finding rules only, no reformatting)
# and mypy over controller/mrckit and tools/.
lint: venv
	$(VENV)/bin/ruff check controller tests bench tools
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy tools/docsamples.py

test: setup lint
	$(VENV)/bin/pytest

# The end-to-end tests (E2E: a subset) while two CPU hogs keep both cores busy, as on CI and
# users' machines; the hogs stop with the tests, on failure and Ctrl-C too.
E2E ?= tests/e2e
test-under-load: setup
	@command -v stress-ng >/dev/null || { export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends stress-ng >/dev/null; }
	@stress-ng --cpu 2 --timeout 2h --quiet & hogs=$$!; trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	 $(VENV)/bin/pytest $(E2E)

# The main job (docs/demo.md): an MRC write across the default fabric survives a link failure;
# prints the report, writes mrc-demo.json and mrc-demo.png here, exits 0 when every check holds.
demo: setup
	$(VENV)/bin/mrc demo --json mrc-demo.json --plot mrc-demo.png

bench: setup
	$(VPY) bench/run_all.py

# The MRC paper's claims, measured (docs/experiments.md): every experiment of `mrc experiment`
# builds its own fabric and leaves its JSON record and plot in docs/experiments/; a failed one
# still leaves its record (or none if it could not run) and the rest go on; then the results
# table is written from the records.
EXP_OUT := docs/experiments
experiments: setup
	@mkdir -p $(EXP_OUT)
	-$(VENV)/bin/mrc experiment failover --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment lossy-ev --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment flaps --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment random-loss --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment load-balance --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment t1-failure --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment incast --transport rc --out $(EXP_OUT)
	-$(VENV)/bin/mrc experiment chaos --duration 30 --out $(EXP_OUT)
	$(VENV)/bin/mrc experiment table --results $(EXP_OUT) --out docs/experiments.md

# Docs from runs: every sample output and figure of README.md and docs/ is printed by the
# command its marker names (tools/docsamples.py); `make docs` runs all but the bench, whose
# figures take an hour (`make docs-bench`). The experiments' records come from `make experiments`;
# docs-gen rewrites the tables and blocks generated from code and records.
DOCS_MD   := README.md $(wildcard docs/*.md)
DOCS_TOOL := $(VPY) tools/docsamples.py
DOCS_OUT  := build/docs
docs: docs-gen docs-samples docs-traffic

docs-gen: setup
	$(VPY) -m mrckit.wire.gen
	$(VPY) -m mrckit.switch.p4runtime.pipeline_doc
	$(VENV)/bin/mrc experiment table --results $(EXP_OUT) --out docs/experiments.md

docs-samples: setup
	@mkdir -p $(DOCS_OUT)
	$(DOCS_TOOL) $(DOCS_MD)

# The traffic samples run on a 16-host fabric of their own, removed on failure and Ctrl-C too.
docs-traffic: setup
	@mkdir -p $(DOCS_OUT)
	$(VENV)/bin/mrc topo gen --planes 4 --spines 4 --leaves 8 --hosts-per-leaf 2 -o $(DOCS_OUT)/f16.yaml
	@trap '$(VENV)/bin/mrc fabric down docs16 >/dev/null 2>&1 || true' EXIT INT TERM; \
	 $(VENV)/bin/mrc fabric up $(DOCS_OUT)/f16.yaml --name docs16 && $(DOCS_TOOL) --tag traffic $(DOCS_MD)

docs-bench: setup
	@mkdir -p $(DOCS_OUT)
	$(DOCS_TOOL) --tag bench $(DOCS_MD)

# Rebuild the committed p4c outputs; needs p4c-bm2-ss on PATH or under /opt/p4tools/bin.
# P4_OUT lets tests/p4 recompile elsewhere and compare with the committed files.
P4C ?= $(shell command -v p4c-bm2-ss || echo /opt/p4tools/bin/p4c-bm2-ss)
P4_OUT ?= p4src/build
p4:
	@[ -x "$(P4C)" ] || { echo "p4c-bm2-ss not found (PATH or /opt/p4tools/bin): see 'mrc doctor'"; exit 1; }
	@mkdir -p $(P4_OUT)
	$(P4C) --std p4-16 --arch v1model -I p4src/include \
	  -o $(P4_OUT)/mrc_switch.json --p4runtime-files $(P4_OUT)/mrc_switch.p4info.txtpb \
	  p4src/mrc_switch.p4

clean:
	rm -rf $(BPF_OUT) $(STAMPS) $(NATIVE_LIB)
