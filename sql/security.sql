-- Who runs what as whom (docs/architecture.md, "Security model"), tried as
-- an attacker would: a member of decoupled_admin who is not a superuser
-- (sec_admin) and an ordinary role (sec_user).
--   1. no extension code resolves names in a caller's search_path: a
--      lookalike of every pg_catalog function and operator the extension
--      calls, first on the caller's path, never runs as a superuser;
--   2. a view's computation leaves no setting behind, in a replica or in
--      verify()'s caller;
--   3. "may the caller read this" asks the effective user, also inside a
--      view computed as its owner in a replica's superuser session;
--   4. no internal helper is callable: the functions PUBLIC may execute are
--      listed below, each a public entry point with its own checks;
--   5. every collection kind's own relation gates every path to its
--      history (AS OF reads, holds, subscriptions, sinks).
\set SHOW_CONTEXT never
CREATE ROLE sec_admin IN ROLE decoupled_admin;
CREATE ROLE sec_user;
CREATE SCHEMA sec AUTHORIZATION sec_admin;
CREATE SCHEMA evil AUTHORIZATION sec_admin;
GRANT USAGE ON SCHEMA sec, evil TO PUBLIC;

-- Wait until `name` has caught up with every registered table's latest tick.
CREATE FUNCTION sec_caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT max(upper) - 1 FROM decoupled.frontiers f
                                             JOIN decoupled.objects o USING (name)
                                            WHERE o.kind = 'table'), '60s') > 0
$$;

-- A table nobody but the superuser may read, registered, and a view of it.
CREATE TABLE secret (k int PRIMARY KEY, v int NOT NULL);
INSERT INTO secret VALUES (1, 42);
SELECT decoupled.register_table('secret') > 0 AS registered;
SELECT decoupled.create_materialized_view('secret_mv', 'SELECT k, v FROM secret') > 0 AS created;
-- A source closed to PUBLIC by its creator.
SELECT decoupled.create_source('closed_counter', 'counter', options => '{"tick": "50ms"}') > 0
    AS created;
REVOKE SELECT ON closed_counter FROM PUBLIC;

------------------------------------------------------------------------------
-- 1. Lookalikes on the caller's path
------------------------------------------------------------------------------
SET ROLE sec_admin;
CREATE TABLE evil.trace (fn text, runner name, super boolean);
GRANT INSERT, SELECT ON evil.trace TO PUBLIC;
-- Every pg_catalog function whose name the extension's SQL and PL/pgSQL
-- bodies call ("any" arguments become text, the usual way to shadow
-- format()), and every operator on the types the catalog uses.
DO $$
DECLARE
    f        record;
    v_body   text;
    v_made   integer := 0;
BEGIN
    FOR f IN
        SELECT p.proname, p.oid,
               replace(replace(pg_get_function_identity_arguments(p.oid),
                               'VARIADIC "any"', 'VARIADIC text[]'), '"any"', 'text') AS args,
               format_type(p.prorettype, NULL) AS ret
          FROM pg_proc p
         WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
           AND NOT p.proretset
           AND (p.prorettype = 'void'::regtype
                OR (SELECT t.typtype <> 'p' FROM pg_type t WHERE t.oid = p.prorettype))
           AND NOT EXISTS (SELECT FROM unnest(p.proargtypes::oid[]) a JOIN pg_type t ON t.oid = a
                            WHERE t.typtype = 'p' AND t.oid <> '"any"'::regtype)
           AND EXISTS (SELECT FROM pg_proc d JOIN pg_language l ON l.oid = d.prolang
                        WHERE d.pronamespace = 'decoupled'::regnamespace
                          AND l.lanname IN ('sql', 'plpgsql')
                          AND d.prosrc ~ ('\m' || p.proname || '\s*\('))
    LOOP
        v_body := format('BEGIN INSERT INTO evil.trace SELECT %L, current_user, rolsuper '
                         'FROM pg_catalog.pg_roles WHERE rolname = current_user; RETURN%s; END',
                         f.proname, CASE WHEN f.ret = 'void' THEN '' ELSE ' NULL' END);
        BEGIN
            EXECUTE format('CREATE FUNCTION evil.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
                           f.proname, f.args, f.ret, v_body);
            v_made := v_made + 1;
        EXCEPTION WHEN duplicate_function OR invalid_function_definition THEN
            NULL;  -- two pg_catalog overloads that differ only in "any"
        END;
    END LOOP;
    FOR f IN
        SELECT o.oprname, o.oid, format_type(o.oprleft, NULL) AS l,
               format_type(o.oprright, NULL) AS r, format_type(o.oprresult, NULL) AS ret
          FROM pg_operator o
         WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprleft <> 0
           AND o.oprleft IN ('bigint'::regtype, 'integer'::regtype, 'text'::regtype,
                             'jsonb'::regtype, 'oid'::regtype, 'boolean'::regtype,
                             'interval'::regtype, 'name'::regtype, 'timestamptz'::regtype,
                             'bigint[]'::regtype, 'text[]'::regtype)
    LOOP
        EXECUTE format('CREATE FUNCTION evil.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
                       f.oid, f.l, f.r, f.ret,
                       format('BEGIN INSERT INTO evil.trace SELECT %L, current_user, rolsuper '
                              'FROM pg_catalog.pg_roles WHERE rolname = current_user; '
                              'RETURN NULL; END', f.oprname));
        EXECUTE format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = evil.op_%s)',
                       f.oprname, f.l, f.r, f.oid);
        v_made := v_made + 1;
    END LOOP;
    RAISE NOTICE 'lookalikes: %', CASE WHEN v_made > 100 THEN 'hundreds' ELSE v_made::text END;
END
$$;
-- The tell-tale ones are there.
SELECT 'evil.format(text,text[])'::regprocedure IS NOT NULL AS format,
       'evil.set_config(text,text,boolean)'::regprocedure IS NOT NULL AS set_config,
       'evil.+(bigint,integer)'::regoperator IS NOT NULL AS plus;

-- sec_admin's own table and a function that meddles with settings.
CREATE TABLE sec.t (k int PRIMARY KEY, v int NOT NULL);
INSERT INTO sec.t VALUES (1, 10), (2, 20);
CREATE FUNCTION sec.meddle(v int) RETURNS int LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'evil, pg_catalog', false);
    PERFORM pg_catalog.set_config('statement_timeout', '1ms', false);
    PERFORM pg_catalog.set_config('sec.meddled', 'yes', false);
    RETURN v;
END
$$;
-- A function that tries, as whoever runs it, every way to the secret table.
CREATE FUNCTION sec.peek(v int) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    r text := '';
BEGIN
    BEGIN
        PERFORM decoupled.acquire_hold('secret');
        r := r || 'hold:allowed ';
    EXCEPTION WHEN insufficient_privilege THEN r := r || 'hold:denied ';
    END;
    BEGIN
        PERFORM decoupled.subscribe('secret', NULL, 1);
        r := r || 'subscribe:allowed ';
    EXCEPTION WHEN insufficient_privilege THEN r := r || 'subscribe:denied ';
    END;
    BEGIN
        PERFORM decoupled.verify('secret_mv');
        r := r || 'verify:allowed ';
    EXCEPTION WHEN insufficient_privilege THEN r := r || 'verify:denied ';
    END;
    BEGIN
        PERFORM decoupled._subscribe_batch(
            (SELECT lifetime_id FROM decoupled.objects WHERE name = 'secret'), 0, 1, NULL);
        r := r || 'batch:allowed';
    EXCEPTION WHEN insufficient_privilege THEN r := r || 'batch:denied';
    END;
    RETURN r;
END
$$;

-- Every entry point sec_admin may call, with the lookalikes first on its
-- path (so this block's own statements use no operator either).
SET search_path = sec, evil, pg_catalog;
SELECT decoupled.register_table('t') IS NOT NULL AS registered;
SELECT decoupled.create_source('sec_src', 'counter') IS NOT NULL AS created;
SELECT decoupled.create_materialized_view('sec_mv', 'SELECT k, v FROM t') IS NOT NULL AS created;
SELECT decoupled.create_materialized_view('sec_meddler', 'SELECT k, meddle(v) AS v FROM t')
       IS NOT NULL AS created;
SELECT decoupled.create_materialized_view('sec_peeker', 'SELECT k, peek(v) AS p FROM t')
       IS NOT NULL AS created;
SELECT decoupled.create_sink('sec_sink', 'sec_mv', 'sec_sink_rows') IS NOT NULL AS created;
SELECT pg_catalog.current_setting('search_path') AS caller_path_kept;
SELECT decoupled.tick_tables() IS NOT NULL AS ticked;
SELECT decoupled.release_hold(decoupled.acquire_hold('t'));
SELECT decoupled.catalog_version() IS NOT NULL AS versioned;
SELECT decoupled.publish_holds() IS NOT NULL AS holds_published;
SELECT decoupled.publish_bounds() IS NOT NULL AS published;
SELECT decoupled.apply_compaction() IS NOT NULL AS applied;
SELECT decoupled.drop('sec_src');
SELECT decoupled.finalize_dropped() IS NOT NULL AS finalized;
RESET search_path;
RESET ROLE;

SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT sec_caught_up('sec_mv'), sec_caught_up('sec_meddler'), sec_caught_up('sec_peeker');
SELECT decoupled.wait_for_upper('sec_sink', (SELECT upper FROM decoupled.frontiers
                                              WHERE name = 'sec_mv') - 1, '60s') > 0 AS sunk;
-- The views over sec_admin's table are right, and nothing ran as a superuser.
SELECT decoupled.verify('sec_mv') AS mv_verifies, decoupled.verify('sec_meddler') AS meddler_verifies;
SELECT count(*) FILTER (WHERE super) AS lookalikes_run_as_superuser FROM evil.trace;
SELECT DISTINCT fn FROM evil.trace WHERE super ORDER BY 1;
SELECT rolsuper AS sec_admin_is_superuser FROM pg_roles WHERE rolname = 'sec_admin';

------------------------------------------------------------------------------
-- 2. No setting leaks out of a computation
------------------------------------------------------------------------------
-- verify() computes sec_meddler as its owner in this session: the settings
-- its function changed are restored.
SELECT current_setting('search_path') AS path_before \gset
SELECT decoupled.verify('sec_meddler') AS verifies;
SELECT current_setting('search_path') = :'path_before' AS search_path_kept,
       current_setting('statement_timeout') AS statement_timeout,
       coalesce(current_setting('sec.meddled', true), '') AS meddled;
SET ROLE sec_admin;
SELECT decoupled.verify('sec_meddler') AS verifies;
SELECT current_setting('search_path') = :'path_before' AS search_path_kept,
       current_setting('statement_timeout') AS statement_timeout,
       coalesce(current_setting('sec.meddled', true), '') AS meddled;
RESET ROLE;
-- In the replica, the view kept being maintained (a leaked search_path
-- would have run evil.+ as a superuser, counted above) and a leaked
-- statement_timeout would stall it: one more change goes through.
UPDATE sec.t SET v = v + 1;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT sec_caught_up('sec_meddler');
SELECT * FROM sec.sec_meddler ORDER BY k;
SELECT name, status, error FROM decoupled.object_statuses
 WHERE name IN ('sec_mv', 'sec_meddler', 'sec_peeker') ORDER BY name;
SELECT count(*) FILTER (WHERE super) AS lookalikes_run_as_superuser FROM evil.trace;

------------------------------------------------------------------------------
-- 3. Privilege checks ask the effective user
------------------------------------------------------------------------------
-- sec_peeker was computed by the replica (a superuser session) as its
-- owner, who may not read "secret": every path was refused.
SELECT k, p FROM sec.sec_peeker ORDER BY k;
SELECT decoupled.verify('sec_peeker') AS verifies;
-- Called by a superuser, a SECURITY DEFINER function of sec_admin acts as
-- sec_admin: the check is on its effective user, not the session's.
SET ROLE sec_admin;
CREATE FUNCTION sec.hold_secret() RETURNS text LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    PERFORM decoupled.acquire_hold('secret');
    RETURN 'allowed';
EXCEPTION WHEN insufficient_privilege THEN
    RETURN 'denied';
END
$$;
RESET ROLE;
SELECT sec.hold_secret() AS definer_hold;
SET ROLE sec_admin;
SELECT regress_try($$SELECT decoupled.acquire_hold('secret')$$) AS admin_hold;
SELECT regress_try($$SELECT decoupled.verify('secret_mv')$$) AS admin_verify;
RESET ROLE;

------------------------------------------------------------------------------
-- 4. Internal helpers are not callable
------------------------------------------------------------------------------
-- What an ordinary role may execute: only these, each a public entry point
-- that makes its own checks (_history_gate and _history_gate_before are
-- the AS OF gates themselves,
-- _shared_holds and _catalog_inventory back public views and dry_run,
-- _kept_* and _weighted_sum are the arithmetic a view's owner evaluates
-- over kept sums,
-- _visible_error and _capture_error back the status views).
SELECT p.oid::regprocedure AS executable_by_public
  FROM pg_proc p
 WHERE p.pronamespace = 'decoupled'::regnamespace
   AND has_function_privilege('sec_user', p.oid, 'EXECUTE')
 ORDER BY p.oid::regprocedure::text;
SET ROLE sec_user;
SELECT regress_try($$SELECT * FROM decoupled._subscribe_batch(1, 0, 1, NULL)$$) AS batch;
SELECT regress_try($$SELECT decoupled._subscribe_start('secret', NULL, NULL)$$) AS start;
SELECT regress_try($$SELECT decoupled._subscribe_upper(1)$$) AS upper;
SELECT regress_try($$SELECT decoupled._acquire_hold('secret', NULL)$$) AS impl;
SELECT regress_try($$SELECT decoupled._verify('secret_mv', NULL)$$) AS impl;
SELECT regress_try($$SELECT decoupled._create_plan_view('x', 'SELECT 1')$$) AS plan_view;
SELECT regress_try($$SELECT decoupled._caller()$$) AS caller;
-- Everyone may read the catalog version.
SELECT decoupled.catalog_version() > 0 AS versioned;
RESET ROLE;
-- Even a superuser cannot create a written plan outside
-- create_materialized_view (no caller recorded).
SELECT regress_try($$SELECT decoupled._create_plan_view('x', 'SELECT 1')$$) AS plan_view;

------------------------------------------------------------------------------
-- 5. A collection's own relation gates every path to its history
------------------------------------------------------------------------------
SELECT decoupled.wait_for_upper('closed_counter', decoupled.oracle_now(), '60s') > 0 AS ticking;
SELECT max(upper) - 1 AS t_secret FROM decoupled.frontiers WHERE name = 'secret' \gset
SELECT upper - 1 AS t_counter FROM decoupled.frontiers WHERE name = 'closed_counter' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_history' AS h_secret
  FROM decoupled.objects WHERE name = 'secret' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_history' AS h_counter
  FROM decoupled.objects WHERE name = 'closed_counter' \gset
SELECT 'decoupled_storage.c' || lifetime_id || '_history' AS h_secret_mv
  FROM decoupled.objects WHERE name = 'secret_mv' \gset
SELECT sec_caught_up('secret_mv');
SET ROLE sec_user;
-- A registered table without a grant.
SELECT regress_try($$SELECT decoupled.acquire_hold('secret')$$) AS hold;
SELECT regress_try($$SELECT count(*) FROM decoupled.subscribe('secret', NULL, 1)$$) AS subscribe;
SET decoupled.as_of = :t_secret;
SELECT regress_try('SELECT count(*) FROM secret') AS as_of_read;
SELECT regress_try('SELECT count(*) FROM ' || :'h_secret') AS history_read;
RESET decoupled.as_of;
-- A source closed to PUBLIC.
SELECT regress_try($$SELECT decoupled.acquire_hold('closed_counter')$$) AS hold;
SELECT regress_try($$SELECT count(*) FROM decoupled.subscribe('closed_counter', NULL, 1)$$)
    AS subscribe;
SET decoupled.as_of = :t_counter;
SELECT regress_try('SELECT count(*) FROM closed_counter') AS as_of_read;
SELECT regress_try('SELECT count(*) FROM ' || :'h_counter') AS history_read;
RESET decoupled.as_of;
-- A materialized view (readable by its creator only).
SELECT regress_try($$SELECT decoupled.acquire_hold('secret_mv')$$) AS hold;
SELECT regress_try($$SELECT count(*) FROM decoupled.subscribe('secret_mv', NULL, 1)$$)
    AS subscribe;
SELECT regress_try($$SELECT decoupled.verify('secret_mv')$$) AS verify;
SET decoupled.as_of = :t_secret;
SELECT regress_try('SELECT count(*) FROM secret_mv') AS as_of_read;
SELECT regress_try('SELECT count(*) FROM ' || :'h_secret_mv') AS history_read;
RESET decoupled.as_of;
RESET ROLE;
-- An admin without SELECT cannot sink it either.
SET ROLE sec_admin;
SELECT regress_try($$SELECT decoupled.create_sink('sec_leak', 'closed_counter', 'sec.leak')$$)
    AS sink;
RESET ROLE;
-- Granted, the source reads AS OF again.
GRANT SELECT ON closed_counter TO sec_user;
SET ROLE sec_user;
SET decoupled.as_of = :t_counter;
SELECT count(*) > 0 AS as_of_read FROM closed_counter;
SELECT count(*) > 0 AS history_read FROM :h_counter;
RESET decoupled.as_of;
RESET ROLE;
-- The gate checks the reader at every read, whatever read the same
-- collection in the same snapshot before (it reads the catalog directly,
-- with the statement's snapshot): within one repeatable-read snapshot the
-- owner reads the history, sec_user does not, a grant lets sec_user read
-- it and a revoke stops the next read.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL decoupled.as_of = :t_secret;
SELECT count(*) >= 0 AS owner_history_read FROM :h_secret;
SET LOCAL ROLE sec_user;
SELECT regress_try('SELECT count(*) FROM ' || :'h_secret') AS other_reader;
RESET ROLE;
GRANT SELECT ON secret TO sec_user;
SET LOCAL ROLE sec_user;
SELECT count(*) >= 0 AS granted_read FROM :h_secret;
RESET ROLE;
REVOKE SELECT ON secret FROM sec_user;
SET LOCAL ROLE sec_user;
SELECT regress_try('SELECT count(*) FROM ' || :'h_secret') AS revoked_read;
COMMIT;
-- Column privileges: a reader granted SELECT on some columns reads them
-- in the latest state as from a plain table, and nothing else; history
-- (AS OF) needs SELECT on the table, as every path to it does.
GRANT SELECT (k) ON secret TO sec_user;
SET ROLE sec_user;
SELECT count(k) >= 0 AS granted_column, count(*) >= 0 AS no_column FROM secret;
SELECT count(*) >= 0 AS granted_in_subquery FROM (SELECT k FROM secret WHERE k > 0) s;
SELECT regress_try('SELECT v FROM secret') AS other_column;
SELECT regress_try('SELECT k FROM secret WHERE v > 0') AS other_column_in_where;
SELECT regress_try('SELECT s FROM secret s') AS whole_row;
SELECT regress_try('SELECT * FROM secret') AS star;
PREPARE sec_columns AS SELECT count(k) >= 0 FROM secret;
EXECUTE sec_columns;
SET decoupled.as_of = :t_secret;
SELECT regress_try('EXECUTE sec_columns') AS prepared_as_of;
SELECT regress_try('SELECT count(k) FROM secret') AS column_as_of;
RESET decoupled.as_of;
DEALLOCATE sec_columns;
RESET ROLE;
REVOKE SELECT (k) ON secret FROM sec_user;

------------------------------------------------------------------------------
-- 6. Only a table's owner unregisters it
------------------------------------------------------------------------------
-- Registering needs the table's ownership; so does dropping its history
-- and giving back its replica identity, by any path: a member of
-- decoupled_admin may drop views and sources, not another role's table's
-- history.
SET ROLE sec_admin;
SELECT regress_try($$SELECT decoupled.unregister_table('secret')$$) AS unregister_other;
SELECT regress_try($$SELECT decoupled.drop('secret')$$) AS drop_other;
SELECT regress_try($$SELECT decoupled.drop('secret', cascade => true)$$) AS drop_other_cascade;
SELECT regress_try($$ALTER TABLE secret SET (decoupled.registered = false)$$) AS alter_other;
RESET ROLE;
SELECT count(*) AS still_registered FROM decoupled.objects WHERE name = 'secret' AND kind = 'table';
-- Its own table, registered and unregistered by sec_admin.
SET ROLE sec_admin;
CREATE TABLE sec.own (k int PRIMARY KEY);
SELECT decoupled.register_table('sec.own') > 0 AS registered_own;
SELECT decoupled.unregister_table('sec.own');
SELECT decoupled.register_table('sec.own') > 0 AS registered_again;
SELECT decoupled.drop('own');
DROP TABLE sec.own;
RESET ROLE;

------------------------------------------------------------------------------
-- 7. An object's error is shown to those who may read it
------------------------------------------------------------------------------
-- A step's error may quote the data it computed from: object_statuses and
-- status_history show it to roles that may SELECT the object, and to the
-- others only that there is one.
CREATE FUNCTION sec.reveal(v int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF v = 42 THEN
        RAISE EXCEPTION 'secret value % rejected', v;
    END IF;
    RETURN v;
END
$$;
SELECT decoupled.create_materialized_view('sec_failing', 'SELECT sec.reveal(v) AS r FROM secret')
       > 0 AS created;
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN EXISTS (SELECT FROM decoupled.object_statuses
                           WHERE name = 'sec_failing' AND status = 'stalled');
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT status, error FROM decoupled.object_statuses WHERE name = 'sec_failing';
SET ROLE sec_user;
SELECT status, error FROM decoupled.object_statuses WHERE name = 'sec_failing';
SELECT DISTINCT error FROM decoupled.status_history
 WHERE name = 'sec_failing' AND status = 'stalled';
RESET ROLE;
GRANT SELECT ON sec_failing TO sec_user;
SET ROLE sec_user;
SELECT status, error FROM decoupled.object_statuses WHERE name = 'sec_failing';
RESET ROLE;
SELECT decoupled.drop('sec_failing');
DROP FUNCTION sec.reveal(int);
-- A table's failing tick: the WARNING quotes the error to a caller who may
-- read the table, and to the others says only that it stalled.  (Nothing
-- legitimate makes a tick fail, so a superuser breaks its pending changes:
-- a retraction of a row that was never there.)
DO $$
BEGIN
    EXECUTE format('INSERT INTO decoupled_storage.c%s_pending (mz_diff, k, v) VALUES (-1, 7, 4242)',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'secret'));
END
$$;
SET ROLE sec_admin;
SELECT has_table_privilege('secret', 'SELECT') AS sec_admin_reads_secret;
SELECT decoupled.tick_tables() >= 0 AS ticked;
RESET ROLE;
SELECT status FROM decoupled.object_statuses WHERE name = 'secret';
-- Reported once a stall; this one is new again for the superuser.
DO $$
BEGIN
    EXECUTE format('DELETE FROM decoupled.table_health WHERE lifetime_id = %s',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'secret'));
END
$$;
SELECT decoupled.tick_tables() >= 0 AS ticked;
DO $$
BEGIN
    EXECUTE format('DELETE FROM decoupled_storage.c%s_pending WHERE mz_diff = -1 AND k = 7',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'secret'));
END
$$;
SELECT decoupled.tick_tables() >= 0 AS ticked;
SELECT status FROM decoupled.object_statuses WHERE name = 'secret';

-- Clean up.
SELECT decoupled.drop('sec_sink'), decoupled.drop('sec_peeker'), decoupled.drop('sec_meddler'),
       decoupled.drop('sec_mv'), decoupled.drop('secret_mv'), decoupled.drop('closed_counter');
SELECT decoupled.unregister_table('sec.t'), decoupled.unregister_table('secret');
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
DROP SCHEMA sec CASCADE;
DROP TABLE secret;
DROP FUNCTION sec_caught_up(text);
DROP OWNED BY sec_admin, sec_user;
DROP ROLE sec_admin;
DROP ROLE sec_user;
RESET client_min_messages;
