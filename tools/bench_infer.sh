#!/bin/sh
# sky bench infer: a loopback fleet (tools/fleet_lib.sh: broker, skyplan,
# boards of unequal emulated speed) serves an int8 model to concurrent
# clients, one infer job per algorithm; `sky bench infer --drive` (C)
# measures each job and prints one JSON object per algorithm (--json) or a
# table. Everything it starts is stopped at the end, also on Ctrl-C.
#
# Run as `sky bench infer [options]` (which sets SKY_BUILD to its build) or
# directly from the repository root (SKY_BUILD, default build/host).
set -u
usage() {
	cat <<'EOF'
usage: sky bench infer [--json] [--clients N] [--inflight K] [--seconds T]
                       [--algos "even optimal"] [--model NAME] [--layers L] [--seq S]
                       [--batch B] [--speeds "0.5 0.25 ..."] [--weights F.safetensors]
                       [--train-steps N] [--samples N] [--keep] [--timeout S]
                       [--events DIR]
  --clients N        concurrent client connections (default 8), each keeping
  --inflight K       requests in flight (default 8: 64 in all, enough to fill the
                     first stage's batches while the others are down the pipeline)
  --seconds T        measured seconds per job (default 10), after one warm-up
                     request per client and, under the full load, one round of
                     answers (clients x inflight: the pipeline is full by then)
  --algos LIST       algorithms, in order (default "even optimal"); the first is
                     the baseline of speedup_vs_even
  --model, --layers  the model (default mini, 24 layers), --seq its tokens per
                     sequence (default the preset's), --batch the served batch
                     (requests per micro-batch, default the preset's)
  --speeds LIST      the boards' emulated speeds (default the demo fleet:
                     "0.5 0.25 0.25 0.125 0.125 0.0625")
  --weights F        serve this model (fp32 from `sky train --save` or `sky job
                     collect`, or int8 from `sky quantize`); default: train one
                     for --train-steps (default 2: only its speed is measured) on
                     one board first
  --samples N        before the first measurement, print N requests of the
                     first job with their logits (`sky infer`; default 0)
  --json             one JSON object per algorithm (default: a table)
  --keep             keep the work directory (logs) and say where
  --events DIR       write every stage's metrics message of each job (one per batch:
                     requests, stage_s, ...) to DIR/infer-<algo>.events (`sky job watch
                     --events`), for a look at where a batch's time goes
  --timeout S        bound on each job's start-up and drain (default 600)
EOF
}
CLIENTS=8
INFLIGHT=8
SECONDS_T=10
ALGOS="even optimal"
MODEL=mini
LAYERS=24
SEQ=""
BATCH=""
SPEEDS="0.5 0.25 0.25 0.125 0.125 0.0625"
WEIGHTS=""
TRAIN_STEPS=2
SAMPLES=0
JSON=0
KEEP=0
TIMEOUT=600
EVENTS=""
. "$(dirname "$0")/opt_lib.sh"
while [ $# -gt 0 ]; do
	case "$1" in --*=*) eval "set -- $(sky_opt_split "$@")"; continue ;; esac
	case "$1" in
	--help | -h)
		usage
		exit 0
		;;
	--json) JSON=1 ;;
	--keep) KEEP=1 ;;
	--clients | --inflight | --seconds | --algos | --model | --layers | --seq | --batch | \
		--speeds | --weights | --train-steps | --samples | --timeout | --events)
		[ $# -ge 2 ] || {
			echo "sky bench infer: $1 needs a value" >&2
			exit 2
		}
		case "$1" in
		--clients) CLIENTS=$2 ;;
		--inflight) INFLIGHT=$2 ;;
		--seconds) SECONDS_T=$2 ;;
		--algos) ALGOS=$2 ;;
		--model) MODEL=$2 ;;
		--layers) LAYERS=$2 ;;
		--seq) SEQ=$2 ;;
		--batch) BATCH=$2 ;;
		--speeds) SPEEDS=$2 ;;
		--weights) WEIGHTS=$2 ;;
		--train-steps) TRAIN_STEPS=$2 ;;
		--samples) SAMPLES=$2 ;;
		--timeout) TIMEOUT=$2 ;;
		--events) EVENTS=$2 ;;
		esac
		shift
		;;
	*)
		echo "sky bench infer: unknown option '$1' (see --help)" >&2
		exit 2
		;;
	esac
	shift
done
for v in "$CLIENTS" "$INFLIGHT" "$LAYERS" "${SEQ:-1}" "${BATCH:-1}" "$TRAIN_STEPS" "$SAMPLES" "$TIMEOUT"; do
	case "$v" in
	'' | *[!0-9]*)
		echo "sky bench infer: --clients, --inflight, --layers, --seq, --batch, --train-steps," \
			"--samples and --timeout take whole numbers" >&2
		exit 2
		;;
	esac
done
[ -z "$WEIGHTS" ] || [ -f "$WEIGHTS" ] || {
	echo "sky bench infer: --weights $WEIGHTS: no such file" >&2
	exit 2
}
case "$WEIGHTS" in '' | /*) ;; *) WEIGHTS="$(pwd)/$WEIGHTS" ;; esac
if [ -n "$EVENTS" ]; then
	mkdir -p "$EVENTS" || exit 2
	case "$EVENTS" in /*) ;; *) EVENTS="$(pwd)/$EVENTS" ;; esac
fi

# from the repository root (broker.sh wants it)
cd "$(dirname "$0")/.." || exit 1
SKY_BUILD=${SKY_BUILD:-build/host}
export SKY_BUILD
FLEET_WHAT="sky bench infer"
. tools/fleet_lib.sh

fleet_begin
SEQ_OPT=""
[ -n "$SEQ" ] && SEQ_OPT="--seq $SEQ"
BATCH_OPT=""
[ -n "$BATCH" ] && BATCH_OPT="--batch $BATCH"

# the model first, while the machine is idle
if [ -z "$WEIGHTS" ]; then
	say "sky bench infer: training $MODEL with $LAYERS layers for $TRAIN_STEPS steps on one board"
	# shellcheck disable=SC2086
	"$SKY" train --model "$MODEL" --layers "$LAYERS" $SEQ_OPT --steps "$TRAIN_STEPS" --seed 1 \
		--quiet --save "$W/model.safetensors" >"$W/train.log" 2>&1 ||
		die "sky train failed: $(tail -3 "$W/train.log")"
	WEIGHTS="$W/model.safetensors"
fi

fleet_start
# a client identity for the requests, and an idle board that watches the
# plans and the frames (it never publishes: a running board's certificate
# would close that board's connection)
"$SKY" pki client --dir "$PKI" bench >"$W/client.log" 2>&1 || die "sky pki client: $(cat "$W/client.log")"
"$SKY" pki issue --dir "$PKI" --id bench-watch --state "$W/watch" >"$W/watch.log" 2>&1 ||
	die "sky pki issue: $(cat "$W/watch.log")"
kill -HUP "$SKY_BROKER_PID" # the ACL with the client's sections
CLIENT="$PKI/clients/bench"
acl_loaded() { # the planner answers the client: the broker lets it ask
	"$SKY" infer --pki "$CLIENT" --broker "$BR" --job none --tokens 1 --timeout 2 2>&1 |
		grep -q unknown_job
}
wait_for 60 acl_loaded || die "the client is not let through (ACL not reloaded?)"

i=0
for s in $SPEEDS; do
	i=$((i + 1))
	fleet_board "b$i" "$s"
done
say "sky bench infer: $N boards (speeds $SPEEDS), $MODEL with $LAYERS layers; $CLIENTS clients x $INFLIGHT in flight, $SECONDS_T s per job"

: >"$W/results.jsonl"
even=""
for a in $ALGOS; do
	say "sky bench infer: serving under $a"
	wpid=""
	if [ -n "$EVENTS" ]; then
		# the operator reads the job's metrics; stopped once the job is measured
		"$SKY" job watch "bench-$a" --pki "$PKI" --broker "$BR" --timeout "$TIMEOUT" \
			--events "$EVENTS/infer-$a.events" >"$W/bench-$a.watch" 2>&1 &
		wpid=$!
		PIDS="$PIDS $wpid"
		sleep 0.5 # subscribed before the job starts
	fi
	# shellcheck disable=SC2086
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model "$MODEL" --layers "$LAYERS" $SEQ_OPT \
		$BATCH_OPT --job "bench-$a" --min-boards "$N" --task infer --weights "$WEIGHTS" --algo "$a" \
		--wait "$TIMEOUT" >"$W/bench-$a.submit" 2>&1 ||
		die "job bench-$a was not served: $(tail -3 "$W/bench-$a.submit")"
	if [ "$SAMPLES" -gt 0 ] && [ -z "$even" ]; then
		say "sky bench infer: $SAMPLES requests to job bench-$a and their logits"
		k=0
		while [ $k -lt "$SAMPLES" ]; do
			toks=$(awk -v s=$k 'BEGIN { srand(s + 1); n = 4 + int(rand() * 8); for (i = 0; i < n; i++)
				printf "%s%d", (i ? "," : ""), 1 + int(rand() * 60) }')
			say "  sky infer --tokens $toks"
			"$SKY" infer --pki "$CLIENT" --broker "$BR" --job "bench-$a" --tokens "$toks" \
				--id "sample-$k" --timeout 60 2>&1 | sed 's/^/    /'
			k=$((k + 1))
		done
	fi
	set -- --drive --job "bench-$a" --broker "$BR" --pki "$CLIENT" --observer "$W/watch" \
		--clients "$CLIENTS" --inflight "$INFLIGHT" --seconds "$SECONDS_T" --algo "$a" \
		--timeout "$TIMEOUT"
	[ -n "$even" ] && set -- "$@" --even-throughput "$even"
	"$SKY" bench infer "$@" >>"$W/results.jsonl" 2>"$W/bench-$a.drive.err" ||
		die "measuring job bench-$a failed: $(tail -3 "$W/bench-$a.drive.err")"
	if [ -n "$wpid" ]; then
		kill "$wpid" 2>/dev/null
		wait "$wpid" 2>/dev/null
	fi
	if [ -z "$even" ]; then
		even=$(tail -n 1 "$W/results.jsonl" | sed -n 's/.*"throughput_seq_s":\([0-9.e+-]*\),.*/\1/p')
	fi
done

if [ "$JSON" = 1 ]; then
	cat "$W/results.jsonl"
else
	printf '%-8s %10s %10s %9s %6s %8s %8s %8s %11s %11s %5s\n' algorithm "seq/s" predicted "meas/pred" \
		fill "p50 ms" "p99 ms" speedup "B/request" "B/req fp32" load
	while IFS= read -r l; do
		g() { echo "$l" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" | tr -d '"'; }
		printf '%-8s %10.2f %10.2f %9.2f %6.2f %8.1f %8.1f %7.2fx %11.0f %11.0f %5.1f\n' "$(g algo)" \
			"$(g throughput_seq_s)" "$(g throughput_predicted_seq_s)" "$(g measured_over_predicted)" \
			"$(g batch_fill)" "$(g p50_ms)" "$(g p99_ms)" "$(g speedup_vs_even)" "$(g bytes_per_request)" \
			"$(g bytes_per_request_fp32)" "$(g loadavg_1m)"
	done <"$W/results.jsonl"
fi
exit 0
