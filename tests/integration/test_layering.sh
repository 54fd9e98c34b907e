#!/bin/sh
# The folder layout is the architecture (../shared/design.md): check it holds.
#  - only port/ includes OS headers beyond the C standard library;
#  - the planner includes only port/, runtime/model/, runtime/wire/ and itself
#    (skyplan's main excepted: it hands runtime code to the service);
#  - the runtime never includes the planner;
#  - only the planner service's own files include its private svc_internal.h;
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
libs='cblas|cjson/cJSON|utf8proc|csv|microhttpd|mbedtls/[a-z0-9_]+|MQTTAsync|MQTTClient|MQTTProperties|immintrin|arm_neon|arm_acle'

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

# The service's state and the calls between its files are private to it:
# planner/service.c, planner/svc_*.c and its unit tests (tests/planner/test_svc_*.c,
# with their fake service tests/planner/svc_*.[ch]).
svc_internal_includes() {
	grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"svc_internal\.h"' \
		port runtime planner tools tests --include='*.c' --include='*.h' |
		grep -vE '^planner/(service|svc_[a-z_]+)\.c$|^planner/svc_internal\.h$|^tests/planner/(test_svc_[a-z_]+\.c|svc_[a-z_]+\.[ch])$'
}
check only_the_service_includes_svc_internal svc_internal_includes

headers_alone() {
	cc=${CC:-cc}
	for h in $(find port runtime planner -name 'sky_*.h' ! -name '*_internal.h'); do
		printf '#include "%s"\n' "$(basename "$h")" |
			$cc -std=gnu11 -fsyntax-only -Iport -Iruntime -Iruntime/model -Iruntime/wire \
				-Iruntime/kernels -Iplanner -x c - 2>&1 | head -3 | sed "s|^|$h: |"
	done
}
check public_headers_compile_alone headers_alone


# ---- no circles among planner/'s modules ------------------------------------
# A module is x.c with its headers sky_x.h and x_internal.h (plan_internal.h
# and sky_plan.h are the module "plan"). Two graphs, each must be a DAG:
#  - includes: a planner file's #include "..." of another planner header;
#  - calls: a planner object's undefined symbol that another planner object
#    defines (nm over $SKY_BUILD/obj/planner, when built), which also sees
#    circles a shared header hides (plan_internal.h declares functions of
#    cost.c and of every partition_*.c alike).
# The planner service (service.c, svc_*.c, svc_internal.h and sky_service.h)
# is one module, "svc": its files call each other through svc_internal.h by
# design. tsort names the modules of each loop it finds. A pair listed in
# cycle_known_pairs ("a b", sorted) is reported on stderr but does not fail
# the check; there is none today.
cycle_known_pairs=''
cycle_module() { # planner/x.c, planner/sky_x.h, planner/x_internal.h -> x
	echo "$1" | sed -e 's|^planner/||' -e 's|\.[cho]$||' -e 's|^sky_||' -e 's|/sky_|/|' \
		-e 's|_internal$||' -e 's|^svc_.*|svc|' -e 's|^service$|svc|'
}
cycle_include_edges() {
	for f in $(find planner -name '*.[ch]' | sort); do
		from=$(cycle_module "$f")
		grep -hoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "$f" |
			sed 's/.*"\(.*\)"/\1/' | while read -r h; do
			for c in "$(dirname "$f")/$h" "planner/$h"; do
				if [ -f "$c" ]; then
					to=$(cycle_module "$c")
					[ "$to" = "$from" ] || echo "$from $to"
					break
				fi
			done
		done
	done | sort -u
}
cycle_call_edges() { # objects whose source still exists (no stale ones)
	objs=$1
	for o in $(cd "$objs" && find . -name '*.o' | sed 's|^\./||' | sort); do
		[ -f "planner/${o%.o}.c" ] || continue
		${NM:-nm} "$objs/$o" | awk -v m="$(cycle_module "planner/$o")" \
			'$2 ~ /^[TDBRC]$/ { print "D", m, $3 } $1 == "U" { print "U", m, $2 }'
	done | awk '$1 == "D" { def[$3] = $2 } $1 == "U" { use[++n] = $2 " " $3 }
		END { for (i = 1; i <= n; i++) { split(use[i], u, " ")
			if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]] } }' | sort -u
}
cycle_loops() { # edges on stdin -> one line per loop: its modules, sorted
	known=$(echo "$cycle_known_pairs" | tr ' ' '\n' | sort | tr '\n' ' ')
	LC_ALL=C tsort 2>&1 >/dev/null | awk '
		/input contains a loop/ { if (l != "") print l; l = ""; next }
		{ sub(/^tsort: /, ""); l = l $0 " " }
		END { if (l != "") print l }' | while read -r loop; do
		set -- $(echo "$loop" | tr ' ' '\n' | sort | tr '\n' ' ')
		if [ -n "$known" ] && [ "$* " = "$known" ]; then
			echo "note: known circle planner/$1 <-> $2" >&2
		else
			echo "circle: $*"
		fi
	done
}
planner_include_cycles() { cycle_include_edges | cycle_loops; }
check planner_no_include_cycles planner_include_cycles
planner_call_cycles() { cycle_call_edges "$1" | cycle_loops; }
cycle_objs=${SKY_BUILD:-build/host}/obj/planner
if [ -d "$cycle_objs" ] && [ -n "$(find "$cycle_objs" -name '*.o' | head -1)" ]; then
	check planner_no_call_cycles planner_call_cycles "$cycle_objs"
else
	echo "SKIP planner_no_call_cycles: no objects in $cycle_objs (build first)"
fi

exit $fail
