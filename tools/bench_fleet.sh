#!/bin/sh
# sky bench fleet: a loopback TLS broker, skyplan
# and a fleet of skyd of unequal emulated speed (tools/fleet_lib.sh), plus an
# aarch64 skyd under qemu when qemu-aarch64 and build/generic-aarch64/bin/skyd
# are there; they enroll, probe and report; then one training job per
# algorithm (a warm-up step that is not timed, then --steps timed ones),
# and, for the last algorithm, the same job again with plaintext frames (the
# cost of sealing), and with --data-owner B the last algorithm again with
# B as the job's data owner (a U-shaped plan). Each job's metrics go
# through `sky job watch --events`;
# `sky bench fleet --analyze` (C) turns them into one JSON object per
# algorithm (--json) or a table, and draws the measured time lines.
# Everything it starts is stopped at the end, also on Ctrl-C.
#
# Run as `sky bench fleet [options]` (which sets SKY_BUILD to its build) or
# directly from the repository root (SKY_BUILD, default build/host).
set -u
usage() {
	cat <<'EOF'
usage: sky bench fleet [--json] [--model NAME] [--layers L] [--seq S] [--steps N] [--micro M]
                       [--algos "even sky optimal"] [--speeds "0.5 0.25 ..."] [--qemu]
                       [--no-plaintext] [--data-owner B] [--out DIR] [--collect F] [--keep]
                       [--timeout S] [--calibrate-steps N | --no-calibrate] [--no-replicas]
  --model, --layers  the job (default mini, 24 layers)
  --seq S            tokens per sequence (default the preset's)
  --steps N          timed steps per job (default 3), after one warm-up step
  --micro M          micro-batches per step (default 4)
  --algos LIST       algorithms, in order (default "even sky optimal"); the first
                     is the baseline of speedup_vs_even; "optimal-pipeline" is
                     optimal without stage replicas (sky job submit --no-replicas),
                     to compare with optimal, which may replicate stages
  --no-replicas      every job planned without stage replicas (as before them)
  --speeds LIST      the boards' emulated speeds (default the demo fleet:
                     "0.5 0.25 0.25 0.125 0.125 0.0625", 1.375 cores in all)
  --qemu             add an aarch64 board (build/generic-aarch64/bin/skyd under
                     qemu-aarch64 -L / -cpu max, full speed). Off by default: under
                     qemu-user a mini layer takes ~7 s forward and ~15 s backward per
                     micro-batch here (the 1/16 board: 0.4 and 0.7 s), so the even
                     plan's step takes minutes. --no-qemu: off (the default)
  --no-plaintext     skip the plaintext-frames run of the last algorithm
  --data-owner B     also run the last algorithm with board B (b1 = the first
                     speed) as the job's data owner: a U-shaped plan, reported
                     as "<algo>+owner" (its speedup against the first algorithm)
  --out DIR          where the SVGs and the events go (default build/demo)
  --collect F        write the model the last algorithm's job trained to F
                     (`sky job collect`: fp32 safetensors, HuggingFace names)
  --json             one JSON object per algorithm (default: a table)
  --keep             keep the work directory (logs) and say where
  --timeout S        bound on each job (default 600)
  --calibrate-steps N  before the algorithms, a calibration job: N steps (default 2,
                     after one warm-up step) split evenly, so every board runs layers;
                     skyplan folds what its stages measure into each board's figures
                     and plans the jobs after it on them (each result's "figures" says
                     which: probe, calibration, previous job or mixed)
  --no-calibrate     no calibration job: the first plans come from the boards' probes
EOF
}
MODEL=mini
LAYERS=24
SEQ=""
STEPS=3
MICRO=4
ALGOS="even sky optimal"
NO_REPLICAS=""
SPEEDS="0.5 0.25 0.25 0.125 0.125 0.0625"
QEMU_BOARD=0
PLAIN=1
OUT=build/demo
JSON=0
KEEP=0
COLLECT=""
TIMEOUT=600
OWNER=""
CAL_STEPS=2
. "$(dirname "$0")/opt_lib.sh"
while [ $# -gt 0 ]; do
	case "$1" in --*=*) eval "set -- $(sky_opt_split "$@")"; continue ;; esac
	case "$1" in
	--help | -h)
		usage
		exit 0
		;;
	--json) JSON=1 ;;
	--no-qemu) QEMU_BOARD=0 ;;
	--qemu) QEMU_BOARD=1 ;;
	--no-plaintext) PLAIN=0 ;;
	--no-calibrate) CAL_STEPS=0 ;;
	--no-replicas) NO_REPLICAS=--no-replicas ;;
	--keep) KEEP=1 ;;
	--model | --layers | --seq | --steps | --micro | --algos | --speeds | --out | --timeout | --collect | \
		--data-owner | --calibrate-steps)
		[ $# -ge 2 ] || {
			echo "sky bench fleet: $1 needs a value" >&2
			exit 2
		}
		case "$1" in
		--model) MODEL=$2 ;;
		--layers) LAYERS=$2 ;;
		--seq) SEQ=$2 ;;
		--steps) STEPS=$2 ;;
		--micro) MICRO=$2 ;;
		--algos) ALGOS=$2 ;;
		--speeds) SPEEDS=$2 ;;
		--out) OUT=$2 ;;
		--timeout) TIMEOUT=$2 ;;
		--collect) COLLECT=$2 ;;
		--data-owner) OWNER=$2 ;;
		--calibrate-steps) CAL_STEPS=$2 ;;
		esac
		shift
		;;
	*)
		echo "sky bench fleet: unknown option '$1' (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
for v in "$LAYERS" "${SEQ:-1}" "$STEPS" "$MICRO" "$TIMEOUT" "$CAL_STEPS"; do
	case "$v" in
	'' | *[!0-9]*)
		echo "sky bench fleet: --layers, --steps, --micro, --timeout and --calibrate-steps take whole numbers" >&2
		exit 2
		;;
	esac
done

# (the collected model's path as the caller meant it, before the cd below)
case "$COLLECT" in '' | /*) ;; *) COLLECT="$(pwd)/$COLLECT" ;; esac

# from the repository root (broker.sh wants it)
cd "$(dirname "$0")/.." || exit 1
SKY_BUILD=${SKY_BUILD:-build/host}
export SKY_BUILD
FLEET_WHAT="sky bench fleet"
. tools/fleet_lib.sh
ARM=build/generic-aarch64/bin/skyd

fleet_begin
mkdir -p "$OUT" || exit 1
fleet_start

SEQ_OPT=""
[ -n "$SEQ" ] && SEQ_OPT="--seq $SEQ"
# the boards: enroll with one-time tokens, probe at the job's shapes, report
i=0
for s in $SPEEDS; do
	i=$((i + 1))
	fleet_board "b$i" "$s"
done
if [ "$QEMU_BOARD" = 1 ]; then
	command -v qemu-aarch64 >/dev/null 2>&1 && [ -x "$ARM" ] ||
		die "--qemu needs qemu-aarch64 and $ARM (make BOARD=generic-aarch64)"
	fleet_board arm 1 timeout -s KILL "$((TIMEOUT * 6))" qemu-aarch64 -L / -cpu max "$ARM"
	say "sky bench fleet: with an aarch64 board under qemu (arm)"
fi
say "sky bench fleet: $N boards (speeds $SPEEDS), $MODEL with $LAYERS layers, $MICRO micro-batches, 1 + $STEPS steps"
"$SKY" fleet status --state "$STATE" >"$W/fleet.txt" 2>&1

# run_job NAME ALGO [SUBMIT OPTIONS...]: watch with --events, submit, wait
run_job() {
	name=$1
	algo=$2
	shift 2
	"$SKY" job watch "$name" --pki "$PKI" --broker "$BR" --timeout "$TIMEOUT" --json \
		--events "$W/$name.events" >"$W/$name.watch" 2>"$W/$name.watch.err" &
	wpid=$!
	PIDS="$PIDS $wpid"
	sleep 0.5 # the watch subscribes before the job can start
	# optimal-pipeline: optimal without stage replicas
	rep=$NO_REPLICAS
	[ "$algo" = optimal-pipeline ] && algo=optimal rep=--no-replicas
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model "$MODEL" --layers "$LAYERS" $SEQ_OPT --job "$name" \
		--min-boards "$N" --task train --algo "$algo" $rep --sched 1f1b --steps $((${JOB_STEPS:-$STEPS} + 1)) \
		--micro "$MICRO" --seed 1 --wait 120 "$@" \
		>"$W/$name.submit" 2>&1 || die "job $name was not accepted: $(tail -3 "$W/$name.submit")"
	wait "$wpid" || die "job $name did not finish: $(cat "$W/$name.watch.err" "$W/$name.watch" | tail -n 3)"
	[ "$JSON" = 1 ] || sed 's/^/  /' "$W/$name.watch" | tail -n 1 >&2
}

first=""
even_s=""
last=""
CAL_JOB=bench-calibrate
if [ "$CAL_STEPS" -gt 0 ]; then
	# every board runs layers (an even split), so every board is measured;
	# skyplan plans the jobs below on what the stages measured
	say "sky bench fleet: calibration ($CAL_STEPS steps, even split)"
	JOB_STEPS=$CAL_STEPS
	run_job "$CAL_JOB" even
	unset JOB_STEPS
fi
for a in $ALGOS; do
	say "sky bench fleet: training under $a"
	run_job "bench-$a" "$a"
	cp "$W/bench-$a.events" "$OUT/events-$a.jsonl"
	last=$a
done
if [ -n "$COLLECT" ] && [ -n "$last" ]; then
	# a part over the broker's message limit (the first stage's, with the
	# embeddings, for mini) is only in its board's state directory
	set --
	for f in "$W"/*/state/parts/"bench-$last"-e*-stage*.safetensors; do
		[ -f "$f" ] && set -- "$@" --part "$f"
	done
	"$SKY" job collect "bench-$last" --pki "$PKI" --broker "$BR" --out "$COLLECT" --timeout 120 \
		"$@" >"$W/collect.log" 2>&1 ||
		die "cannot collect the model of bench-$last: $(tail -3 "$W/collect.log")"
	say "sky bench fleet: the model bench-$last trained is in $COLLECT"
fi
if [ "$PLAIN" = 1 ] && [ -n "$last" ]; then
	say "sky bench fleet: $last again with plaintext frames"
	run_job "bench-$last-plain" "$last" --plaintext-frames
	cp "$W/bench-$last-plain.events" "$OUT/events-$last-plaintext.jsonl"
fi

if [ -n "$OWNER" ] && [ -n "$last" ]; then
	say "sky bench fleet: $last again with $OWNER as the data owner"
	run_job "bench-$last-owner" "$last" --data-owner "$OWNER"
	cp "$W/bench-$last-owner.events" "$OUT/events-$last-owner.jsonl"
fi

# the figures (C), the time lines and the plan
: >"$W/results.jsonl"
for a in $ALGOS; do
	set -- --analyze "$W/bench-$a.events" --algo "$a" --svg "$OUT/timeline-$a.svg" \
		--figures "$STATE/plans/bench-$a.figures.json" --calibration-job "$CAL_JOB"
	[ -n "$even_s" ] && set -- "$@" --even-step "$even_s"
	[ "$PLAIN" = 1 ] && [ "$a" = "$last" ] && set -- "$@" --plaintext "$W/bench-$last-plain.events"
	"$SKY" bench fleet "$@" >>"$W/results.jsonl" || die "cannot analyze job bench-$a"
	if [ -z "$first" ]; then
		first=$a
		even_s=$(sed -n 's/.*"step_s_measured":\([0-9.e+-]*\),.*/\1/p' "$W/results.jsonl")
		# the baseline against itself
		"$SKY" bench fleet "$@" --even-step "$even_s" >"$W/first.json" &&
			mv "$W/first.json" "$W/results.jsonl"
	fi
done
if [ -n "$OWNER" ] && [ -n "$last" ]; then
	"$SKY" bench fleet --analyze "$W/bench-$last-owner.events" --algo "$last+owner" \
		--svg "$OUT/timeline-$last-owner.svg" ${even_s:+--even-step "$even_s"} \
		--figures "$STATE/plans/bench-$last-owner.figures.json" --calibration-job "$CAL_JOB" \
		>>"$W/results.jsonl" || die "cannot analyze job bench-$last-owner"
fi
# the optimal plan drawn by `sky plan --svg` on the fleet as the boards reported it
# (skyplan's fleet.json: each board's measured times per micro-batch, memory, link)
f="$STATE/fleet.json"
if [ -s "$f" ]; then
	for k in id fwd_s bwd_s mem_bytes bw_Bps lat_s; do
		grep -o "\"$k\":[^,}]*" "$f" | sed 's/^[^:]*://' >"$W/col.$k"
	done
	paste -d ' ' "$W/col.id" "$W/col.fwd_s" "$W/col.bwd_s" "$W/col.mem_bytes" "$W/col.bw_Bps" \
		"$W/col.lat_s" | awk 'BEGIN { printf "{\"what\":\"sky bench fleet: as the boards reported\",\"boards\":[" }
		{ printf "%s{\"id\":%s,\"fwd_s\":%s,\"bwd_s\":%s,\"mem_bytes\":%s,\"bw_Bps\":%s,\"lat_s\":%s}",
			(NR > 1 ? "," : ""), $1, $2, $3, $4, $5, $6 }
		END { print "]}" }' >"$W/plan-fleet.json"
	"$SKY" plan --fleet "$W/plan-fleet.json" --model "$MODEL" --layers "$LAYERS" $SEQ_OPT \
		--micro-batches "$MICRO" --schedule 1f1b --algo optimal --svg "$OUT/plan-optimal.svg" \
		>"$W/plan.txt" 2>&1 || log "sky bench fleet: no plan picture: $(tail -1 "$W/plan.txt")"
fi
if [ "$JSON" = 1 ]; then
	cat "$W/results.jsonl"
else
	printf '%-8s %10s %10s %8s %8s %6s %6s %9s %9s  %s\n' algorithm "measured" predicted "meas/pred" \
		speedup comm wait "frame MB/s" loss figures
	while IFS= read -r l; do
		g() { echo "$l" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" | tr -d '"'; }
		printf '%-8s %9.3fs %9.3fs %8.2f %7.2fx %5.1f%% %5.1f%% %9.2f %9.4f  %s\n' "$(g algo)" \
			"$(g step_s_measured)" "$(g step_s_predicted)" "$(g measured_over_predicted)" \
			"$(g speedup_vs_even)" "$(echo "$(g comm_share)" | awk '{print $1*100}')" \
			"$(echo "$(g wait_share)" | awk '{print $1*100}')" "$(g frame_MBps)" "$(g loss)" \
			"$(echo "$l" | sed -n 's/.*"figures":"\([^"]*\)".*/\1/p')"
	done <"$W/results.jsonl"
	c=$(sed -n 's/.*"encryption_cost_s_per_step":\([^,}]*\).*/\1/p' "$W/results.jsonl")
	p=$(sed -n 's/.*"step_s_plaintext":\([^,}]*\).*/\1/p' "$W/results.jsonl")
	[ -n "$c" ] && echo "$last with plaintext frames: ${p} s a step; sealing costs ${c} s a step"
fi
cp "$W/results.jsonl" "$OUT/bench-fleet.jsonl"
say "sky bench fleet: time lines in $OUT/timeline-*.svg, the optimal plan in $OUT/plan-optimal.svg, figures in $OUT/bench-fleet.jsonl"
exit 0
