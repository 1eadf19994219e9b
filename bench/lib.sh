# Helpers shared by the bench/* scripts: source it, after `set -euo pipefail`.
#   . "$(dirname "$0")/lib.sh"

# --- Spreads: what a repeated figure is made of -------------------------
# A figure measured N times is quoted as its median only with its spread:
# min / median / max over the runs. When max/min is above
# BENCH_UNSETTLED_RATIO (1.3) the runs disagree by more than any change
# worth reporting, and the figure is flagged "unsettled": measure it again
# on a quieter machine rather than quote the median (docs/BENCHMARKS.md).
BENCH_UNSETTLED_RATIO=1.3

# median: the median of the numbers on stdin, one per line (0 if none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# spread: the numbers on stdin, one per line, as "N MIN MEDIAN MAX RATIO
# FLAG", FLAG "unsettled" or "settled" (a single run, or none, is "settled"
# with ratio 1; a minimum of 0 with a larger maximum is "unsettled").
spread() {
    sort -g | awk -v limit="$BENCH_UNSETTLED_RATIO" '
        NF { v[++n] = $1 }
        END {
            if (n == 0) { print "0 0 0 0 1.00 settled"; exit }
            med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            if (v[1] > 0) ratio = v[n] / v[1]; else ratio = (v[n] > 0) ? 1e9 : 1
            printf "%d %s %s %s %.2f %s\n", n, v[1], med, v[n], ratio, (ratio > limit) ? "unsettled" : "settled"
        }'
}

# spread_line LABEL UNIT: the numbers on stdin as one line of a report:
#   "LABEL: min 9.1 / median 10.0 / max 10.4 UNIT over 3 runs (max/min 1.14)"
# with ": UNSETTLED" at the end when they disagree.
spread_line() {
    local n min med max ratio flag
    read -r n min med max ratio flag <<<"$(spread)"
    printf '%s: min %.1f / median %.1f / max %.1f %s over %d runs (max/min %s)%s\n' "$1" "$min" "$med" "$max" "$2" "$n" \
        "$([ "$ratio" = 1000000000.00 ] && echo "inf" || echo "$ratio")" \
        "$([ "$flag" = unsettled ] && echo ": UNSETTLED, the median is not a figure")"
}

# unsettled: true when the numbers on stdin are unsettled.
unsettled() { [ "$(spread | cut -d' ' -f6)" = unsettled ]; }
