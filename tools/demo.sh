#!/bin/sh
# make demo: what Sky does today, on one machine: one board checked against PyTorch, the
# planner on the paper's fleet, one board training alone, a layer benchmark, then the fleet
# control plane (a loopback TLS broker, skyplan and four boards of unequal emulated speed).
# The fleet does not yet train end to end across boards; see README.
set -eu
B="${1:-build/host}"
echo "== Sky demo (board build: $B, $("$B/bin/sky" version))"

echo "== One encoder layer from safetensors files, forward + backward, checked against PyTorch"
mkdir -p build/demo
"$B/bin/sky" layer --model tiny --prefix encoder.layer.0. \
	--weights tests/data/layer_tool/weights.safetensors --input tests/data/layer_tool/input.safetensors \
	--grad tests/data/layer_tool/grad.safetensors --out build/demo/layer_out.safetensors
"$B/bin/sky" layer --compare tests/data/layer_tool/torch_expected.safetensors \
	build/demo/layer_out.safetensors | tail -n 3

echo "== The planner on the Sky Computing paper's fleet: 160-layer BERT-large, 63 unequal workers"
"$B/bin/sky" sim --paper

echo "== Training a 4-layer tiny BERT on one board (synthetic task, one sealed arena)"
"$B/bin/sky" train --model tiny --layers 4 --steps 300 --seed 1 --quiet
echo "== One BERT-base layer, fp32: forward, forward+backward and sgemm alone"
"$B/bin/sky" bench layer --model base --runs 3 --warmup 1

echo "== The fleet control plane: a loopback TLS broker, skyplan, and 4 boards of unequal"
echo "   (emulated) speed that enroll with one-time tokens, probe, report, and take a signed plan"
(
	SKY_BUILD="$B"
	export SKY_BUILD
	. tests/integration/broker.sh
	sky_broker_start >/dev/null
	D=$SKY_BROKER_DIR
	BR="127.0.0.1:$SKY_BROKER_PORT"
	pids=""
	stop() {
		for p in $pids; do kill "$p" 2>/dev/null; done
		for p in $pids; do wait "$p" 2>/dev/null; done
		sky_broker_stop
	}
	trap stop EXIT
	"$B/bin/skyplan" --pki "$SKY_PKI_DIR" --broker "$BR" >"$D/skyplan.log" 2>&1 &
	pids="$!"
	sleep 0.5
	i=0
	for speed in 1.0 0.5 0.5 0.25; do
		i=$((i + 1))
		mkdir -p "$D/board$i"
		printf 'name = demo%s\nthreads = 1\nspeed = %s\n' "$i" "$speed" >"$D/board$i/profile.conf"
		cp -r "$SKY_PKI_DIR/claim" "$D/board$i/claim"
		tok=$("$B/bin/sky" pki token --dir "$SKY_PKI_DIR")
		"$B/bin/skyd" --enroll --claim "$tok" --id "board$i" --pki-ca "$D/board$i/claim/ca.crt" \
			--state "$D/board$i/state" --broker "$BR" --profile "$D/board$i/profile.conf" \
			--model mini --layers 8 --keepalive 5 >"$D/board$i.log" 2>&1 &
		pids="$pids $!"
	done
	"$B/bin/sky" job submit --pki "$SKY_PKI_DIR" --broker "$BR" --model mini --layers 8 \
		--job demo --min-boards 4 --algo optimal --wait 60
	sleep 1 # skyplan saves fleet.json within 0.2-0.3 s of the last ack it handles
	"$B/bin/sky" fleet status --pki "$SKY_PKI_DIR"
)
