#!/usr/bin/env bash
# `make check`: install what is missing, build with warnings as errors,
# install, then run every test layer against throwaway servers:
#
#   unit        GoogleTest via CTest (pure C++ in extension/core)
#   regress     pg_regress, sql/ + expected/
#   isolation   pg_isolation_regress, specs/ + expected/
#   tap         prove with PostgreSQL::Test::Cluster, t/ (TAP_TESTS=t/009_x.pl: some)
#
# REGRESS_TESTS="catalog ddl" and ISOLATION_TESTS="..." run some tests of
# those layers (catalog first: later suites use its helpers).
#
# Usage: test/check.sh [layer...]   (default: all layers)
# PostgreSQL refuses to run as root, so as root the servers run as `postgres`
# from a scratch copy of the test files that user can read and write.
# Ends with the line "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LAYERS=("$@")
[ ${#LAYERS[@]} -eq 0 ] && LAYERS=(unit regress isolation tap)

bash tools/install-deps.sh || exit 1
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PGXS_DIR=$(dirname "$("$PG_CONFIG" --pgxs)")/..

echo "== build"
make -s PG_CONFIG="$PG_CONFIG" || exit 1
if [ -w "$("$PG_CONFIG" --pkglibdir)" ]; then
    make -s PG_CONFIG="$PG_CONFIG" install >/dev/null || exit 1
else
    echo "cannot install into $("$PG_CONFIG" --pkglibdir): run 'sudo make install' first" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    RUN_AS=(runuser -u postgres --)
    RUN_USER=postgres
else
    RUN_AS=()
    RUN_USER=$(id -un)
fi
WORK=$(mktemp -d /tmp/pg_decoupled-check.XXXXXX)
cp -r sql expected specs t test/decoupled.conf README.md "$WORK"/
chown -R "$RUN_USER" "$WORK"
as_runner() { (cd "$WORK" && "${RUN_AS[@]}" env PATH="$BINDIR:$PATH" "$@"); }

PASSED=0
FAILED=0
FAILED_LAYERS=()
count() { PASSED=$((PASSED + $1)); FAILED=$((FAILED + $2)); [ "$2" -gt 0 ] && FAILED_LAYERS+=("$3"); }

run_unit() {
    echo "== unit (GoogleTest)"
    cmake -S test/unit -B build/unit -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
        cmake --build build/unit -j"$(nproc)" >/dev/null || { count 0 1 unit; return; }
    local out
    out=$(ctest --test-dir build/unit --output-on-failure 2>&1)
    echo "$out" | tail -n 3
    local line total failed
    line=$(echo "$out" | grep -E 'tests passed, [0-9]+ tests? failed out of' | tail -n 1)
    total=$(echo "$line" | sed -E 's/.*out of ([0-9]+).*/\1/')
    failed=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/')
    if [ -z "$line" ]; then echo "$out"; count 0 1 unit; return; fi
    count $((total - failed)) "$failed" unit
}

# pg_regress prints one line per test: "test NAME ... ok" or "... FAILED".
count_regress_lines() {
    local out=$1 layer=$2
    local ok bad
    ok=$(echo "$out" | grep -cE '\.\.\. ok' || true)
    bad=$(echo "$out" | grep -cE '\.\.\. (FAILED|failed)' || true)
    count "$ok" "$bad" "$layer"
}

# pg_regress or pg_isolation_regress against a temporary instance.
run_pg_regress() {  # layer, driver, suite variable
    local layer=$1 driver=$2 suite=$3 tests out status
    tests=$(make -s PG_CONFIG="$PG_CONFIG" "print-$suite")
    [ "$suite" = REGRESS ] && [ -n "${REGRESS_TESTS:-}" ] && tests=$REGRESS_TESTS
    [ "$suite" = ISOLATION ] && [ -n "${ISOLATION_TESTS:-}" ] && tests=$ISOLATION_TESTS
    out=$(as_runner "$driver" \
        --temp-instance="$WORK/tmp_$layer" --temp-config="$WORK/decoupled.conf" \
        --bindir="$BINDIR" --inputdir="$WORK" --outputdir="$WORK/$layer" \
        --dbname=postgres --use-existing $tests 2>&1)
    status=$?
    echo "$out" | grep -E '^(test |     |=|All|[0-9]+ of)' || echo "$out"
    [ $status -ne 0 ] && [ -f "$WORK/$layer/regression.diffs" ] && cat "$WORK/$layer/regression.diffs"
    count_regress_lines "$out" "$layer"
    [ $status -ne 0 ] && ! echo "$out" | grep -qE '\.\.\. (FAILED|failed)' && count 0 1 "$layer"
}

run_regress() {
    echo "== regress (pg_regress)"
    run_pg_regress regress "$PGXS_DIR/test/regress/pg_regress" REGRESS
}

run_isolation() {
    echo "== isolation (pg_isolation_regress)"
    run_pg_regress isolation "$PGXS_DIR/test/isolation/pg_isolation_regress" ISOLATION
}

run_tap() {
    echo "== tap (prove)"
    local out status tests failed
    out=$(as_runner env TESTDIR="$WORK" PG_REGRESS="$PGXS_DIR/test/regress/pg_regress" \
        prove ${PROVE_FLAGS:-} -I "$PGXS_DIR/test/perl" -I "$WORK/t" ${TAP_TESTS:-t/*.pl} 2>&1)
    status=$?
    echo "$out"
    tests=$(echo "$out" | sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p')
    failed=$(echo "$out" | sed -nE 's/.*Failed ([0-9]+)\/[0-9]+ subtests.*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    tests=${tests:-0}
    if [ $status -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
    count $((tests - failed > 0 ? tests - failed : 0)) "$failed" tap
    if [ $status -ne 0 ]; then
        for log in "$WORK"/tmp_check/log/*; do
            [ -f "$log" ] || continue
            echo "---- $log (last 60 lines)"
            tail -n 60 "$log"
        done
    fi
}

for layer in "${LAYERS[@]}"; do
    case $layer in
        unit) run_unit ;;
        regress) run_regress ;;
        isolation) run_isolation ;;
        tap) run_tap ;;
        *) echo "unknown layer: $layer" >&2; exit 2 ;;
    esac
done

echo
if [ ${#FAILED_LAYERS[@]} -gt 0 ]; then
    echo "failing layers: ${FAILED_LAYERS[*]}; test files kept in $WORK"
else
    rm -rf "$WORK"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
