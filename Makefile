# Sky: `make` builds the host board into build/host/; `make BOARD=rpi4`
# cross-builds into build/rpi4/. CC, CFLAGS, LDFLAGS, PREFIX and DESTDIR
# from outside are honoured, as Buildroot and Yocto expect.
#
#   make [BOARD=b]          binaries: build/<b>/bin/{skyd,skyplan,sky}
#   make check              every test (native, then aarch64 under qemu), "N passed, N failed"
#   make demo               the main job on one machine
#   make bench              benchmarks, JSON into build/bench/
#   make faults             every fault scenario and the churn run, JSON per event into build/faults/
#   make fuzz               libFuzzer harnesses, each for FUZZ_SECONDS
#   make install            into $(DESTDIR)$(PREFIX)/bin and $(DESTDIR)$(SYSCONFDIR)/sky
#   make deb [BOARD=b]      Debian packages sky-board and sky-planner into build/<b>/deb/
#   make SANITIZE=address,undefined check
#   make check-tsan         the ThreadSanitizer leg of check on its own
#   make V=1 ...            every command in full; without V=1 each step is one
#                           short line, as in Kbuild: "  CC      runtime/stage.c",
#                           "  AR      build/host/lib/libsky_rt.a", "  LD      build/host/bin/sky",
#                           "  CCLD    build/host/tests/port/test_arena" (a test, compiled
#                           and linked at once); warnings and errors show in full either way

BOARD ?= host
.DEFAULT_GOAL := all

# V=1 echoes each command; otherwise say prints what is made ($(1): the
# step, $(2): the file) and Q hides the command (its output still shows).
V ?= 0
ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-7s %s\n' '$(1)' '$(2)'
endif

BOARDS := $(sort $(notdir $(patsubst %/board.mk,%,$(wildcard boards/*/board.mk))))
ifeq ($(filter $(BOARD),$(BOARDS)),)
$(error unknown BOARD '$(BOARD)'; boards are: $(BOARDS))
endif
include boards/$(BOARD)/board.mk

# SANITIZE=address,undefined (or either) builds with those sanitizers, and
# SANITIZE=thread with ThreadSanitizer (it cannot be combined with address);
# leaving it empty removes them (and their 2-15x slowdown).
SANITIZE ?=
SANITIZERS := address undefined address,undefined undefined,address thread
ifneq ($(SANITIZE),)
ifeq ($(filter $(SANITIZE),$(SANITIZERS)),)
$(error unknown SANITIZE '$(SANITIZE)'; use address, undefined, address,undefined or thread)
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
ifeq ($(SANITIZE),thread)
B := build/$(BOARD)-tsan
endif
O := $(B)/obj

# Include paths are the layering rule: planner code sees port/ and the two
# shared runtime corners (model/, wire/) and nothing else of the runtime.
INC_PORT := -Iport
INC_SHARED := $(INC_PORT) -Iruntime/model -Iruntime/wire
INC_RT := $(INC_SHARED) -Iruntime -Iruntime/kernels
INC_PLAN := $(INC_SHARED) -Iplanner
INC_ALL := $(INC_RT) -Iplanner -Itests

BASE_CFLAGS := -std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter -fno-strict-aliasing \
	-MMD -MP -DSKY_BOARD=\"$(BOARD)\" $(SAN_FLAGS)
# Paho: the asynchronous client with TLS (OpenSSL underneath).
LIBS := -lpaho-mqtt3as -lmbedtls -lmbedx509 -lmbedcrypto -lcjson -lutf8proc -lcsv -lopenblas -lsystemd -lpthread -lm

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
	$(call say,CC,$<)
	$(Q)$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) -c $< -o $@
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
# skyplan's main hands the runtime's model-file code to the service
# (planner/skyplan/main.c); the rest of the planner sees no runtime header
$(O)/planner/skyplan/%.o: INC = $(INC_PLAN) -Iruntime -Iruntime/kernels
$(O)/tools/%.o $(O)/tests/%.o: INC = $(INC_ALL)
$(O)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(INC) $(KFLAGS) -c $< -o $@

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
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)$(BOARD_CROSS)ar rcs $@ $^

$(B)/bin/skyd: $(call obj,$(SKYD_SRC)) $(LIB_RT) $(LIB_PLAN) $(LIB_SHARED) $(LIB_PORT)
$(B)/bin/skyplan: $(call obj,$(SKYPLAN_SRC)) $(LIB_PLAN) $(LIB_RT) $(LIB_SHARED) $(LIB_PORT)
$(B)/bin/sky: $(call obj,$(SKY_SRC)) $(ALL_LIBS)
# Only the planner serves HTTP (skyplan --metrics), so only it and the
# planner's tests link libmicrohttpd; skyd and sky do not depend on it.
$(B)/bin/skyplan $(B)/tests/planner/%: LIBS += -lmicrohttpd
$(BINS):
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) \
		-Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LIBS)

$(B)/etc/sky/profile.conf: boards/$(BOARD)/profile.conf
	@mkdir -p $(@D)
	$(call say,CP,$@)
	$(Q)cp $< $@

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
	$(call say,CCLD,$@)
	$(Q)$(CC) $(BASE_CFLAGS) $(BOARD_CFLAGS) $(CFLAGS) $(INC_ALL) $(LDFLAGS) $(WRAP) -o $@ $< \
		$(filter %.o,$^) -Wl,--start-group $(ALL_LIBS) -Wl,--end-group $(LIBS)

# The objects linked into many tests are kept: as mere prerequisites of the
# pattern rule above they are intermediate, so make would delete them after
# every build (printing an rm line of them all) and compile them again.
TEST_HELPERS := $(filter-out $(wildcard tests/*/test_*.c),$(foreach a,$(TEST_AREAS),\
	$(if $(wildcard tests/$(a)/test_*.c),$(wildcard tests/$(a)/*.c))))
.SECONDARY: $(call obj,$(TEST_COMMON) $(TEST_HELPERS))

tests: all $(TEST_BINS)
cross-tests: all $(CROSS_TEST_BINS)

# aarch64 binaries run under qemu-user with -L /: loader and libc then both
# come from the host's arm64 packages (libc6:arm64). With -L
# /usr/aarch64-linux-gnu the loader came from the cross package and libc.so.6
# from the arm64 ld.so cache; their versions differed and the first
# pthread_create spun forever with every signal blocked, so each qemu run is
# bounded by timeout -s KILL (seconds; the smoke bound is for test_thread).
QEMU_KILL_S ?= 600
QEMU_SMOKE_S ?= 60
qemu = timeout -s KILL $(1) qemu-aarch64 -L /
CROSS_B := build/generic-aarch64
TOTALS := build/check-totals
SMOKE := $(CROSS_B)/tests/port/test_thread
CROSS_RUN_BINS := $(filter-out $(SMOKE),$(patsubst $(B)/%,$(CROSS_B)/%,$(CROSS_TEST_BINS)))
# One qemu leg (label, -cpu): the thread smoke test first, under the short
# bound; a guest that cannot start a thread skips the leg's other tests
# (each would hang until its own bound) after one FAIL line.
qemu_leg = if OPENBLAS_NUM_THREADS=1 SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label $(1) \
		--prefix "$(call qemu,$(QEMU_SMOKE_S)) -cpu $(2)" $(SMOKE); then \
	OPENBLAS_NUM_THREADS=1 SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label $(1) \
		--prefix "$(call qemu,$(QEMU_KILL_S)) -cpu $(2)" $(CROSS_RUN_BINS); \
	else echo "== $(1): qemu cannot run a thread (see above); the leg's other tests are not run"; \
	false; fi

# The ThreadSanitizer leg: the tests whose code runs on more than one thread
# (once-only initialisation, the worker pool, Paho's callback thread, the metrics
# snapshot served on libmicrohttpd's thread, and the fleet and metrics tests'
# skyd/skyplan/sky processes), built with SANITIZE=thread into
# build/host-tsan. tests/tsan.sh fails a test on any report from any of its
# processes. `make check-tsan` runs only this leg.
TSAN_B := build/host-tsan
TSAN_UNIT := tests/port/test_once tests/port/test_pool tests/wire/test_mqtt tests/planner/test_metrics
TSAN_SCRIPTS := tests/integration/test_fleet.sh tests/integration/test_metrics.sh
TSAN_RUN := OPENBLAS_NUM_THREADS=1 SKY_BUILD=$(TSAN_B) tests/run.sh --label tsan \
	--prefix tests/tsan.sh $(addprefix $(TSAN_B)/,$(TSAN_UNIT)) $(TSAN_SCRIPTS)
tsan-build: all $(addprefix $(B)/,$(TSAN_UNIT))

# Native tests, then the runtime's tests cross-built for aarch64 under qemu,
# once as a Raspberry Pi 4 core (no dot-product) and once with every feature
# (dot-product on), so both kernel dispatch paths run; then the integration
# tests against a real broker, then the ThreadSanitizer leg, then every
# fuzz harness for a few seconds on its committed corpus (tests/fuzz/check.sh,
# clang's libFuzzer from install-deps). Each leg is one run.sh --label L, which
# records its tests in TOTALS (a leg's failure does not stop the others);
# the summary then prints the tests each leg ran and, last, "N passed,
# N failed" over distinct tests: a test run in three legs counts once, and
# is failed if it failed in any. A leg that crashed, did not finish or ran
# nothing fails the check.
check: deps
	@rm -f $(TOTALS); mkdir -p build
	$(MAKE) --no-print-directory BOARD=host tests
	$(MAKE) --no-print-directory BOARD=generic-aarch64 SANITIZE= cross-tests
	$(MAKE) --no-print-directory BOARD=host SANITIZE=thread tsan-build
	-@SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label host $(TEST_BINS)
	-@$(call qemu_leg,"qemu cortex-a72",cortex-a72)
	-@$(call qemu_leg,"qemu max",max)
	-@SKY_BUILD=$(B) SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label integration \
		$(wildcard tests/integration/test_*.sh)
	-@SKY_TEST_TOTALS=$(TOTALS) $(TSAN_RUN)
	-@SKY_TEST_TOTALS=$(TOTALS) tests/run.sh --label fuzz tests/fuzz/check.sh
	@tests/run.sh --summary $(TOTALS)

deps:
	@tools/install-deps.sh

check-tsan: deps
	$(MAKE) --no-print-directory BOARD=host SANITIZE=thread tsan-build
	@rm -f build/tsan-totals; SKY_TEST_TOTALS=build/tsan-totals $(TSAN_RUN); tests/run.sh --summary build/tsan-totals

# ---- the main job, benchmarks, fuzzing ---------------------------------------
demo: deps all
	tools/demo.sh $(B)

# The fault scenarios (tests/integration/test_faults.sh): make check runs
# the default list; this adds the churn run (26 membership changes under one
# job), and the serving faults (test_serve_faults.sh, also in make check).
# One JSON per event in build/faults/.
FAULTS_ALL := middle middle4 hang ends two second join join50 slow drift pause churn corrupt
faults: deps all
	@rm -rf build/faults
	FAULTS_SCENARIOS="$(FAULTS_ALL)" SKY_BUILD=$(B) tests/run.sh --label faults tests/integration/test_faults.sh \
		tests/integration/test_serve_faults.sh

bench: deps all
	tools/bench.sh $(B)

FUZZ_SECONDS ?= 20
fuzz: deps
	tools/fuzz.sh $(FUZZ_SECONDS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSCONFDIR)/sky
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 boards/$(BOARD)/profile.conf $(DESTDIR)$(SYSCONFDIR)/sky/profile.conf

# Debian packages (tools/deb/build.sh): sky-board (skyd, the board's
# profile, its systemd unit) and sky-planner (skyplan, sky, its unit).
deb: all
ifneq ($(SANITIZE),)
	$(error make deb packages release builds: leave SANITIZE empty)
endif
	STRIP=$(BOARD_CROSS)strip tools/deb/build.sh $(BOARD) $(B)

clean:
	rm -rf build

.PHONY: FORCE all tests cross-tests tsan-build check check-tsan deps demo bench faults fuzz install deb clean
-include $(shell find $(O) -name '*.d' 2>/dev/null)
