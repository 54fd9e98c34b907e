#!/bin/sh
# Command lines as people type them: every sky command (and subcommand) and
# both daemons answer --help and --version on stdout with exit 0, take
# --opt=value as well as --opt value, and refuse an unknown option with
# exit 2 and a message naming it. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# every command line, as "program words..." with _ for spaces in the name
CMDS="sky_train sky_layer sky_quantize sky_eval sky_bench sky_bench_frame sky_bench_layer
sky_bench_planner sky_bench_probe sky_plan sky_sim sky_pki sky_pki_init sky_pki_token
sky_pki_issue sky_pki_operator sky_pki_sign sky_pki_bench sky_pki_verify sky_job sky_job_submit
sky_job_watch sky_job_collect sky_job_frame sky_fleet sky_fleet_status sky_tokenize sky_vocab
sky_vocab_build sky_bench_tokenize sky_data sky_data_prepare sky_data_info sky_bench_data sky_bench_train
skyd skyplan"

run() { # $1 name: runs the command line it names with the rest of the arguments
	name=$1
	shift
	set -- $(echo "$name" | tr _ ' ') "$@"
	prog=$1
	shift
	"$B/bin/$prog" "$@"
}

for c in $CMDS; do
	run "$c" --help >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 0 ] && grep -qi usage "$tmp/out"; then pass "help_$c"
	else fail "help_$c" "rc $rc, stdout $(head -c 200 "$tmp/out"), stderr $(head -c 200 "$tmp/err")"; fi
	run "$c" --version >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 0 ] && grep -q "(board " "$tmp/out"; then pass "version_$c"
	else fail "version_$c" "rc $rc, stdout $(head -c 200 "$tmp/out"), stderr $(head -c 200 "$tmp/err")"; fi
	run "$c" --no-such-option=1 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q -- "unknown option '--no-such-option" "$tmp/err"; then
		pass "unknown_$c"
	else fail "unknown_$c" "rc $rc, stderr $(head -c 200 "$tmp/err")"; fi
done

# --steps=5 and --steps 5 train the same: the same loss lines
T="--model tiny --layers 1 --eval 2"
"$SKY" train --steps=5 $T --seed=3 >"$tmp/eq" 2>"$tmp/err"
rc1=$?
"$SKY" train --steps 5 $T --seed 3 >"$tmp/sp" 2>>"$tmp/err"
rc2=$?
loss() { grep -o 'step *[0-9]* .*loss [0-9.]*\|first loss [0-9.]*, last loss [0-9.]*' "$1"; }
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(loss "$tmp/eq" | grep -c .)" -ge 2 ] &&
	[ "$(loss "$tmp/eq")" = "$(loss "$tmp/sp")" ]; then pass train_opt_equals
else fail train_opt_equals "rc $rc1/$rc2: $(cat "$tmp/eq" "$tmp/sp" "$tmp/err" | head -c 600)"; fi

# a missing value and a bad value name the option, exit 2
"$SKY" train --steps >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--steps needs a value" "$tmp/err"; then pass train_missing_value
else fail train_missing_value "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" train --steps=0 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--steps expects an integer from 1" "$tmp/err"; then pass train_bad_value
else fail train_bad_value "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" train --quiet=1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--quiet takes no value" "$tmp/err"; then pass train_flag_value
else fail train_flag_value "rc $rc: $(cat "$tmp/err")"; fi

# a command without positional arguments names a stray one (sky_opt_no_args)
for c in "train" "fleet status" "pki token"; do
	# shellcheck disable=SC2086
	"$SKY" $c stray >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q -- "sky $c: unexpected argument 'stray' (sky $c --help)" "$tmp/err"; then
		pass "stray_argument_$(echo "$c" | tr ' ' _)"
	else fail "stray_argument_$(echo "$c" | tr ' ' _)" "rc $rc: $(cat "$tmp/err")"; fi
done

# options after a positional argument, in a subcommand (sky pki verify FILE
# --opt): getopt permutes, and the subcommand's parse starts afresh after
# the command's own
echo x >"$tmp/env"
"$SKY" pki verify "$tmp/env" --no-such-option >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "sky pki verify: unknown option '--no-such-option'" "$tmp/err"; then
	pass options_after_positional
else fail options_after_positional "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" pki verify "$tmp/env" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--cert is required" "$tmp/err"; then pass positional_then_required
else fail positional_then_required "rc $rc: $(cat "$tmp/err")"; fi

# plan with --opt=value: the same plan as with --opt value
"$SKY" plan --paper --micro-batches=4 --algo=even --json >"$tmp/p1" 2>"$tmp/err"
"$SKY" plan --paper --micro-batches 4 --algo even --json >"$tmp/p2" 2>>"$tmp/err"
if [ -s "$tmp/p1" ] && cmp -s "$tmp/p1" "$tmp/p2"; then pass plan_opt_equals
else fail plan_opt_equals "$(head -c 300 "$tmp/p1"; head -c 300 "$tmp/err")"; fi

# the bash completion (tools/deb) completes values after = as after a space
C=tools/deb/sky.bash-completion
complete_words() { # WORD...: prints the candidates for the last word
	bash -c '. "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sky; echo "${COMPREPLY[*]}"' \
		"$C" "$@"
}
c1=$(complete_words "$SKY" train --model ti)
c2=$(complete_words "$SKY" train --model = ti)
c3=$(complete_words "$SKY" plan --objective=bo)
c4=$(complete_words "$SKY" train --ver)
if [ "$c1" = tiny ] && [ "$c2" = tiny ] && [ "$c3" = bottleneck ] && [ "$c4" = --version ]; then
	pass completion_opt_equals
else fail completion_opt_equals "got '$c1' '$c2' '$c3' '$c4'"; fi
