# Shared by the integration scripts (sourced after `cd` to the repository):
# PASS/FAIL lines that tests/run.sh counts, with the failures in $fails for
# the script's exit code, and a private work directory.
fails=0
pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1: $2"
	fails=$((fails + 1))
}

# sky_test_workdir NAME: a fresh directory under $TMPDIR in $W. Under
# SANITIZE=address, Paho C 1.3.11 itself leaks a few hundred bytes of its own
# bookkeeping when a client whose connection was lost is destroyed (every
# frame inside libpaho); that is not Sky's to fix, so LeakSanitizer is told
# to ignore leaks allocated inside that library only.
sky_test_workdir() {
	W=$(mktemp -d "${TMPDIR:-/tmp}/sky-$1.XXXXXX")
	printf 'leak:libpaho-mqtt3as\n' >"$W/lsan.supp"
	LSAN_OPTIONS="suppressions=$W/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
	export LSAN_OPTIONS
}

# sky_wait SECONDS command...: runs command every 0.1 s until it succeeds (0)
# or SECONDS have passed (1). A deadline, never a delay: tests must pass on a
# slow, loaded machine, so bounds are generous and success returns at once.
sky_wait() {
	_sky_wait_end=$(($(date +%s) + $1))
	shift
	while [ "$(date +%s)" -le "$_sky_wait_end" ]; do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
