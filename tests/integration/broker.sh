# Broker harness for integration tests (POSIX sh; source it, do not run it):
#
#   . tests/integration/broker.sh
#   sky_broker_start [DIR]   makes a fresh fleet PKI in DIR/pki (DIR: a new
#                            temp dir if omitted) with `sky pki init` on a free
#                            loopback port, starts mosquitto with the generated
#                            config (mutual TLS, ACL) in the background, and
#                            waits (at most ~10 s) until both its listeners
#                            accept TCP connections. Returns non-zero (with a
#                            message on stderr) if it cannot. Exports:
#       SKY_BROKER_PORT      the fleet listener's port on 127.0.0.1
#       SKY_CLAIM_PORT       the claim listener's (SKY_BROKER_PORT + 1)
#       SKY_PKI_DIR          the PKI directory (ca.crt, planner.*, claim/, ...)
#       SKY_BROKER_DIR       DIR
#       SKY_BROKER_PID       mosquitto's pid
#       SKY_BROKER_LOG       mosquitto's log file (connections, denials)
#       SKY_BIN              directory with sky, skyd, skyplan (absolute)
#     and, if no EXIT trap is set yet, sets `trap sky_broker_stop EXIT`
#     (a test with its own EXIT trap must call sky_broker_stop from it).
#   sky_broker_stop          kills that mosquitto (by pid) and waits for it;
#                            safe to call twice. Leaves DIR in place unless
#                            the harness made it (then removes it).
#   sky_broker_restart       stops and starts mosquitto again with the same
#                            config, port and certificates (a broker outage).
#   sky_mq_tls CERT KEY      prints the mosquitto_pub/sub options to reach the
#                            fleet listener as the identity in CERT/KEY, with a
#                            fresh "sky:..." client id (the broker admits no
#                            other; the fleet listener replaces it with the
#                            CN, so a second client with the same certificate
#                            closes the first, as it would for skyd):
#                              mosquitto_pub $(sky_mq_tls "$SKY_PKI_DIR/operator.crt" \
#                                  "$SKY_PKI_DIR/operator.key") -t ... -m ...
#   sky_mq_claim_tls CERT KEY  the same for the claim listener (ids kept)
#
# Source it from the repository root. Needs: $SKY_BUILD (e.g. build/host; default build/host) relative to the
# repository root or absolute, mosquitto, ss (iproute2), od.
# Nothing here talks to anything but 127.0.0.1.

_sky_repo=$(pwd) # tests source this from the repository root
case "${SKY_BUILD:-build/host}" in
/*) SKY_BIN="${SKY_BUILD}/bin" ;;
*) SKY_BIN="$_sky_repo/${SKY_BUILD:-build/host}/bin" ;;
esac
export SKY_BIN
_sky_broker_own_dir=0

# A port in 20000..59998 that nothing listens on now, nor on the next one
# (the claim listener).
_sky_free_port() {
	_i=0
	while [ $_i -lt 50 ]; do
		_p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 39999 ))
		if ! ss -Hltn "sport = :$_p" 2>/dev/null | grep -q . &&
			! ss -Hltn "sport = :$((_p + 1))" 2>/dev/null | grep -q .; then
			echo "$_p"
			return 0
		fi
		_i=$((_i + 1))
	done
	return 1
}

# Starts mosquitto on the existing config; waits until it listens.
_sky_broker_launch() {
	mosquitto -c "$SKY_PKI_DIR/mosquitto.conf" >>"$SKY_BROKER_LOG" 2>&1 &
	SKY_BROKER_PID=$!
	export SKY_BROKER_PID
	_i=0
	while [ $_i -lt 100 ]; do # 100 x 0.1 s
		if ! kill -0 "$SKY_BROKER_PID" 2>/dev/null; then
			SKY_BROKER_PID=""
			return 1 # exited: port taken or bad config (see the log)
		fi
		# (the claim listener only if the config has one: a PKI made by an
		# older `sky pki init` does not)
		if ss -Hltn "sport = :$SKY_BROKER_PORT" 2>/dev/null | grep -q . &&
			{ ! grep -q "^listener $SKY_CLAIM_PORT " "$SKY_PKI_DIR/mosquitto.conf" ||
				ss -Hltn "sport = :$SKY_CLAIM_PORT" 2>/dev/null | grep -q .; }; then
			return 0
		fi
		sleep 0.1
		_i=$((_i + 1))
	done
	kill "$SKY_BROKER_PID" 2>/dev/null
	wait "$SKY_BROKER_PID" 2>/dev/null
	SKY_BROKER_PID=""
	return 1
}

sky_broker_start() {
	if [ -n "${1:-}" ]; then
		SKY_BROKER_DIR=$1
		mkdir -p "$SKY_BROKER_DIR" || return 1
	else
		SKY_BROKER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sky-broker.XXXXXX") || return 1
		_sky_broker_own_dir=1
	fi
	SKY_BROKER_DIR=$(cd "$SKY_BROKER_DIR" && pwd)
	SKY_PKI_DIR="$SKY_BROKER_DIR/pki"
	SKY_BROKER_LOG="$SKY_BROKER_DIR/mosquitto.log"
	export SKY_BROKER_DIR SKY_PKI_DIR SKY_BROKER_LOG
	if ! command -v mosquitto >/dev/null 2>&1; then
		echo "sky_broker_start: mosquitto not installed (tools/install-deps.sh)" >&2
		return 1
	fi
	if [ ! -x "$SKY_BIN/sky" ]; then
		echo "sky_broker_start: $SKY_BIN/sky not built" >&2
		return 1
	fi
	_try=0
	while [ $_try -lt 5 ]; do # another process may take the port between check and bind
		SKY_BROKER_PORT=$(_sky_free_port) || break
		SKY_CLAIM_PORT=$((SKY_BROKER_PORT + 1))
		export SKY_BROKER_PORT SKY_CLAIM_PORT
		rm -rf "$SKY_PKI_DIR"
		"$SKY_BIN/sky" pki init --dir "$SKY_PKI_DIR" --port "$SKY_BROKER_PORT" \
			${SKY_BROKER_MAX_PACKET:+--max-packet "$SKY_BROKER_MAX_PACKET"} >/dev/null ||
			return 1
		if _sky_broker_launch; then
			# `trap` in a command substitution runs in a subshell, which
			# dash starts without traps: list them through a file instead
			trap >"$SKY_BROKER_DIR/.traps"
			grep -q 'EXIT$' "$SKY_BROKER_DIR/.traps" || trap sky_broker_stop EXIT
			rm -f "$SKY_BROKER_DIR/.traps"
			return 0
		fi
		_try=$((_try + 1))
	done
	echo "sky_broker_start: mosquitto did not start; log:" >&2
	tail -n 20 "$SKY_BROKER_LOG" >&2
	return 1
}

sky_broker_stop() {
	if [ -n "${SKY_BROKER_PID:-}" ]; then
		kill "$SKY_BROKER_PID" 2>/dev/null
		wait "$SKY_BROKER_PID" 2>/dev/null
		SKY_BROKER_PID=""
	fi
	if [ "$_sky_broker_own_dir" = 1 ] && [ -n "${SKY_BROKER_DIR:-}" ]; then
		rm -rf "$SKY_BROKER_DIR"
		_sky_broker_own_dir=0
	fi
	return 0
}

sky_broker_restart() {
	if [ -n "${SKY_BROKER_PID:-}" ]; then
		kill "$SKY_BROKER_PID" 2>/dev/null
		wait "$SKY_BROKER_PID" 2>/dev/null
		SKY_BROKER_PID=""
	fi
	# the old socket may linger briefly; mosquitto sets SO_REUSEADDR
	_sky_broker_launch
}

_sky_mq_id() { echo "sky:t-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"; }
sky_mq_tls() {
	echo "-h 127.0.0.1 -p $SKY_BROKER_PORT -i $(_sky_mq_id) --cafile $SKY_PKI_DIR/ca.crt --cert $1 --key $2"
}
sky_mq_claim_tls() {
	echo "-h 127.0.0.1 -p $SKY_CLAIM_PORT -i $(_sky_mq_id) --cafile $SKY_PKI_DIR/ca.crt --cert $1 --key $2"
}
