# C14.1: WAL capture.  Writers insert, update, delete, truncate and abort on
# a table with a primary key (with TOASTed values an update leaves alone)
# and on one without, while the capture worker is stopped (SIGTERM, the
# controller restarts it), killed (SIGKILL: the server restarts) and the
# server is stopped in immediate mode.  At every tick the history must read
# back exactly the table's contents at that tick: every committed change
# once, nothing of an aborted one.  Then: the slot is visible and goes with
# the last registered table and with DROP EXTENSION; where wal_level is not
# logical, registration says how to switch and triggers capture.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DecoupledTest;

my $node = DecoupledTest::new_node('wal_capture', wal_level => 'logical',
    restart_after_crash => 'on');
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, note text);
    CREATE TABLE journal (a int, b text);  -- no primary key
    INSERT INTO acct SELECT g, 100, NULL FROM generate_series(1, 50) g;
    INSERT INTO journal SELECT g % 5, 'seed' FROM generate_series(1, 20) g;
    SELECT decoupled.register_table('acct', retain_history => '1 day');
    SELECT decoupled.register_table('journal', retain_history => '1 day');
    -- Ground truth: each table's contents at each tick, read in the tick's
    -- transaction; only the workload writes, so they are exact.
    CREATE TABLE truth (ts bigint PRIMARY KEY, acct text, journal text);
    CREATE FUNCTION digest_acct() RETURNS text LANGUAGE sql AS
      $$ SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM acct t $$;
    CREATE FUNCTION digest_journal() RETURNS text LANGUAGE sql AS
      $$ SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM journal t $$;
    CREATE PROCEDURE workload(iterations int) LANGUAGE plpgsql AS $$
    DECLARE
        big text;
    BEGIN
        FOR i IN 1..iterations LOOP
            INSERT INTO acct VALUES (1000 + i, i, NULL) ON CONFLICT (id) DO NOTHING;
            UPDATE acct SET balance = balance + 1 WHERE id = (i % 50) + 1;
            IF i % 3 = 0 THEN
                DELETE FROM acct WHERE id = 1000 + i - 1;
            END IF;
            IF i % 10 = 0 THEN
                -- Incompressible enough to be stored out of line; the next
                -- updates leave it alone.
                SELECT string_agg(md5(random()::text), '') INTO big FROM generate_series(1, 300);
                UPDATE acct SET note = big WHERE id = (i % 50) + 1;
            END IF;
            INSERT INTO journal VALUES (i % 5, 'w' || i), (i % 5, 'w' || i);
            UPDATE journal SET b = b || '+' WHERE a = i % 5 AND b = 'w' || (i - 5);
            DELETE FROM journal WHERE b = 'w' || (i - 20);
            IF i % 97 = 0 THEN
                TRUNCATE journal;
                INSERT INTO journal VALUES (0, 'after truncate ' || i);
            END IF;
            -- An error rolls back what this block wrote.
            BEGIN
                INSERT INTO acct VALUES (-i, -1, 'never');
                INSERT INTO journal VALUES (-1, 'never');
                RAISE EXCEPTION 'abort';
            EXCEPTION WHEN raise_exception THEN
                NULL;
            END;
            COMMIT;
            IF i % 11 = 0 THEN
                INSERT INTO acct VALUES (-i, -1, 'rolled back');
                ROLLBACK;
            END IF;
            -- A session's tick waits for capture to take in what committed.
            PERFORM decoupled.tick_tables();
            INSERT INTO truth
            SELECT f.upper - 1, digest_acct(), digest_journal()
              FROM decoupled.frontiers f WHERE f.name = 'acct';
            COMMIT;
        END LOOP;
    END
    $$;
});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || trigger_tables || ' ' || status FROM decoupled.capture},
    '2 0 running');
is($node->safe_psql('postgres',
        q{SELECT string_agg(relreplident::text, ',' ORDER BY relname) FROM pg_class
           WHERE oid IN ('acct'::regclass, 'journal'::regclass)}),
    'd,f', 'registration keeps the primary key as identity, sets FULL without one');
is($node->safe_psql('postgres',
        q{SELECT count(*) FROM pg_trigger WHERE tgrelid IN ('acct'::regclass, 'journal'::regclass)
             AND tgname LIKE 'decoupled_capture_%'}),
    '0', 'adopted tables have no capture triggers: writers pay nothing');

sub capture_pid {
    return $node->safe_psql('postgres', 'SELECT worker_pid FROM decoupled.capture');
}

# Writes `sql`, ticks, and records the truth at that tick.
sub write_and_tick {
    my ($sql) = @_;
    $node->safe_psql('postgres', qq{
        $sql;
        SELECT decoupled.tick_tables();
        INSERT INTO truth SELECT f.upper - 1, digest_acct(), digest_journal()
          FROM decoupled.frontiers f WHERE f.name = 'acct'});
}

sub truth_rows { return $node->safe_psql('postgres', 'SELECT count(*) FROM truth'); }

sub run_workload {
    my $bg = $node->background_psql('postgres', on_error_stop => 0);
    $bg->query_until(qr/started/, "\\echo started\nCALL workload(1000000);\n");
    return $bg;
}

sub wait_progress {
    my ($more) = @_;
    my $target = truth_rows() + $more;
    return if $node->poll_query_until('postgres', "SELECT count(*) >= $target FROM truth");
    diag($node->safe_psql('postgres', q{
        SELECT pid, backend_type, state, wait_event_type, wait_event, left(query, 60)
          FROM pg_stat_activity WHERE backend_type <> 'checkpointer'}));
    diag($node->safe_psql('postgres', 'SELECT * FROM decoupled.capture'));
    die 'the workload made no progress';
}

my $bg = run_workload();
wait_progress(30);

# The worker stops (SIGTERM) three times; the controller restarts it.
for my $round (1 .. 3) {
    my $pid = capture_pid();
    kill 'TERM', $pid;
    $node->poll_query_until('postgres',
        "SELECT worker_pid IS NOT NULL AND worker_pid <> $pid FROM decoupled.capture")
      or die 'the capture worker did not come back';
    wait_progress(20);
}
pass('the capture worker was stopped three times under writers and came back');

# Killed: the postmaster restarts the server, the workload dies with it.
my $offset = -s $node->logfile;
kill 'KILL', capture_pid();
$node->poll_query_until('postgres', 'SELECT worker_pid IS NOT NULL FROM decoupled.capture')
  or die 'no capture worker after the crash restart';
ok(DecoupledTest::crashed_since($node, $offset), 'SIGKILL of the worker restarted the server');
eval { $bg->quit };
$bg = run_workload();
wait_progress(30);

# The server crashes (immediate stop) under writers.
$node->stop('immediate');
eval { $bg->quit };
$node->start;
$bg = run_workload();
wait_progress(30);
# The workload is cancelled, and checked gone: a workload left running
# would write under the checks below and make their truth inexact.
$node->poll_query_until('postgres', q{
    SELECT count(pg_cancel_backend(pid)) = 0 FROM pg_stat_activity
     WHERE query LIKE 'CALL workload%' AND state = 'active' AND pid <> pg_backend_pid()})
  or die 'the workload outlived its cancel';
eval { $bg->quit };

# Every tick's history is the table's contents at that tick.
my $checked = $node->safe_psql('postgres', q{
    CREATE FUNCTION mismatches() RETURNS TABLE (ts bigint, what text)
    LANGUAGE plpgsql AS $$
    DECLARE
        r truth;
    BEGIN
        FOR r IN SELECT * FROM truth ORDER BY truth.ts LOOP
            PERFORM set_config('decoupled.as_of', r.ts::text, true);
            IF digest_acct() <> r.acct THEN ts := r.ts; what := 'acct'; RETURN NEXT; END IF;
            IF digest_journal() <> r.journal THEN ts := r.ts; what := 'journal'; RETURN NEXT; END IF;
        END LOOP;
        PERFORM set_config('decoupled.as_of', '', true);
    END
    $$;
    SELECT count(*) || ' ticks, ' || (SELECT count(*) FROM mismatches()) || ' mismatches'
      FROM truth});
like($checked, qr/^\d+ ticks, 0 mismatches$/, "AS OF every tick reads the table's state ($checked)");
cmp_ok(truth_rows(), '>=', 200, 'at least 200 ticks were checked');
# Catalog changes while capture follows writers.  Between passes the worker
# keeps the caches decoding filled as long as no catalog change lies in the
# WAL it decodes; changes here — columns added and dropped on a table written
# in the same transactions as the registered ones, and on a table written
# between them — must each be decoded with the catalog of its time.
$node->safe_psql('postgres', 'CREATE TABLE churn (id int, a text)');
for my $i (1 .. 25) {
    write_and_tick(qq{
        INSERT INTO churn (id, a) SELECT g, 'before $i' FROM generate_series(1, 20) g;
        INSERT INTO journal VALUES ($i, 'ddl $i');
        ALTER TABLE churn ADD COLUMN c$i text DEFAULT 'd$i';
        INSERT INTO churn (id, a) SELECT g, 'after $i' FROM generate_series(1, 20) g;
        UPDATE journal SET b = b || '!' WHERE b = 'ddl $i'});
    $node->safe_psql('postgres', qq{
        UPDATE churn SET a = a || '.' WHERE id = $i;
        ALTER TABLE churn DROP COLUMN c$i;
        INSERT INTO churn (id, a) VALUES ($i, 'dropped $i')});
}
write_and_tick('SELECT 1');
is($node->safe_psql('postgres', 'SELECT count(*) FROM mismatches()'), '0',
    'catalog changes under writers: AS OF every tick still reads the table\'s state');
is($node->safe_psql('postgres', 'SELECT status, last_error IS NULL FROM decoupled.capture'),
    'running|t', 'capture decoded the changes around them without an error');

# The slot and its lag are visible.
my $view = $node->safe_psql('postgres', q{
    SELECT status, slot_name, retained_wal_bytes IS NOT NULL, lag_bytes IS NOT NULL,
           last_error IS NULL
      FROM decoupled.capture});
is($view, 'running|pg_decoupled|t|t|t', 'decoupled.capture shows the slot, its WAL and lag');

# A failing capture shows in health, and recovers.
# (It fails recording its progress, which is no one table's failure: one
# table's would set that table aside after three passes.)
$node->safe_psql('postgres', q{
    CREATE FUNCTION stall_capture() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'capture stalled by the test'; END $$;
    CREATE TRIGGER stall BEFORE INSERT OR UPDATE ON decoupled.capture_progress
        FOR EACH ROW EXECUTE FUNCTION stall_capture();
    INSERT INTO acct VALUES (2004000, 1, 'waits')});
DecoupledTest::wait_for($node,
    q{SELECT status || ' ' || (error IS NOT NULL) FROM decoupled.object_statuses
       WHERE name = 'acct'}, 'stalled true');
is($node->safe_psql('postgres', 'SELECT status FROM decoupled.capture'), 'stalled',
    'decoupled.capture shows the stall');
# Status history keeps the transition (C6.3), once, with capture's error.
# The controller's round records it (this node runs none: the test calls
# the round's recorder as it polls).
my $last_event = q{
    SELECT (SELECT status || ' ' || coalesce(error LIKE 'WAL capture: %', false)
              FROM decoupled.status_history WHERE name = 'acct' AND replica IS NULL
             ORDER BY occurred_at DESC LIMIT 1)
      FROM decoupled._record_capture_health()};
DecoupledTest::wait_for($node, $last_event, 'stalled true');
$node->safe_psql('postgres', 'DROP TRIGGER stall ON decoupled.capture_progress');
DecoupledTest::wait_for($node,
    q{SELECT status FROM decoupled.object_statuses WHERE name = 'acct'}, 'running');
DecoupledTest::wait_for($node, $last_event, 'running false');
is($node->safe_psql('postgres', q{
    SELECT string_agg(status, ' ' ORDER BY occurred_at)
      FROM decoupled.status_history WHERE name = 'acct' AND replica IS NULL}),
    'stalled running', 'status history has the stall and the recovery, once each');
write_and_tick('SELECT 1');
is($node->safe_psql('postgres', 'SELECT count(*) FROM mismatches()'), '0',
    'after the stall, what waited is captured once');

# Trigger capture, and back.  A row the worker last saw is updated under
# triggers: after the switch back, the worker retracts what the trigger
# wrote, not what it remembers.
write_and_tick(q{UPDATE acct SET balance = balance + 1 WHERE id = 7});
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET decoupled.capture = 'trigger'; SELECT pg_reload_conf()});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || trigger_tables || ' ' || coalesce(slot_name, '-')
        FROM decoupled.capture}, '0 2 -');
pass("decoupled.capture = 'trigger' releases every table to triggers and drops the slot");
{
    my ($rc, $out, $err) = $node->psql('postgres', q{
        CREATE TABLE by_trigger (k int PRIMARY KEY);
        SELECT decoupled.register_table('by_trigger')});
    like($err, qr/NOTICE:  table "public.by_trigger" is captured by triggers.*\nHINT:  Set decoupled.capture = 'wal'/s,
        "with decoupled.capture = 'trigger', registration says how to switch");
    $node->safe_psql('postgres',
        q{SELECT decoupled.unregister_table('by_trigger'); DROP TABLE by_trigger});
}
$node->safe_psql('postgres', q{
    INSERT INTO acct VALUES (2005000, 1, 'by trigger');
    UPDATE acct SET balance = balance + 1000 WHERE id = 7;
    SELECT decoupled.tick_tables()});
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET decoupled.capture; SELECT pg_reload_conf()});
DecoupledTest::wait_for($node,
    q{SELECT wal_tables || ' ' || trigger_tables || ' ' || slot_name FROM decoupled.capture},
    '2 0 pg_decoupled');
write_and_tick(q{INSERT INTO acct VALUES (2005001, 1, 'from the WAL');
                 UPDATE acct SET balance = balance + 1 WHERE id = 7});
is($node->safe_psql('postgres', 'SELECT count(*) FROM mismatches()'), '0',
    'switching to triggers and back loses and doubles nothing');

# A slot dropped by hand: the tables are taken again from their contents.
# The worker holds the slot while it captures, and gives it back after a
# second without a captured change: drop it then.
$node->safe_psql('postgres', DecoupledTest::drop_capture_slot_sql());
$node->safe_psql('postgres', q{INSERT INTO acct VALUES (2005002, 1, 'while the slot was gone')});
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '1');
write_and_tick(q{INSERT INTO acct VALUES (2005003, 1, 'after')});
is($node->safe_psql('postgres', 'SELECT count(*) FROM mismatches()'), '0',
    'a lost slot is recreated and its tables resynchronised');

# The slot goes with the last registered table, and with the extension.
$node->safe_psql('postgres', q{
    SELECT decoupled.unregister_table('acct');
    DROP TABLE journal});
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '0');
is($node->safe_psql('postgres', q{SELECT relreplident FROM pg_class WHERE oid = 'acct'::regclass}),
    'd', 'unregistering gives the table its own replica identity back');
$node->safe_psql('postgres', q{SELECT decoupled.register_table('acct')});
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '1');
# Tables without a primary key get REPLICA IDENTITY FULL while registered;
# DROP EXTENSION gives each its own back, as unregister_table does.
$node->safe_psql('postgres', q{
    CREATE TABLE idn_default (a int, b int);
    CREATE TABLE idn_nothing (a int, b int);
    ALTER TABLE idn_nothing REPLICA IDENTITY NOTHING;
    CREATE TABLE idn_index (a int NOT NULL, b int);
    CREATE UNIQUE INDEX idn_index_a ON idn_index (a);
    ALTER TABLE idn_index REPLICA IDENTITY USING INDEX idn_index_a;
    SELECT decoupled.register_table(t) FROM unnest('{idn_default,idn_nothing,idn_index}'::regclass[]) t;
});
is($node->safe_psql('postgres', q{
    SELECT string_agg(relreplident::text, '' ORDER BY relname) FROM pg_class
     WHERE relname IN ('idn_default', 'idn_index', 'idn_nothing')}), 'fff',
    'registered tables without a primary key have REPLICA IDENTITY FULL');
$node->safe_psql('postgres', 'DROP EXTENSION pg_decoupled CASCADE');
is($node->safe_psql('postgres', q{
    SELECT string_agg(c.relname || '=' || c.relreplident::text
                      || coalesce(':' || i.relname, ''), ',' ORDER BY c.relname)
      FROM pg_class c
      LEFT JOIN pg_index x ON x.indrelid = c.oid AND x.indisreplident
      LEFT JOIN pg_class i ON i.oid = x.indexrelid
     WHERE c.relname IN ('acct', 'idn_default', 'idn_index', 'idn_nothing')}),
    'acct=d,idn_default=d,idn_index=i:idn_index_a,idn_nothing=n',
    'DROP EXTENSION gives every registered table its own replica identity back');
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '0');
pass('the slot goes with the last registered table and with DROP EXTENSION');
# DROP SCHEMA decoupled CASCADE drops the extension as well: it is handled
# as DROP EXTENSION is, the replica identities given back first.
$node->safe_psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.register_table(t) FROM unnest('{idn_default,idn_index}'::regclass[]) t;
});
is($node->safe_psql('postgres', q{
    SELECT string_agg(relreplident::text, '' ORDER BY relname) FROM pg_class
     WHERE relname IN ('idn_default', 'idn_index')}), 'ff', 'registered again: FULL');
$node->safe_psql('postgres', 'DROP SCHEMA decoupled CASCADE');
is($node->safe_psql('postgres', q{
    SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'pg_decoupled') || ':'
           || string_agg(relreplident::text, '' ORDER BY relname) FROM pg_class
     WHERE relname IN ('idn_default', 'idn_index')}), '0:di',
    'DROP SCHEMA decoupled CASCADE gives every registered table its own replica identity back');
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '0');
pass('the slot goes with DROP SCHEMA decoupled CASCADE');
# So does DROP OWNED BY the role that owns the extension.
$node->safe_psql('postgres', q{
    CREATE ROLE ext_owner SUPERUSER;
    SET ROLE ext_owner;
    CREATE EXTENSION pg_decoupled;
    SELECT decoupled.register_table('idn_default');
    RESET ROLE;
});
is($node->safe_psql('postgres',
        q{SELECT relreplident FROM pg_class WHERE relname = 'idn_default'}), 'f',
    'registered by the extension\'s owner: FULL');
# CASCADE: until the capture worker adopts the table, the capture
# triggers on it depend on the extension's function.
$node->safe_psql('postgres', 'DROP OWNED BY ext_owner CASCADE');
is($node->safe_psql('postgres', q{
    SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'pg_decoupled') || ':'
           || relreplident::text FROM pg_class WHERE relname = 'idn_default'}), '0:d',
    'DROP OWNED BY the extension\'s owner gives the table its own replica identity back');
DecoupledTest::wait_for($node,
    q{SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pg_decoupled'}, '0');
pass('the slot goes with DROP OWNED BY the extension\'s owner');
$node->stop;

# Without logical WAL: triggers, and a NOTICE that says how to switch.
my $plain = DecoupledTest::new_node('trigger_capture');
$plain->start;
my ($ret, $stdout, $stderr) = $plain->psql('postgres', q{
    CREATE EXTENSION pg_decoupled;
    CREATE TABLE t (k int PRIMARY KEY);
    SELECT decoupled.register_table('t');
    SELECT status FROM decoupled.capture});
like($stderr, qr/NOTICE:  table "public.t" is captured by triggers.*\nHINT:  Set wal_level = logical/s,
    'register_table says how to capture from the WAL');
is($stdout, "1\noff", 'capture is off where wal_level is not logical');
is($plain->safe_psql('postgres',
        q{INSERT INTO t VALUES (1); SELECT decoupled.tick_tables();
          SELECT count(*) FROM decoupled_storage.c1_cur}),
    "1\n1", 'triggers capture');
is($plain->safe_psql('postgres',
        q{SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index x
            JOIN pg_class c ON c.oid = x.indrelid
           WHERE c.relname IN ('c1_cur', 'c1_pending')
             AND pg_get_indexdef(x.indexrelid) LIKE '%(k)'}),
    'c1_cur', 'the key is indexed in cur; in pending only while captured from the WAL');
# Trigger capture retracts an old row itself, not its key: where its owner's
# append retracted that row and appended another in its place, an update
# or delete of the table's row takes the appended one instead, so that each
# key keeps one current row, the table's (as WAL capture retracts by key).
$plain->safe_psql('postgres', q{
    CREATE TABLE ak (id int PRIMARY KEY, v text);
    INSERT INTO ak VALUES (1, 'a'), (2, 'b'), (3, 'c');
    SELECT decoupled.register_table('ak');
    SELECT decoupled.tick_tables()});
is($plain->safe_psql('postgres', q{
    SELECT decoupled.append('ak', jsonb_build_array(
               jsonb_build_object('mz_timestamp', upper, 'mz_diff', -1, 'data', '{"id": 1, "v": "a"}'::jsonb),
               jsonb_build_object('mz_timestamp', upper, 'mz_diff', 1, 'data', '{"id": 1, "v": "fixed"}'::jsonb),
               jsonb_build_object('mz_timestamp', upper, 'mz_diff', -1, 'data', '{"id": 2, "v": "b"}'::jsonb),
               jsonb_build_object('mz_timestamp', upper, 'mz_diff', -1, 'data', '{"id": 3, "v": "c"}'::jsonb),
               jsonb_build_object('mz_timestamp', upper, 'mz_diff', 1, 'data', '{"id": 3, "v": "fixed"}'::jsonb)),
           upper, upper + 1) = upper + 1
      FROM decoupled.frontiers WHERE name = 'ak'}), 't', 'the owner appends corrections');
$plain->safe_psql('postgres', q{
    UPDATE ak SET v = 'table' WHERE id = 1;
    UPDATE ak SET v = 'table' WHERE id = 2;
    DELETE FROM ak WHERE id = 3;
    SELECT decoupled.tick_tables()});
is($plain->safe_psql('postgres', q{
    SELECT status FROM decoupled.object_statuses WHERE name = 'ak'}), 'running',
    'the tick after the corrections succeeds');
is($plain->safe_psql('postgres', q{
    SELECT upper - 1 AS t FROM decoupled.frontiers WHERE name = 'ak' \gset
    SET decoupled.as_of = :t;
    SELECT string_agg(id || '=' || v, ',' ORDER BY id, v) FROM ak}),
    '1=table,2=table', 'an update or delete of a row an append replaced retracts the replacement');

# Trigger capture's own guards: its triggers stay as registration made them,
# and TRUNCATE needs READ COMMITTED.
($ret, $stdout, $stderr) = $plain->psql('postgres', 'DROP TRIGGER decoupled_capture_insert ON t');
like($stderr, qr/cannot drop the capture triggers of a registered table/,
    'a capture trigger cannot be dropped');
($ret, $stdout, $stderr) = $plain->psql('postgres',
    'ALTER TRIGGER decoupled_capture_delete ON t RENAME TO gone');
like($stderr, qr/cannot create, replace or rename a capture trigger/,
    'a capture trigger cannot be renamed');
($ret, $stdout, $stderr) = $plain->psql('postgres',
    'BEGIN ISOLATION LEVEL REPEATABLE READ; TRUNCATE t; COMMIT');
like($stderr, qr/cannot truncate registered table "public.t" at isolation level repeatable read/,
    'trigger capture refuses TRUNCATE above READ COMMITTED');
$plain->stop;
done_testing();
