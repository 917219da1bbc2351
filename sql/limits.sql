-- Limits on what one caller may take or write, and bad input on the write
-- path (C2.1, C4, "Errors and bad input"): a session's holds have a quota of
-- their own, so one session cannot take what every other needs (53400); an
-- append refuses absurd multiplicities, ill-typed values and unknown keys
-- (22023, naming the update, the collection and the column), and changes
-- nothing when it does; the replica protocol's conditions have SQLSTATEs of
-- the extension's own class ZD.
\set SHOW_CONTEXT never
-- Runs a statement; reports SQLSTATE, message, detail and hint instead of
-- failing, with timestamps masked (T).
CREATE FUNCTION pg_temp.attempt(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_detail text;
    v_hint   text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM
                          || CASE WHEN v_detail <> '' THEN ' | detail: ' || v_detail ELSE '' END
                          || CASE WHEN v_hint <> '' THEN ' | hint: ' || v_hint ELSE '' END,
                          '(?<!\d)\d{13}(?!\d)|(?<=incarnation )\d+|(?<=collection )\d+|(?<=view )\d+',
                          'T', 'g');
END
$$;

------------------------------------------------------------------------------
-- Holds: a quota per session
------------------------------------------------------------------------------

CREATE TABLE lim_held (k int);
SELECT decoupled.register_table('lim_held') > 0 AS registered;
SHOW decoupled.max_holds_per_session;
-- This session takes holds until it is refused.
CREATE FUNCTION pg_temp.take_holds(OUT taken integer, OUT refusal text) LANGUAGE plpgsql AS $$
BEGIN
    taken := 0;
    FOR attempt IN 1 .. 1000 LOOP
        refusal := pg_temp.attempt($q$SELECT decoupled.acquire_hold('lim_held')$q$);
        EXIT WHEN refusal <> 'ok';
        taken := taken + 1;
    END LOOP;
END
$$;
SELECT * FROM pg_temp.take_holds();
SELECT count(*) AS holds_of_this_session FROM decoupled.session_holds
 WHERE session_pid = pg_backend_pid();
-- A subscription is a hold too: refused the same way.
SELECT pg_temp.attempt($$SELECT * FROM decoupled.subscribe('lim_held', up_to => (
                          SELECT upper FROM decoupled.frontiers WHERE name = 'lim_held'))$$)
    AS subscribe;
-- Below the quota again, the session may take one more.
SELECT decoupled.release_hold(max(hold_id)) IS NULL AS released FROM decoupled.session_holds
 WHERE session_pid = pg_backend_pid();
SELECT decoupled.acquire_hold('lim_held') > 0 AS acquired_again;
SELECT pg_temp.attempt($$SELECT decoupled.acquire_hold('lim_held')$$) AS one_beyond;
-- (specs/hold_quota.spec: meanwhile another session still acquires holds.)
SELECT count(decoupled.release_hold(hold_id)) AS released FROM decoupled.session_holds
 WHERE session_pid = pg_backend_pid();

------------------------------------------------------------------------------
-- Appends: multiplicities, value types, keys
------------------------------------------------------------------------------

CREATE DOMAIN lim_positive AS integer CHECK (VALUE > 0);
CREATE DOMAIN lim_required AS integer NOT NULL;
CREATE TABLE lim_t (id int, price numeric(6,2), tags text[], at timestamptz, qty lim_positive,
                    n lim_required DEFAULT 1);
SELECT decoupled.register_table('lim_t') > 0 AS registered;
SELECT upper AS u0 FROM decoupled.frontiers WHERE name = 'lim_t' \gset
-- The statement that appends `updates` (JSON text, @t standing for the
-- upper) to lim_t at its upper.
CREATE FUNCTION pg_temp.append_sql(updates text) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT decoupled.append(%L, %L, %s, %s)', 'lim_t',
                  replace(replace(updates, '"@t"', upper::text), '@t', upper::text),
                  upper, upper + 10)
      FROM decoupled.frontiers WHERE name = 'lim_t'
$$;
SELECT case_name, pg_temp.attempt(pg_temp.append_sql(updates)) AS outcome FROM (VALUES
    -- A multiplicity is stored as that many rows: bounded per update and per
    -- append.
    ('largest bigint', '[{"mz_timestamp": @t, "mz_diff": 9223372036854775807, "data": {"id": 1}}]'),
    ('beyond the bound', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 1}},
                           {"mz_timestamp": @t, "mz_diff": -1000001, "data": {"id": 1}}]'),
    ('fractional', '[{"mz_timestamp": @t, "mz_diff": 1.5, "data": {"id": 1}}]'),
    ('text diff', '[{"mz_timestamp": @t, "mz_diff": "1", "data": {"id": 1}}]'),
    ('too many rows', (SELECT jsonb_agg(jsonb_build_object('mz_timestamp', '@t', 'mz_diff', 1000000,
                                                           'data', jsonb_build_object('id', g)))::text
                         FROM generate_series(1, 11) g)),
    -- Times are integers >= 0 (and then must lie in the appended interval).
    ('huge time', '[{"mz_timestamp": 1e30, "mz_diff": 1, "data": {"id": 1}}]'),
    ('negative time', '[{"mz_timestamp": -1, "mz_diff": 1, "data": {"id": 1}}]'),
    ('fractional time', '[{"mz_timestamp": 1.5, "mz_diff": 1, "data": {"id": 1}}]'),
    -- Keys: of the update and of its data.
    ('unknown column', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 1, "idd": 2}}]'),
    ('storage column', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"mz_ts": 2}}]'),
    ('unknown key', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {}, "mz_time": 2}]'),
    -- Values that do not convert to their column's type, in any update.
    ('not an integer', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 1}},
                         {"mz_timestamp": @t, "mz_diff": 1, "data": {"id": "abc"}}]'),
    ('integer overflow', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 1e20}}]'),
    ('numeric overflow', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"price": 12345.678}}]'),
    ('bad array', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"tags": "x"}}]'),
    ('bad time', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"at": "not a time"}}]'),
    ('domain check', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"qty": -1, "n": 1}}]'),
    ('domain null', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"n": null}}]'),
    -- A missing column is NULL, which this one's domain refuses.
    ('missing column', '[{"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 1}}]'),
    -- A retraction of a row present nowhere is still refused, after these.
    ('good shape', '[{"mz_timestamp": @t, "mz_diff": -1, "data": {"id": 1, "n": 1}}]')
) AS t(case_name, updates);
-- A failed append changes nothing.
SELECT upper = :u0 AS upper_unchanged FROM decoupled.frontiers WHERE name = 'lim_t';

-- Missing keys are NULL; values convert as jsonb_populate_record does.
SELECT decoupled.append('lim_t', replace(
    '[{"mz_timestamp": @t, "mz_diff": 2, "data": {"id": 5, "n": 1}},
      {"mz_timestamp": @t, "mz_diff": 1, "data": {"id": 6, "price": 9.5, "tags": ["a", "b"],
                                                 "at": "2024-01-02T03:04:05Z", "qty": 3,
                                                 "n": 2}}]',
    '@t', :u0::text)::jsonb, :u0, :u0 + 10) > 0 AS appended;
SET decoupled.as_of = :u0;
SELECT * FROM lim_t ORDER BY id;
RESET decoupled.as_of;

------------------------------------------------------------------------------
-- The replica protocol's own SQLSTATEs (class ZD)
------------------------------------------------------------------------------

-- A replica nobody runs: this session acts as it.
DO $$ BEGIN
    PERFORM decoupled.create_cluster('lim', replicas => 0, managed => false);
    PERFORM decoupled.create_replica('lim', 'x', external => true);
END $$;
SELECT decoupled.replica_start(replica_id, 'default', 1) AS old_incarnation
  FROM decoupled.cluster_replicas WHERE cluster = 'lim' \gset
SELECT decoupled.replica_start(replica_id, 'default', 1) AS incarnation
  FROM decoupled.cluster_replicas WHERE cluster = 'lim' \gset
SELECT lifetime_id AS lim_t_id FROM decoupled.objects WHERE name = 'lim_t' \gset
SELECT case_name, pg_temp.attempt(s) AS outcome FROM (VALUES
    -- A replica appends only to a source or view of its cluster: lim_t is
    -- a registered table (42501).
    ('replica append, absurd diff',
     format($$SELECT decoupled.replica_append(%s, %s, jsonb_build_array(jsonb_build_object(
                 'mz_timestamp', upper, 'mz_diff', 9223372036854775807, 'data', '{}'::jsonb)),
                 upper, upper + 1) FROM decoupled.frontiers WHERE name = 'lim_t'$$,
            :incarnation, :lim_t_id)),
    -- ZD001: a fenced incarnation, whatever it calls.
    ('fenced append',
     format($$SELECT decoupled.replica_append(%s, %s, '[]', 0, 1)$$, :old_incarnation, :lim_t_id)),
    ('fenced report',
     format($$SELECT decoupled.replica_report(%s, %s, 'running')$$, :old_incarnation, :lim_t_id)),
    ('fenced compaction', format($$SELECT decoupled.replica_compact(%s)$$, :old_incarnation))
) AS t(case_name, s);
-- The idle views of a pass advance together (replica_advance_idle): a view
-- with nothing to compute moves to its inputs' upper; its first
-- computation, a change to compute and a lost race are left to its own
-- step (nothing returned, nothing moved); a fenced incarnation is refused.
CREATE TABLE lim_src (k int);
SELECT decoupled.register_table('lim_src') > 0 AS registered;
SELECT decoupled.create_materialized_view('lim_idle', 'SELECT count(*) AS n FROM lim_src',
                                          cluster => 'lim') > 0 AS created;
SELECT lifetime_id AS lim_idle_id FROM decoupled.objects WHERE name = 'lim_idle' \gset
CREATE FUNCTION pg_temp.idle(incarnation bigint, id bigint, expected bigint)
RETURNS TABLE (advanced bigint, moved boolean, at_input_upper boolean) LANGUAGE sql AS $$
    SELECT count(a.*), count(a.*) > 0 AND max(a.upper) > expected,
           bool_and(a.upper = (SELECT upper FROM decoupled.frontiers WHERE name = 'lim_src'))
      FROM decoupled.replica_advance_idle(incarnation, ARRAY[id], ARRAY[expected]) a
$$;
SELECT upper AS lim_idle_upper FROM decoupled.frontiers WHERE name = 'lim_idle' \gset
SELECT 'first computation' AS case_name, * FROM pg_temp.idle(:incarnation, :lim_idle_id, :lim_idle_upper);
SELECT caught_up FROM decoupled.replica_maintain(:incarnation, :lim_idle_id, :lim_idle_upper);
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT upper AS lim_idle_upper FROM decoupled.frontiers WHERE name = 'lim_idle' \gset
SELECT 'lost race' AS case_name, * FROM pg_temp.idle(:incarnation, :lim_idle_id, :lim_idle_upper - 1);
SELECT 'nothing changed' AS case_name, * FROM pg_temp.idle(:incarnation, :lim_idle_id, :lim_idle_upper);
SELECT f.upper = s.upper AS view_at_input_upper
  FROM decoupled.frontiers f, decoupled.frontiers s WHERE f.name = 'lim_idle' AND s.name = 'lim_src';
-- Nor may a replica move an upper far past the clock.
SELECT 'replica append at the end of time' AS case_name,
       pg_temp.attempt(format($$SELECT decoupled.replica_append(%s, %s, '[]', %s,
                                                               9223372036854775807)$$,
                              :incarnation, :lim_idle_id, upper)) AS outcome
  FROM decoupled.frontiers WHERE name = 'lim_idle';
INSERT INTO lim_src VALUES (1), (2);
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT upper AS lim_idle_upper FROM decoupled.frontiers WHERE name = 'lim_idle' \gset
SELECT 'a change to compute' AS case_name, * FROM pg_temp.idle(:incarnation, :lim_idle_id, :lim_idle_upper);
SELECT upper = :lim_idle_upper AS unmoved FROM decoupled.frontiers WHERE name = 'lim_idle';
SELECT caught_up FROM decoupled.replica_maintain(:incarnation, :lim_idle_id, :lim_idle_upper);
SELECT n FROM lim_idle;
SELECT decoupled.verify('lim_idle');
SELECT 'fenced' AS case_name, pg_temp.attempt(format(
    $$SELECT * FROM decoupled.replica_advance_idle(%s, ARRAY[%s::bigint], ARRAY[0::bigint])$$,
    :old_incarnation, :lim_idle_id)) AS outcome;
-- Several views' steps in one call (replica_maintain_many): in the order
-- given, each view's error returned with it (the others stepped), the
-- requirements of those stepped advanced with their progress; a fenced
-- incarnation fails the whole call.
INSERT INTO lim_src VALUES (3);
SELECT decoupled.tick_tables() >= 1 AS ticked;
SELECT upper AS lim_idle_upper FROM decoupled.frontiers WHERE name = 'lim_idle' \gset
SELECT m.lifetime_id = :lim_idle_id AS is_lim_idle, m.upper > :lim_idle_upper AS moved,
       m.caught_up, m.error_state, m.error_message
  FROM decoupled.replica_maintain_many(:incarnation, ARRAY[-1, :lim_idle_id]::bigint[],
                                       ARRAY[0, :lim_idle_upper]::bigint[], 1000) m;
SELECT n FROM lim_idle;
SELECT decoupled.verify('lim_idle');
SELECT r.frontier = f.upper - 1 AS requirement_follows_progress
  FROM decoupled.requirements r JOIN decoupled.frontiers f ON f.name = r.required_by
 WHERE r.required_by = 'lim_idle';
SELECT 'many: lost race' AS case_name, m.upper > :lim_idle_upper AS winner_upper, m.error_state
  FROM decoupled.replica_maintain_many(:incarnation, ARRAY[:lim_idle_id]::bigint[],
                                       ARRAY[:lim_idle_upper]::bigint[], 1000) m;
SELECT case_name, pg_temp.attempt(s) AS outcome FROM (VALUES
    ('many: fenced', format($$SELECT * FROM decoupled.replica_maintain_many(%s, ARRAY[%s::bigint],
                                ARRAY[0::bigint], 1000)$$, :old_incarnation, :lim_idle_id)),
    ('many: lengths differ', format($$SELECT * FROM decoupled.replica_maintain_many(%s,
                                ARRAY[%s::bigint], '{}', 1000)$$, :incarnation, :lim_idle_id))
) AS t(case_name, s);

-- Bounds: an append's new upper at most 10 s past the clock (else it pulls
-- every later tick and the oracle along), a view's as_of not in the
-- future, replica counts up to 64; NULL arguments are 22004.
SELECT upper AS lim_upper FROM decoupled.frontiers WHERE name = 'lim_t' \gset
SELECT case_name, pg_temp.attempt(s) AS outcome FROM (VALUES
    ('append at the end of time',
     format($$SELECT decoupled.append('lim_t', '[]', %s, 9223372036854775807)$$, :lim_upper)),
    ('append an hour ahead',
     format($$SELECT decoupled.append('lim_t', '[]', %1$s, %1$s + 3600000)$$, :lim_upper)),
    ('view as of the end of time',
     $$SELECT decoupled.create_materialized_view('lim_future', 'SELECT id FROM lim_t',
                                                 as_of => 9223372036854775807)$$),
    ('65 replicas', $$SELECT decoupled.create_cluster('lim_big', 65)$$),
    ('100,000 replicas', $$SELECT decoupled.alter_cluster('default', 100000)$$),
    ('managed NULL', $$SELECT decoupled.create_cluster('lim_null', 1, NULL)$$),
    ('retention NULL', $$SELECT decoupled.prune_status_history(NULL)$$),
    ('retention negative', $$SELECT decoupled.prune_status_history('-1 day')$$),
    ('retain_history NULL',
     $$SELECT decoupled.create_source('lim_rn', 'counter', retain_history => NULL)$$),
    ('cluster NULL',
     $$SELECT decoupled.create_materialized_view('lim_nc', 'SELECT id FROM lim_t', cluster => NULL)$$),
    ('incarnation NULL', $$SELECT decoupled.retire_incarnation('default', NULL)$$),
    ('wait for an upper NULL', $$SELECT decoupled.wait_for_upper('lim_t', NULL)$$),
    ('wait timeout NULL', $$SELECT decoupled.wait_for_upper('lim_t', 1, NULL)$$),
    ('wait for the controller NULL', $$SELECT decoupled.wait_for_controller(NULL)$$),
    ('wait for capture NULL', $$SELECT decoupled.wait_for_capture(NULL)$$),
    ('dry run NULL', $$SELECT * FROM decoupled.dry_run(NULL)$$)
) AS t(case_name, s);
-- Within the bound, appends go on.
SELECT pg_temp.attempt(format($$SELECT decoupled.append('lim_t', '[]', %1$s, %1$s + 1000)$$,
                              :lim_upper)) AS within_bound;

-- ZD002: a replica step on what the catalog dropped meanwhile; a user's
-- append to a dropped collection stays 42704 (a replica's append to a
-- table is refused before: 42501).
DO $$ BEGIN PERFORM decoupled.drop('lim_t'); END $$;
SELECT case_name, pg_temp.attempt(s) AS outcome FROM (VALUES
    ('replica append, dropped',
     format($$SELECT decoupled.replica_append(%s, %s, '[]', 0, 1)$$, :incarnation, :lim_t_id)),
    ('replica step, dropped',
     format($$SELECT * FROM decoupled.replica_maintain(%s, %s, 0)$$, :incarnation, :lim_t_id)),
    ('user append, dropped', $$SELECT decoupled.append('lim_t', '[]', 0, 1)$$)
) AS t(case_name, s);

DO $$ BEGIN
    PERFORM decoupled.replica_stop(incarnation) FROM decoupled.cluster_replicas
      WHERE cluster = 'lim';
    PERFORM decoupled.drop('lim_idle');
    PERFORM decoupled.drop('lim_src');
    PERFORM decoupled.drop_cluster('lim');
    PERFORM decoupled.drop('lim_held');
    PERFORM decoupled.finalize_dropped();
END $$;
DROP TABLE lim_held, lim_t, lim_src;
DROP DOMAIN lim_positive, lim_required;

-- Where a relation would be created, and what names no relation: the
-- temporary schema is refused (the relation would go with the session
-- while the catalog keeps its object), an empty search_path says so as
-- PostgreSQL does, an OID that names no relation and a table without
-- columns are refused clearly; a very long wait is "for ever", not an
-- overflow; dry_run reads calls in any case.
CREATE TABLE lim_perm (id int PRIMARY KEY) WITH (decoupled.registered = true);
SET search_path = pg_temp, public;
SELECT case_name, regexp_replace(regress_try(s), 'pg_temp_[0-9]+', 'pg_temp_N') AS outcome FROM (VALUES
    ('view in pg_temp', $$SELECT decoupled.create_materialized_view('lim_tmp', 'SELECT 1 AS x')$$),
    ('familiar view in pg_temp', $$CREATE MATERIALIZED VIEW lim_tmp WITH (decoupled.maintained)
                                   AS SELECT 1 AS x$$),
    ('source in pg_temp', $$SELECT decoupled.create_source('lim_tmp', 'counter')$$),
    ('sink into pg_temp', $$SELECT decoupled.create_sink('lim_tmp', 'lim_perm', 'lim_out')$$)
) AS t(case_name, s);
SET search_path = '';
SELECT public.regress_try($$SELECT decoupled.create_materialized_view('lim_tmp', 'SELECT 1 AS x')$$)
    AS empty_path;
RESET search_path;
CREATE TABLE lim_nocols ();
SELECT case_name, regress_try(s) AS outcome FROM (VALUES
    ('OID 0', $$SELECT decoupled.register_table(0::regclass)$$),
    ('OID of nothing', $$SELECT decoupled.register_table(999999::regclass)$$),
    ('no columns', $$SELECT decoupled.register_table('lim_nocols')$$),
    ('wait for ever, already past', $$SELECT decoupled.wait_for_upper('lim_perm', 0, '300000 years')$$)
) AS t(case_name, s);
SELECT action, kind, name FROM decoupled.dry_run('select Decoupled.create_cluster(''lim_dry'')');
SELECT decoupled.unregister_table('lim_perm');
DROP TABLE lim_perm, lim_nocols;
