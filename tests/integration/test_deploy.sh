#!/bin/sh
# Deploying a model to a serving fleet: mosquitto (broker.sh), skyplan and 3
# skyd boards. An infer job is submitted with an int8 model made here (sky
# train --save, sky quantize): the operator uploads it in hashed chunks,
# skyplan stores it, plans on the boards' int8 times, cuts each stage's
# slice and sends it on request; every board must end up with exactly the
# slice cut locally from the same file for its half-layers (same SHA-256).
# Then: the same model again (a resubmit) and the fp32 file (quantised by
# sky job submit with sky quantize's calibration) download nothing (cache
# hits on every board); a second model under a paced planner, with one board
# killed (SIGKILL) mid-download and restarted (the job submitted with
# --no-replan, so its plan waits for it), which fetches only the chunks
# it did not have; a board restarted after its download fetches nothing;
# a corrupted upload chunk, a wrong model hash and bad submits are refused
# with their reasons.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin deploy
now() { date +%s.%N; }
CHUNK=1024 # skyplan's slice chunks: a tiny slice is ~10-30 of them
sky_fleet_start --slice-chunk-bytes $CHUNK
sky_fleet_boards 3

# the models: tiny, 4 layers, trained a little and quantised
"$SKY" train --model tiny --layers 4 --steps 2 --save "$W/m1.fp32.safetensors" >"$W/train1.log" 2>&1 &&
	"$SKY" quantize --in "$W/m1.fp32.safetensors" --out "$W/m1.int8.safetensors" >"$W/q1.log" 2>&1 ||
	fail deploy_models "$(tail -2 "$W/train1.log" "$W/q1.log")"
"$SKY" train --model tiny --layers 4 --steps 2 --seed 7 --save "$W/m2.fp32.safetensors" \
	>"$W/train2.log" 2>&1 &&
	"$SKY" quantize --in "$W/m2.fp32.safetensors" --out "$W/m2.int8.safetensors" >"$W/q2.log" 2>&1 ||
	fail deploy_model2 "$(tail -2 "$W/train2.log" "$W/q2.log")"
"$SKY" quantize --in "$W/m1.fp32.safetensors" --out "$W/m3.int8.safetensors" --calib 3 \
	>"$W/q3.log" 2>&1 || fail deploy_model3 "$(tail -2 "$W/q3.log")"

# The jobs use the even split: every board gets a slice (b2 is killed
# mid-download below), and a resubmit must get the same slices to be a
# cache hit; optimal plans on probed int8 times, which a loaded machine
# moves (planning on int8 times is test_service's and test_cost's).
submit() { # job, options...: sky job submit --task infer, all boards, --wait
	job=$1
	shift
	"$SKY" job submit --pki "$PKI" --broker "$BR" --job "$job" --min-boards $N --task infer \
		--wait 90 --json "$@" >"$W/$job.submit" 2>"$W/$job.submit.err"
}
# every_board_has_its_slice JOB MODEL: each board's cache holds the slice of
# its half-layers (from the submit's JSON) cut here from MODEL
every_board_has_its_slice() {
	ok=1
	for i in 1 2 3; do
		b="b$i"
		# (a stage names its site between board and first)
		line=$(grep -oE "\{\"board\":\"$b\",(\"site\":\"[^\"]*\",)?\"first\":[0-9]+,\"last\":[0-9]+" \
			"$W/$1.submit")
		first=$(echo "$line" | sed 's/.*"first":\([0-9]*\).*/\1/')
		last=$(echo "$line" | sed 's/.*"last":\([0-9]*\)/\1/')
		[ -n "$first" ] && [ -n "$last" ] || {
			ok=0
			echo "  $b: not in the plan of $1"
			continue
		}
		want=$("$SKY" slice --weights "$2" --first "$first" --last "$last" \
			--out "$W/$1.$b.slice" | sed -n 's/.*"sha256":"\([0-9a-f]*\)".*/\1/p')
		if [ -f "$W/$b/state/slices/$want.safetensors" ] &&
			[ "$(sha256sum <"$W/$b/state/slices/$want.safetensors" | cut -d' ' -f1)" = "$want" ]; then
			:
		else
			ok=0
			echo "  $b (half-layers $first-$last): no slice $want; has $(ls "$W/$b/state/slices" | tr '\n' ' ')"
		fi
	done
	[ $ok = 1 ]
}
wire_bytes() { # board job: bytes on the wire the planner logged for it
	grep "sent to board $1 (job $2)" "$W/skyplan.log" | sed 's/.*, \([0-9]*\) bytes on the wire.*/\1/' |
		awk '{s += $1} END {print s + 0}'
}

# ---- 1. an int8 model: uploaded, planned, sliced, sent -------------------------
t0=$(now)
if submit d1 --weights "$W/m1.int8.safetensors" --algo even; then
	t1=$(now)
	pass deploy_int8_job_acked_by_every_board
	echo "MEASURE deploy_time_s $(echo "$t1 - $t0" | bc) (submit of a tiny 4-layer int8 model to 3 boards, upload + plan + slices, $(date -u +%F))"
	for i in 1 2 3; do
		echo "MEASURE deploy_wire_bytes_b$i $(wire_bytes b$i d1) (slice chunks of $CHUNK bytes + 96-byte headers)"
	done
else
	fail deploy_int8_job_acked_by_every_board "$(cat "$W/d1.submit" "$W/d1.submit.err" | tail -5)"
fi
grep -q "model .* stored" "$W/skyplan.log" && pass deploy_model_stored_by_hash ||
	fail deploy_model_stored_by_hash "$(grep -i model "$W/skyplan.log" | tail -3)"
m1sha=$(sha256sum <"$W/m1.int8.safetensors" | cut -d' ' -f1)
[ -f "$STATE/models/$m1sha.safetensors" ] && cmp -s "$STATE/models/$m1sha.safetensors" "$W/m1.int8.safetensors" &&
	pass deploy_planner_store_holds_the_model || fail deploy_planner_store_holds_the_model "$(ls "$STATE/models")"
if out=$(every_board_has_its_slice d1 "$W/m1.int8.safetensors"); then
	pass deploy_every_board_has_the_slice_cut_locally
else
	fail deploy_every_board_has_the_slice_cut_locally "$out"
fi
fetched_d1=$(grep -c "for job d1 in place" "$W"/b?.log | awk -F: '{s += $2} END {print s}')
[ "$fetched_d1" -eq 3 ] && pass deploy_three_downloads || fail deploy_three_downloads "$fetched_d1 boards logged a download"

# ---- 2. the same model again, and its fp32 file: nothing downloaded ------------
sent_before=$(grep -c "sending chunks" "$W/skyplan.log")
if submit d2 --weights "$W/m1.int8.safetensors" --algo even && submit d3 --weights "$W/m1.fp32.safetensors" --algo even; then
	pass deploy_resubmit_and_fp32_acked
else
	fail deploy_resubmit_and_fp32_acked "$(tail -3 "$W/d2.submit.err" "$W/d3.submit.err")"
fi
hits() { grep -c "slice cache hit: job $1 " "$W"/b?.log | awk -F: '{s += $2} END {print s}'; }
[ "$(hits d2)" -eq 3 ] && [ "$(hits d3)" -eq 3 ] &&
	[ "$(grep -c "sending chunks" "$W/skyplan.log")" -eq "$sent_before" ] &&
	pass deploy_resubmit_and_fp32_are_cache_hits_on_every_board ||
	fail deploy_resubmit_and_fp32_are_cache_hits_on_every_board \
		"hits d2 $(hits d2), d3 $(hits d3); slice transfers $sent_before -> $(grep -c "sending chunks" "$W/skyplan.log")"
grep -q "quantised 4 layers of tiny" "$W/d3.submit.err" &&
	[ "$(ls "$STATE/models" | grep -c safetensors)" -eq 1 ] &&
	pass deploy_fp32_quantised_like_sky_quantize ||
	fail deploy_fp32_quantised_like_sky_quantize "$(ls "$STATE/models"; tail -2 "$W/d3.submit.err")"
grep -q '"hits":2' "$W/b1/state/slices/stats.json" && pass deploy_hits_in_board_metrics ||
	fail deploy_hits_in_board_metrics "$(cat "$W/b1/state/slices/stats.json")"

# ---- 3. a board killed mid-download, restarted: resumes ----------------------
kill "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
sky_fleet_planner --slice-chunk-bytes $CHUNK --slice-pace-ms 150 ||
	fail deploy_planner_restarts "$(tail -3 "$W/skyplan.log")"
# --no-replan: the plan waits for the board that died (a serving job would
# otherwise be re-planned over the others, test_serve_faults.sh)
submit d4 --weights "$W/m2.int8.safetensors" --algo even --no-replan &
SUB=$!
part_chunks() { # chunks in b2's .part
	s=$(cat "$W/b2/state/slices/"*.part 2>/dev/null | wc -c)
	echo $((s / CHUNK))
}
if sky_wait 60 sh -c "[ \$(cat '$W'/b2/state/slices/*.part 2>/dev/null | wc -c) -ge $((3 * CHUNK)) ]"; then
	kill -9 "$PID_b2"
	had=$(part_chunks)
	sleep 1
	sky_fleet_skyd b2
	pass deploy_board_killed_mid_download
else
	had=0
	fail deploy_board_killed_mid_download "b2 never had 3 chunks: $(ls -l "$W/b2/state/slices")"
fi
if wait "$SUB"; then
	pass deploy_job_acked_after_the_restart
else
	fail deploy_job_acked_after_the_restart "$(tail -3 "$W/d4.submit.err" "$W/d4.submit")"
fi
line=$(grep "for job d4 in place" "$W/b2.log" | tail -1)
fetched=$(echo "$line" | sed -n 's/.* \([0-9]*\) chunks fetched, \([0-9]*\) resumed.*/\1/p')
resumed=$(echo "$line" | sed -n 's/.* \([0-9]*\) chunks fetched, \([0-9]*\) resumed.*/\2/p')
total=$(grep "for job d4 not in the cache: fetching" "$W/b2.log" | head -1 | sed 's/.*fetching \([0-9]*\) chunks.*/\1/')
if [ -n "$fetched" ] && [ "$resumed" -ge 3 ] && [ "$resumed" -eq "$had" ] &&
	[ $((fetched + resumed)) -eq "$total" ]; then
	pass deploy_restarted_board_fetches_only_missing_chunks
	echo "MEASURE deploy_resume b2: $resumed of $total chunks kept from before the SIGKILL, $fetched fetched after"
else
	fail deploy_restarted_board_fetches_only_missing_chunks "had $had, log: $line (total $total)"
fi
grep -q "resuming at chunk $had of" "$W/b2.log" && pass deploy_resume_asks_from_first_missing_chunk ||
	fail deploy_resume_asks_from_first_missing_chunk "$(grep resuming "$W/b2.log")"
if out=$(every_board_has_its_slice d4 "$W/m2.int8.safetensors"); then
	pass deploy_every_board_has_model2_slice
else
	fail deploy_every_board_has_model2_slice "$out"
fi

# a restart after the download: the saved plan's slice is a cache hit
kill "$PID_b1"
wait "$PID_b1" 2>/dev/null
sky_fleet_skyd b1
if sky_wait 30 grep -q "slice cache hit: job d4 " "$W/b1.log" &&
	sky_wait 5 grep -q '"hits":3,"misses":2,' "$W/b1/state/slices/stats.json"; then
	pass deploy_restart_after_download_is_a_cache_hit
else
	fail deploy_restart_after_download_is_a_cache_hit "$(grep -i slice "$W/b1.log" | tail -3; cat "$W/b1/state/slices/stats.json")"
fi

# ---- 4. refusals, each with its reason ------------------------------------------
refused() { # name, expected text, submit options...
	name=$1
	want=$2
	shift 2
	if "$SKY" job submit --pki "$PKI" --broker "$BR" --job "$name" --ack-timeout 30 "$@" \
		>"$W/$name.out" 2>&1; then
		fail "deploy_refuses_$name" "accepted: $(cat "$W/$name.out")"
	elif grep -q "$want" "$W/$name.out"; then
		pass "deploy_refuses_$name"
	else
		fail "deploy_refuses_$name" "$(tail -2 "$W/$name.out")"
	fi
}
refused corrupt_chunk "payload SHA-256 mismatch" --task infer --weights "$W/m3.int8.safetensors" \
	--corrupt-chunk 1 --chunk-bytes 4096
refused wrong_model_hash "model hash mismatch" --task infer --weights "$W/m3.int8.safetensors" \
	--claim-sha256 "$(sha256sum <"$W/m1.fp32.safetensors" | cut -d' ' -f1)"
refused batch_too_big "serve batch 99 is above the model's batch 8" --task infer \
	--weights "$W/m1.int8.safetensors" --batch 99
refused shape_mismatch "the model has 4 layers, the job 3" --task infer \
	--weights "$W/m1.int8.safetensors" --layers 3
printf '{"job":"nw","model":"tiny","task":"infer"}' >"$W/noweights.json"
refused no_weights "task infer needs weights" --file "$W/noweights.json"
printf '{"job":"ut","model":"tiny","task":"dance"}' >"$W/badtask.json"
refused unknown_task "unknown task 'dance'" --file "$W/badtask.json"
# the planner said so too (its log names the refusals it answered)
grep -q "upload from sky-operator refused: model .*payload SHA-256 mismatch" "$W/skyplan.log" &&
	grep -q "refused: .*serve batch 99" "$W/skyplan.log" &&
	pass deploy_planner_logs_refusals || fail deploy_planner_logs_refusals "$(grep -i refused "$W/skyplan.log" | tail -4)"

exit $((fails > 0))
