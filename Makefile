# Workspace entry points. `make install` is idempotent and incremental: each package is
# rebuilt only when one of its files changed (ninja keeps object files in packages/*/build).
# Each build writes the package's wheel and sdist into dist/ and installs that wheel.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMPS := .stamps
# TORCH_NEURONX_API=0 leaves out torch-neuronx-api (the `torch_neuronx` module through which
# transformers/accelerate find device neuron), e.g. to keep AWS's torch-neuronx in the venv.
TORCH_NEURONX_API ?= 1
# Dependency order (see WORKSPACE.md).
PACKAGES := neuron-sim neuron-kernels neuron-ccl torch-neuron $(if $(filter 1,$(TORCH_NEURONX_API)),torch-neuronx-api)
# Client libraries of tests/ecosystem (transformers, accelerate, peft, ...), pinned in one file.
ECOSYSTEM_REQUIREMENTS := tests/ecosystem/requirements.txt
# Clients installed without their declared dependencies (HTA's pull in jupyterlab), pinned too.
ECOSYSTEM_NODEPS := tests/ecosystem/requirements-nodeps.txt
TORCH_VERSION := 2.13.0
PRESENT := $(foreach p,$(PACKAGES),$(if $(wildcard packages/$(p)/pyproject.toml),$(p)))
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
JOBS ?= 2
DIST := dist

# A package's sources: its files that git does not ignore (tracked or new), so nothing a
# build writes into the tree (build/, *.egg-info/, *.so, __pycache__/) counts as a change;
# without git, the same exclusions by name.
pkg_files = $(wildcard $(shell git ls-files --cached --others --exclude-standard -- packages/$(1) 2>/dev/null || \
              find packages/$(1) -type f -not -path '*/build/*' -not -path '*/__pycache__/*' \
              -not -path '*/.pytest_cache/*' -not -path '*.egg-info/*' -not -name '*.so' 2>/dev/null))

# A package's distribution files at its current version ("name-version" as file names spell it,
# from its pyproject.toml); FORCE rebuilds a package whose wheel or sdist is not in dist/.
pyproject_field = $(shell sed -n 's/^$(2) = "\(.*\)"/\1/p' packages/$(1)/pyproject.toml)
dist_stem = $(subst -,_,$(call pyproject_field,$(1),name))-$(call pyproject_field,$(1),version)
dist_missing = $(if $(and $(wildcard $(DIST)/$(call dist_stem,$(1))-*.whl),$(wildcard $(DIST)/$(call dist_stem,$(1)).tar.gz)),,FORCE)

.PHONY: test-projection install wheels versions test-packaging check-sdists FORCE test demo bench test-upstream lint patched-torch clean help test-cpp test-pkg test-sanitize test-fuzz-long test-models test-kernels-full test-native-verified

help:
	@echo "make install        create $(VENV), install torch==2.13.0, every package ($(PRESENT)) and $(ECOSYSTEM_REQUIREMENTS)"
	@echo "                    (TORCH_NEURONX_API=0 leaves out torch-neuronx-api, e.g. to keep AWS's torch-neuronx)"
	@echo "make wheels         every package's wheel and sdist in $(DIST)/ (pip install --find-links $(DIST) <name>)"
	@echo "make versions       each package's version, CHANGELOG top entry and wheel"
	@echo "make test-packaging the version checks, then each package installed alone from $(DIST)/ and smoke-tested"
	@echo "make check-sdists   (long) every sdist built with pip's build isolation from $(DIST)/"
	@echo "make test           install when needed, run every package's tests and tests/"
	@echo "make test-pkg PKG=<name>  one package's pytest suite and C++ tests (ctest), e.g. PKG=neuron-ccl"
	@echo "make test-cpp       every package's C++ tests (ctest)"
	@echo "make demo           the main job: train a small GPT on 'neuron' and on CPU, side by side"
	@echo "make test-sanitize  (long) the demo and tests/distributed under TORCH_NEURON_SANITIZE=1, and its overhead"
	@echo "make test-fuzz-long (long) op fuzzing against CPU, FUZZ_EXAMPLES per family, FUZZ_SEED"
	@echo "make bench          benchmarks (ratios against a baseline measured in the same run)"
	@echo "make test-upstream  PyTorch's device-generic suites and eleven upstream test files on 'neuron', vanilla and patched torch"
	@echo "make test-projection  every shape-only workload against its executed run (tests/projection)"
	@echo "make test-models    every transformers architecture, tiny config, trained on 'neuron' vs CPU"
	@echo "make test-native-verified  (long) record the models' native calls, replay each under device numerics"
	@echo "                    vs CPU, rewrite packages/torch-neuron/docs/native-verified.{json,md} (NATIVE_VERIFIED_SAMPLE=5)"
	@echo "make patched-torch  build the patched torch wheel into a separate environment"
	@echo "make lint           static checks"

$(STAMPS)/venv:
	@mkdir -p $(STAMPS)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install torch==$(TORCH_VERSION)
	$(PIP) install -r ci/requirements-dev.txt
	@touch $@

# Wheel and sdist into dist/ against the venv (no build isolation: the build tree is reused),
# then the wheel into the venv.
define PACKAGE_RULE
$(STAMPS)/$(1): $(STAMPS)/venv $(call pkg_files,$(1)) $(foreach d,$(2),$(STAMPS)/$(d)) $(call dist_missing,$(1))
	@echo "== building $(1)"
	$(PY) -m tools.packaging build $(1) --jobs $(JOBS)
	@touch $$@
endef
$(eval $(call PACKAGE_RULE,neuron-sim,))
$(eval $(call PACKAGE_RULE,neuron-kernels,neuron-sim))
$(eval $(call PACKAGE_RULE,neuron-ccl,neuron-sim))
$(eval $(call PACKAGE_RULE,torch-neuron,$(filter neuron-sim neuron-kernels neuron-ccl,$(PRESENT))))
# AWS's torch-neuronx ships the same top-level package `torch_neuronx`: stop before either
# overwrites the other's files (torch_neuronx checks it again at import, for a later install).
$(STAMPS)/torch-neuronx-api: $(STAMPS)/venv $(call pkg_files,torch-neuronx-api) $(STAMPS)/torch-neuron \
                             $(call dist_missing,torch-neuronx-api)
	@$(PY) packages/torch-neuronx-api/torch_neuronx/ownership.py
	@echo "== building torch-neuronx-api"
	$(PY) -m tools.packaging build torch-neuronx-api --jobs $(JOBS)
	@touch $@


# The venv's own pip with torch pinned in the file: the clients must not bring another torch.
$(STAMPS)/ecosystem: $(STAMPS)/venv $(ECOSYSTEM_REQUIREMENTS) $(wildcard $(ECOSYSTEM_NODEPS)) | $(foreach p,$(PRESENT),$(STAMPS)/$(p))
	@echo "== installing $(ECOSYSTEM_REQUIREMENTS)"
	$(PIP) install -r $(ECOSYSTEM_REQUIREMENTS)
	$(if $(wildcard $(ECOSYSTEM_NODEPS)),$(PIP) install --no-deps -r $(ECOSYSTEM_NODEPS))
	@$(PY) -c "import importlib.metadata as m, sys; v = m.version('torch'); \
	  sys.exit(0 if v.split('+')[0] == '$(TORCH_VERSION)' else f'torch {v} replaced torch==$(TORCH_VERSION): reinstall it')"
	@touch $@

install: $(foreach p,$(PRESENT),$(STAMPS)/$(p)) \
         $(if $(wildcard $(ECOSYSTEM_REQUIREMENTS)),$(STAMPS)/ecosystem)

# The packages' wheels and sdists, built (incrementally) by the package rules above.
wheels: $(foreach p,$(PRESENT),$(STAMPS)/$(p))
	@ls -l $(DIST) | awk 'NR > 1 {printf "%-60s %6.1f MiB\n", "$(DIST)/" $$9, $$5 / 1048576}'

versions: $(STAMPS)/venv
	@$(PY) -m tools.packaging versions

# The version checks, then each package installed alone into a kept environment of its own
# (build/packaging/alone/) from the wheels in dist/, and a smoke subset of its tests run there.
test-packaging: wheels
	@echo "== versions"
	@$(PY) -m tools.packaging versions --check
	@echo "== each package installed alone from $(DIST)/"
	@$(PY) -m tools.packaging alone --jobs $(JOBS) $(PRESENT)

# Long: every sdist built into a wheel with pip's build isolation, requirements from dist/.
check-sdists: wheels
	$(PY) -m tools.packaging sdists --jobs $(JOBS)

# The C++ tests of package $(1), when its CMakeLists has a *_BUILD_TESTS option.
define CTEST_PKG
if grep -q "BUILD_TESTS" packages/$(1)/CMakeLists.txt 2>/dev/null; then \
  opt=$$(grep -o '[A-Z_]*_BUILD_TESTS' packages/$(1)/CMakeLists.txt | head -1); \
  echo "== ctest $(1)"; \
  cmake -S packages/$(1) -B packages/$(1)/build/ctest -G Ninja -DCMAKE_BUILD_TYPE=Release --no-warn-unused-cli \
    -D$$opt=ON -D$${opt%_BUILD_TESTS}_BUILD_PYTHON=OFF -DPython_EXECUTABLE=$(abspath $(PY)) \
    -DCMAKE_PREFIX_PATH="$$($(PY) -c 'import pybind11;print(pybind11.get_cmake_dir())')" >/dev/null && \
  cmake --build packages/$(1)/build/ctest -j $(JOBS) >/dev/null && \
  (cd packages/$(1)/build/ctest && ctest --output-on-failure -j $(JOBS)) || exit 1; \
fi
endef

test-cpp: install
	@for p in $(PRESENT); do $(call CTEST_PKG,$$p); done

# Package suites that run in parallel workers; the rest start processes of their own.
PARALLEL_SUITES := neuron-sim neuron-kernels torch-neuron

# One package's suites: `make test-pkg PKG=neuron-ccl` runs its pytest, then its ctest.
test-pkg: install
	@if [ -z "$(PKG)" ] || ! echo " $(PRESENT) " | grep -q " $(PKG) "; then \
	  echo "make test-pkg PKG=<name>: name one of $(PRESENT)"; exit 2; fi
	@echo "== pytest packages/$(PKG)/tests"
	@$(PYTEST) $(if $(filter $(PKG),$(PARALLEL_SUITES)),-n $(JOBS)) packages/$(PKG)/tests
	@p=$(PKG); $(call CTEST_PKG,$$p)

test: install test-cpp test-packaging
	@set -e; for p in $(PRESENT); do \
	  echo "== pytest packages/$$p/tests"; \
	  if echo " $(PARALLEL_SUITES) " | grep -q " $$p "; then \
	    $(PYTEST) -n $(JOBS) packages/$$p/tests; \
	  else \
	    $(PYTEST) packages/$$p/tests; \
	  fi; \
	done
	@echo "== pytest tests/"
	@$(PYTEST) tests
	@echo "== patch series: proof matrix (vanilla vs patched torch)"
	@$(PY) -m tools.patches matrix
	@if [ -d tools/upstream ]; then echo "== upstream device-generic tests (smoke)"; $(PY) -m tools.upstream.run --smoke; fi
	@if [ -d tools/models ]; then echo "== transformers architectures (smoke subset)"; $(PY) -m tools.models.run --smoke --workers $(JOBS); fi
	@echo "== builds stay incremental: nothing the tests built counts as a source change"
	@if ! $(MAKE) --no-print-directory -q install; then \
	  echo "make test: 'make install' would rebuild after the test run:"; \
	  $(MAKE) --no-print-directory --debug=v -n install | grep -E "is newer than|File '.stamps/.*' does not exist" | head -20; \
	  exit 1; \
	fi
	@out=$$($(MAKE) --no-print-directory install 2>&1); \
	if echo "$$out" | grep -q "== building"; then echo "$$out"; echo "make test: a second 'make install' rebuilt a package"; exit 1; fi

# The generated kernel families' full kernel x dtype x shape matrix under device numerics (long).
test-kernels-full: install
	NEURON_KERNELS_FULL_MATRIX=1 $(PYTEST) packages/neuron-kernels/tests/test_families.py \
	  packages/torch-neuron/tests/test_native_families.py

demo: install
	$(PY) tools/demo/train_char_gpt.py

# Long: the demo and the distributed suite under the stream-race sanitizer (not in `make test`).
test-sanitize: install
	TORCH_NEURON_SANITIZE=1 $(PY) tools/demo/train_char_gpt.py --steps 8
	TORCH_NEURON_SANITIZE=1 $(PYTEST) tests/distributed
	$(PY) tools/bench/sanitizer_overhead.py --repeats 9

# Long: op-argument fuzzing against CPU with a fresh seed and many examples (tests/fuzz/run.py).
FUZZ_EXAMPLES ?= 2000
FUZZ_SEED ?= $(shell date +%s)
test-fuzz-long: install
	$(PY) -m tests.fuzz.run --examples $(FUZZ_EXAMPLES) --seed $(FUZZ_SEED)

bench: install
	$(PY) packages/neuron-sim/bench/bench_runtime.py
	$(PY) packages/neuron-kernels/bench/bench_sim.py
	$(PY) packages/neuron-kernels/bench/calibrate.py
	$(PY) -m neuron_ccl.bench --op allreduce --ranks 2 --sizes 4K,1M,16M,64M,256M
	$(PY) tools/bench/bench_eager.py
	$(PY) tools/bench/bert_trn1.py

# The suites and the eleven upstream files of tools/upstream/files.py, on vanilla and patched
# torch (.venv-patched, built or brought up to date first); the patched run's cpu pre-pass of
# the files is vanilla's (the series changes nothing torch does on cpu). Dashboard: build/upstream/.
test-upstream: install
	$(PY) -m tools.patches build
	$(PY) -m tools.upstream.run --fetch-source --patched yes --patched-cpu vanilla

# Every architecture of transformers' MODEL_MAPPING_NAMES; dashboard in build/models/.
test-models: install
	$(PY) -m tools.models.run --workers $(JOBS)

# Long: the demo's and the sweep's own native calls (the smoke subset and every
# NATIVE_VERIFIED_SAMPLE-th architecture of the full sweep; 1 = all), each (overload, dtype) replayed
# under device numerics against CPU; rewrites the committed data and document (a sample runs in `make test`).
NATIVE_VERIFIED_SAMPLE ?= 5
test-native-verified: install
	$(PY) -m tools.overloads record --sweep smoke --workers 1
	$(PY) -m tools.overloads record --sweep full --sample $(NATIVE_VERIFIED_SAMPLE) --add --workers 1
	$(PY) -m tools.overloads verify

patched-torch: install
	$(PY) -m tools.patches build

lint: install
	@$(PY) -m ruff --version >/dev/null 2>&1 || $(PIP) install ruff
	$(PY) -m ruff check packages tools tests

clean:
	rm -rf $(STAMPS) packages/*/build build .venv-patched $(DIST)

# Every shape-only workload against its executed run (make test runs a fixed sample of them).
test-projection: install
	TORCH_NEURON_PROJECTION_FULL=1 $(PYTEST) tests/projection
