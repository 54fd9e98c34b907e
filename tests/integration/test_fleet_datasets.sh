#!/bin/sh
# Boards name the data sets they hold (docs/data.md, "Data sets on boards"):
# skyd --dataset NAME=PATH and <state>/datasets/NAME.skyds, each checked at
# start; the capability report carries each set's name, rows, labels, seq,
# file hash and tokenizer hash (never a row), skyplan keeps them and `sky
# fleet status` shows them; a damaged set stops skyd with a message naming
# it.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/ft_lib.sh
T=fleet_datasets
sky_fleet_begin $T
if [ ! -f /usr/share/games/fortunes/computers ]; then
	fail "${T}_fortunes" "no fortunes (tools/install-deps.sh installs them)"
	exit 0
fi
ft_setup "$W/ft" || { fail "${T}_setup" "$FT_ERR"; exit 1; }
sky_fleet_start
# b1 names a set on its command line, b2 keeps two in its state folder
mkdir -p "$W/b2/state/datasets"
cp "$W/ft/train.skyds" "$W/b2/state/datasets/fortunes.skyds"
cp "$W/ft/dev.skyds" "$W/b2/state/datasets/fortunes-dev.skyds"
sky_fleet_enroll b1 --dataset "train=$W/ft/train.skyds"
sky_fleet_enroll b2
N=2
sky_wait 60 sky_fleet_reported || fail "${T}_report" "$(sky_fleet_json | head -c 300)"

sha=$(sha256sum "$W/ft/train.skyds" | cut -d' ' -f1)
rows=$("$SKY" data info "$W/ft/train.skyds" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"])')
sky_fleet_json >"$W/fleet.json"
if python3 - "$W/fleet.json" "$sha" "$rows" <<'PY'; then
import json, sys
d = json.loads(open(sys.argv[1]).readline())
b = {x["id"]: x for x in d["boards"]}
s1 = b["b1"]["caps"]["datasets"]
s2 = b["b2"]["caps"]["datasets"]
assert [s["name"] for s in s1] == ["train"], s1
assert [s["name"] for s in s2] == ["fortunes", "fortunes-dev"], s2
t = s1[0]
assert t["sha256"] == sys.argv[2] and t["rows"] == int(sys.argv[3]), t
assert t["labels"] == 3 and t["seq"] == 24 and len(t["tokenizer"]) == 8, t
assert s2[0]["sha256"] == t["sha256"] and s2[0]["tokenizer"] == t["tokenizer"]
assert s2[1]["sha256"] != t["sha256"]
PY
	pass "${T}_reported_and_kept"
else
	fail "${T}_reported_and_kept" "$(head -c 600 "$W/fleet.json")"
fi
"$SKY" fleet status --state "$STATE" >"$W/status.txt" 2>&1
if grep -q "^data sets" "$W/status.txt" &&
	grep -E "^  train +b1 +$rows +3 +24  $(echo "$sha" | cut -c1-16)" "$W/status.txt" >/dev/null &&
	grep -E "^  fortunes-dev +b2 " "$W/status.txt" >/dev/null; then
	pass "${T}_fleet_status_shows_them"
else
	fail "${T}_fleet_status_shows_them" "$(cat "$W/status.txt")"
fi

# a damaged set: skyd stops at start naming it
head -c 300 "$W/ft/train.skyds" >"$W/broken.skyds"
sky_fleet_enroll b3 --dataset "bad=$W/broken.skyds"
eval "p3=\$PID_b3"
sky_wait 30 sh -c "! kill -0 $p3 2>/dev/null"
wait "$p3"
rc=$?
if [ $rc -ne 0 ] && grep -q "data set 'bad' ($W/broken.skyds)" "$W/b3.log"; then
	pass "${T}_damaged_set_stops_skyd"
else
	fail "${T}_damaged_set_stops_skyd" "rc $rc: $(tail -3 "$W/b3.log")"
fi
exit 0
