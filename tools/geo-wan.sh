#!/bin/sh
# A WAN on one machine: Sky sites as network namespaces, each joined to a
# core namespace by a veth pair shaped with tc (tbf, both directions), with
# a site broker bridged to the core broker, the planner on the core and
# boards on the sites. As root.
#
#   tools/geo-wan.sh up   [options]      build it and start everything
#   tools/geo-wan.sh down [--dir D]      stop everything and remove it
#   tools/geo-wan.sh run  [options] -- COMMAND...
#                                        up, COMMAND in the core namespace,
#                                        down (also on Ctrl-C); exits with
#                                        COMMAND's status
#
# Options (up and run):
#   --sites N        sites (default 3), named site1..siteN
#   --boards N       boards per site (default 3)
#   --speeds LIST    the boards' emulated speeds (skyd --speed): SITES x BOARDS
#                    values, site1's boards first, or BOARDS values that every
#                    site repeats (default "0.5 0.25 0.125")
#   --rate R         each site's uplink, both directions (tc tbf rate; default
#                    20mbit); "none" leaves the links unshaped
#   --model M --layers L --seq S   the shapes the boards probe (default mini, 24)
#   --order interleaved|grouped    the order boards first report to the
#                    planner: site1's first board, site2's first, ... (the
#                    default), or every board of site1 first
#   --dir D          where everything lives (default /tmp/sky-geo-wan)
#   --keep           down leaves D (the logs) in place
# COMMAND sees SKY_GEO_DIR, SKY_GEO_PKI (the fleet PKI), SKY_GEO_BROKER (the
# core broker, HOST:PORT), SKY_GEO_STATE (skyplan's state), SKY_GEO_BOARDS
# (how many boards) and SKY_BIN.
#
# Layout: namespaces <p>-core and <p>-site1.. (<p> = $SKY_GEO_NS, default
# skygeo); site i's veth pair sgcI (core side, 10.177.I.1/30) and sgsI (site
# side, 10.177.I.2/30); the core broker on 10.177.0.1 (the core's loopback;
# sky pki init --listen names it in its certificate), every site broker on
# its namespace's 127.0.0.1:8883, where its boards connect; bridges go from
# each site to 10.177.0.1:8883 (and :8884, the probe connection). Addresses
# exist only inside these namespaces; nothing is added to the host's own.
#
# No delay is emulated: this kernel has no netem (sch_netem), so links have
# a rate and the real (tiny) delay of veth; latency is covered by the cost
# model's unit tests instead.
#
# Everything this script starts runs inside its namespaces, so `down` stops
# exactly that: the processes `ip netns pids` lists for each of them (SIGTERM,
# then SIGKILL after 10 s), then the namespaces themselves (their veth
# pairs go with them). `up` first removes what a previous run left.
set -u
cd "$(dirname "$0")/.." || exit 1
SKY_BUILD=${SKY_BUILD:-build/host}
case "$SKY_BUILD" in
/*) SKY_BIN="$SKY_BUILD/bin" ;;
*) SKY_BIN="$(pwd)/$SKY_BUILD/bin" ;;
esac
export SKY_BIN
P=${SKY_GEO_NS:-skygeo}
DIR=/tmp/sky-geo-wan
SITES=3
BOARDS=3
SPEEDS="0.5 0.25 0.125"
RATE=20mbit
MODEL=mini
LAYERS=24
SEQ=""
ORDER=interleaved
KEEP=0
CORE_IP=10.177.0.1
PORT=8883

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "geo-wan: $*" >&2
	exit 1
}

CMD=${1:-}
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
	case "$1" in
	--) shift; break ;;
	--keep) KEEP=1 ;;
	--help | -h) usage; exit 0 ;;
	--sites | --boards | --speeds | --rate | --model | --layers | --seq | --order | --dir)
		[ $# -ge 2 ] || die "$1 needs a value"
		case "$1" in
		--sites) SITES=$2 ;;
		--boards) BOARDS=$2 ;;
		--speeds) SPEEDS=$2 ;;
		--rate) RATE=$2 ;;
		--model) MODEL=$2 ;;
		--layers) LAYERS=$2 ;;
		--seq) SEQ=$2 ;;
		--order) ORDER=$2 ;;
		--dir) DIR=$2 ;;
		esac
		shift
		;;
	*) die "unknown option '$1' (--help)" ;;
	esac
	shift
done
for v in "$SITES" "$BOARDS" "$LAYERS" "${SEQ:-1}"; do
	case "$v" in '' | *[!0-9]*) die "--sites, --boards, --layers and --seq take whole numbers" ;; esac
done
[ "$SITES" -ge 1 ] && [ "$SITES" -le 16 ] || die "--sites: 1 to 16"
case "$ORDER" in interleaved | grouped) ;; *) die "--order: interleaved or grouped" ;; esac
case "$DIR" in /*) ;; *) DIR="$(pwd)/$DIR" ;; esac

core_ns() { echo "$P-core"; }
site_ns() { echo "$P-site$1"; }
in_ns() { # in_ns NS COMMAND...
	_ns=$1
	shift
	ip netns exec "$_ns" "$@"
}
our_namespaces() {
	echo "$(core_ns)"
	_i=1
	while [ $_i -le 16 ]; do
		echo "$(site_ns $_i)"
		_i=$((_i + 1))
	done
}

down() {
	for ns in $(our_namespaces); do
		ip netns list 2>/dev/null | grep -q "^$ns\( \|$\)" || continue
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill $pids 2>/dev/null
		_end=$(($(date +%s) + 10))
		while [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && [ "$(date +%s)" -lt "$_end" ]; do
			sleep 0.2
		done
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill -9 $pids 2>/dev/null
		ip netns del "$ns" 2>/dev/null || echo "geo-wan: could not remove namespace $ns" >&2
	done
	if [ "$KEEP" = 1 ]; then
		[ -d "$DIR" ] && echo "geo-wan: logs kept in $DIR" >&2
	else
		rm -rf "$DIR"
	fi
}

wait_for() { # wait_for SECONDS command...
	_end=$(($(date +%s) + $1))
	shift
	while [ "$(date +%s)" -le "$_end" ]; do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}

shape() { # shape NS DEV: tbf at RATE on DEV's egress
	[ "$RATE" = none ] && return 0
	in_ns "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 64kb latency 2s ||
		die "tc tbf on $2 failed (rate '$RATE')"
}

listening() { in_ns "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; }

up() {
	[ "$(id -u)" = 0 ] || die "needs root (network namespaces, tc)"
	command -v mosquitto >/dev/null 2>&1 || die "mosquitto not installed (tools/install-deps.sh)"
	[ -x "$SKY_BIN/skyd" ] || die "$SKY_BIN/skyd not built (make)"
	KEEP_WANTED=$KEEP
	KEEP=0
	down # what a previous run left
	KEEP=$KEEP_WANTED
	mkdir -p "$DIR" || die "cannot create $DIR"
	C=$(core_ns)
	ip netns add "$C" || die "ip netns add $C failed"
	in_ns "$C" ip link set lo up
	in_ns "$C" ip addr add "$CORE_IP/32" dev lo
	i=1
	while [ "$i" -le "$SITES" ]; do
		S=$(site_ns $i)
		ip netns add "$S" || die "ip netns add $S failed"
		in_ns "$S" ip link set lo up
		ip link add "sgc$i" netns "$C" type veth peer name "sgs$i" netns "$S" ||
			die "veth pair for site $i failed"
		in_ns "$C" ip addr add "10.177.$i.1/30" dev "sgc$i"
		in_ns "$S" ip addr add "10.177.$i.2/30" dev "sgs$i"
		in_ns "$C" ip link set "sgc$i" up
		in_ns "$S" ip link set "sgs$i" up
		in_ns "$S" ip route add default via "10.177.$i.1"
		shape "$C" "sgc$i"
		shape "$S" "sgs$i"
		i=$((i + 1))
	done

	PKI="$DIR/pki"
	"$SKY_BIN/sky" pki init --dir "$PKI" --port "$PORT" --listen "$CORE_IP" >"$DIR/pki.log" 2>&1 ||
		die "sky pki init failed: $(tail -2 "$DIR/pki.log")"
	i=1
	while [ "$i" -le "$SITES" ]; do
		"$SKY_BIN/sky" pki bridge --dir "$PKI" --port "$PORT" --core "$CORE_IP:$PORT" "site$i" \
			>>"$DIR/pki.log" 2>&1 || die "sky pki bridge site$i failed: $(tail -2 "$DIR/pki.log")"
		i=$((i + 1))
	done
	in_ns "$C" mosquitto -c "$PKI/mosquitto.conf" >"$DIR/broker-core.log" 2>&1 &
	wait_for 10 listening "$C" "$PORT" || die "the core broker did not start: $(tail -3 "$DIR/broker-core.log")"
	i=1
	while [ "$i" -le "$SITES" ]; do
		S=$(site_ns $i)
		in_ns "$S" mosquitto -c "$PKI/sites/site$i/mosquitto.conf" >"$DIR/broker-site$i.log" 2>&1 &
		wait_for 10 listening "$S" "$PORT" ||
			die "site$i's broker did not start: $(tail -3 "$DIR/broker-site$i.log")"
		i=$((i + 1))
	done
	bridged() { [ "$(grep -c "New bridge connected" "$DIR/broker-core.log")" -ge $((2 * SITES)) ]; }
	wait_for 30 bridged || die "the bridges did not connect: $(grep -i bridge "$DIR"/broker-*.log | tail -4)"

	STATE="$DIR/skyplan"
	in_ns "$C" "$SKY_BIN/skyplan" --pki "$PKI" --broker "$CORE_IP:$PORT" --state "$STATE" \
		>"$DIR/skyplan.log" 2>&1 &
	wait_for 20 grep -q "serving" "$DIR/skyplan.log" || die "skyplan did not start: $(tail -3 "$DIR/skyplan.log")"

	# boards, in the order they first report
	if [ "$ORDER" = interleaved ]; then
		order=""
		b=1
		while [ "$b" -le "$BOARDS" ]; do
			i=1
			while [ "$i" -le "$SITES" ]; do order="$order $i:$b"; i=$((i + 1)); done
			b=$((b + 1))
		done
	else
		order=""
		i=1
		while [ "$i" -le "$SITES" ]; do
			b=1
			while [ "$b" -le "$BOARDS" ]; do order="$order $i:$b"; b=$((b + 1)); done
			i=$((i + 1))
		done
	fi
	SEQ_OPT=""
	[ -n "$SEQ" ] && SEQ_OPT="--seq $SEQ"
	n=0
	for ib in $order; do
		i=${ib%:*}
		b=${ib#*:}
		id="s${i}b$b"
		speed=$(echo "$SPEEDS" | awk -v i="$i" -v b="$b" -v nb="$BOARDS" -v ns="$SITES" \
			'{ k = (NF == nb * ns) ? (i - 1) * nb + b : b; print (k <= NF) ? $k : $NF }')
		mkdir -p "$DIR/$id"
		printf 'name = %s\nthreads = 1\n' "$id" >"$DIR/$id/profile.conf"
		"$SKY_BIN/sky" pki issue --dir "$PKI" --id "$id" --state "$DIR/$id/state" >>"$DIR/pki.log" 2>&1 ||
			die "sky pki issue $id failed: $(tail -2 "$DIR/pki.log")"
		in_ns "$(site_ns "$i")" env OPENBLAS_NUM_THREADS=1 "$SKY_BIN/skyd" --state "$DIR/$id/state" \
			--broker "127.0.0.1:$PORT" --site "site$i" --profile "$DIR/$id/profile.conf" \
			--speed "$speed" --model "$MODEL" --layers "$LAYERS" $SEQ_OPT --keepalive 5 \
			--probe-seconds 2 >"$DIR/$id.log" 2>&1 &
		n=$((n + 1))
		# one board probes at a time (probes at once would share the cores)
		reported() {
			[ "$("$SKY_BIN/sky" fleet status --state "$STATE" --json 2>/dev/null |
				grep -o '"caps":{' | wc -l)" -ge "$n" ]
		}
		wait_for 180 reported || die "board $id did not report within 180 s: $(tail -3 "$DIR/$id.log")"
	done
	echo "$n" >"$DIR/boards"
	echo "geo-wan: $SITES sites x $BOARDS boards (speeds $SPEEDS), uplinks $RATE, core broker" \
		"$CORE_IP:$PORT in $C; state in $DIR" >&2
}

case "$CMD" in
up)
	# a failed or interrupted start leaves nothing behind
	trap 'down' EXIT
	trap 'exit 130' INT TERM HUP
	up
	trap - EXIT INT TERM HUP
	;;
down) down ;;
run)
	[ $# -gt 0 ] || die "run needs -- COMMAND"
	trap 'down' EXIT
	trap 'exit 130' INT TERM HUP
	up
	ip netns exec "$(core_ns)" env SKY_GEO_DIR="$DIR" SKY_GEO_PKI="$DIR/pki" \
		SKY_GEO_BROKER="$CORE_IP:$PORT" SKY_GEO_STATE="$DIR/skyplan" \
		SKY_GEO_BOARDS="$(cat "$DIR/boards")" SKY_BIN="$SKY_BIN" "$@"
	rc=$?
	exit $rc
	;;
--help | -h | help) usage ;;
*)
	usage >&2
	exit 2
	;;
esac
