# Option parsing shared by the shell scripts behind `sky bench` (POSIX sh;
# source it before the option loop: . "$(dirname "$0")/opt_lib.sh").
#
#   sky_opt_split ARG...   prints ARG... quoted for eval, the first one,
#                          "--opt=value", split in two ("--opt" "value"), so
#                          that --opt=value works as in every sky command
#                          (getopt_long); only the argument in hand is split,
#                          so a value that itself looks like --x=y is kept:
#
#   while [ $# -gt 0 ]; do
#       case "$1" in --*=*) eval "set -- $(sky_opt_split "$@")"; continue ;; esac
#       case "$1" in ...

# _sky_opt_quote WORD: WORD in single quotes (each ' in it as '\''), and a space
_sky_opt_quote() {
	_sky_opt_r=$1
	_sky_opt_q=""
	while :; do
		case "$_sky_opt_r" in
		*\'*)
			_sky_opt_q="$_sky_opt_q${_sky_opt_r%%\'*}'\\''"
			_sky_opt_r=${_sky_opt_r#*\'}
			;;
		*) break ;;
		esac
	done
	printf "'%s%s' " "$_sky_opt_q" "$_sky_opt_r"
}

sky_opt_split() {
	_sky_opt_quote "${1%%=*}"
	_sky_opt_quote "${1#*=}"
	shift
	for _sky_opt_a in "$@"; do _sky_opt_quote "$_sky_opt_a"; done
}
