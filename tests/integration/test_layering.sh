#!/bin/sh
# The folder layout is the architecture (../shared/design.md): check it holds.
#  - only port/ includes OS headers beyond the C standard library;
#  - the planner includes only port/, runtime/model/, runtime/wire/ and itself
#    (skyplan's main excepted: it hands runtime code to the service);
#  - the runtime never includes the planner;
#  - every public header compiles on its own.
set -u
cd "$(dirname "$0")/../.."

fail=0
check() { # name, then a command whose output lists offenders
	name=$1
	shift
	out=$("$@")
	if [ -n "$out" ]; then
		echo "FAIL $name:"
		echo "$out" | sed 's/^/   /'
		fail=1
	else
		echo "PASS $name"
	fi
}

# C standard library headers (C11) plus the libraries the design names.
std='assert|complex|ctype|errno|fenv|float|inttypes|iso646|limits|locale|math|setjmp|signal|stdalign|stdarg|stdatomic|stdbool|stddef|stdint|stdio|stdlib|stdnoreturn|string|tgmath|threads|time|uchar|wchar|wctype'
libs='cblas|cjson/cJSON|utf8proc|microhttpd|mbedtls/[a-z0-9_]+|MQTTAsync|MQTTClient|MQTTProperties|immintrin|arm_neon|arm_acle'

os_includes() {
	grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' runtime planner tools/sky \
		--include='*.c' --include='*.h' |
		grep -vE "<($std)\.h>" | grep -vE "<($libs)\.h>"
}
check only_port_includes_os_headers os_includes

planner_includes() {
	# skyplan's main is where the planner meets the runtime (it passes the
	# model-file code to the service): the one planner file allowed runtime
	# headers
	for f in $(find planner -name '*.[ch]' ! -path planner/skyplan/main.c); do
		grep -hoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "$f" |
			sed 's/.*"\(.*\)"/\1/' | while read -r h; do
			[ -f "planner/$h" ] || [ -f "$(dirname "$f")/$h" ] || [ -f "port/$h" ] ||
				[ -f "runtime/model/$h" ] || [ -f "runtime/wire/$h" ] ||
				echo "$f includes $h"
		done
	done
}
check planner_includes_only_shared_headers planner_includes

runtime_includes_planner() {
	for f in $(find runtime -name '*.[ch]'); do
		grep -hoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "$f" |
			sed 's/.*"\(.*\)"/\1/' | while read -r h; do
			[ -f "planner/$h" ] && echo "$f includes planner header $h"
		done
	done
}
check runtime_never_includes_planner runtime_includes_planner

headers_alone() {
	cc=${CC:-cc}
	for h in $(find port runtime planner -name 'sky_*.h' ! -name '*_internal.h'); do
		printf '#include "%s"\n' "$(basename "$h")" |
			$cc -std=gnu11 -fsyntax-only -Iport -Iruntime -Iruntime/model -Iruntime/wire \
				-Iruntime/kernels -Iplanner -x c - 2>&1 | head -3 | sed "s|^|$h: |"
	done
}
check public_headers_compile_alone headers_alone

exit $fail
