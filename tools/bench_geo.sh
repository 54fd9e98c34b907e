#!/bin/sh
# sky bench geo: a geo-distributed fleet on one machine (tools/geo-wan.sh, as
# root): 3 sites of 3 boards of unequal emulated speed, each site's uplink
# shaped to 20 Mbit/s both ways, boards enrolled interleaved (a board of each
# site in turn), `mini` with 24 layers. One training job per plan: `even`,
# `optimal --link-blind` (the cost model without sites, as Sky planned
# before them) and `optimal` (link-aware), each a warm-up step and --steps
# timed ones. Each job's metrics (`sky job watch --events`) go through
# `sky bench fleet --analyze`, which gives step_s_measured, step_s_predicted
# (the link-aware simulation of the plan as published), cross_site_cuts and
# wan_bytes_per_step (measured: what the stages on either side of each
# cross-site cut sent towards each other). One JSON object per plan with
# --json, else a table. No delay is emulated (no netem on this kernel).
# Everything is removed at the end, also on Ctrl-C (geo-wan.sh run).
#
# Run as `sky bench geo [options]` or directly from the repository root.
set -u
usage() {
	cat <<'EOF'
usage: sky bench geo [--json] [--layers L] [--steps N] [--micro M] [--rate R]
                     [--speeds "..."] [--plans "even link-blind optimal"]
                     [--keep] [--timeout S]
  --layers L     mini's layers (default 24)
  --steps N      timed steps per job (default 2), after one warm-up step
  --micro M      micro-batches per step (default 8)
  --rate R       each site's uplink, both ways (tc tbf rate, default 20mbit)
  --speeds LIST  the 9 boards' speeds, site by site (default: factory 1/4 1/8
                 1/16, shop 1/6 1/12 1/12, home 1/8 1/8 1/16, as in
                 planner/data/geo-3x3.json)
  --plans LIST   which plans, in order (default "even link-blind optimal")
  --json         one JSON object per plan (default: a table)
  --keep         keep the work directory (logs) and say where
  --timeout S    bound on each job (default 1200)
EOF
}
LAYERS=24
STEPS=2
MICRO=8
RATE=20mbit
SPEEDS="0.25 0.125 0.0625 0.1667 0.0833 0.0833 0.125 0.125 0.0625"
PLANS="even link-blind optimal"
JSON=0
KEEP=0
TIMEOUT=1200
INNER=0
ARGS="$*"
. "$(dirname "$0")/opt_lib.sh"
while [ $# -gt 0 ]; do
	case "$1" in --*=*) eval "set -- $(sky_opt_split "$@")"; continue ;; esac
	case "$1" in
	--help | -h) usage; exit 0 ;;
	--json) JSON=1 ;;
	--keep) KEEP=1 ;;
	--inner) INNER=1 ;;
	--layers | --steps | --micro | --rate | --speeds | --plans | --timeout)
		[ $# -ge 2 ] || { echo "sky bench geo: $1 needs a value" >&2; exit 2; }
		case "$1" in
		--layers) LAYERS=$2 ;;
		--steps) STEPS=$2 ;;
		--micro) MICRO=$2 ;;
		--rate) RATE=$2 ;;
		--speeds) SPEEDS=$2 ;;
		--plans) PLANS=$2 ;;
		--timeout) TIMEOUT=$2 ;;
		esac
		shift
		;;
	*) echo "sky bench geo: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
for v in "$LAYERS" "$STEPS" "$MICRO" "$TIMEOUT"; do
	case "$v" in '' | *[!0-9]*)
		echo "sky bench geo: --layers, --steps, --micro and --timeout take whole numbers" >&2
		exit 2 ;;
	esac
done
for p in $PLANS; do
	case "$p" in even | link-blind | optimal | sky) ;; *)
		echo "sky bench geo: unknown plan '$p' (even, link-blind, optimal, sky)" >&2
		exit 2 ;;
	esac
done
cd "$(dirname "$0")/.." || exit 1
SKY_BUILD=${SKY_BUILD:-build/host}
export SKY_BUILD
log() { echo "$*" >&2; }

if [ "$INNER" = 0 ]; then
	[ "$(id -u)" = 0 ] || { log "sky bench geo: needs root (network namespaces, tc)"; exit 1; }
	D=$(mktemp -d "${TMPDIR:-/tmp}/sky-bench-geo.XXXXXX") || exit 1
	rmdir "$D"
	set -- --sites 3 --boards 3 --speeds "$SPEEDS" --rate "$RATE" --model mini --layers "$LAYERS" \
		--order interleaved --dir "$D"
	[ "$KEEP" = 1 ] && set -- "$@" --keep
	[ "$JSON" = 1 ] || log "sky bench geo: 3 sites x 3 boards (speeds $SPEEDS), uplinks $RATE, mini $LAYERS layers, $MICRO micro-batches, 1 + $STEPS steps"
	# shellcheck disable=SC2086 # our own options, re-read by the inner run
	exec tools/geo-wan.sh run "$@" -- sh "$(pwd)/tools/bench_geo.sh" --inner $ARGS
fi

# ---- inside the core namespace (geo-wan.sh run): the jobs ---------------------
SKY="$SKY_BIN/sky"
W=$SKY_GEO_DIR
BR=$SKY_GEO_BROKER
PKI=$SKY_GEO_PKI
N=$SKY_GEO_BOARDS
# the planner's link probes have measured every site before the first plan
measured() { [ "$(grep -o '"a":"site[0-9]*","b":"core"' "$SKY_GEO_STATE/fleet.json" 2>/dev/null | wc -l)" -ge 3 ]; }
_end=$(($(date +%s) + 120))
while ! measured && [ "$(date +%s)" -lt "$_end" ]; do sleep 0.5; done
measured || log "sky bench geo: the planner has not measured every site's path yet"
[ "$JSON" = 1 ] || { log "sky bench geo: paths measured through the bridges:"; grep -o '"links":[^]]*' "$SKY_GEO_STATE/fleet.json" >&2; }
run_job() { # run_job NAME SUBMIT-OPTIONS...
	name=$1
	shift
	"$SKY" job watch "$name" --pki "$PKI" --broker "$BR" --timeout "$TIMEOUT" --json \
		--events "$W/$name.events" >"$W/$name.watch" 2>"$W/$name.watch.err" &
	wpid=$!
	sleep 0.5
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model mini --layers "$LAYERS" --job "$name" \
		--min-boards "$N" --task train --sched 1f1b --steps $((STEPS + 1)) --micro "$MICRO" \
		--seed 1 --wait 120 "$@" >"$W/$name.submit" 2>&1 || {
		log "sky bench geo: job $name was not accepted: $(tail -3 "$W/$name.submit")"
		kill "$wpid" 2>/dev/null
		return 1
	}
	wait "$wpid" || {
		log "sky bench geo: job $name did not finish: $(tail -n 3 "$W/$name.watch.err" "$W/$name.watch")"
		return 1
	}
	[ "$JSON" = 1 ] || tail -n 1 "$W/$name.watch" | sed 's/^/  /' >&2
}
: >"$W/results.jsonl"
even_s=""
rc=0
for p in $PLANS; do
	case "$p" in
	link-blind) set -- --algo optimal --link-blind ;;
	*) set -- --algo "$p" ;;
	esac
	[ "$JSON" = 1 ] || log "sky bench geo: training under $p"
	run_job "geo-$p" "$@" || { rc=1; continue; }
	label=$p
	[ "$p" = link-blind ] && label="optimal --link-blind"
	set -- --analyze "$W/geo-$p.events" --algo "$label"
	[ -n "$even_s" ] && set -- "$@" --even-step "$even_s"
	"$SKY" bench fleet "$@" >>"$W/results.jsonl" || { log "sky bench geo: cannot analyze geo-$p"; rc=1; }
	if [ -z "$even_s" ] && [ "$p" = even ]; then
		even_s=$(sed -n 's/.*"step_s_measured":\([0-9.e+-]*\),.*/\1/p' "$W/results.jsonl")
		# the baseline against itself, as sky bench fleet does
		"$SKY" bench fleet "$@" --even-step "$even_s" >"$W/even.json" &&
			mv "$W/even.json" "$W/results.jsonl"
	fi
done
if [ "$JSON" = 1 ]; then
	cat "$W/results.jsonl"
else
	printf '%-21s %10s %10s %9s %8s %5s %12s\n' plan measured predicted meas/pred speedup cuts "WAN MB/step"
	while IFS= read -r l; do
		g() { echo "$l" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" | tr -d '"'; }
		printf '%-21s %9.3fs %9.3fs %9.2f %7.2fx %5s %12.2f\n' "$(g algo)" "$(g step_s_measured)" \
			"$(g step_s_predicted)" "$(g measured_over_predicted)" "$(g speedup_vs_even)" \
			"$(g cross_site_cuts)" "$(echo "$(g wan_bytes_per_step)" | awk '{print $1/1e6}')"
	done <"$W/results.jsonl"
fi
exit $rc
