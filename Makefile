# Sky: `make` builds the host board into build/host/; `make BOARD=rpi4`
# cross-builds into build/rpi4/. CC, CFLAGS, LDFLAGS, PREFIX and DESTDIR
# from outside are honoured, as Buildroot and Yocto expect.
#
#   make [BOARD=b]          binaries: build/<b>/bin/{skyd,skyplan,sky}
#   make check              every test (native, then aarch64 under qemu), "N passed, N failed"
#   make demo               the main job on one machine
#   make bench              benchmarks, JSON into build/bench/
#   make fuzz               libFuzzer harnesses, each for FUZZ_SECONDS
#   make install            into $(DESTDIR)$(PREFIX)/bin and $(DESTDIR)$(SYSCONFDIR)/sky
#   make SANITIZE=address,undefined check

BOARD ?= host
.DEFAULT_GOAL := all
BOARDS := $(sort $(notdir $(patsubst %/board.mk,%,$(wildcard boards/*/board.mk))))
ifeq ($(filter $(BOARD),$(BOARDS)),)
$(error unknown BOARD '$(BOARD)'; boards are: $(BOARDS))
endif
include boards/$(BOARD)/board.mk

# SANITIZE=address,undefined (or either) builds with those sanitizers;
# leaving it empty removes them (and their 2-3x slowdown).
SANITIZE ?=
SANITIZERS := address undefined address,undefined undefined,address
ifneq ($(SANITIZE),)
ifeq ($(filter $(SANITIZE),$(SANITIZERS)),)
$(error unknown SANITIZE '$(SANITIZE)'; use address, undefined or address,undefined)
endif
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

ifeq ($(origin CC),default)
CC := $(BOARD_CROSS)gcc
endif
CFLAGS ?= -O2 -g
LDFLAGS ?=
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= $(PREFIX)/etc
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

B := build/$(BOARD)
ifneq ($(SANITIZE),)
B := build/$(BOARD)-san
endif
O := $(B)/obj

# Include paths are the layering rule: planner code sees port/ and the two
# shared runtime corners (model/, wire/) and nothing else of the runtime.
INC_PORT := -Iport
INC_SHARED := $(INC_PORT) -Iruntime/model -Iruntime/wire
INC_RT := $(INC_SHARED) -Iruntime -Iruntime/kernels
INC_PLAN := $(INC_SHARED) -Iplanner
INC_ALL := $(INC_RT) -Iplanner -Itests

BASE_CFLAGS := -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fno-strict-aliasing \
	-MMD -MP -DSKY_BOARD=\"$(BOARD)\" $(SAN_FLAGS)
# Paho: the asynchronous client with TLS (OpenSSL underneath).
LIBS := -lpaho-mqtt3as -lmbedtls -lmbedx509 -lmbedcrypto -lcjson -lopenblas -lpthread -lm

PORT_SRC := $(wildcard port/*.c)
SHARED_SRC := $(wildcard runtime/model/*.c runtime/wire/*.c)
# Kernel files for other architectures are skipped; within an architecture
# folder the file name says which instructions it needs (see flags below).
ifeq ($(BOARD_ARCH),x86_64)
KERNEL_ARCH := x86
else
KERNEL_ARCH := arm
endif
RT_SRC := $(wildcard runtime/*.c runtime/kernels/*.c runtime/kernels/$(KERNEL_ARCH)/*.c)
PLAN_SRC := $(wildcard planner/*.c)

obj = $(patsubst %.c,$(O)/%.o,$(1))

# Objects depend on the flags they were built with: changing CC, CFLAGS or
# SANITIZE rebuilds instead of silently mixing old and new objects.
FLAGS_STAMP := $(B)/.flags
VERSION_C := $(B)/gen/version.c
FLAGS_NOW := $(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(LDFLAGS)
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
$(VERSION_C): FORCE
	@mkdir -p $(@D)
	@echo 'const char *sky_version(void) { return "$(VERSION)"; }' | cmp -s - $@ || \
		echo 'const char *sky_version(void) { return "$(VERSION)"; }' > $@
$(O)/version.o: $(VERSION_C) $(FLAGS_STAMP)
	$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) -c $< -o $@
FORCE:

LIB_PORT := $(B)/lib/libsky_port.a
LIB_SHARED := $(B)/lib/libsky_shared.a
LIB_RT := $(B)/lib/libsky_rt.a
LIB_PLAN := $(B)/lib/libsky_plan.a
ALL_LIBS := $(LIB_RT) $(LIB_PLAN) $(LIB_SHARED) $(LIB_PORT)

BINS := $(B)/bin/skyd $(B)/bin/skyplan $(B)/bin/sky
SKYD_SRC := $(wildcard runtime/skyd/*.c)
SKYPLAN_SRC := $(wildcard planner/skyplan/*.c)
SKY_SRC := $(wildcard tools/sky/*.c)

all: $(BINS) $(B)/etc/sky/profile.conf

# ---- compile ---------------------------------------------------------------
# (when several patterns match, make applies the most specific one last)
$(O)/port/%.o: INC = $(INC_PORT)
$(O)/runtime/%.o: INC = $(INC_RT)
$(O)/runtime/model/%.o $(O)/runtime/wire/%.o: INC = $(INC_SHARED)
$(O)/planner/%.o: INC = $(INC_PLAN)
$(O)/tools/%.o $(O)/tests/%.o: INC = $(INC_ALL)
$(O)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(INC) $(KFLAGS) -c $< -o $@

# Per-file instruction sets for SIMD kernels (shared with tools/fuzz.sh).
KOBJ := $(O)
include runtime/kernels/kernel_flags.mk

# ---- libraries and binaries ------------------------------------------------
$(LIB_PORT): $(call obj,$(PORT_SRC)) $(O)/version.o
$(LIB_SHARED): $(call obj,$(SHARED_SRC))
$(LIB_RT): $(call obj,$(RT_SRC))
$(LIB_PLAN): $(call obj,$(PLAN_SRC))
$(ALL_LIBS):
	@mkdir -p $(@D)
	rm -f $@
	$(BOARD_CROSS)ar rcs $@ $^

$(B)/bin/skyd: $(call obj,$(SKYD_SRC)) $(LIB_RT) $(LIB_PLAN) $(LIB_SHARED) $(LIB_PORT)
$(B)/bin/skyplan: $(call obj,$(SKYPLAN_SRC)) $(LIB_PLAN) $(LIB_RT) $(LIB_SHARED) $(LIB_PORT)
$(B)/bin/sky: $(call obj,$(SKY_SRC)) $(ALL_LIBS)
$(BINS):
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) \
		-Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LIBS)

$(B)/etc/sky/profile.conf: boards/$(BOARD)/profile.conf
	@mkdir -p $(@D)
	cp $< $@

# ---- tests -----------------------------------------------------------------
# tests/<area>/test_<module>.c -> one binary each; other .c files in the area
# and tests/common/ are linked into every test of that area.
TEST_AREAS := $(notdir $(wildcard tests/*))
CROSS_TEST_AREAS := port runtime wire
TEST_COMMON := tests/sky_test.c $(wildcard tests/common/*.c)
WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free
test_bins = $(patsubst %.c,$(B)/%,$(foreach a,$(1),$(wildcard tests/$(a)/test_*.c)))
TEST_BINS := $(call test_bins,$(TEST_AREAS))
CROSS_TEST_BINS := $(call test_bins,$(CROSS_TEST_AREAS))

.SECONDEXPANSION:
$(B)/tests/%: tests/%.c $(call obj,$(TEST_COMMON)) \
		$$(call obj,$$(filter-out $$(wildcard $$(dir tests/$$*)test_*.c),$$(wildcard $$(dir tests/$$*)*.c))) \
		$(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(INC_ALL) $(LDFLAGS) $(WRAP) -o $@ $< \
		$(filter %.o,$^) -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LIBS)

tests: all $(TEST_BINS)
cross-tests: all $(CROSS_TEST_BINS)

# -L /, not /usr/aarch64-linux-gnu: there the loader (cross package) and libc
# (libc6:arm64) differ, and the first pthread_create or fork spins forever
QEMU := qemu-aarch64 -L /
CROSS_B := build/generic-aarch64
TOTALS := build/check-totals

# Native tests, then the runtime's tests cross-built for aarch64 under qemu,
# once as a Raspberry Pi 4 core (no dot-product) and once with every feature
# (dot-product on), so both kernel dispatch paths run; then the integration
# tests against a real broker. run.sh appends each leg's counts to TOTALS.
check: deps
	@rm -f $(TOTALS); mkdir -p build
	$(MAKE) --no-print-directory BOARD=host tests
	$(MAKE) --no-print-directory BOARD=generic-aarch64 SANITIZE= cross-tests
	-@SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label host $(TEST_BINS)
	-@OPENBLAS_NUM_THREADS=1 SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label a72 \
		--prefix "$(QEMU) -cpu cortex-a72" $(patsubst $(B)/%,$(CROSS_B)/%,$(CROSS_TEST_BINS))
	-@OPENBLAS_NUM_THREADS=1 SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label max \
		--prefix "$(QEMU) -cpu max" $(patsubst $(B)/%,$(CROSS_B)/%,$(CROSS_TEST_BINS))
	-@SKY_BUILD=$(B) SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label integration \
		$(wildcard tests/integration/test_*.sh)
	@awk '{p+=$$1; f+=$$2} END {printf "%d passed, %d failed\n", p, f; exit f > 0}' $(TOTALS)

deps:
	@tools/install-deps.sh

# ---- the main job, benchmarks, fuzzing ---------------------------------------
demo: deps all
	tools/demo.sh $(B)

bench: deps all
	tools/bench.sh $(B)

FUZZ_SECONDS ?= 20
fuzz: deps
	tools/fuzz.sh $(FUZZ_SECONDS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSCONFDIR)/sky
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 boards/$(BOARD)/profile.conf $(DESTDIR)$(SYSCONFDIR)/sky/profile.conf

clean:
	rm -rf build

.PHONY: FORCE all tests cross-tests check deps demo bench fuzz install clean
-include $(shell find $(O) -name '*.d' 2>/dev/null)
