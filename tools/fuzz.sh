#!/bin/sh
# make fuzz: builds each libFuzzer harness tests/fuzz/fuzz_<name>.c and runs
# it for a bounded time on a copy of its seed corpus tests/fuzz/corpus/<name>/.
#
#   tools/fuzz.sh [SECONDS] [NAME...]     (SECONDS per harness, default 20;
#                                          NAMEs limit the run, e.g. "csr")
#
# Every harness links against one static library of Sky's sources (port/,
# runtime/ with its kernels, runtime/model/, runtime/wire/, planner/; no
# mains) built with clang -fsanitize=fuzzer-no-link,address into
# build/fuzz/; the archive lets each harness pull in only the objects it
# uses. make rebuilds an object when its source or a header it includes
# changes.
# Crash inputs land in build/fuzz/artifacts/<name>/. Exits non-zero if any
# harness fails to build or finds a crash, leak or timeout. The committed
# corpora are never modified (new inputs go to build/fuzz/corpus/).
set -u
cd "$(dirname "$0")/.." || exit 2

secs=${1:-20}
case "$secs" in
'' | *[!0-9]*) echo "fuzz: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;;
esac
[ $# -gt 0 ] && shift
only="$*"

CC=${FUZZ_CC:-clang}
if ! command -v "$CC" >/dev/null 2>&1; then
	echo "fuzz: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2
	exit 2
fi
OUT=build/fuzz
OBJ=$OUT/obj
mkdir -p "$OBJ" "$OUT/bin" "$OUT/gen"

arch=$(uname -m)
case "$arch" in
x86_64) kdir=runtime/kernels/x86 ;;
aarch64) kdir=runtime/kernels/arm ;;
*) kdir="" ;;
esac
CFLAGS="-std=gnu11 -g -O1 -fno-omit-frame-pointer -fno-strict-aliasing -w -Iport -Iruntime/model -Iruntime/wire -Iruntime -Iruntime/kernels -Iplanner -Itests"
SAN="-fsanitize=fuzzer-no-link,address"
LIBS="-lpaho-mqtt3as -lmbedtls -lmbedx509 -lmbedcrypto -lcjson -lutf8proc -lcsv -lopenblas -lsystemd -lpthread -lm"

ver=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo "const char *sky_version(void) { return \"$ver-fuzz\"; }" >"$OUT/gen/version.c.new"
cmp -s "$OUT/gen/version.c.new" "$OUT/gen/version.c" 2>/dev/null || mv "$OUT/gen/version.c.new" "$OUT/gen/version.c"
rm -f "$OUT/gen/version.c.new"

# The objects are built by make (two jobs, header dependencies from -MMD);
# per-file instruction sets follow the Makefile's file-name rules.
echo "fuzz: compiling Sky's sources with $CC ($SAN) into $OBJ"
build_failed=0
make --no-print-directory -k -j"${FUZZ_JOBS:-2}" -f - CC="$CC" CFLAGS_F="$CFLAGS" SAN="$SAN" \
	OBJ="$OBJ" KDIR="$kdir" OUT="$OUT" <<'MK' >"$OUT/build.log" 2>&1 || build_failed=1
SRCS := $(wildcard port/*.c runtime/*.c runtime/kernels/*.c runtime/model/*.c runtime/wire/*.c \
	planner/*.c) $(if $(KDIR),$(wildcard $(KDIR)/*.c)) $(OUT)/gen/version.c
OBJS := $(patsubst %.c,$(OBJ)/%.o,$(SRCS))
all: $(OBJS)
$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_F) -DSKY_BOARD='"fuzz"' $(SAN) $(KFLAGS) $(BOARD_CFLAGS) -MMD -MP -c $< -o $@
KOBJ := $(OBJ)
include runtime/kernels/kernel_flags.mk
-include $(OBJS:.o=.d)
MK
if [ $build_failed -ne 0 ]; then
	echo "fuzz: some sources did not compile with $CC:" >&2
	grep -E 'error' "$OUT/build.log" | head -20 | sed 's/^/   /' >&2
fi
# Objects of sources that no longer exist must not linger in the archive.
srcs=$(ls port/*.c runtime/*.c runtime/kernels/*.c runtime/model/*.c runtime/wire/*.c \
	planner/*.c ${kdir:+$kdir/*.c} "$OUT/gen/version.c" 2>/dev/null)
rm -f "$OUT/libsky_fuzz.a"
# shellcheck disable=SC2046
ar rcs "$OUT/libsky_fuzz.a" $(for s in $srcs; do o="$OBJ/${s%.c}.o"; [ -f "$o" ] && echo "$o"; done)

passed=0
failed=0
report=""
for h in tests/fuzz/fuzz_*.c; do
	[ -f "$h" ] || continue
	name=$(basename "$h" .c)
	name=${name#fuzz_}
	if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then
		continue
	fi
	bin="$OUT/bin/fuzz_$name"
	# shellcheck disable=SC2086
	if ! $CC $CFLAGS -DSKY_BOARD='"fuzz"' -fsanitize=fuzzer,address "$h" "$OUT/libsky_fuzz.a" $LIBS -o "$bin" \
		2>"$OUT/bin/fuzz_$name.log"; then
		echo "FAIL fuzz_$name: does not build:"
		sed 's/^/   /' "$OUT/bin/fuzz_$name.log" | head -30
		failed=$((failed + 1))
		report="$report fuzz_$name(build)"
		continue
	fi
	corpus="$OUT/corpus/$name"
	art="$OUT/artifacts/$name"
	rm -rf "$corpus"
	mkdir -p "$corpus" "$art"
	[ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
	n_seed=$(find "$corpus" -type f | wc -l)
	log="$OUT/fuzz_$name.log"
	echo "fuzz: fuzz_$name for ${secs}s on $n_seed seed(s)"
	# -timeout: one input taking >10 s is a hang; -rss_limit_mb bounds memory
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$art/" "$corpus" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ $rc -eq 0 ]; then
		echo "PASS fuzz_$name: ${execs:-?} runs in ${secs}s, no crash"
		passed=$((passed + 1))
	else
		echo "FAIL fuzz_$name: exit $rc; crash input in $art/ (log $log):"
		grep -E 'ERROR|SUMMARY|==[0-9]+==|Test unit written|deadly' "$log" | head -15 | sed 's/^/   /'
		failed=$((failed + 1))
		report="$report fuzz_$name"
	fi
done
if [ $build_failed -ne 0 ]; then
	echo "fuzz: some sources did not compile (see $OUT/build.log); harnesses that need them fail"
fi
echo "fuzz: $passed passed, $failed failed${report:+ ($report )}"
[ $failed -eq 0 ]
