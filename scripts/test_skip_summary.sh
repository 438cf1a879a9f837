#!/bin/sh
# After ctest: the skipped tests grouped by the reason they printed ("SKIP: ..."), so that
# `make test` says why, not only "Skipped". Reads ctest's log of the last run:
#   scripts/test_skip_summary.sh <build>/Testing/Temporary/LastTest.log
# A test counts as skipped when ctest says its skip expression matched; its reason is the first
# line GoogleTest printed after "<file>:<line>: Skipped". Prints nothing when nothing was skipped;
# always exits 0 (it reports, the tests decide).
log=${1:?usage: test_skip_summary.sh <build>/Testing/Temporary/LastTest.log}
[ -r "$log" ] || { echo "test_skip_summary: cannot read $log" >&2; exit 0; }
tab=$(printf '\t')
rows=$(awk -v OFS="$tab" '
  /^[0-9]+\/[0-9]+ Testing: / {
    name = substr($0, index($0, "Testing: ") + 9); sub(/  # GetParam.*/, "", name)
    reason = ""; want = 0; total++
  }
  /^Output:$/ { inside = 1; next }
  /^<end of output>$/ { inside = 0 }
  inside && want { want = 0; reason = ($0 ~ /^\[  SKIPPED \]/ || $0 == "") ? "(no reason printed)" : $0 }
  inside && /: Skipped$/ { want = 1 }
  /^Skip regular expression found in output/ {
    if (reason == "") reason = "(no reason printed)"
    if (!(reason in count)) example[reason] = name
    count[reason]++; skipped++
  }
  END {
    if (skipped > 0) print skipped, total
    for (r in count) print count[r], r, example[r]
  }' "$log")
[ -n "$rows" ] || exit 0
echo "$rows" | head -n 1 | awk -F"$tab" '{ printf "%d of %d tests skipped, by reason:\n", $1, $2 }'
echo "$rows" | tail -n +2 | sort -t"$tab" -k1,1nr -k2,2 |
  awk -F"$tab" '{ printf "%6d  %s\n        e.g. %s\n", $1, $2, $3 }'
exit 0
