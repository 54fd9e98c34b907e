#!/bin/sh
# make demo's last step: a loopback fleet (tools/fleet_lib.sh: a TLS
# mosquitto, skyplan, boards of emulated speed) serves the fortunes model
# make demo fine-tuned, and a client classifies sentences typed as text.
#
#   tools/demo_serve_text.sh MODEL_DIR "sentence" ...
#
# The model is uploaded as int8 (sky job submit quantises it) with its
# tokenizer's hash (--tokenizer); `sky infer --model-dir` tokenizes each
# sentence here, checks that hash against the job's signed plan and prints
# the label and its probability. Run from the repository root (SKY_BUILD,
# default build/host). Everything it starts is stopped at the end.
set -u
DIR=$1
shift
SKY_BUILD=${SKY_BUILD:-build/host}
export SKY_BUILD
FLEET_WHAT="demo serve"
. tools/fleet_lib.sh
MODEL=mini
LAYERS=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"num_hidden_layers\"])" "$DIR/config.json")
SEQ=${SKY_DEMO_SEQ:-64}
SEQ_OPT="--seq $SEQ"
fleet_begin
fleet_start
for b in "b1 0.5" "b2 0.25" "b3 0.25"; do
	# shellcheck disable=SC2086 # an id and a speed
	fleet_board $b
done
say "   $N boards online (emulated speeds 1/2, 1/4, 1/4 of a core), probed at mini's shapes, $LAYERS layers"
"$SKY" pki client --dir "$PKI" demo >"$W/client.log" 2>&1 || die "sky pki client: $(cat "$W/client.log")"
kill -HUP "$SKY_BROKER_PID" # the broker re-reads its ACL with the client's lines
"$SKY" job submit --pki "$PKI" --broker "$BR" --job fortunes --task infer --min-boards "$N" \
	--weights "$DIR/model.safetensors" --model mini --seq "$SEQ" --tokenizer "$DIR" \
	--algo optimal --wait 120 >"$W/submit.log" 2>&1 || die "the serving job was not acked: $(tail -5 "$W/submit.log")"
grep -E "^  stage" "$W/submit.log" | sed 's/^/   /'
say "   sky infer --model-dir $DIR --text ...   (tokenized here, the tokenizer checked against the job's)"
for t in "$@"; do
	"$SKY" infer --pki "$PKI/clients/demo" --broker "$BR" --job fortunes --model-dir "$DIR" \
		--text "$t" --id typed --timeout 60 2>"$W/infer.err" | sed 's/^typed  /   /' ||
		die "sky infer: $(cat "$W/infer.err")"
done
