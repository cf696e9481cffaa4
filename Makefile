# tsopt — build, test and run.
#
#   make            build build/tsopt (installs missing Debian packages first when run as root)
#   make test       every check CI runs but the hostile-input ones: the Criterion tests (under ASan + UBSan),
#                   verify-rules, the Python checks, generated/ and its nvcc compile, the install (see "test")
#   make run        the main job: check, evaluate and compile every bench graph (headers in generated/)
#   make SAN=1 ...  build into build-san/ with AddressSanitizer and UndefinedBehaviorSanitizer
#   make install PREFIX=DIR   DIR/bin/tsopt and its data in DIR/share/tsopt (rules, templates, cost models,
#                   calibrate/kernels.cu, the bench graphs, examples/, python/); default PREFIX=/usr/local
#
# libyaml, GSL and OpenBLAS are linked statically so that build/tsopt also runs on the GPU machine, where
# they are absent. Criterion is only needed by the tests.

CC      ?= cc
SAN     ?= 0
BUILD   := $(if $(filter 1,$(SAN)),build-san,build)
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wundef -Wvla -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_DEFAULT_SOURCE $(WARN) -Isrc -MMD -MP
# The sanitized build is where make test runs the tests (see "test"). Besides ASan and UBSan it makes two
# kinds of undefined behaviour that neither reports, and whose effect can depend on the optimisation
# level, show up: a read of an uninitialised local reads a 0xfe pattern (ASan fills new heap blocks with
# 0xbe already), and type-based alias analysis, on at -O2 but not at -O1, is on.
ifeq ($(SAN),1)
CFLAGS  += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
           -ftrivial-auto-var-init=pattern -fstrict-aliasing
LDFLAGS += -fsanitize=address,undefined
endif
# OpenBLAS (the serial library; the interpreter runs its own threads) computes the float64 reference's
# contractions; linked before GSL's CBLAS so that cblas_dgemm is OpenBLAS's.
OPENBLAS_A  := /usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.a
STATIC_LIBS := -Wl,-Bstatic -lyaml -lgsl $(OPENBLAS_A) -lgslcblas -Wl,-Bdynamic
LDLIBS  := $(STATIC_LIBS) -lm -pthread

# Parallel jobs where make test runs independent single-threaded steps side by side (CI: 2 cores).
ifndef JOBS
JOBS    := $(shell nproc 2>/dev/null || echo 2)
endif

LIB_SRC  := $(filter-out src/main.c $(EXCLUDE),$(wildcard src/*.c))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_OBJ := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%.o)
GRAPHS   := $(sort $(wildcard bench/graphs/*.yaml))

# Sizes at which `make run` evaluates graphs whose full size is beyond a CPU float64 reference.
EVAL_DIMS_attention        := t_q=128,t_kv=128
EVAL_DIMS_attention_causal := t_q=128,t_kv=128
EVAL_DIMS_attention_gqa    := t_q=128,t_kv=128
EVAL_DIMS_attention_d64    := t_q=128,t_kv=128
EVAL_DIMS_attention_d256   := t_q=128,t_kv=128
EVAL_DIMS_attention_bf16   := t_q=128,t_kv=128
EVAL_DIMS_attention_cross  := t_q=64,t_kv=256
EVAL_DIMS_attention_softcap := t_q=128,t_kv=128
EVAL_DIMS_decoder_layer    := t=16,d=256,f=512
EVAL_DIMS_matmul           := m=16
EVAL_DIMS_rmsnorm          := m=16
EVAL_DIMS_swiglu           := m=32
EVAL_DIMS_layernorm_mlp    := m=16
EVAL_DIMS_residual_rmsnorm := t=16
EVAL_DIMS_lora             := m=8,d=512
EVAL_DIMS_qknorm_attention := t_q=128,t_kv=128
EVAL_DIMS_gemm_logsumexp   := m=8,d=512
EVAL_DIMS_gemm_gelu        := m=8,d=512
EVAL_DIMS_gemm_groupnorm   := m=8,d=512
EVAL_DIMS_gemm_mish        := b=8
EVAL_DIMS_gemm_layernorm   := m=8,k=512
EVAL_DIMS_linear_bf16      := b=2,t=8,d=256,n=512
EVAL_DIMS_attention_batch_gqa := t_q=64,t_kv=64
EVAL_DIMS_attention_mask   := t_q=64,t_kv=96
EVAL_DIMS_swiglu_decode    := m=16,d=512,n=1024
EVAL_DIMS_rmsnorm_mlp_decode := m=16,d=512,n=1024

.PHONY: all test run deps clean unit-tests compile-tests generated gpu-build gpu-check check-generated torch-tests install check-install check-gpu-tests random-graphs
all: $(BUILD)/tsopt

# ---- dependencies ----------------------------------------------------------------------------------
DEB_PKGS := libyaml-dev libgsl-dev libopenblas-serial-dev libcriterion-dev clang libclang-rt-14-dev valgrind
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

# The test sources compiled, not linked (compile-tests): their -O2 warnings, as errors, in the plain build.
$(BUILD)/tests/%.o: tests/%.c tests/testutil.h | build/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c $< -o $@

# The simulated CUDA driver and CUPTI that test_tune runs `tsopt tune` on (never instrumented: it is
# dlopened into the sanitized binary like the real driver would be).
$(BUILD)/tests/libmockcuda.so: calibrate/mock_cuda.c
	@mkdir -p $(dir $@)
	cc -O1 -shared -fPIC -o $@ $< -lm

# ---- test ------------------------------------------------------------------------------------------
# unit-tests runs this build's tests: the Criterion binaries JOBS at a time (each runs 2 tests at a time;
# the slow ones first, so that no core idles at the end: test_tune mostly waits on its 15 s watchdog),
# each one's output kept in its .log and shown when it fails, then verify-rules and the Python checks.
SLOW_TESTS := test_tune test_row test_hostile test_emit test_search test_models
unit-tests: $(TEST_BIN) $(BUILD)/tsopt $(BUILD)/tests/libmockcuda.so
	@printf '%s\n' $(filter $(SLOW_TESTS:%=$(BUILD)/tests/%),$(TEST_BIN)) \
	  $(filter-out $(SLOW_TESTS:%=$(BUILD)/tests/%),$(TEST_BIN)) | \
	  xargs -P $(JOBS) -I{} sh -c 'TSOPT=$(BUILD)/tsopt MOCKCUDA=$(BUILD)/tests/libmockcuda.so {} --jobs 2 \
	    --short-filename > {}.log 2>&1 || { cat {}.log; echo "{} FAILED"; exit 1; }'; rc=$$?; \
	  for t in $(TEST_BIN); do printf '%-18s %s\n' $${t##*/} "$$(tail -n 1 $$t.log)"; done; exit $$rc
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
	@if python3 -c "import yaml" 2>/dev/null; then \
	  TSOPT=$(BUILD)/tsopt python3 tests/check_torch_op.py > $(BUILD)/torch-op.log 2>&1 || { cat $(BUILD)/torch-op.log; exit 1; }; \
	  echo "python/tsopt_torch.py without a GPU: $$(tail -n 1 $(BUILD)/torch-op.log)"; \
	else echo "tests/check_torch_op.py skipped: python3 lacks PyYAML"; fi
	@if command -v python3 >/dev/null; then \
	  TSOPT=$(BUILD)/tsopt python3 bench/test_accuracy.py > $(BUILD)/accuracy-tests.log 2>&1 || { cat $(BUILD)/accuracy-tests.log; exit 1; }; \
	  echo "bench/accuracy.py, chart.py: $$(tail -n 1 $(BUILD)/accuracy-tests.log)"; \
	else echo "bench/test_accuracy.py skipped: no python3"; fi

# Every check but the hostile-input ones (fuzz-smoke, valgrind-cli: .ci/run), in three steps that each keep
# JOBS cores busy. Why nothing is lost:
#  1. The plain build (-O2, warnings as errors) of build/tsopt, and of the tests compiled but not linked.
#     The plain tests are not run: they ran again what step 2 runs, the same sources built differently
#     only in -O2 against -O1 with the sanitizers. -O2's own compile-time findings are warnings, kept here
#     (GCC warns differently at -O2 than at -O1 with the sanitizers). No source depends on the build (no
#     __SANITIZE_ADDRESS__, __OPTIMIZE__ or NDEBUG in src/ or tests/), so at run time -O2 can only change
#     the effect of undefined behaviour: what UBSan and ASan report, and the two kinds they do not,
#     uninitialised reads and aliasing violations, which the sanitized build's flags above expose as far
#     as a build can (uninitialised memory holds a pattern, not what -O1 happens to leave there; alias
#     analysis is type-based, as at -O2). build/tsopt itself still runs in step 3 (every bench graph
#     compiled and diffed, the install, the importer) and under valgrind in .ci/run.
#  2. The tests, verify-rules and the Python checks under ASan + UBSan (build-san/).
#  3. check-generated, torch-tests, check-install and check-gpu-tests side by side (independent: each writes
#     its own files under build/; --output-sync keeps each one's output together).
test: build/.deps
	$(MAKE) -j$(JOBS) all compile-tests
	$(MAKE) -j$(JOBS) SAN=1 unit-tests
	$(MAKE) -j$(JOBS) --output-sync=target --no-print-directory check-generated torch-tests check-install check-gpu-tests random-graphs

# The test sources at this build's flags, without linking or running them (make test's -O2 warning check).
compile-tests: $(TEST_OBJ)

# The PyTorch importer (tsopt_torch/) round-trips its test modules through tsopt eval; skipped, saying why,
# where python3 has no torch (tests/torch/install_torch.sh installs it from PyPI).
torch-tests: $(BUILD)/tsopt
	@if python3 -c "import torch" 2>/dev/null; then \
	  TSOPT=$(BUILD)/tsopt python3 -W ignore tests/torch/roundtrip.py > $(BUILD)/torch-tests.log 2>&1 || { cat $(BUILD)/torch-tests.log; exit 1; }; \
	  echo "tsopt_torch round trips (tests/torch/roundtrip.py): $$(tail -n 1 $(BUILD)/torch-tests.log)"; \
	else echo "tsopt_torch round trips skipped: python3 has no torch (bash tests/torch/install_torch.sh installs it)"; fi

# generated/ must match what tsopt writes now, and every header and template must compile (sm_80 and
# sm_90a, warnings as errors: -Werror all-warnings also hands ptxas --warning-as-error, so ptxas's
# warnings, the wgmma serialisation ones on sm_90a among them, fail the check); one header included in two
# translation units must link.
# The sm_90a compile is of the device code only (-cubin: the device preprocessing, cicc and ptxas with the
# same command lines as in nvcc -c), not of the host code, which the sm_80 compile (nvcc -c, whose
# objects abi-check links) compiles already: nvcc's host preprocessing, cudafe++ and gcc -c see the same
# code for both, their command lines differing only in __CUDA_ARCH_LIST__ (800 or 900; nvcc --dryrun).
# A header or template that mentions __CUDA_ARCH_LIST__ gets the whole nvcc -c for sm_90a as well (the
# grep below); none does, and the CUDA headers they include do not read it (with CUDA 13.0 the
# host-preprocessed translation units of all 32 are byte-identical for the two). That saves cudafe++ and
# gcc -c (~3 s a file, a fifth of the check). The 64 compilations run JOBS at a time, largest file first.
# The sm_80 compile's device code is not optimised (NVVM and ptxas at -O0, NVCC_UNOPTIMISED): it checks that the
# code parses, instantiates and assembles for sm_80 (ptxas still rejects an instruction sm_80 lacks), not how fast
# it runs, which the sm_90a compile at -O3 and the GPU runs decide; decoder_layer.cuh 19.6 s -> 6.4 s on the
# 2-core CI machine. check-install builds the examples' device code the same way.
NVCC_CHECK = nvcc -std=c++17 -Werror all-warnings
NVCC_SM90A = -gencode=arch=compute_90a,code=sm_90a
NVCC_UNOPTIMISED = -Xcicc -O0 -Xptxas -O0
check-generated: $(BUILD)/tsopt
	@rm -rf $(BUILD)/regen $(BUILD)/nvcc && mkdir -p $(BUILD)/regen $(BUILD)/nvcc
	@for f in $(GRAPHS); do $(BUILD)/tsopt compile -o $(BUILD)/regen $$f > /dev/null || exit 1; done
	@diff -r -x README.md generated $(BUILD)/regen > $(BUILD)/regen.diff || \
	  { echo "generated/ is out of date: run make generated"; head -n 40 $(BUILD)/regen.diff; exit 1; }
	@echo "generated/ matches tsopt compile: ok"
	@for h in generated/*.cuh; do n=$$(basename $$h .cuh); u=$$(echo $$n | tr a-z A-Z); \
	  printf '#define TSOPT_%s_IMPLEMENTATION\n#include "%s"\n' $$u ../../$$h > $(BUILD)/nvcc/$$n.cu; done
	@for t in templates/*.cuh; do printf '#include "%s"\n' ../../$$t > $(BUILD)/nvcc/tpl_$$(basename $$t .cuh).cu; done
	@for h in generated/*.cuh templates/*.cuh; do \
	  case $$h in generated/*) cu=$(BUILD)/nvcc/$$(basename $$h .cuh).cu;; *) cu=$(BUILD)/nvcc/tpl_$$(basename $$h .cuh).cu;; esac; \
	  if grep -q __CUDA_ARCH_LIST__ $$h; then a90=90-host; else a90=90; fi; \
	  echo "$$(wc -c < $$h) 80 $$cu"; echo "$$(wc -c < $$h) $$a90 $$cu"; done | sort -rn | cut -d' ' -f2- | \
	  xargs -P $(JOBS) -n 2 sh -c 'case $$0 in \
	    80) $(NVCC_CHECK) -arch=sm_80 $(NVCC_UNOPTIMISED) -c $$1 -o $$1.80.o;; \
	    90) $(NVCC_CHECK) $(NVCC_SM90A) -Xptxas -v -cubin $$1 -o $$1.90.cubin 2> $$1.90.ptxas;; \
	    *) $(NVCC_CHECK) $(NVCC_SM90A) -Xptxas -v -c $$1 -o $$1.90.o 2> $$1.90.ptxas;; \
	  esac || { grep -v "^ptxas info" $$1.90.ptxas 2> /dev/null; echo "nvcc failed on $$1 (sm_$$0)"; exit 255; }'
	@echo "every generated header and template compiles for sm_80 and sm_90a: ok"
	@awk '/Function properties for/ { f = $$NF } \
	  /bytes stack frame/ && $$1 > 0 && $$5 == 0 { print FILENAME ": " f ": " $$1 " bytes of stack, no spills"; bad = 1 } \
	  END { exit bad }' $(BUILD)/nvcc/*.90.ptxas || { echo "a kernel keeps an array in local memory (indexed at run time: \
see templates/map.cuh put()); registers would serve"; exit 1; }
	@echo "no sm_90a kernel keeps an array in local memory (a stack frame without spills): ok"
	@printf '#include "../../generated/swiglu.cuh"\nint other(void) { return (int)swiglu_workspace_bytes(); }\n' > $(BUILD)/nvcc/tu2.cu
	@printf '#include "../../generated/swiglu.cuh"\nint other(void);\nint main(void) { return other(); }\n' > $(BUILD)/nvcc/tu1.cu
	@$(NVCC_CHECK) -arch=sm_80 $(BUILD)/nvcc/tu1.cu $(BUILD)/nvcc/tu2.cu -o $(BUILD)/nvcc/two_tu
	@echo "a generated header included in two translation units links: ok"
	@$(MAKE) --no-print-directory abi-check

# The launch helpers' argument checks through the C ABI on a stub CUDA runtime (no GPU; tests/abi/),
# linked with the sm_80 objects check-generated compiled.
ABI_GRAPHS = matmul attention decoder_layer
abi-check:
	@for n in $(ABI_GRAPHS); do test -f $(BUILD)/nvcc/$$n.cu.80.o || { echo "abi-check: make check-generated first"; exit 1; }; done
	@$(CC) -std=c11 -O1 -Wall -Wextra -Werror -c tests/abi/stub_cudart.c -o $(BUILD)/nvcc/stub_cudart.o
	@$(CC) -std=c11 -O1 -Wall -Wextra -Werror -Itests/abi -c tests/abi/test_abi.c -o $(BUILD)/nvcc/test_abi.o
	@nvcc -cudart none $(ABI_GRAPHS:%=$(BUILD)/nvcc/%.cu.80.o) $(BUILD)/nvcc/stub_cudart.o $(BUILD)/nvcc/test_abi.o \
	  -o $(BUILD)/nvcc/test_abi
	@$(BUILD)/nvcc/test_abi
	@for n in $(ABI_GRAPHS); do readelf -sW --demangle $(BUILD)/nvcc/$$n.cu.80.o | \
	  awk '$$5 != "LOCAL" && $$7 != "UND" && $$6 != "HIDDEN" && /tsopt_/' > $(BUILD)/nvcc/$$n.exported; \
	  if [ -s $(BUILD)/nvcc/$$n.exported ]; then echo "abi-check: $$n exports internal symbols (another library of the \
	same graph would share them):"; head -n 5 $(BUILD)/nvcc/$$n.exported; exit 1; fi; done
	@echo "generated headers export only their C ABI and typed launch function: ok"

# ---- install ---------------------------------------------------------------------------------------
# The binary finds its data in <bin>/../share/tsopt (src/home.h), so PREFIX may be any folder.
PREFIX ?= /usr/local
SHARE   = $(DESTDIR)$(PREFIX)/share/tsopt
install: $(BUILD)/tsopt
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE)/rules $(SHARE)/templates $(SHARE)/costmodel $(SHARE)/calibrate \
	  $(SHARE)/graphs $(SHARE)/examples/host $(SHARE)/examples/c $(SHARE)/examples/graph $(SHARE)/examples/torch \
	  $(SHARE)/python
	install -m 755 $(BUILD)/tsopt $(DESTDIR)$(PREFIX)/bin/tsopt
	install -m 644 rules/*.rules $(SHARE)/rules
	install -m 644 templates/*.cuh $(SHARE)/templates
	install -m 644 costmodel/*.yaml $(SHARE)/costmodel
	install -m 644 calibrate/kernels.cu $(SHARE)/calibrate
	install -m 644 bench/graphs/*.yaml $(SHARE)/graphs
	install -m 644 examples/README.md examples/Makefile examples/CMakeLists.txt $(SHARE)/examples
	install -m 644 examples/host/* $(SHARE)/examples/host
	install -m 644 examples/c/* $(SHARE)/examples/c
	install -m 644 examples/graph/* $(SHARE)/examples/graph
	install -m 644 examples/torch/* $(SHARE)/examples/torch
	install -m 644 python/tsopt_torch.py $(SHARE)/python

# A fresh install used from an unrelated folder: every bench graph compiles with the data found beside the
# binary, the examples (C, C++ and CUDA; Make and CMake) build and link against its headers, and a
# translation unit that includes a header without its implementation macro compiles about as fast as an
# empty one.
INSTALL_TEST := $(abspath $(BUILD)/install-test)
check-install: $(BUILD)/tsopt
	@rm -rf $(INSTALL_TEST) && $(MAKE) -s install PREFIX=$(INSTALL_TEST)/prefix > /dev/null
	@mkdir -p $(INSTALL_TEST)/work && cd $(INSTALL_TEST)/work && unset TSOPT_HOME && \
	  for g in ../prefix/share/tsopt/graphs/*.yaml; do ../prefix/bin/tsopt compile -o headers $$g > /dev/null || exit 1; done
	@echo "the installed tsopt compiles every bench graph from another folder: ok"
	@cd $(INSTALL_TEST)/work && $(MAKE) -s -C ../prefix/share/tsopt/examples TSOPT=$(INSTALL_TEST)/prefix/bin/tsopt \
	  OUT=$(INSTALL_TEST)/work/examples ARCH="$(NVCC_SM90A) $(NVCC_UNOPTIMISED)" > examples.log 2>&1 || { cat examples.log; exit 1; }
	@echo "examples/ (host program with two sizes of one graph, C program through the C ABI, CUDA-graph helper from C) build against it: ok"
	@if command -v cmake > /dev/null; then cd $(INSTALL_TEST)/work && \
	  { cmake -S ../prefix/share/tsopt/examples -B cmake -DTSOPT=$(INSTALL_TEST)/prefix/bin/tsopt \
	      -DGRAPHS=$(INSTALL_TEST)/prefix/share/tsopt/graphs -DCMAKE_CUDA_FLAGS="$(NVCC_UNOPTIMISED)" && \
	    cmake --build cmake; } > cmake.log 2>&1 || \
	  { cat cmake.log; exit 1; }; echo "examples/CMakeLists.txt builds against it: ok"; \
	else echo "examples/CMakeLists.txt not built: no cmake"; fi
	@cd $(INSTALL_TEST)/work && printf 'int f(void) { return 1; }\n' > empty.cu && \
	  printf '#include "headers/decoder_layer.cuh"\nsize_t f(void) { return decoder_layer_workspace_bytes(1); }\n' > decl.cu && \
	  t0=$$(date +%s.%N) && nvcc -std=c++17 -Werror all-warnings -c empty.cu -o empty.o && t1=$$(date +%s.%N) && \
	  nvcc -std=c++17 -Werror all-warnings -c decl.cu -o decl.o && t2=$$(date +%s.%N) && \
	  awk -v a=$$t0 -v b=$$t1 -v c=$$t2 'BEGIN { printf "a TU including decoder_layer.cuh without its implementation macro compiles in %.1f s (an empty TU: %.1f s)\n", c - b, b - a }'

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
GPU_TESTS := gemm_test:-lcublas attention_test: gemm_sm90_test:-lcublas gemm_row_parts_test:-lcublas attention_sm90_test: row_test: gemm_f32_test:-lcublas math_test:
gpu-build: $(BUILD)/tsopt
	bash bench/gpu_build.sh
	@for t in $(GPU_TESTS); do n=$${t%%:*}; l=$${t#*:}; \
	  nvcc -O3 -std=c++17 $(NVCC_ARCH) -I templates bench/gpu/$$n.cu $$l -o build/gpu/$$n & done; \
	  nvcc -O3 -std=c++17 $(NVCC_ARCH) -I templates -DROW_TEST_PAIRS=1 bench/gpu/row_test.cu -o build/gpu/row_test_pairs & \
	  fail=0; for j in $$(jobs -p); do wait $$j || fail=1; done; exit $$fail

gpu-check:
	bash bench/gpu_run.sh

# 400 random graphs of the kinds external suites hold (bench/random_graphs.py: linear layers with activation chains,
# batched matmuls, grouped-head attention, norms over any axis, MLP blocks, transposed elementwise maps; two fixed
# seeds) must each compile; the report also lists slow compiles, matrix products left to a reduce kernel and extra
# GEMMs, which do not fail it.
random-graphs: $(BUILD)/tsopt
	@for seed in 1 2; do python3 bench/random_graphs.py --seed $$seed --count 200 --tsopt $(BUILD)/tsopt \
	  > $(BUILD)/random-graphs-$$seed.log 2>&1 || { cat $(BUILD)/random-graphs-$$seed.log; exit 1; }; \
	  sed -n '/graphs (/,$$p' $(BUILD)/random-graphs-$$seed.log; done

# The template test programs (bench/gpu/*_test.cu, what gpu-build links and the H200 runs) compiled here,
# host code and sm_90a device code to PTX (code=compute_90a: NVVM at -O0, no ptxas), warnings as errors, not
# linked: a template change that breaks one of them fails make test, not the next GPU session. Every
# instantiation is compiled; optimising and assembling them is left to gpu-build (these programs at -O3, for
# the GPU) and to check-generated, which assembles every header's code at -O3 with ptxas's warnings as errors.
# attention_sm90_test alone took 196 s of a core with NVVM at -O1 and ptxas, 112 s to PTX at -O1, 46 s at -O0
# (gemm_sm90_test 41 s with ptxas at -O1).
GPU_TEST_OBJS := $(foreach t,$(GPU_TESTS),$(BUILD)/gpu-tests/$(firstword $(subst :, ,$(t))).o)
$(BUILD)/gpu-tests/%.o: bench/gpu/%.cu $(wildcard templates/*.cuh bench/gpu/*.cuh)
	@mkdir -p $(@D)
	@$(NVCC_CHECK) -O0 -Xcicc -O0 -gencode=arch=compute_90a,code=compute_90a -I templates -c $< -o $@ > $(@:.o=.log) 2>&1 || { echo "$<:"; cat $(@:.o=.log); rm -f $@; exit 1; }
# The templates' host-side checks (tests/templates/*.cu): index arithmetic a kernel shares with the host
# (__host__ __device__), built and run here, no GPU needed.
TEMPLATE_HOST_TESTS := $(patsubst tests/templates/%.cu,$(BUILD)/gpu-tests/host_%,$(wildcard tests/templates/*.cu))
$(BUILD)/gpu-tests/host_%: tests/templates/%.cu $(wildcard templates/*.cuh)
	@mkdir -p $(@D)
	@$(NVCC_CHECK) -O1 -arch=sm_80 -I templates $< -o $@ > $@.log 2>&1 || { echo "$<:"; cat $@.log; rm -f $@; exit 1; }
check-gpu-tests: $(GPU_TEST_OBJS) $(TEMPLATE_HOST_TESTS)
	@echo "the template test programs (bench/gpu/*_test.cu) compile: ok"
	@for t in $(TEMPLATE_HOST_TESTS); do $$t > $$t.log 2>&1 || { cat $$t.log; exit 1; }; tail -n 1 $$t.log; done

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/main.d

# ---- fuzzing (tests/fuzz/README.md) ------------------------------------------------------------------
# libFuzzer targets built with clang into build-fuzz/ (library and targets with ASan + UBSan).
#   make fuzz             each target for FUZZ_SECONDS (default 600) over its corpus, with the dictionary
#   make fuzz-smoke       what CI runs: replays tests/fuzz/regressions/<target>/, then fuzzes each target
#                         for FUZZ_SMOKE_SECONDS (30: CI's ten minutes); fails when a target finds a crash (the
#                         reproducer is left in build-fuzz/)
#   make fuzz-regressions only the replay, no fuzzing
#   make valgrind-cli     check, eval and compile every bench graph under valgrind: no errors, no leaks
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 30
FUZZ_MAXLEN_fuzz_graph   ?= 8192
FUZZ_MAXLEN_fuzz_rules   ?= 8192
FUZZ_MAXLEN_fuzz_compile ?= 4096
FUZZ_MAXLEN_fuzz_tune    ?= 8192
FUZZ_TIMEOUT_fuzz_graph   ?= 20
FUZZ_TIMEOUT_fuzz_rules   ?= 20
FUZZ_TIMEOUT_fuzz_compile ?= 60
FUZZ_TIMEOUT_fuzz_tune    ?= 20
FUZZ_BUILD   := build-fuzz
FUZZ_TARGETS := fuzz_graph fuzz_rules fuzz_compile fuzz_tune
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Isrc $(FUZZ_SAN)
FUZZ_OBJ     := $(LIB_SRC:src/%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)
# Each run: the target's corpus (new inputs go to build-fuzz/corpus/<target>, the seeds stay as they are).
FUZZ_RUN      = mkdir -p $(FUZZ_BUILD)/corpus/$(1) $(FUZZ_BUILD)/crashes/$(1) && \
                $(FUZZ_BUILD)/$(1) -max_total_time=$(2) -max_len=$(FUZZ_MAXLEN_$(1)) -timeout=$(FUZZ_TIMEOUT_$(1)) -rss_limit_mb=2048 \
                  -dict=tests/fuzz/tsopt.dict -print_final_stats=1 \
                  -artifact_prefix=$(FUZZ_BUILD)/crashes/$(1)/ \
                  $(FUZZ_BUILD)/corpus/$(1) tests/fuzz/corpus/$(1)
FUZZ_REPLAY   = if ls tests/fuzz/regressions/$(1)/* >/dev/null 2>&1; then \
                  $(FUZZ_BUILD)/$(1) -runs=0 tests/fuzz/regressions/$(1)/* > $(FUZZ_BUILD)/replay-$(1).log 2>&1 || \
                  { tail -n 40 $(FUZZ_BUILD)/replay-$(1).log; echo "$(1): a regression input fails again"; exit 1; }; \
                  echo "$(1): $$(ls tests/fuzz/regressions/$(1) | wc -l) regression inputs replayed: ok"; fi

.PHONY: abi-check fuzz fuzz-build fuzz-smoke fuzz-regressions valgrind-cli
fuzz-build: $(FUZZ_BINS)

$(FUZZ_BUILD)/obj/%.o: src/%.c | build/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libtsopt.a: $(FUZZ_OBJ)
	$(AR) rcs $@ $^

$(FUZZ_BUILD)/%: tests/fuzz/%.c tests/fuzz/fuzz_common.h $(FUZZ_BUILD)/libtsopt.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_BUILD)/libtsopt.a $(LDLIBS) -o $@

fuzz-regressions: $(FUZZ_BINS)
	@set -e; $(foreach t,$(FUZZ_TARGETS),$(call FUZZ_REPLAY,$(t));)

fuzz: fuzz-regressions
	@set -e; $(foreach t,$(FUZZ_TARGETS),echo "== $(t) for $(FUZZ_SECONDS) s"; $(call FUZZ_RUN,$(t),$(FUZZ_SECONDS));)

# 45 s of each target; one rule per target, so that `make -j2 fuzz-smoke` runs two at once.
fuzz-smoke: $(FUZZ_TARGETS:%=fuzz-smoke-%)
fuzz-smoke-%: fuzz-regressions
	@$(call FUZZ_RUN,$*,$(FUZZ_SMOKE_SECONDS)) > $(FUZZ_BUILD)/smoke-$*.log 2>&1 || \
	  { tail -n 60 $(FUZZ_BUILD)/smoke-$*.log; echo "$* found a crash: $$(ls $(FUZZ_BUILD)/crashes/$*)"; exit 1; }
	@echo "== $* for $(FUZZ_SMOKE_SECONDS) s: $$(grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units)' $(FUZZ_BUILD)/smoke-$*.log | tr '\n' ' ')"

# Every bench graph: check, eval at small sizes and compile into a scratch folder, each under valgrind,
# which must report no errors and no leaks (--error-exitcode=9 on any).
VALGRIND := valgrind --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible -q
VALGRIND_DIMS_attention        := t_q=8,t_kv=8
VALGRIND_DIMS_attention_causal := t_q=8,t_kv=8
VALGRIND_DIMS_attention_gqa    := t_q=8,t_kv=8
VALGRIND_DIMS_attention_d64    := t_q=8,t_kv=8
VALGRIND_DIMS_attention_d256   := t_q=8,t_kv=8
VALGRIND_DIMS_attention_bf16   := t_q=8,t_kv=8
VALGRIND_DIMS_attention_cross  := t_q=4,t_kv=16
VALGRIND_DIMS_attention_softcap := t_q=8,t_kv=8
VALGRIND_DIMS_decoder_layer    := t=4,d=256,f=64
VALGRIND_DIMS_decoder_decode   := b=2,s=5,s_max=8,d=256,f=64
VALGRIND_DIMS_decoder_prefill  := b=2,n=3,s=5,s_max=8,d=256,f=64
VALGRIND_DIMS_matmul           := m=4,d=64,n=64
VALGRIND_DIMS_rmsnorm          := m=4,d=64,n=64
VALGRIND_DIMS_rmsnorm_mlp      := m=4,d=64,n=64
VALGRIND_DIMS_swiglu           := m=4,d=64,n=64
VALGRIND_DIMS_gemm_gelu        := m=4,d=64,n=64
VALGRIND_DIMS_gemm_logsumexp   := m=4,d=64,n=64
VALGRIND_DIMS_gemm_groupnorm   := m=4,d=64,f=128,g=4,c=32
VALGRIND_DIMS_gemm_mish        := b=4,k=64,f=32
VALGRIND_DIMS_gemm_layernorm   := m=4,k=64,n=64
VALGRIND_DIMS_gemm_batchnorm   := b=8,k=64,f=64
VALGRIND_DIMS_linear_bf16      := b=2,t=4,d=64,n=64
VALGRIND_DIMS_attention_batch_gqa := t_q=8,t_kv=8
VALGRIND_DIMS_attention_mask := t_q=8,t_kv=12
VALGRIND_DIMS_layernorm_mlp    := m=4,d=64,f=64,e=32
VALGRIND_DIMS_lora             := m=4,d=64,n=64,r=4
VALGRIND_DIMS_qknorm_attention := t_q=8,t_kv=8
VALGRIND_DIMS_residual_rmsnorm := t=4,d=64
VALGRIND_DIMS_swiglu_decode    := m=4,d=64,n=64
VALGRIND_DIMS_rmsnorm_mlp_decode := m=4,d=64,n=64
valgrind-cli: $(GRAPHS:bench/graphs/%.yaml=valgrind-%)
	@echo "valgrind: check, eval and compile of every bench graph: no errors, no leaks"

valgrind-%: build/tsopt
	@rm -rf build/valgrind/$* && mkdir -p build/valgrind/$*
	@echo "== valgrind bench/graphs/$*.yaml"
	@test -n "$(VALGRIND_DIMS_$*)" || { echo "valgrind-$*: the Makefile has no VALGRIND_DIMS_$* (small sizes for bench/graphs/$*.yaml)"; exit 1; }
	@$(VALGRIND) build/tsopt check bench/graphs/$*.yaml > build/valgrind/$*/check.log
	@$(VALGRIND) build/tsopt eval --dims $(VALGRIND_DIMS_$*) bench/graphs/$*.yaml > build/valgrind/$*/eval.log
	@$(VALGRIND) build/tsopt compile -o build/valgrind/$* bench/graphs/$*.yaml > build/valgrind/$*/compile.log
