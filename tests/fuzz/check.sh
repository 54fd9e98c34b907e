#!/bin/sh
# make check's fuzz leg: every libFuzzer harness (tests/fuzz/fuzz_*.c) for a
# few seconds on its committed corpus, through tools/fuzz.sh (which first
# runs each committed seed, the regression inputs among them). A harness
# whose invariant went stale fails CI the day it goes stale.
# SKY_FUZZ_CHECK_SECONDS (default 3) is the time per harness.
cd "$(dirname "$0")/../.." || exit 2
exec tools/fuzz.sh "${SKY_FUZZ_CHECK_SECONDS:-3}"
