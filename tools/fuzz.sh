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
# uses. Objects are rebuilt when their source or any header is newer.
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
CFLAGS="-std=gnu11 -g -O1 -fno-omit-frame-pointer -fno-strict-aliasing -w \
 -DSKY_BOARD=\"fuzz\" -Iport -Iruntime/model -Iruntime/wire -Iruntime -Iruntime/kernels -Iplanner -Itests"
SAN="-fsanitize=fuzzer-no-link,address"
LIBS="-lpaho-mqtt3as -lmbedtls -lmbedx509 -lmbedcrypto -lcjson -lopenblas -lpthread -lm"

ver=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo "const char *sky_version(void) { return \"$ver-fuzz\"; }" >"$OUT/gen/version.c"

# Per-file instruction sets, as in the Makefile.
kflags() {
	case "$1" in
	*/x86/*_avx2.c) echo "-mavx2 -mfma" ;;
	*/x86/*_avx512.c) echo "-mavx2 -mfma -mavx512f -mavx512bw -mavx512vl" ;;
	*/x86/*_vnni.c) echo "-mavx2 -mfma -mavx512f -mavx512bw -mavx512vl -mavx512vnni" ;;
	*/arm/*_dotprod.c) echo "-march=armv8.2-a+dotprod" ;;
	*) echo "" ;;
	esac
}

srcs=$(ls port/*.c runtime/*.c runtime/kernels/*.c runtime/model/*.c runtime/wire/*.c \
	planner/*.c ${kdir:+$kdir/*.c} "$OUT/gen/version.c" 2>/dev/null)
newest_h=$(find port runtime planner -name '*.h' -newer "$OUT/lib.stamp" 2>/dev/null | head -1)
[ -f "$OUT/lib.stamp" ] || newest_h=all

echo "fuzz: compiling Sky's sources with $CC ($SAN) into $OBJ"
build_failed=0
objs=""
for s in $srcs; do
	o="$OBJ/$(echo "$s" | tr '/' '_' | sed 's/\.c$/.o/')"
	objs="$objs $o"
	if [ -n "$newest_h" ] || [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
		# shellcheck disable=SC2086 # flag lists
		if ! $CC $CFLAGS $SAN $(kflags "$s") -c "$s" -o "$o" 2>"$o.log"; then
			echo "fuzz: cannot compile $s:" >&2
			sed 's/^/   /' "$o.log" >&2
			rm -f "$o"
			build_failed=1
		fi
	fi
done
rm -f "$OUT/libsky_fuzz.a"
# shellcheck disable=SC2086
ar rcs "$OUT/libsky_fuzz.a" $(for o in $objs; do [ -f "$o" ] && echo "$o"; done)
[ $build_failed -eq 0 ] && touch "$OUT/lib.stamp"

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
	if ! $CC $CFLAGS -fsanitize=fuzzer,address "$h" "$OUT/libsky_fuzz.a" $LIBS -o "$bin" \
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
	echo "fuzz: some sources did not compile (see above); harnesses that needed them fail to link"
fi
echo "fuzz: $passed passed, $failed failed${report:+ ($report )}"
[ $failed -eq 0 ]
