#!/bin/sh
# The Debian packages (tools/deb/build.sh, `make deb`) of the build under
# test ($SKY_BUILD, default build/host), end to end:
#   - contents, conffiles, Architecture and Depends (dpkg-deb -I/-c), and
#     every Depends package installed here for that architecture; the same
#     for the arm64 packages of build/generic-aarch64 when it is built;
#   - lintian reports no errors; systemd-analyze verify passes both units;
#     the bash completion completes commands, sub-commands and options;
#   - the packages unpacked (dpkg -x): skyplan and skyd started with their
#     units' ExecStart command lines (only /usr/bin, /etc/sky, /var/lib/...
#     moved into a temp dir) on a loopback fleet: the board enrolls from
#     its provisioning directory, spends the token, comes online; a second
#     start runs from the identity without enrolling; a board with neither
#     identity nor token refuses to start, saying why;
#   - as root (SKIP otherwise, or if a sky package or /var/lib/sky* is
#     already there): dpkg -i on this machine, the installed binaries run
#     with the units' command lines, skyd as user sky (as User=sky would
#     run it, where the provisioning directory is read-only to it, so the
#     token is marked used in the state), dpkg -r leaves only the state,
#     dpkg --purge removes it.
# Prints PASS/FAIL/SKIP lines. Bounded: every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

B=${SKY_BUILD:-build/host}
BOARD=$(basename "$B")
. tests/integration/lib.sh
if [ ! -f "boards/$BOARD/profile.conf" ]; then
	echo "SKIP deb: $B is not a board's build directory"
	exit 0
fi
sky_test_workdir deb
chmod 0711 "$W" # user sky walks through to its own directories
PIDS=""
INSTALLED=0
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	[ "$INSTALLED" -eq 1 ] && dpkg --purge sky-board sky-planner >>"$W/dpkg.log" 2>&1
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds

# ---- build and inspect ----------------------------------------------------------
# check_debs DIR ARCH LABEL: contents, conffiles, Architecture, Depends
check_debs() {
	_d=$1 _arch=$2 _l=$3
	_board=$(ls "$_d"/sky-board_*_"$_arch".deb 2>/dev/null | head -1)
	_plan=$(ls "$_d"/sky-planner_*_"$_arch".deb 2>/dev/null | head -1)
	if [ -z "$_board" ] || [ -z "$_plan" ]; then
		fail "deb_${_l}_built" "no $_arch packages in $_d"
		return
	fi
	_miss=""
	for f in ./usr/bin/skyd ./etc/sky/profile.conf ./lib/systemd/system/skyd.service \
		./usr/share/doc/sky-board/copyright ./usr/share/doc/sky-board/changelog.gz; do
		dpkg-deb -c "$_board" | awk '{print $6}' | grep -qx "$f" || _miss="$_miss sky-board:$f"
	done
	for f in ./usr/bin/skyplan ./usr/bin/sky ./lib/systemd/system/skyplan.service \
		./etc/default/skyplan ./usr/share/bash-completion/completions/sky \
		./usr/share/doc/sky-planner/examples/mosquitto-sky.conf \
		./usr/share/doc/sky-planner/copyright; do
		dpkg-deb -c "$_plan" | awk '{print $6}' | grep -qx "$f" || _miss="$_miss sky-planner:$f"
	done
	dpkg-deb -I "$_board" conffiles | grep -qx /etc/sky/profile.conf || _miss="$_miss conffile:profile"
	dpkg-deb -I "$_plan" conffiles | grep -qx /etc/default/skyplan || _miss="$_miss conffile:default"
	for s in postinst postrm; do
		dpkg-deb -I "$_board" "$s" >/dev/null 2>&1 || _miss="$_miss sky-board:$s"
	done
	[ -z "$_miss" ] && pass "deb_${_l}_contents" || fail "deb_${_l}_contents" "missing:$_miss"

	_bad=""
	for p in "$_board" "$_plan"; do
		[ "$(dpkg-deb -f "$p" Architecture)" = "$_arch" ] || _bad="$_bad $(basename "$p"):arch"
		_dep=$(dpkg-deb -f "$p" Depends)
		for lib in libc6 libpaho-mqtt1.3 libmbedcrypto7 libmbedx509-1 libcjson1 libopenblas0 \
			libsystemd0 adduser; do
			echo "$_dep" | tr ',' '\n' | grep -q "^ *$lib\b" || _bad="$_bad $(basename "$p"):no-$lib"
		done
		# each one is a real package of that architecture (installed here to build)
		for dep in $(echo "$_dep" | tr ',' '\n' | sed 's/(.*//; s/ //g'); do
			[ "$dep" = adduser ] && continue
			dpkg-query -W -f='${Status}\n' "$dep:$_arch" 2>/dev/null | grep -q 'ok installed' ||
				_bad="$_bad $dep:$_arch-unknown"
		done
	done
	[ -z "$_bad" ] && pass "deb_${_l}_arch_and_depends" || fail "deb_${_l}_arch_and_depends" "$_bad"
}

case "$(uname -m)" in x86_64) ARCH=amd64 ;; aarch64) ARCH=arm64 ;; *) ARCH=unknown ;; esac
if tools/deb/build.sh "$BOARD" "$B" >"$W/build.log" 2>&1; then
	pass deb_build
else
	fail deb_build "$(tail -3 "$W/build.log")"
	exit 1
fi
check_debs "$B/deb" "$ARCH" host
X=build/generic-aarch64
if [ -x "$X/bin/skyd" ] && [ "$X" != "$B" ]; then
	if STRIP=aarch64-linux-gnu-strip tools/deb/build.sh generic-aarch64 "$X" >"$W/build-arm64.log" 2>&1; then
		check_debs "$X/deb" arm64 arm64
	else
		fail deb_arm64_build "$(tail -3 "$W/build-arm64.log")"
	fi
else
	echo "SKIP deb_arm64: $X is not built (make BOARD=generic-aarch64)"
fi
DEB_BOARD=$(ls "$B"/deb/sky-board_*_"$ARCH".deb | head -1)
DEB_PLAN=$(ls "$B"/deb/sky-planner_*_"$ARCH".deb | head -1)

if command -v lintian >/dev/null; then
	lintian "$DEB_BOARD" "$DEB_PLAN" >"$W/lintian.log" 2>&1
	if grep -q '^E:' "$W/lintian.log"; then
		fail deb_lintian_no_errors "$(grep '^E:' "$W/lintian.log" | head -5 | tr '\n' '|')"
	else
		pass deb_lintian_no_errors
		echo "lintian warnings: $(grep -c '^W:' "$W/lintian.log")"
	fi
else
	fail deb_lintian_no_errors "lintian is not installed (tools/install-deps.sh)"
fi

# ---- the packages unpacked: the units' command lines on a loopback fleet ----------
R="$W/root"
mkdir -p "$R"
dpkg-deb -x "$DEB_BOARD" "$R" && dpkg-deb -x "$DEB_PLAN" "$R"
# verify checks that ExecStart's binary exists: point it at the unpacked one
mkdir -p "$W/units"
for u in skyd skyplan; do
	sed "s|/usr/bin/|$R/usr/bin/|" "$R/lib/systemd/system/$u.service" >"$W/units/$u.service"
done
if systemd-analyze verify "$W/units/skyd.service" "$W/units/skyplan.service" >"$W/verify.log" 2>&1 &&
	! grep -q . "$W/verify.log"; then
	pass deb_units_verify
else
	fail deb_units_verify "$(head -3 "$W/verify.log" | tr '\n' '|')"
fi

# the bash completion, as bash would call it for "sky tr<TAB>", "sky train --st<TAB>",
# "sky pki t<TAB>"; options come from the installed binary's --help
complete_words() { # WORD...: prints the candidates for the last word
	bash -c '. "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sky; echo "${COMPREPLY[*]}"' \
		"$R/usr/share/bash-completion/completions/sky" "$@"
}
c1=$(complete_words "$R/usr/bin/sky" tr)
c2=$(complete_words "$R/usr/bin/sky" train --st)
c3=$(complete_words "$R/usr/bin/sky" pki t)
if [ "$c1" = train ] && [ "$c2" = --steps ] && [ "$c3" = token ]; then
	pass deb_bash_completion
else
	fail deb_bash_completion "got '$c1' '$c2' '$c3'"
fi

if ! sky_broker_start "$W/broker"; then
	fail deb_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$R/usr/bin/sky"
exec_start() { sed -n 's/^ExecStart=//p' "$1"; }
PLAN_CMD=$(exec_start "$R/lib/systemd/system/skyplan.service")
BOARD_CMD=$(exec_start "$R/lib/systemd/system/skyd.service")
echo "skyplan.service: $PLAN_CMD"
echo "skyd.service:    $BOARD_CMD"
# provision ETCDIR ID: what a board image drops in /etc/sky
provision() {
	mkdir -p "$1"
	cp "$R/etc/sky/profile.conf" "$1/"
	cp -r "$PKI/claim" "$1/claim"
	echo "$BR" >"$1/broker"
	echo "$2" >"$1/id"
	"$SKY" pki token --dir "$PKI" --ttl 300 >"$1/token"
}
fleet_state=""
board_online() {
	"$SKY" fleet status --state "$fleet_state" --json 2>/dev/null | sed 's/{"id":/\n{"id":/g' |
		grep "^{\"id\":\"$1\"" | grep -q '"state":"online"'
}

mkdir -p "$W/var/skyplan"
ln -s "$PKI" "$W/var/skyplan/pki"
fleet_state="$W/var/skyplan/state"
# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
set -- $(echo "$PLAN_CMD" | sed -e "s|/usr/bin/|$R/usr/bin/|" -e "s|/var/lib/skyplan|$W/var/skyplan|g" \
	-e "s|\${SKY_BROKER}|$BR|")
"$@" >"$W/skyplan.log" 2>&1 &
PIDS="$PIDS $!"
WAIT_S=20
wait_for grep -q serving "$W/skyplan.log" || fail deb_skyplan_starts "$(tail -3 "$W/skyplan.log")"

provision "$W/etc/sky" deb1
board_cmd() { # ETCDIR STATEDIR BINDIR
	echo "$BOARD_CMD" | sed -e "s|/usr/bin/|$3/|" -e "s|/etc/sky|$1|g" -e "s|/var/lib/sky|$2|g"
}
# shellcheck disable=SC2046
$(board_cmd "$W/etc/sky" "$W/var/sky" "$R/usr/bin") >"$W/skyd1.log" 2>&1 &
SKYD=$!
PIDS="$PIDS $SKYD"
WAIT_S=60
if wait_for board_online deb1 && grep -q "enroll: deb1 enrolled" "$W/skyd1.log" &&
	[ ! -e "$W/etc/sky/token" ] && grep -q "token spent; removed" "$W/skyd1.log"; then
	pass deb_skyd_enrolls_from_config_dir
else
	fail deb_skyd_enrolls_from_config_dir "$(grep -E 'enroll|error' "$W/skyd1.log" | tail -3 | tr '\n' '|')"
fi
kill "$SKYD"
wait "$SKYD"
# shellcheck disable=SC2046
$(board_cmd "$W/etc/sky" "$W/var/sky" "$R/usr/bin") >"$W/skyd2.log" 2>&1 &
SKYD=$!
PIDS="$PIDS $SKYD"
WAIT_S=60
if wait_for grep -q "connected to .* as deb1" "$W/skyd2.log" && wait_for board_online deb1 &&
	! grep -q "enroll" "$W/skyd2.log"; then
	pass deb_skyd_restarts_from_identity
else
	fail deb_skyd_restarts_from_identity "$(tail -3 "$W/skyd2.log" | tr '\n' '|')"
fi
kill "$SKYD"
wait "$SKYD"

mkdir -p "$W/etc-notoken"
cp "$R/etc/sky/profile.conf" "$W/etc-notoken/"
echo "$BR" >"$W/etc-notoken/broker"
# shellcheck disable=SC2046
$(board_cmd "$W/etc-notoken" "$W/var/sky-none" "$R/usr/bin") >"$W/skyd3.log" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "holds no identity, and $W/etc-notoken has no token" "$W/skyd3.log"; then
	pass deb_skyd_refuses_without_identity_or_token
else
	fail deb_skyd_refuses_without_identity_or_token "exit $rc: $(tail -2 "$W/skyd3.log")"
fi

# ---- dpkg -i on this machine ------------------------------------------------------
install_part() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "SKIP deb_install: not root (dpkg -i needs root)"
		return
	fi
	if dpkg-query -W sky-board sky-planner >/dev/null 2>&1 || [ -e /var/lib/sky ] ||
		[ -e /var/lib/skyplan ]; then
		echo "SKIP deb_install: sky-board, sky-planner or /var/lib/sky* already on this machine; not touching them"
		return
	fi
	# dpkg's lock: other builds may run apt-get meanwhile; wait for it
	_end=$(($(date +%s) + 120))
	INSTALLED=1
	until dpkg -i "$DEB_BOARD" "$DEB_PLAN" >>"$W/dpkg.log" 2>&1; do
		if ! grep -q 'lock' "$W/dpkg.log" || [ "$(date +%s)" -gt "$_end" ]; then
			fail deb_install "$(tail -3 "$W/dpkg.log" | tr '\n' '|')"
			return
		fi
		sleep 2
	done
	_bad=""
	for f in /usr/bin/skyd /usr/bin/skyplan /usr/bin/sky /etc/sky/profile.conf \
		/lib/systemd/system/skyd.service /lib/systemd/system/skyplan.service \
		/usr/share/bash-completion/completions/sky; do
		[ -e "$f" ] || _bad="$_bad no-$f"
	done
	getent passwd sky >/dev/null || _bad="$_bad no-user-sky"
	[ "$(stat -c '%U %a' /var/lib/sky 2>/dev/null)" = "sky 700" ] || _bad="$_bad /var/lib/sky:$(stat -c '%U %a' /var/lib/sky 2>&1)"
	[ "$(stat -c '%U %a' /var/lib/skyplan 2>/dev/null)" = "sky 700" ] || _bad="$_bad /var/lib/skyplan"
	[ -z "$_bad" ] && pass deb_install_files_user_state || fail deb_install_files_user_state "$_bad"

	if systemd-analyze verify /lib/systemd/system/skyd.service /lib/systemd/system/skyplan.service \
		>"$W/verify2.log" 2>&1 && ! grep -q . "$W/verify2.log"; then
		pass deb_installed_units_verify
	else
		fail deb_installed_units_verify "$(head -3 "$W/verify2.log" | tr '\n' '|')"
	fi

	# the installed skyd, as user sky (User=sky): the provisioning
	# directory is the board image's (root-owned, group sky may read), the
	# state directory is sky's (StateDirectory=)
	E="$W/etc2"
	provision "$E" deb2
	chown -R root:sky "$E"
	chmod -R g+rX,o-rwx "$E"
	install -d -o sky -g sky -m 0700 "$W/var2"
	# shellcheck disable=SC2046
	setpriv --reuid=sky --regid=sky --init-groups -- $(board_cmd "$E" "$W/var2/sky" /usr/bin) \
		>"$W/skyd4.log" 2>&1 &
	SKYD=$!
	PIDS="$PIDS $SKYD"
	WAIT_S=60
	if wait_for board_online deb2 && [ "$(stat -c %U "$W/var2/sky/board.key" 2>/dev/null)" = sky ] &&
		[ -e "$E/token" ] && grep -q "$E/token" "$W/var2/sky/token.used" 2>/dev/null; then
		pass deb_installed_skyd_as_user_sky_enrolls
	else
		fail deb_installed_skyd_as_user_sky_enrolls "$(grep -E 'enroll|error|token' "$W/skyd4.log" | tail -3 | tr '\n' '|')"
	fi
	kill "$SKYD"
	wait "$SKYD"

	touch /var/lib/sky/board-state-marker /var/lib/skyplan/planner-state-marker
	dpkg -r sky-board sky-planner >>"$W/dpkg.log" 2>&1
	_bad=""
	for f in /usr/bin/skyd /usr/bin/skyplan /usr/bin/sky /lib/systemd/system/skyd.service \
		/lib/systemd/system/skyplan.service /usr/share/bash-completion/completions/sky; do
		[ -e "$f" ] && _bad="$_bad left-$f"
	done
	[ -e /var/lib/sky/board-state-marker ] || _bad="$_bad lost-/var/lib/sky"
	[ -e /var/lib/skyplan/planner-state-marker ] || _bad="$_bad lost-/var/lib/skyplan"
	[ -z "$_bad" ] && pass deb_remove_keeps_only_state || fail deb_remove_keeps_only_state "$_bad"

	dpkg --purge sky-board sky-planner >>"$W/dpkg.log" 2>&1
	_bad=""
	for f in /var/lib/sky /var/lib/skyplan /etc/sky/profile.conf /etc/default/skyplan; do
		[ -e "$f" ] && _bad="$_bad left-$f"
	done
	INSTALLED=0
	[ -z "$_bad" ] && pass deb_purge_removes_state || fail deb_purge_removes_state "$_bad"
}
install_part
exit $((fails > 0))
