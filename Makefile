# tsopt — build, test and run.
#
#   make            build build/tsopt (installs missing Debian packages first when run as root)
#   make test       build and run every Criterion test, then the sanitizer pass (ASan + UBSan)
#   make run        the main job: check, evaluate and compile every bench graph (headers in generated/)
#   make SAN=1 ...  build into build-san/ with AddressSanitizer and UndefinedBehaviorSanitizer
#
# libyaml and GSL are linked statically so that build/tsopt also runs on the GPU machine, where they are
# absent. Criterion is only needed by the tests.

CC      ?= cc
SAN     ?= 0
BUILD   := $(if $(filter 1,$(SAN)),build-san,build)
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wundef -Wvla -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_DEFAULT_SOURCE $(WARN) -Isrc -MMD -MP
ifeq ($(SAN),1)
CFLAGS  += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
STATIC_LIBS := -Wl,-Bstatic -lyaml -lgsl -lgslcblas -Wl,-Bdynamic
LDLIBS  := $(STATIC_LIBS) -lm

LIB_SRC  := $(filter-out src/main.c $(EXCLUDE),$(wildcard src/*.c))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
GRAPHS   := $(sort $(wildcard bench/graphs/*.yaml))

# Sizes at which `make run` evaluates graphs whose full size is beyond a CPU float64 reference.
EVAL_DIMS_attention        := t_q=128,t_kv=128
EVAL_DIMS_attention_causal := t_q=128,t_kv=128
EVAL_DIMS_attention_gqa    := t_q=128,t_kv=128
EVAL_DIMS_decoder_layer    := t=16,d=256,f=512
EVAL_DIMS_matmul           := m=16
EVAL_DIMS_rmsnorm          := m=16
EVAL_DIMS_swiglu           := m=32

.PHONY: all test run deps clean unit-tests generated gpu-build gpu-check check-generated
all: $(BUILD)/tsopt

# ---- dependencies ----------------------------------------------------------------------------------
DEB_PKGS := libyaml-dev libgsl-dev libcriterion-dev
deps: build/.deps
build/.deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) || exit 1; \
	  else \
	    echo "tsopt needs these Debian packages; run:  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi; mkdir -p build && touch $@

# ---- build -----------------------------------------------------------------------------------------
$(BUILD)/obj/%.o: src/%.c | build/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtsopt.a: $(LIB_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/tsopt: $(BUILD)/obj/main.o $(BUILD)/libtsopt.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libtsopt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< $(BUILD)/libtsopt.a $(LDFLAGS) $(LDLIBS) -lcriterion -o $@

# ---- test ------------------------------------------------------------------------------------------
# unit-tests runs this build's tests; test runs them plain, then again under the sanitizers.
unit-tests: $(TEST_BIN) $(BUILD)/tsopt
	@set -e; for t in $(TEST_BIN); do TSOPT=$(BUILD)/tsopt $$t --jobs 2 --short-filename; done
	@echo "verify-rules rules/ (every shipped rule must pass):"
	@$(BUILD)/tsopt verify-rules --trials 200 rules > $(BUILD)/verify-rules.log || { cat $(BUILD)/verify-rules.log; exit 1; }
	@tail -n 1 $(BUILD)/verify-rules.log
	@if $(BUILD)/tsopt verify-rules tests/rules_wrong/planted.rules >/dev/null; then \
	  echo "verify-rules accepted the planted wrong rules"; exit 1; \
	else echo "verify-rules rejects the planted wrong rules: ok"; fi
	@if python3 -c "import numpy, yaml" 2>/dev/null; then \
	  TSOPT=$(BUILD)/tsopt python3 tests/check_graphref.py > $(BUILD)/graphref.log || { cat $(BUILD)/graphref.log; exit 1; }; \
	  echo "bench/graphref.py agrees with the interpreter: $$(tail -n 1 $(BUILD)/graphref.log)"; \
	else echo "bench/graphref.py check skipped: python3 lacks numpy or PyYAML"; fi

test: build/.deps
	$(MAKE) unit-tests
	$(MAKE) SAN=1 unit-tests
	$(MAKE) check-generated

# generated/ must match what tsopt writes now, and every header and template must compile (sm_80 and
# sm_90, warnings as errors); one header included in two translation units must link.
NVCC_CHECK = nvcc -std=c++17 -Werror all-warnings
check-generated: $(BUILD)/tsopt
	@rm -rf $(BUILD)/regen $(BUILD)/nvcc && mkdir -p $(BUILD)/regen $(BUILD)/nvcc
	@for f in $(GRAPHS); do $(BUILD)/tsopt compile -o $(BUILD)/regen $$f > /dev/null || exit 1; done
	@diff -r -x README.md generated $(BUILD)/regen > $(BUILD)/regen.diff || \
	  { echo "generated/ is out of date: run make generated"; head -n 40 $(BUILD)/regen.diff; exit 1; }
	@echo "generated/ matches tsopt compile: ok"
	@for h in generated/*.cuh; do n=$$(basename $$h .cuh); u=$$(echo $$n | tr a-z A-Z); \
	  printf '#define TSOPT_%s_IMPLEMENTATION\n#include "%s"\n' $$u ../../$$h > $(BUILD)/nvcc/$$n.cu; done
	@for t in templates/*.cuh; do printf '#include "%s"\n' ../../$$t > $(BUILD)/nvcc/tpl_$$(basename $$t .cuh).cu; done
	@ls $(BUILD)/nvcc/*.cu | xargs -P 2 -I{} sh -c '$(NVCC_CHECK) -arch=sm_80 -c {} -o {}.80.o && \
	  $(NVCC_CHECK) -gencode=arch=compute_90a,code=sm_90a -c {} -o {}.90.o || { echo "nvcc failed on {}"; exit 255; }'
	@echo "every generated header and template compiles for sm_80 and sm_90a: ok"
	@printf '#include "../../generated/swiglu.cuh"\nint other(void) { return (int)swiglu_workspace_bytes(); }\n' > $(BUILD)/nvcc/tu2.cu
	@printf '#include "../../generated/swiglu.cuh"\nint other(void);\nint main(void) { return other(); }\n' > $(BUILD)/nvcc/tu1.cu
	@$(NVCC_CHECK) -arch=sm_80 $(BUILD)/nvcc/tu1.cu $(BUILD)/nvcc/tu2.cu -o $(BUILD)/nvcc/two_tu
	@echo "a generated header included in two translation units links: ok"

# ---- run -------------------------------------------------------------------------------------------
run: $(GRAPHS:bench/graphs/%.yaml=run-%)

run-%: $(BUILD)/tsopt
	@echo "== bench/graphs/$*.yaml"
	@$(BUILD)/tsopt check bench/graphs/$*.yaml
	@$(BUILD)/tsopt eval $(if $(EVAL_DIMS_$*),--dims $(EVAL_DIMS_$*)) bench/graphs/$*.yaml
	@$(BUILD)/tsopt compile -o generated bench/graphs/$*.yaml
	@echo

# ---- generated headers -----------------------------------------------------------------------------
# Every bench graph compiled offline into generated/ (committed; CI checks that they do not drift).
generated: $(BUILD)/tsopt
	@set -e; for f in $(GRAPHS); do $(BUILD)/tsopt compile -o generated $$f > /dev/null; echo "generated/$$(basename $$f .yaml).cuh"; done

# ---- the GPU check ---------------------------------------------------------------------------------
# gpu-build runs here (no GPU): headers for the bench and odd sizes, a shared library per header, and the
# template test programs, all in build/gpu. gpu-check runs on the H200 machine with build/gpu carried.
NVCC_ARCH ?= -gencode=arch=compute_90a,code=sm_90a
gpu-build: $(BUILD)/tsopt
	bash bench/gpu_build.sh
	nvcc -O3 -std=c++17 $(NVCC_ARCH) -I templates bench/gpu/gemm_test.cu -lcublas -o build/gpu/gemm_test
	nvcc -O3 -std=c++17 $(NVCC_ARCH) -I templates bench/gpu/attention_test.cu -o build/gpu/attention_test

gpu-check:
	bash bench/gpu_run.sh

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/main.d
