#!/usr/bin/env bash
# The step-size rule (brief C13.3): when a `groups` or `partitions` step
# computes the touched groups again through the arrangement, and when one
# pass over the whole input is cheaper.  In one throwaway server
# (bench/lib.sh): a registered table t(id, k, v) of ROWS rows in NGROUPS
# groups and the view SELECT k, min(v), max(v) FROM t GROUP BY k; for each
# count of touched groups in TOUCHED, the time to compute the view at its
# latest time for those groups only (decoupled._stage_plan with the touched
# groups' condition, as a step does) against the whole view (the same
# without the condition), medians of RUNS.  The groups are spread over the
# key range, as random changes touch them.
#
#   bash bench/step_size.sh
#   (ROWS=1000000 NGROUPS=1000 TOUCHED="1 16 64 128 250 400 600 1000" RUNS=5)
CMDLINE=("$0" "$@")
ROWS=${ROWS:-1000000}
NGROUPS=${NGROUPS:-1000}
TOUCHED=${TOUCHED:-1 16 64 128 250 400 600 1000}
source "$(dirname "$0")/lib.sh"
export PGOPTIONS="-c client_min_messages=warning"

echo "-- ${CMDLINE[*]}"
echo "-- commit $(git -C "$ROOT" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- ROWS=$ROWS NGROUPS=$NGROUPS RUNS=$RUNS"
bench_psql <<SQL
CREATE TABLE t (id int, k int, v int);
INSERT INTO t SELECT i, i % $NGROUPS, ((i::bigint * 7919) % 100003)::int FROM generate_series(1, $ROWS) i;
SELECT decoupled.register_table('t') > 0;
SELECT decoupled.tick_tables() > 0;
SELECT decoupled.create_materialized_view('mm',
    'SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k') > 0;
SELECT decoupled.wait_for_upper('mm', (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 't'),
                                '600s') IS NOT NULL;
ANALYZE;
-- One computation, timed: the view at its latest time, for the groups
-- whose keys are in \`keys\` (NULL: all of them), into its stage (in
-- memory, emptied when the transaction ends).
CREATE FUNCTION timed(keys int[]) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE
    o  decoupled.objects;
    d  jsonb;
    t0 timestamptz;
    ms float8;
BEGIN
    SELECT * INTO o FROM decoupled.objects WHERE name = 'mm';
    SELECT c.definition INTO d FROM decoupled.catalog_objects c WHERE c.lifetime_id = o.lifetime_id;
    t0 := clock_timestamp();
    PERFORM decoupled._stage_plan((d->>'plan')::oid::regclass, (d->>'owner')::oid,
        (SELECT upper - 1 FROM decoupled.frontiers WHERE name = 'mm'),
        decoupled._storage(o.lifetime_id, 'stage')::regclass,
        CASE WHEN keys IS NOT NULL
             THEN format('k OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.int4[])', keys) END);
    ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
    RETURN ms;
END
\$\$;
SQL
> /dev/null

full=()
for run in $(seq "$RUNS"); do full+=("$(bench_psql -c "SELECT timed(NULL)")"); done
full_ms=$(printf '%s\n' "${full[@]}" | median)
echo
echo "| touched groups | share of the view | touched groups again | whole view | ratio |"
echo "|---:|---:|---:|---:|---:|"
for n in $TOUCHED; do
    probe=()
    for run in $(seq "$RUNS"); do
        probe+=("$(bench_psql -c "SELECT timed(ARRAY(SELECT (g * $NGROUPS / $n) FROM generate_series(0, $n - 1) g))")")
    done
    probe_ms=$(printf '%s\n' "${probe[@]}" | median)
    awk -v n="$n" -v g="$NGROUPS" -v p="$probe_ms" -v f="$full_ms" \
        'BEGIN { printf "| %d | %.0f%% | %.1f ms | %.1f ms | %.2f× |\n", n, 100 * n / g, p, f, p / f }'
done
