#!/usr/bin/env bash
# decoupled.publish_bounds() with 10 and with COLLECTIONS registered tables,
# of which 10 changed since the last round.  Publication work follows the
# queue of changed collections, so the two should cost about the same.
# Median of RUNS rounds each.
#
#   bash bench/publish_bounds.sh       (COLLECTIONS=10000, RUNS=7)
source "$(dirname "$0")/lib.sh"
COLLECTIONS=${COLLECTIONS:-10000}
RUNS=${RUNS:-7}

register() {  # $1: first index, $2: last index
    bench_psql >/dev/null <<SQL
DO \$\$
BEGIN
    FOR i IN $1..$2 LOOP
        EXECUTE format('CREATE TABLE c%s (k int)', i);
        PERFORM decoupled.register_table(format('c%s', i)::regclass, retain_history => '0');
    END LOOP;
END
\$\$;
SQL
}

# One round: advance the uppers of tables c1..c10, which queues them, then
# time publish_bounds() alone.
round_ms() {
    bench_psql <<'SQL'
DO $$
BEGIN
    PERFORM decoupled.append(format('c%s', i), '[]', f.upper, f.upper + 1000)
       FROM generate_series(1, 10) i JOIN decoupled.frontiers f ON f.name = format('c%s', i);
END
$$;
\timing on
SELECT decoupled.publish_bounds();
SQL
}

measure() {
    for _ in $(seq "$RUNS"); do
        round_ms | sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p'
    done | median
}

register 1 10
small=$(measure)
start=$(date +%s)
# In batches: each registration takes a few relation locks until commit.
for first in $(seq 11 250 "$COLLECTIONS"); do
    register "$first" "$(( first + 249 < COLLECTIONS ? first + 249 : COLLECTIONS ))"
done
echo "registered $COLLECTIONS tables in $(( $(date +%s) - start )) s"
bench_psql >/dev/null -c 'SELECT decoupled.tick_tables()' -c 'SELECT decoupled.publish_bounds()'
large=$(measure)
printf '%-40s %10.3f ms\n' "10 collections, 10 changed" "$small"
printf '%-40s %10.3f ms\n' "$COLLECTIONS collections, 10 changed" "$large"
printf '%-40s %10.2fx\n' "ratio" "$(echo "$large / $small" | bc -l)"
