-- A replica's errors are health (C5.3, C6): a view whose computation fails —
-- with any SQLSTATE, 42704 included, which a replica once took for "dropped
-- meanwhile" and then silently stopped maintaining the view — is reported
-- `stalled` with the error, in its current health and in the history; the
-- replica goes on with its other work, retries the view, and the view runs
-- again once the cause is gone.  Only the protocol's own SQLSTATEs (class
-- ZD) mean fenced, dropped meanwhile or a lost race — raised by the
-- extension, never by a view's code.
\set SHOW_CONTEXT never
-- Waits until `name` caught up with the latest tick of re_t.
CREATE FUNCTION pg_temp.caught_up(name text) RETURNS boolean LANGUAGE sql AS $$
    SELECT decoupled.wait_for_upper(name, (SELECT upper - 1 FROM decoupled.frontiers
                                            WHERE name = 're_t'), '60s') > 0
$$;
-- Waits (a bounded poll: health is reported asynchronously, and nothing
-- signals it) until `name` shows `status` on the default replica.
CREATE FUNCTION pg_temp.wait_status(name text, status text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    FOR attempt IN 1 .. 1200 LOOP
        IF EXISTS (SELECT FROM decoupled.object_statuses s
                    WHERE s.name = wait_status.name AND s.status = wait_status.status) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN false;
END
$$;

CREATE TABLE re_t (k int);
INSERT INTO re_t VALUES (1), (2);
SELECT decoupled.register_table('re_t') > 0 AS registered;
SELECT decoupled.tick_tables() AS ticked;
-- A lookup that fails with undefined_object (42704) while re_broken says so.
-- STABLE: a view may call it.
CREATE TABLE re_broken (broken boolean NOT NULL);
CREATE FUNCTION re_lookup(k int) RETURNS int STABLE LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM public.re_broken WHERE broken) THEN
        RAISE EXCEPTION 'no lookup entry for %', k USING ERRCODE = 'undefined_object';
    END IF;
    RETURN k * 10;
END
$$;
SELECT decoupled.create_materialized_view('re_v', 'SELECT re_lookup(k) AS v FROM re_t') > 0
    AS created;
SELECT decoupled.create_materialized_view('re_n', 'SELECT count(*) AS n FROM re_t') > 0
    AS created;
SELECT pg_temp.caught_up('re_v') AS caught_up, pg_temp.caught_up('re_n') AS caught_up;
SELECT pg_temp.wait_status('re_v', 'running') AS running;
SELECT * FROM re_v ORDER BY v;

-- The lookup breaks, and the input changes: the view's next computation
-- fails.
INSERT INTO re_broken VALUES (true);
INSERT INTO re_t VALUES (3);
SELECT decoupled.tick_tables() AS ticked;
SELECT pg_temp.wait_status('re_v', 'stalled') AS stalled;
-- (Which row the computation failed on first is the plan's business.)
SELECT name, replica, status, regexp_replace(error, '\d+$', 'N') AS error
  FROM decoupled.object_statuses WHERE name = 're_v';
SELECT name, replica, status, regexp_replace(error, '\d+$', 'N') AS error
  FROM decoupled.status_history WHERE name = 're_v' AND status = 'stalled';
-- Meanwhile the replica maintains the rest.
SELECT pg_temp.caught_up('re_n') AS caught_up;
SELECT * FROM re_n;
SELECT name, status FROM decoupled.object_statuses WHERE name = 're_n';

-- The cause goes: the replica's retry catches the view up, and it runs again.
UPDATE re_broken SET broken = false;
SELECT pg_temp.caught_up('re_v') AS caught_up;
SELECT pg_temp.wait_status('re_v', 'running') AS running;
SELECT name, status, error FROM decoupled.object_statuses WHERE name = 're_v';
SELECT * FROM re_v ORDER BY v;
SELECT decoupled.verify('re_v') AS verified;

-- The protocol's SQLSTATEs raised by a view's own code mean nothing to
-- the replica: a view that raised ZD001 (fenced) kept its cluster's replica
-- restarting, every other view with it.  Nor do a cancel (57014) or a
-- failed ASSERT (P0004) it raises, which PL/pgSQL's OTHERS does not catch:
-- they failed the batch of every pass.  Raised by the code a role wrote,
-- class ZD and class 08 (a lost connection) come out as 38000, and the view
-- stalls as with any other error; the replica's incarnation stays the same
-- and it maintains the rest meanwhile.
CREATE TABLE re_raise (code text);
CREATE FUNCTION re_raising(k int) RETURNS int STABLE LANGUAGE plpgsql AS $$
DECLARE
    v_code text := (SELECT code FROM public.re_raise);
BEGIN
    IF v_code IS NOT NULL THEN
        RAISE EXCEPTION 'the view''s own % for %', v_code, k USING ERRCODE = v_code;
    END IF;
    RETURN k;
END
$$;
SELECT decoupled.create_materialized_view('re_z', 'SELECT re_raising(k) AS v FROM re_t') > 0
    AS created;
SELECT pg_temp.caught_up('re_z') AS caught_up;
SELECT pg_temp.wait_status('re_z', 'running') AS running;
SELECT i.incarnation AS incarnation_before
  FROM decoupled.catalog_replica_incarnations i JOIN decoupled.catalog_replicas r USING (replica_id)
 WHERE r.cluster = 'default' AND i.retired_at IS NULL \gset
-- Each code in turn: the view's code raises it at the next step, then
-- stops raising it.
INSERT INTO re_raise VALUES (NULL);
CREATE FUNCTION pg_temp.raise_next(code text) RETURNS void LANGUAGE sql AS $$
    UPDATE public.re_raise SET code = raise_next.code;
    INSERT INTO public.re_t SELECT max(k) + 1 FROM public.re_t;
$$;
CREATE FUNCTION pg_temp.stalled_with() RETURNS TABLE (stalled boolean, error text,
                                                      others_caught_up boolean)
LANGUAGE plpgsql AS $$
BEGIN
    stalled := pg_temp.wait_status('re_z', 'stalled');
    SELECT regexp_replace(s.error, '\d+$', 'N') INTO error
      FROM decoupled.object_statuses s WHERE s.name = 're_z';
    others_caught_up := pg_temp.caught_up('re_n');
    RETURN NEXT;
END
$$;
SELECT format('SELECT pg_temp.raise_next(%L)', c),
       'SELECT decoupled.tick_tables() > 0 AS ticked',
       'SELECT * FROM pg_temp.stalled_with()',
       'UPDATE re_raise SET code = NULL',
       'SELECT pg_temp.caught_up(''re_z'') AS caught_up, '
       '       pg_temp.wait_status(''re_z'', ''running'') AS running'
  FROM unnest(ARRAY['ZD001', 'ZD002', 'ZD003', 'ZD004', '08006', '57014', 'P0004']) c \gexec
-- verify() runs the same code in its caller's session: the error comes
-- with 38000 there too, and a context line names the SQLSTATE it asked for.
UPDATE re_raise SET code = 'ZD001';
DO $$
BEGIN
    PERFORM decoupled.verify('re_z');
EXCEPTION WHEN OTHERS THEN
    DECLARE
        v_context text;
    BEGIN
        GET STACKED DIAGNOSTICS v_context = PG_EXCEPTION_CONTEXT;
        RAISE NOTICE 'verify() failed: % %; %', SQLSTATE, regexp_replace(SQLERRM, '\d+$', 'N'),
                     substring(v_context FROM 'raised with SQLSTATE [^\n]*');
    END;
END
$$;
UPDATE re_raise SET code = NULL;
SELECT i.incarnation = :incarnation_before AS same_incarnation
  FROM decoupled.catalog_replica_incarnations i JOIN decoupled.catalog_replicas r USING (replica_id)
 WHERE r.cluster = 'default' AND i.retired_at IS NULL;
SELECT decoupled.verify('re_z') AS verified, decoupled.verify('re_n') AS verified;

DO $$ BEGIN
    PERFORM decoupled.drop('re_t', cascade => true);
    PERFORM decoupled.finalize_dropped();
END $$;
DROP TABLE re_t, re_broken, re_raise;
DROP FUNCTION re_lookup(int);
DROP FUNCTION re_raising(int);

-- Health of a process that stopped reporting (C6): a replica or adapterd
-- reports every second; one silent for 30 s (hung, gone, or in one long
-- step) shows `stalled`, and so do the objects it ran, whatever it said
-- last.  Its silence is made here by dating its last report back, in a
-- transaction that is rolled back.
SELECT decoupled.create_source('silent_src', 'counter') > 0 AS created;
SELECT decoupled.wait_for_upper('silent_src', 0, '60s') > 0 AS ticking;
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN (SELECT status = 'running' FROM decoupled.object_statuses
                    WHERE name = 'silent_src');
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
BEGIN;
UPDATE decoupled.catalog_replica_incarnations
   SET heartbeat_at = clock_timestamp() - interval '1 minute'
 WHERE retired_at IS NULL
   AND replica_id IN (SELECT replica_id FROM decoupled.catalog_replicas WHERE cluster = 'default');
UPDATE decoupled.catalog_adapter_incarnations
   SET heartbeat_at = clock_timestamp() - interval '1 minute'
 WHERE retired_at IS NULL AND adapter = 'default';
SELECT status, error ~ '^replica has not reported for [0-9]+ s$' AS says_silent
  FROM decoupled.replica_statuses WHERE name = 'default';
SELECT DISTINCT status FROM decoupled.cluster_replicas WHERE cluster = 'default';
SELECT name, status, error ~ 'has not reported' AS says_silent
  FROM decoupled.object_statuses WHERE name = 'silent_src';
SELECT status FROM decoupled.adapters WHERE name = 'default';
ROLLBACK;
SELECT status <> 'stalled' AS not_stalled
  FROM decoupled.object_statuses WHERE name = 'silent_src';
SELECT decoupled.drop('silent_src');

-- A step that never ends (a function of the view's creator sleeps) is
-- cancelled after decoupled.step_timeout, the replicas' statement_timeout
-- (applied at their heartbeats): the view stalls saying so, is retried only
-- after ten times that, and the other views of its cluster go on.
ALTER SYSTEM SET decoupled.step_timeout = '1s';
SELECT pg_reload_conf();
-- Waits for a heartbeat of every running replica of the default cluster
-- committed after `t` (a bounded poll, as wait_status).
CREATE FUNCTION pg_temp.heartbeat_after(t timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    FOR attempt IN 1 .. 1200 LOOP
        IF (SELECT bool_and(r.heartbeat_at > t) FROM decoupled.cluster_replicas r
             WHERE r.cluster = 'default' AND r.status = 'running') THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN false;
END
$$;
-- Two heartbeats: the first may have begun before the reload reached it.
SELECT pg_temp.heartbeat_after(clock_timestamp()) AND pg_temp.heartbeat_after(clock_timestamp())
       AS applied;
CREATE FUNCTION re_sleepy(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF v = 666 THEN
        PERFORM pg_sleep(3600);
    END IF;
    RETURN v;
END
$$;
CREATE TABLE re_sl (id int PRIMARY KEY);
SELECT decoupled.register_table('re_sl') > 0 AS registered;
SELECT decoupled.create_materialized_view('re_sleepy_v', 'SELECT re_sleepy(id) AS s FROM re_sl')
       > 0 AS created;
SELECT decoupled.create_materialized_view('re_awake_v', 'SELECT count(*) AS n FROM re_sl')
       > 0 AS created;
INSERT INTO re_sl VALUES (1), (666);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.wait_for_upper('re_awake_v', (SELECT upper - 1 FROM decoupled.frontiers
                                                WHERE name = 're_sl'), '120s') > 0
       AS awake_view_follows;
SELECT * FROM re_awake_v;
SELECT pg_temp.wait_status('re_sleepy_v', 'stalled') AS stalled;
SELECT error ~ 'statement timeout' AS says_why
  FROM decoupled.object_statuses WHERE name = 're_sleepy_v';
SELECT decoupled.drop('re_sleepy_v'), decoupled.drop('re_awake_v'),
       decoupled.unregister_table('re_sl');
DROP TABLE re_sl;
DROP FUNCTION re_sleepy(int);

-- A step whose owner's code catches that cancel and goes on is ended with
-- its session at twice decoupled.step_timeout: the view stalls saying so,
-- the replica opens a new session and the other views go on.  A
-- session-level advisory lock the owner's code takes in a step goes with
-- the step's transaction, not kept by the replica's long-lived session
-- (extension/step_deadline.cpp).
CREATE FUNCTION re_stubborn(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    IF v = 777 THEN
        WHILE clock_timestamp() < t0 + interval '120 s' LOOP
            BEGIN
                PERFORM pg_sleep(0.1);
            EXCEPTION WHEN query_canceled THEN
                NULL;  -- the cancel, caught and ignored
            END;
        END LOOP;
    END IF;
    RETURN v;
END
$$;
CREATE FUNCTION re_grab(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF v = 5 THEN
        PERFORM pg_advisory_lock(424242);
    END IF;
    RETURN v;
END
$$;
CREATE TABLE re_st (id int PRIMARY KEY);
SELECT decoupled.register_table('re_st') > 0 AS registered;
-- Two such views of one owner: after a step whose session ended, the
-- replica steps the others first, one such step a pass.
SELECT decoupled.create_materialized_view('re_stubborn_v', 'SELECT re_stubborn(id) AS s FROM re_st')
       > 0 AS created;
SELECT decoupled.create_materialized_view('re_stubborn_v2', 'SELECT re_stubborn(id) + 1 AS s FROM re_st')
       > 0 AS created;
SELECT decoupled.create_materialized_view('re_grab_v', 'SELECT re_grab(id) AS g FROM re_st')
       > 0 AS created;
INSERT INTO re_st VALUES (5), (777);
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.wait_for_upper('re_grab_v', (SELECT upper - 1 FROM decoupled.frontiers
                                               WHERE name = 're_st'), '120s') > 0
       AS other_view_follows;
SELECT * FROM re_grab_v ORDER BY g;
SELECT pg_temp.wait_status('re_stubborn_v', 'stalled') AS stalled,
       pg_temp.wait_status('re_stubborn_v2', 'stalled') AS stalled;
SELECT name, error ~ 'twice decoupled.step_timeout' AS says_why
  FROM decoupled.object_statuses WHERE name IN ('re_stubborn_v', 're_stubborn_v2') ORDER BY name;
-- The lock went with the step's transaction (released as it ended: a
-- bounded poll, the upper may be seen a moment before).
DO $$
BEGIN
    FOR attempt IN 1 .. 200 LOOP
        EXIT WHEN pg_try_advisory_lock(424242);
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
SELECT count(*) AS lock_now_ours FROM pg_locks
 WHERE locktype = 'advisory' AND objid = 424242 AND pid = pg_backend_pid() AND granted;
SELECT pg_advisory_unlock(424242) AS unlocked;
SELECT decoupled.drop('re_stubborn_v'), decoupled.drop('re_stubborn_v2'),
       decoupled.drop('re_grab_v'), decoupled.unregister_table('re_st');
DROP TABLE re_st;
DROP FUNCTION re_stubborn(int), re_grab(int);
ALTER SYSTEM RESET decoupled.step_timeout;
SELECT pg_reload_conf();
