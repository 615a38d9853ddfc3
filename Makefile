# nnasm — one Makefile, out-of-tree into build/. `make run` and `make test` install what they need
# first (make deps), then build, then run.
#
#   make deps      install the Debian packages (idempotent; sudo when not root)
#   make           library (static + shared), the nnasm tool, the samples
#   make run       the flagship sample
#   make test      the layer check (tests/check_layers.sh), then the googletest suite (at ref,
#                  avx2 and the native ISA level)
#   make test-isa  the suite at every ISA level and with the JIT off
#   make bench     google benchmark (tests/bench/)
#   make bench-gemm  the GEMM benchmarks only, as a table against Eigen and the baselines
#   make bench-targets  issue 4's speed targets, each with this machine's figure and whether it is
#                  met (BENCH_CPUS=0,1 pins the runs to those CPUs)
#   make bench-threads  the thread sweep, 1, 2, 4, … threads up to the machine's cores
#   make bench-deps  optional competitor libraries for the bench baselines (tests/bench/README.md)
#   make bench-torch PyTorch's LeNet-5 rows (tests/bench/torch_lenet.py; needs bench-deps)
#   make bench-models  real models (ResNet-18, MobileNetV2, SqueezeNet, ShuffleNetV2, a transformer
#                  encoder, an MLP, an LSTM and a GRU classifier) against ONNX Runtime and PyTorch,
#                  alternating rounds, one table
#                  (tests/bench/models/; BENCH_MODELS=resnet18,mlp ROUNDS=3 SECONDS=0.5 THREADS=1,2)
#   make bench-models-deps  bench-deps plus onnxruntime-node (npm) into build/bench-models/ort/
#   make bench-recurrent  the LSTM and GRU listings against L2 bandwidth, the LSTM training step
#                  against PyTorch, the lstm and gru exports against ONNX Runtime (one thread)
#   make bench-layers  the CNNs layer by layer against ONNX Runtime's profile (after bench-models;
#                  LAYER_MODELS=resnet18,...)
#   make onnx-models  installs python3-torch and rewrites the PyTorch exports the import test
#                  reads (tests/onnx/torch_exports.py → tests/golden/onnx/)
#   make install PREFIX=/usr/local [DESTDIR=…]  libraries, headers, pkg-config and CMake files, the
#                  tool (docs/install.md); make test-install builds and runs the consumer
#                  projects of tests/install/ against such an install
#   make test SAN=address|thread   sanitizer flavours, built into build/san-<name>/
#   make check-noexcept  the library and suite built with -fno-exceptions -fno-rtti
#   make fuzz      the libFuzzer targets (tests/fuzz/fuzz_<name>.cpp; clang, ASan + UBSan), each
#                  FUZZ_SECONDS (60) on a copy of its corpus; fails if one finds a crash
#   make fuzz-smoke  the same for 10 seconds each (CI)
#   make onnx-conformance  import and run every ONNX backend node test (libonnx-testdata): a table
#                  of passed / failed / unsupported in build/onnx-conformance.md

CXX      ?= g++
PREFIX   ?= /usr/local
SAN      ?=
BUILD    := build$(if $(SAN),/san-$(SAN))

DEB_PACKAGES := g++ make libxbyak-dev libeigen3-dev libcereal-dev libfmt-dev libgtest-dev \
                libbenchmark-dev libcli11-dev libxxhash-dev zlib1g-dev dataset-fashion-mnist \
                libonnx-dev libprotobuf-dev libonnx-testdata cmake pkg-config python3-numpy
# Optional: only the benchmark baselines use them (make bench-deps); nothing else needs them.
BENCH_DEB_PACKAGES := libopenblas-dev libdnnl-dev libxsmm-dev python3-torch python3-torchvision
# Only the fuzz targets use them (make fuzz): clang and its libFuzzer and sanitizer runtimes.
FUZZ_DEB_PACKAGES := clang libclang-rt-14-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

CXXFLAGS ?= -O2
CXXFLAGS += -std=c++17 -Wall -Wextra -fPIC -MMD -MP
# Reference kernels are plain loops: let g++'s -O2 vectorizer add runtime alias checks and
# epilogues (its default "very cheap" model refuses both and leaves them scalar).
ifeq ($(findstring clang,$(CXX)),)
CXXFLAGS += -fvect-cost-model=dynamic
endif
CPPFLAGS += -I. -isystem /usr/include/eigen3
# The ONNX importer (serialize/onnx/) reads models through the protobuf classes Debian's
# libonnx-dev generated with these two definitions; every file that includes onnx/onnx_pb.h must
# see them the same way.
CPPFLAGS += -DONNX_ML=1 -DONNX_NAMESPACE=onnx
LDLIBS   := -lfmt -lxxhash -lz -lpthread -lonnx_proto -lprotobuf
ifneq ($(SAN),)
CXXFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer -g
LDFLAGS  += -fsanitize=$(SAN)
endif
# make check-noexcept: everything without exceptions and RTTI (xbyak reports errors by code), but
# the one translation unit that wraps cereal, which throws and catches at its edge.
ifneq ($(NOEXCEPT),)
CXXFLAGS += -fno-exceptions -fno-rtti -DXBYAK_NO_EXCEPTION
BUILD    := build/noexcept
endif

MAKEFLAGS += --no-print-directory
JOBS := -j$(shell nproc)

# Three libraries (docs/install.md): the runtime (libnnasm: the engine, the shell, listings, model
# files, .npy and the C API; what a game ships), the importers (libnnasm_import: ONNX and .flow,
# with protobuf and libonnx, and the C API's import calls) and, static only and not installed,
# the samples' and the suite's dataset loaders and plotting (libnnasm_data.a: IDX/Fashion-MNIST
# with zlib, SVG plots, CSV logs).
IMPORT_SRC:= $(wildcard serialize/onnx/*.cpp serialize/flow/*.cpp serialize/import_names.cpp api/*import*.cpp)
DATA_SRC  := $(addprefix serialize/,fashion_mnist.cpp idx.cpp svg_plot.cpp csv_log.cpp)
ALL_LIB_SRC := $(wildcard isa/*.cpp jit/*.cpp engine/*.cpp engine/*/*.cpp ops/*.cpp ops/*/*.cpp shell/*.cpp serialize/*.cpp \
                       serialize/*/*.cpp api/*.cpp)
LIB_SRC   := $(filter-out $(IMPORT_SRC) $(DATA_SRC),$(ALL_LIB_SRC))
TOOL_SRC  := $(wildcard shell/cli/*.cpp)
SAMPLE_SRC:= $(wildcard samples/*.cpp)
# Plain C samples of the C API (api/nnasm.h), linked against the static library.
SAMPLE_C_SRC := $(wildcard samples/*.c)
# Code the suite shares with other programs (the ONNX node-test runner with tests/onnx/conformance.cpp).
TEST_SUPPORT_SRC := tests/onnx/node_case.cpp
TEST_SRC  := $(wildcard tests/*_test.cpp) $(TEST_SUPPORT_SRC)
# C sources of the suite: the C API's header compiled as strict C99.
TEST_C_SRC := $(wildcard tests/*.c)
# Tests that need a process of their own (e.g. a replaced global operator new).
SOLO_SRC  := $(wildcard tests/solo/*_test.cpp)
BENCH_SRC := $(wildcard tests/bench/*.cpp)

obj = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(1))
LIB_OBJ := $(call obj,$(LIB_SRC))
IMPORT_OBJ := $(call obj,$(IMPORT_SRC))
DATA_OBJ := $(call obj,$(DATA_SRC))
# Each archive also depends on its member list: a source file added since the last build (whose
# object another make run may have built already) must still get into the archive.
members = $(shell mkdir -p $(BUILD); echo '$(2)' | cmp -s - $(1) 2>/dev/null || echo '$(2)' > $(1))$(1)
LIB_LIST := $(call members,$(BUILD)/libnnasm.members,$(LIB_OBJ))
IMPORT_LIST := $(call members,$(BUILD)/libnnasm_import.members,$(IMPORT_OBJ))
DATA_LIST := $(call members,$(BUILD)/libnnasm_data.members,$(DATA_OBJ))

LIB_A    := $(BUILD)/libnnasm.a
LIB_SO   := $(BUILD)/libnnasm.so
IMPORT_A := $(BUILD)/libnnasm_import.a
IMPORT_SO:= $(BUILD)/libnnasm_import.so
DATA_A   := $(BUILD)/libnnasm_data.a
# What the tool, the samples and the suite link, in the order a static link needs.
LIBS_ALL := $(IMPORT_A) $(DATA_A) $(LIB_A)
# The shared libraries' version (engine/version.h): libnnasm.so.MAJOR.MINOR.PATCH with the soname
# libnnasm.so.MAJOR, and the links libnnasm.so.MAJOR and libnnasm.so beside it.
version_part = $(shell sed -n 's/^\#define NNASM_VERSION_$(1) \([0-9]*\)$$/\1/p' engine/version.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION  := $(VERSION_MAJOR).$(call version_part,MINOR).$(call version_part,PATCH)
TOOL     := $(BUILD)/nnasm
SAMPLES  := $(patsubst samples/%.cpp,$(BUILD)/samples/%,$(SAMPLE_SRC)) $(patsubst samples/%.c,$(BUILD)/samples/%,$(SAMPLE_C_SRC))
TESTS    := $(BUILD)/tests/nnasm_tests
SOLO     := $(patsubst tests/solo/%.cpp,$(BUILD)/tests/%,$(SOLO_SRC))
BENCH    := $(BUILD)/tests/nnasm_bench
# The ONNX backend node tests (libonnx-testdata), run by tests/onnx/conformance.cpp.
ONNX_NODE_DIR ?= /usr/share/libonnx-testdata/data/node
CONFORMANCE := $(BUILD)/tests/onnx_conformance

.PHONY: all deps bench-deps fuzz-deps run test test-isa check-noexcept bench bench-gemm bench-targets bench-threads bench-torch bench-models bench-models-deps bench-layers bench-recurrent onnx-models fuzz fuzz-smoke samples \
        onnx-conformance install test-install clean FORCE
all: $(LIB_A) $(LIB_SO) $(IMPORT_A) $(IMPORT_SO) $(TOOL) $(SAMPLES)
samples: $(SAMPLES)

deps: PKGS := $(DEB_PACKAGES)
bench-deps: PKGS := $(BENCH_DEB_PACKAGES)
fuzz-deps: PKGS := $(FUZZ_DEB_PACKAGES)
fuzz-deps: deps
deps bench-deps fuzz-deps:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

run: deps
	@$(MAKE) $(JOBS) $(BUILD)/samples/fashion_mlp
	$(BUILD)/samples/fashion_mlp

# The suite runs once per ISA level below the machine's best (capped by NNASM_ISA), briefly, then
# at the native level with googletest's full summary last; then README's own program is built
# with README's compile line against build/libnnasm.a (tests/readme_build.sh; not under SAN).
# It also builds what README says `make` leaves under build/ (the shared library and the samples:
# a few objects and links) and checks that all of it is there (tests/readme_files.sh), then
# installs into a temporary prefix and builds and runs the consumer projects of tests/install/
# with CMake and pkg-config against it (tests/install/consumer_test.sh; not under SAN).
test: deps
	tests/check_layers.sh
	tests/check_imm_reads.sh
	@$(MAKE) $(JOBS) $(TESTS) $(SOLO) $(TOOL) $(if $(SAN),,$(LIB_A) $(LIB_SO) $(SAMPLES))
	@for t in $(SOLO); do $$t --gtest_brief=1 || exit 1; done
	NNASM_ISA=ref NNASM_TOOL=$(TOOL) $(TESTS) --gtest_brief=1
	NNASM_ISA=avx2 NNASM_TOOL=$(TOOL) $(TESTS) --gtest_brief=1
	NNASM_TOOL=$(TOOL) $(TESTS)
	$(if $(SAN),,NNASM_LIBRARY=$(LIB_SO) /usr/bin/python3 tests/python/test_nnasm.py)
	$(if $(SAN),,tests/readme_build.sh)
	$(if $(SAN),,tests/readme_files.sh)
	$(if $(SAN),,tests/install/consumer_test.sh)
	$(if $(SAN),,tests/workflow.sh)
	$(if $(SAN),,@$(MAKE) $(ABI_V1_CLIENT) && $(ABI_V1_CLIENT))

# The library and the suite built with -fno-exceptions -fno-rtti into build/noexcept/ (the
# platforms that forbid both), then the suite at the native level. The tool is the ordinary one:
# its option parser (CLI11) throws.
check-noexcept: deps
	@$(MAKE) $(JOBS) NOEXCEPT=1 build/noexcept/tests/nnasm_tests
	@$(MAKE) $(JOBS) $(TOOL)
	NNASM_TOOL=$(TOOL) build/noexcept/tests/nnasm_tests --gtest_brief=1

# Every level and the JIT switched off (NNASM_JIT=0), each with a full summary.
test-isa: deps
	@$(MAKE) $(JOBS) $(TESTS) $(TOOL)
	for isa in ref avx2 avx512; do NNASM_ISA=$$isa NNASM_TOOL=$(TOOL) $(TESTS) --gtest_brief=1 || exit 1; done
	NNASM_JIT=0 NNASM_TOOL=$(TOOL) $(TESTS) --gtest_brief=1

# Every ONNX backend node test imported and run (tests/onnx/conformance.cpp): a table of passed /
# failed / unsupported per test and per op type in $(BUILD)/onnx-conformance.md; fails if a test
# of an op the importer claims fails.
onnx-conformance: deps
	@$(MAKE) $(JOBS) $(CONFORMANCE)
	$(CONFORMANCE) $(ONNX_NODE_DIR) $(BUILD)/onnx-conformance.md

$(CONFORMANCE): $(call obj,tests/onnx/conformance.cpp $(TEST_SUPPORT_SRC)) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# One thread, like the baselines (tests/bench/threads_bench.cpp sets its own counts).
# BENCH_ARGS passes more flags, e.g. BENCH_ARGS=--benchmark_filter=gemm.
# oneDNN's 2-thread rows run in a process of their own: OpenMP's threads spin after each parallel
# region and slowed the rows that ran after them in the same process.
bench: deps
	@$(MAKE) $(JOBS) $(BENCH)
	NNASM_THREADS=1 $(BENCH) --benchmark_filter=-'BM_threads_sgemm_(vs_)?onednn' --benchmark_repetitions=5 \
	  --benchmark_report_aggregates_only=true $(BENCH_ARGS)
	NNASM_THREADS=1 $(BENCH) --benchmark_filter='BM_threads_sgemm_(vs_)?onednn' --benchmark_repetitions=5 \
	  --benchmark_report_aggregates_only=true $(BENCH_ARGS)

# The thread sweep (tests/bench/threads_bench.cpp: 1, 2, 4, … threads up to the machine's cores),
# for a machine with more cores than the one docs/benchmarks.md's tables come from; oneDNN's rows
# after, in a process of their own.
bench-threads: deps
	@$(MAKE) $(JOBS) $(BENCH)
	$(BENCH) --benchmark_filter='BM_threads_(pool|cache|mlp|gemv|sgemm/)' --benchmark_repetitions=3 \
	  --benchmark_report_aggregates_only=true $(BENCH_ARGS)
	$(BENCH) --benchmark_filter='BM_threads_sgemm_onednn/' --benchmark_repetitions=3 \
	  --benchmark_report_aggregates_only=true $(BENCH_ARGS)

# The GEMM rows (nnasm, Eigen and the installed baselines), then their medians as one table with
# each library's time over nnasm's (tests/bench/gemm_table.awk).
bench-gemm: deps
	@$(MAKE) $(JOBS) $(BENCH)
	@mkdir -p $(BUILD)/bench
	NNASM_THREADS=1 $(BENCH) --benchmark_filter=^BM_gemm_ --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
	  --benchmark_out=$(BUILD)/bench/gemm.csv --benchmark_out_format=csv $(BENCH_ARGS)
	@awk -f tests/bench/gemm_table.awk $(BUILD)/bench/gemm.csv

# Issue 4's speed targets: the rows that measure them, then one line per target with the figure,
# the target and whether it is met (tests/bench/targets.awk). Four processes: a CSV file's rows
# must share their counters, and oneDNN's 2-thread rows need a process of their own (OpenMP's
# threads spin after each parallel region). BENCH_CPUS pins every run to those CPUs with taskset,
# e.g. BENCH_CPUS=0,1 on two physical cores of a larger machine, so that the 2-thread rows have
# two cores to themselves; the thread sweep then stops at their count.
TARGETS_RUN = NNASM_THREADS=1 $(if $(BENCH_CPUS),taskset -c $(BENCH_CPUS)) $(BENCH) --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_out_format=csv
bench-targets: deps
	@$(MAKE) $(JOBS) $(BENCH)
	@mkdir -p $(BUILD)/bench
	@rm -f $(BUILD)/bench/targets_*.csv
	$(TARGETS_RUN) --benchmark_filter='^BM_threads_(mlp_(forward|train)_b(1|64)|gemv_1x784x256)/[12]$$' \
	  --benchmark_out=$(BUILD)/bench/targets_threads.csv $(BENCH_ARGS)
	$(TARGETS_RUN) --benchmark_filter='^BM_gemm_square_vs_(libxsmm|onednn)/' \
	  --benchmark_out=$(BUILD)/bench/targets_gemm1.csv $(BENCH_ARGS)
	$(TARGETS_RUN) --benchmark_filter='^BM_threads_sgemm_vs_onednn/' \
	  --benchmark_out=$(BUILD)/bench/targets_gemm2.csv $(BENCH_ARGS)
	$(TARGETS_RUN) --benchmark_filter='^BM_dispatch_1000_tiny/shape:[0-2]/mode:0$$' \
	  --benchmark_out=$(BUILD)/bench/targets_dispatch.csv $(BENCH_ARGS)
	@awk -f tests/bench/targets.awk $(BUILD)/bench/targets_*.csv

# PyTorch on one thread, the same LeNet-5 as BM_lenet_* (Debian's python3, not a virtualenv's).
onnx-models:
	$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch
	/usr/bin/python3 tests/onnx/torch_exports.py

bench-torch:
	/usr/bin/python3 tests/bench/torch_lenet.py

# Real models against ONNX Runtime and PyTorch (tests/bench/models/bench_models.py). ONNX Runtime
# comes from npm, not Debian: onnxruntime-node carries the linux-x64 CPU library in its package;
# its install script only fetches GPU parts, hence --ignore-scripts. Pinned, so that a rerun
# compares against the same ONNX Runtime; the folder's own package.json keeps npm from looking
# for a project further up.
ORT_NODE_VERSION ?= 1.30.0
ORT_DIR := build/bench-models/ort
BENCH_MODELS ?= resnet18,mobilenet_v2,squeezenet1_1,shufflenet_v2_x1_0,transformer,mlp,lstm,gru
ROUNDS  ?= 3
LAYER_MODELS ?= resnet18,mobilenet_v2,squeezenet1_1,shufflenet_v2_x1_0
SECONDS ?= 0.5
THREADS ?= 1,2
bench-models-deps: bench-deps
	@grep -qs '"version": "$(ORT_NODE_VERSION)"' $(ORT_DIR)/node_modules/onnxruntime-node/package.json || \
	  { mkdir -p $(ORT_DIR) && cd $(ORT_DIR) && { [ -f package.json ] || echo '{"private": true}' > package.json; } && \
	    npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@$(ORT_NODE_VERSION); }

bench-models: bench-models-deps
	@$(MAKE) $(JOBS) $(TOOL) $(BUILD)/bench-models/fma_peak
	/usr/bin/python3 tests/bench/models/bench_models.py --models $(BENCH_MODELS) --rounds $(ROUNDS) \
	  --seconds $(SECONDS) --threads $(THREADS) --zoo build/bench-models/zoo --nnasm $(TOOL) \
	  --ort-modules $(ORT_DIR)/node_modules --fma-peak $(BUILD)/bench-models/fma_peak

# Layer by layer against ONNX Runtime's own profile, batch 1, one thread (after bench-models has
# exported and imported the models): tests/bench/models/layers.py.
bench-layers: bench-models-deps
	@$(MAKE) $(JOBS) $(TOOL)
	/usr/bin/python3 tests/bench/models/layers.py --models $(LAYER_MODELS) --zoo build/bench-models/zoo --nnasm $(TOOL) \
	  --ort-modules $(ORT_DIR)/node_modules

# The recurrent layers, one thread (docs/benchmarks.md, Recurrent layers): the listings against
# this machine's L2 bandwidth, the training step against PyTorch, the exports against ONNX Runtime.
bench-recurrent: bench-models-deps
	@$(MAKE) $(JOBS) $(TOOL) $(BUILD)/bench-models/l2_read
	tests/bench/recurrent.sh
	tests/bench/lstm_train_b64.sh
	$(MAKE) bench-models BENCH_MODELS=lstm,gru THREADS=1

$(BUILD)/bench-models/l2_read: tests/bench/models/l2_read.cpp
	@mkdir -p $(dir $@)
	$(CXX) -O2 -std=c++17 $< -o $@

$(BUILD)/bench-models/fma_peak: tests/bench/models/fma_peak.cpp
	@mkdir -p $(dir $@)
	$(CXX) -O2 -std=c++17 -pthread $< -o $@

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@
ifneq ($(NOEXCEPT),)
$(BUILD)/obj/serialize/section_codec.o: CXXFLAGS += -fexceptions -frtti
endif

# C: the API's users. Strict C99, warnings as errors, so the header stays valid C.
CC      ?= cc
CFLAGS_C := -std=c99 -pedantic -Wall -Wextra -Werror -O2 -fPIC -MMD -MP $(if $(SAN),-fsanitize=$(SAN) -g)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -Iapi $(CFLAGS_C) -c $< -o $@

$(LIB_A): $(LIB_OBJ) $(LIB_LIST)
$(IMPORT_A): $(IMPORT_OBJ) $(IMPORT_LIST)
$(DATA_A): $(DATA_OBJ) $(DATA_LIST)
$(LIB_A) $(IMPORT_A) $(DATA_A):
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(filter %.o,$^)

# The shared libraries export only the C API (nnasm_*) and namespace nnasm (api/libnnasm.map,
# `local: *`): fmt, xbyak, the std instantiations and everything else they link stay inside, so
# a game may link its own. The runtime needs neither protobuf nor zlib; --no-undefined makes a
# stray reference into the importers a link error here rather than at a user's load time.
SO_FLAGS := -shared -Wl,--no-undefined -Wl,--version-script=api/libnnasm.map
LIB_SO_LIBS := -lfmt -lxxhash -lpthread
IMPORT_SO_LIBS := -L$(BUILD) -lnnasm -lonnx_proto -lprotobuf -lfmt -lpthread
$(LIB_SO).$(VERSION): $(LIB_OBJ) api/libnnasm.map
	$(CXX) $(SO_FLAGS) -Wl,-soname,libnnasm.so.$(VERSION_MAJOR) $(LDFLAGS) -o $@ $(LIB_OBJ) $(LIB_SO_LIBS)
$(IMPORT_SO).$(VERSION): $(IMPORT_OBJ) api/libnnasm.map $(LIB_SO)
	$(CXX) $(SO_FLAGS) -Wl,-soname,libnnasm_import.so.$(VERSION_MAJOR) $(LDFLAGS) -o $@ $(IMPORT_OBJ) $(IMPORT_SO_LIBS)
$(LIB_SO) $(IMPORT_SO): %.so: %.so.$(VERSION)
	ln -sf $(notdir $<) $*.so.$(VERSION_MAJOR)
	ln -sf $(notdir $<) $@

$(TOOL): $(call obj,$(TOOL_SRC)) $(LIBS_ALL)
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/samples/%: $(BUILD)/obj/samples/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TESTS): $(call obj,$(TEST_SRC)) $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_C_SRC)) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest -lgtest_main $(LDLIBS)

# A plugin built against the version-1 header (tests/abi/nnasm_v1.h) loads this shared library.
ABI_V1_CLIENT := $(BUILD)/tests/abi_client_v1
$(ABI_V1_CLIENT): $(BUILD)/obj/tests/abi/client_v1.o $(LIB_SO)
	$(CXX) $(LDFLAGS) -o $@ $< -L$(BUILD) -lnnasm -Wl,-rpath,$(abspath $(BUILD))

# One test file alone, for working on it: make build/tests/only/listing_test
$(BUILD)/tests/only/%: $(BUILD)/obj/tests/%.o $(call obj,$(TEST_SUPPORT_SRC)) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest -lgtest_main $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/solo/%.o $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lgtest -lgtest_main $(LDLIBS)

# Competitor baselines (tests/bench/baselines_*.cpp), optional: each library is compiled in when
# its header is installed (make bench-deps) and otherwise leaves one row saying so. Override to
# build without one: make HAVE_ONEDNN= build/tests/nnasm_bench (HAVE_OPENBLAS, HAVE_LIBXSMM
# alike). A stamp holds the choice, so that changing it recompiles the baselines.
OPENBLAS_H    := $(wildcard $(foreach v,pthread openmp serial,/usr/include/*/openblas-$(v)/cblas.h))
OPENBLAS_INC  := $(dir $(firstword $(OPENBLAS_H)))
OPENBLAS_LIB  := $(subst /usr/include/,/usr/lib/,$(OPENBLAS_INC))
HAVE_OPENBLAS ?= $(if $(OPENBLAS_INC),1)
HAVE_ONEDNN   ?= $(if $(wildcard /usr/include/oneapi/dnnl/dnnl.hpp),1)
HAVE_LIBXSMM  ?= $(if $(wildcard /usr/include/libxsmm.h),1)
BASELINE_FLAGS := $(if $(HAVE_OPENBLAS),-DNNASM_HAVE_OPENBLAS $(addprefix -isystem ,$(OPENBLAS_INC))) \
                  $(if $(HAVE_ONEDNN),-DNNASM_HAVE_ONEDNN) \
                  $(if $(HAVE_LIBXSMM),-DNNASM_HAVE_LIBXSMM)
# libxsmm's BLAS fallback (unused here) resolves to OpenBLAS when it is linked, else to the stub.
BASELINE_LIBS  := $(if $(HAVE_OPENBLAS),$(addprefix -L,$(OPENBLAS_LIB)) -lopenblas) \
                  $(if $(HAVE_ONEDNN),-ldnnl -lgomp) \
                  $(if $(HAVE_LIBXSMM),-lxsmm -lxsmmnoblas -ldl -lrt -lm)
BASELINE_OBJ   := $(call obj,$(wildcard tests/bench/baselines_*.cpp))
BASELINE_STAMP := $(BUILD)/obj/tests/bench/baselines.flags

$(BASELINE_OBJ): CPPFLAGS += $(BASELINE_FLAGS)
$(BASELINE_OBJ): $(BASELINE_STAMP)
$(BASELINE_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(strip $(BASELINE_FLAGS))' | cmp -s - $@ || echo '$(strip $(BASELINE_FLAGS))' > $@
FORCE:

$(BENCH): $(call obj,$(BENCH_SRC)) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ -lbenchmark -lbenchmark_main $(BASELINE_LIBS) $(LDLIBS)

# libFuzzer targets: every tests/fuzz/fuzz_<name>.cpp (one LLVMFuzzerTestOneInput each) becomes
# build/fuzz/<name>, linked against a copy of the library's objects that clang builds with
# coverage, ASan and UBSan into build/fuzz/obj/ (whatever CXX and SAN say). `make fuzz` runs each
# for FUZZ_SECONDS on a fresh copy of its seed corpus tests/fuzz/corpus/<name>/ in
# build/fuzz/corpus-work/<name>/ (the repository's corpus is never written), with
# tests/fuzz/<name>.dict when there is one; a crash lands in build/fuzz/artifacts/<name>/ and fails
# the run. FUZZ_MAX_LEN_<name> overrides FUZZ_MAX_LEN for one target; FUZZ_ARGS adds flags.
FUZZ_CXX      ?= clang++
FUZZ_SECONDS  ?= 60
FUZZ_MAX_LEN  ?= 4096
FUZZ_MAX_LEN_listing := 16384
FUZZ_MAX_LEN_exec    := 8192
FUZZ_TIMEOUT  ?= 20
FUZZ_DIR      := build/fuzz
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CXXFLAGS := -std=c++17 -O1 -g -Wall -Wextra -MMD -MP -fsanitize=fuzzer-no-link $(FUZZ_SAN)
FUZZ_NAMES    := $(patsubst tests/fuzz/fuzz_%.cpp,%,$(wildcard tests/fuzz/fuzz_*.cpp))
FUZZ_BINS     := $(addprefix $(FUZZ_DIR)/,$(FUZZ_NAMES))
FUZZ_LIB_OBJ  := $(patsubst %.cpp,$(FUZZ_DIR)/obj/%.o,$(ALL_LIB_SRC))

fuzz: fuzz-deps
	@$(MAKE) $(JOBS) $(FUZZ_BINS)
	@fail=; $(foreach t,$(FUZZ_NAMES),max_len_$t=$(or $(FUZZ_MAX_LEN_$t),$(FUZZ_MAX_LEN))); \
	for t in $(FUZZ_NAMES); do \
	  work=$(FUZZ_DIR)/corpus-work/$$t; art=$(FUZZ_DIR)/artifacts/$$t/; log=$(FUZZ_DIR)/$$t.log; \
	  rm -rf $$work && mkdir -p $$work $$art && cp -r tests/fuzz/corpus/$$t/. $$work/; \
	  dict=tests/fuzz/$$t.dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
	  eval max_len=\$$max_len_$$t; \
	  echo "fuzz $$t: $(FUZZ_SECONDS) s, -max_len=$$max_len, corpus $$work, log $$log"; \
	  if $(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$$max_len -rss_limit_mb=2048 \
	       -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1 -artifact_prefix=$$art $$dict $(FUZZ_ARGS) \
	       $$work >$$log 2>&1; then \
	    grep -E '^(#[0-9]+.*DONE|stat::(number_of_executed_units|average_exec_per_sec))' $$log; \
	  else \
	    tail -n 40 $$log; echo "fuzz $$t: FAILED (artifact in $$art)"; fail="$$fail $$t"; \
	  fi; \
	done; [ -z "$$fail" ] || { echo "fuzz: crashes in:$$fail"; exit 1; }

fuzz-smoke:
	@$(MAKE) fuzz FUZZ_SECONDS=10

# Keep the targets' own objects, which make would otherwise delete as intermediate files.
.PRECIOUS: $(FUZZ_DIR)/obj/tests/fuzz/%.o
$(FUZZ_DIR)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CPPFLAGS) $(FUZZ_CXXFLAGS) -c $< -o $@

$(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CXX) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

# Writes the generated seeds (tests/fuzz/make_seeds.cpp says which).
$(FUZZ_DIR)/make_seeds: $(FUZZ_DIR)/obj/tests/fuzz/make_seeds.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CXX) $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

# What a project builds against (docs/install.md), under $(DESTDIR)$(PREFIX):
#   lib/        libnnasm.so.$(VERSION) (soname libnnasm.so.MAJOR, links .so.MAJOR and .so),
#               libnnasm_import.so likewise, libnnasm.a, libnnasm_import.a
#   include/    nnasm.h and the C API's other headers (api/nnasm*.h)
#   include/nnasm/  the C++ API: PUBLIC_HEADERS and every header of this tree they include, at
#               their paths in the tree, their includes of each other rewritten to "nnasm/...",
#               so that -I<prefix>/include alone finds them (#include <nnasm/shell/shell.h>)
#   lib/pkgconfig/  nnasm.pc (C), nnasm++.pc (C++), nnasm_import.pc
#   lib/cmake/nnasm/  nnasmConfig.cmake, nnasmConfigVersion.cmake: nnasm::nnasm, nnasm::c,
#               nnasm::import
#   bin/nnasm   the tool
PUBLIC_HEADERS := shell/shell.h engine/executor.h engine/context.h engine/trainer.h \
                  serialize/model_file.h serialize/listing.h serialize/npy.h \
                  serialize/onnx/onnx_import.h serialize/flow/flow_import.h
VERSION_MINOR := $(call version_part,MINOR)
subst_version = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
                    -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' -e 's|@VERSION_MINOR@|$(VERSION_MINOR)|g'
INSTALL_LIB := $(DESTDIR)$(PREFIX)/lib
INSTALL_INC := $(DESTDIR)$(PREFIX)/include
install: $(LIB_A) $(LIB_SO) $(IMPORT_A) $(IMPORT_SO) $(TOOL)
	install -d $(INSTALL_LIB)/pkgconfig $(INSTALL_LIB)/cmake/nnasm $(DESTDIR)$(PREFIX)/bin $(INSTALL_INC)/nnasm
	install -m 644 $(LIB_A) $(IMPORT_A) $(INSTALL_LIB)/
	install -m 755 $(LIB_SO).$(VERSION) $(IMPORT_SO).$(VERSION) $(INSTALL_LIB)/
	for l in libnnasm libnnasm_import; do \
	  ln -sf $$l.so.$(VERSION) $(INSTALL_LIB)/$$l.so.$(VERSION_MAJOR) && ln -sf $$l.so.$(VERSION) $(INSTALL_LIB)/$$l.so || exit 1; \
	done
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(wildcard api/nnasm*.h) $(INSTALL_INC)/
	@hdrs=$$(printf '#include "%s"\n' $(PUBLIC_HEADERS) | $(CXX) -x c++ -std=c++17 -I. -MM -MT deps - | \
	         tr ' \\' '\n\n' | grep -v -e '^$$' -e '^/' -e '^deps:$$' | sort -u) || exit 1; \
	dirs=$$(for h in $$hdrs; do echo "$${h%%/*}"; done | sort -u | paste -sd'|'); \
	echo "install: $$(echo $$hdrs | wc -w) C++ headers into $(INSTALL_INC)/nnasm/ ($$dirs)"; \
	for h in $$hdrs; do \
	  install -d $(INSTALL_INC)/nnasm/$$(dirname $$h) && \
	  sed -E "s,^([[:space:]]*#[[:space:]]*include[[:space:]]*\")(($$dirs)/),\1nnasm/\2," $$h \
	    > $(INSTALL_INC)/nnasm/$$h && chmod 644 $(INSTALL_INC)/nnasm/$$h || exit 1; \
	done
	for pc in nnasm nnasm++ nnasm_import; do $(subst_version) api/$$pc.pc.in > $(INSTALL_LIB)/pkgconfig/$$pc.pc || exit 1; done
	for f in nnasmConfig nnasmConfigVersion; do $(subst_version) api/cmake/$$f.cmake.in > $(INSTALL_LIB)/cmake/nnasm/$$f.cmake || exit 1; done

# Installs into a temporary prefix and builds the consumer projects of tests/install/ against it,
# with CMake and with pkg-config (tests/install/consumer_test.sh); `make test` runs it.
test-install: $(LIB_A) $(LIB_SO) $(IMPORT_A) $(IMPORT_SO) $(TOOL)
	tests/install/consumer_test.sh

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
