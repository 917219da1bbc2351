-- Attacks a review as an attacker found (docs/architecture.md, "Security
-- model"), each a class: a role that is not a superuser must neither run
-- code with the extension's rights nor read or write what it may not.
--   1. verify() uses only scratch tables it made itself: tables of its
--      names made beforehand in the session's temporary schema, with
--      triggers, are refused, not written as a superuser;
--   2. the planner never calls a role's leaky operator on the statistics
--      of a collection that role may not read (history views, AS OF reads);
--   3. capture's error, which may quote a row, is masked in every function
--      that returns it;
--   4. a sink's columns keep their types by OID: a type renamed and another
--      made under its old name is not picked up;
--   5. a constraint added to a domain in use, by a role that is not a
--      superuser, is refused;
--   6. append() writes only into a collection its caller owns, and the
--      replica protocol, which only superusers and decoupled_replica's
--      members may speak, only into what a replica maintains;
--   and domains are looked through range types, and checks through
--   operators;
--   7. values of an append are converted as the collection's owner when a
--      column reaches a domain (a superuser's check may call anyone's
--      function), and a failed conversion is diagnosed with the types by
--      OID, never by a name another type may have taken;
--   8. dry_run() runs only the call it is given in the caller's
--      search_path; every other function of the extension sets its own;
--   9. nothing a role builds on a history view keeps a dropped
--      collection's storage;
--  10. a schema's owner drops others' views and sinks there only with
--      their history's rights (creator, admin, superuser);
--  11. a view's steps and a replica's appends run no domain check with
--      the extension's rights;
--  12. a view's query is analyzed as its creator only: parse analysis
--      converts a literal of an array, composite or range of a domain at
--      once, running the domain's check, which must never run as the
--      extension's owner.
--  13. a registered table stays an ordinary table (an ON SELECT rule would
--      make it a view, whose query capture would run as a superuser when
--      it takes the table again), and a domain in use gets SET NOT NULL
--      only from a superuser;
--  14. decoupled.as_of does not cross into another role's SECURITY
--      DEFINER function: its caller must not choose the time of what it
--      reads with its owner's rights.
--  15. range types whose subtype_diff an ordinary role owns;
--  16. CREATE SCHEMA's own statements pass the DDL checks;
--  17. verify() runs the owner's code in the caller's session: a caller
--      who cannot act as the owner must have no temporary relations (nor
--      types, 20) there,
--      which the owner's functions would find before their own;
--  18. a role that may only read a collection adds at most a few
--      arrangements (indexes) to its storage, which every write of the
--      collection's history pays for;
--  19. functions everyone may call, with the largest arguments;
--  20. verify() and the caller's temporary types (a domain the owner's
--      functions would find before their own);
--  21. a cascade of ALTER TYPE / ALTER TABLE reaching another role's view
--      drops it only with the rights DROP needs;
--  22. verify() computes with the settings every computation uses, not its
--      caller's (standard_conforming_strings), and leaves no cursor of the
--      owner's code behind.

\set SHOW_CONTEXT never
CREATE ROLE atk_user;
CREATE ROLE atk_admin IN ROLE decoupled_admin;
CREATE SCHEMA atk AUTHORIZATION atk_admin;
GRANT USAGE ON SCHEMA atk TO PUBLIC;

CREATE TABLE payroll (id int PRIMARY KEY, pw text NOT NULL);
INSERT INTO payroll SELECT g, 'password_' || g FROM generate_series(1, 300) g;
SELECT decoupled.register_table('payroll') > 0 AS registered;
SELECT decoupled.create_materialized_view('payroll_mv', 'SELECT id, pw FROM payroll') > 0
    AS created;
GRANT SELECT ON payroll_mv TO atk_user;
SELECT decoupled.wait_for_upper('payroll_mv', (SELECT upper - 1 FROM decoupled.frontiers
                                                WHERE name = 'payroll'), '60s') > 0 AS caught_up;

------------------------------------------------------------------------------
-- 1. verify() and the caller's temporary tables
SET ROLE atk_user;
CREATE FUNCTION pg_temp.atk_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'trigger runs as %', current_user;
    RETURN NULL;
END
$$;
DO $$
DECLARE
    id bigint := (SELECT lifetime_id FROM decoupled.objects WHERE name = 'payroll_mv');
BEGIN
    EXECUTE format('CREATE TEMP TABLE decoupled_verify_%s (mz_ts bigint, mz_diff bigint, '
                   'mz_key text, mz_hash integer, id int, pw text)', id);
    EXECUTE format('CREATE TEMP TABLE decoupled_verify_view_%s (k text)', id);
    EXECUTE format('CREATE TRIGGER t BEFORE INSERT ON pg_temp.decoupled_verify_view_%s '
                   'FOR EACH ROW EXECUTE FUNCTION pg_temp.atk_trigger()', id);
END
$$;
DO $$
BEGIN
    PERFORM decoupled.verify('payroll_mv');
EXCEPTION WHEN duplicate_table OR object_not_in_prerequisite_state THEN
    RAISE NOTICE 'verify() refused: %', regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END
$$;
-- Without them, verify() works for the same role.
DO $$
DECLARE
    id bigint := (SELECT lifetime_id FROM decoupled.objects WHERE name = 'payroll_mv');
BEGIN
    EXECUTE format('DROP TABLE pg_temp.decoupled_verify_%s, pg_temp.decoupled_verify_view_%s',
                   id, id);
END
$$;
SELECT decoupled.verify('payroll_mv') AS verified;
SELECT decoupled.verify('payroll_mv') AS verified_again;
RESET ROLE;

------------------------------------------------------------------------------
-- 2. Statistics of storage, through a leaky operator
DO $$
BEGIN
    EXECUTE format('ANALYZE decoupled_storage.c%s_cur',
                   (SELECT lifetime_id FROM decoupled.objects WHERE name = 'payroll'));
END
$$;
CREATE TABLE atk.seen (value text);
GRANT INSERT, SELECT, DELETE ON atk.seen TO PUBLIC;
CREATE FUNCTION atk.leak(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO atk.seen VALUES ($1);
    RETURN true;
END
$$;
CREATE OPERATOR atk.<<< (FUNCTION = atk.leak, LEFTARG = text, RIGHTARG = text,
                         RESTRICT = scalarltsel);
GRANT EXECUTE ON FUNCTION atk.leak(text, text) TO PUBLIC;
SELECT set_config('atk.history', format('decoupled_storage.c%s_history', lifetime_id), false)
       IS NOT NULL AS noted
  FROM decoupled.objects WHERE name = 'payroll';
-- A role that may not read payroll: its planner gets no value of it,
-- through the history view or through an AS OF read.
SET ROLE atk_user;
DO $$
BEGIN
    EXECUTE format('EXPLAIN SELECT * FROM %s WHERE pw OPERATOR(atk.<<<) $q$x$q$',
                   current_setting('atk.history'));
END
$$;
SET decoupled.as_of = 1;
EXPLAIN (COSTS OFF) SELECT * FROM payroll WHERE pw OPERATOR(atk.<<<) 'x';
RESET decoupled.as_of;
SELECT count(*) AS values_seen FROM atk.seen;
RESET ROLE;
-- One who may read it plans with them as before: the operator estimates
-- from the values.
GRANT SELECT ON payroll TO atk_user;
SET ROLE atk_user;
DO $$
BEGIN
    EXECUTE format('EXPLAIN SELECT * FROM %s WHERE pw OPERATOR(atk.<<<) $q$x$q$',
                   current_setting('atk.history'));
END
$$;
SELECT count(*) > 0 AS values_seen FROM atk.seen;
RESET ROLE;
REVOKE SELECT ON payroll FROM atk_user;

------------------------------------------------------------------------------
-- 3. Capture's error, masked wherever it is returned.  A domain (a
-- superuser's) whose check fails once a flag is set stalls WAL capture on
-- a row of cap; the error quotes the row.
CREATE TABLE atk_flag (f boolean);
INSERT INTO atk_flag VALUES (false);
CREATE FUNCTION atk_check(v text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (SELECT f FROM public.atk_flag) THEN
        RAISE EXCEPTION 'rejecting value %', v;
    END IF;
    RETURN true;
END
$$;
CREATE DOMAIN atk_checked AS text CHECK (public.atk_check(VALUE));
CREATE TABLE cap (id int PRIMARY KEY, s atk_checked);
SELECT decoupled.register_table('cap') > 0 AS registered;
SELECT decoupled.wait_for_capture('60 s') AS captured;
BEGIN;
INSERT INTO cap VALUES (1, 'SSN-123-45-6789');
UPDATE atk_flag SET f = true;
COMMIT;
DO $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        EXIT WHEN (SELECT status FROM decoupled.capture) = 'stalled';
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT status, last_error LIKE '%SSN-123-45-6789%' AS quotes_the_row FROM decoupled.capture;
SET ROLE atk_user;
SELECT status, last_error FROM decoupled.capture;
SELECT last_error FROM decoupled._capture_error();
SELECT last_error FROM decoupled._capture_state();
RESET ROLE;
UPDATE atk_flag SET f = false;
SELECT decoupled.wait_for_capture('60 s') AS captured;

------------------------------------------------------------------------------
-- 4. A sink's column types by OID, and 5. constraints added to a domain in use
SET ROLE atk_admin;
CREATE TYPE atk.mood AS ENUM ('a', 'b');
CREATE DOMAIN atk.dd AS int;
CREATE TABLE atk.t (id int PRIMARY KEY, m atk.mood, v atk.dd);
INSERT INTO atk.t VALUES (1, 'a', 1);
SELECT decoupled.register_table('atk.t') > 0 AS registered;
ALTER TYPE atk.mood RENAME TO mood_old;
CREATE FUNCTION atk.evil(x atk.mood_old) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'evil runs as %', current_user;
    RETURN true;
END
$$;
CREATE DOMAIN atk.mood AS atk.mood_old CHECK (atk.evil(VALUE));
SELECT decoupled.create_sink('atk_sink', 't', 'atk.t_changes') > 0 AS created;
SELECT format_type(atttypid, atttypmod) AS sink_column_type FROM pg_attribute
 WHERE attrelid = 'atk.t_changes'::regclass AND attname = 'm';
CREATE FUNCTION atk.evil2(x int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'evil2 runs as %', current_user;
    RETURN true;
END
$$;
ALTER DOMAIN atk.dd ADD CONSTRAINT ck CHECK (atk.evil2(VALUE));
-- A domain no collection uses takes one.
CREATE DOMAIN atk.free AS int;
ALTER DOMAIN atk.free ADD CONSTRAINT ck CHECK (VALUE > 0);
RESET ROLE;
-- A superuser may add one.
ALTER DOMAIN atk.dd ADD CONSTRAINT positive CHECK (VALUE > 0);

-- A domain with such a check inside a range type (and an array of it) is
-- refused like the domain itself; so is a superuser's domain whose check
-- uses an operator whose function an ordinary role owns (and may replace).
SET ROLE atk_admin;
CREATE DOMAIN atk.spied AS int CHECK (atk.evil2(VALUE));
CREATE TYPE atk.spied_range AS RANGE (subtype = atk.spied);
CREATE TABLE atk.ranged (id int PRIMARY KEY, r atk.spied_range);
SELECT decoupled.register_table('atk.ranged');
CREATE TABLE atk.ranges (id int PRIMARY KEY, r atk.spied_range[]);
SELECT decoupled.register_table('atk.ranges');
CREATE FUNCTION atk.gt(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > $2';
CREATE OPERATOR atk.>>> (LEFTARG = int, RIGHTARG = int, FUNCTION = atk.gt);
RESET ROLE;
CREATE DOMAIN atk_positive AS int CHECK (VALUE OPERATOR(atk.>>>) 0);
SET ROLE atk_admin;
CREATE TABLE atk.op_checked (id int PRIMARY KEY, v atk_positive);
SELECT decoupled.register_table('atk.op_checked');
RESET ROLE;
DROP DOMAIN atk_positive CASCADE;

------------------------------------------------------------------------------
-- 6. append() only by the collection's owner
SET ROLE atk_admin;
SELECT decoupled.append('payroll',
           format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 777, "pw": "forged"}}]',
                  upper)::jsonb, upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'payroll';
SELECT decoupled.append('payroll_mv', '[]', upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'payroll_mv';
-- Nor its owner into a maintained view or a source: their replicas write
-- them (hand-written rows would stay wrong for good).
RESET ROLE;
SELECT regress_try(format($$SELECT decoupled.append('payroll_mv', '[]', %s, %s)$$, upper, upper + 1))
  FROM decoupled.frontiers WHERE name = 'payroll_mv';
SET ROLE atk_admin;
-- Its own registered table: yes.
SELECT decoupled.append('t', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 2, "m": "b", "v": 2}}]',
                                    upper)::jsonb, upper, upper + 1) > 0 AS appended
  FROM decoupled.frontiers WHERE name = 't';
-- Nor may an admin speak the replica protocol: it writes every view's
-- history, whoever owns the view.
SELECT decoupled.replica_start(r.replica_id, 'default', pg_backend_pid())
  FROM decoupled.cluster_replicas r LIMIT 1;
RESET ROLE;
-- A member of decoupled_replica (what replica processes log in as) may,
-- and changes no catalog; a replica appends only to a source or view of
-- its cluster, never to a registered table.
CREATE ROLE atk_replica IN ROLE decoupled_replica;
SET ROLE atk_replica;
SELECT has_function_privilege('decoupled.replica_append(bigint, bigint, jsonb, bigint, bigint)',
                              'EXECUTE') AS replica_may_append,
       has_function_privilege('decoupled.create_cluster(text, integer, boolean)', 'EXECUTE')
           AS replica_may_change_catalog;
DO $$
BEGIN
    PERFORM decoupled.replica_append(i.incarnation, o.lifetime_id,
               format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 778, "pw": "forged"}}]',
                      f.upper)::jsonb, f.upper, f.upper + 1)
      FROM decoupled.objects o, decoupled.frontiers f, decoupled.cluster_replicas i
     WHERE o.name = 'payroll' AND f.name = 'payroll' AND i.incarnation IS NOT NULL
     LIMIT 1;
    RAISE NOTICE 'appended';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'replica_append refused: %', regexp_replace(SQLERRM, '[0-9]+', 'N', 'g');
END
$$;
RESET ROLE;
DROP ROLE atk_replica;
SELECT count(*) AS forged FROM decoupled.frontiers f, LATERAL (
    SELECT set_config('decoupled.as_of', (f.upper - 1)::text, true)) s, payroll p
 WHERE f.name = 'payroll' AND p.id IN (777, 778);

------------------------------------------------------------------------------
-- 7. Conversions of an append's values
-- A superuser's domain whose check calls a function of the superuser's,
-- which calls one an ordinary role owns (no dependency records that).
CREATE SCHEMA atk_hooks AUTHORIZATION atk_user;
SET ROLE atk_user;
CREATE FUNCTION atk_hooks.hook(v text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
RESET ROLE;
CREATE FUNCTION atk_valid_code(v text) RETURNS boolean LANGUAGE sql AS 'SELECT atk_hooks.hook(v)';
CREATE DOMAIN atk_code AS text CHECK (atk_valid_code(VALUE));
GRANT USAGE ON SCHEMA atk_hooks TO atk_admin;
CREATE SCHEMA atk_moved AUTHORIZATION atk_admin;
SET ROLE atk_admin;
CREATE TABLE atk.codes (id int PRIMARY KEY, c atk_code);
SELECT decoupled.register_table('atk.codes') > 0 AS registered;
RESET ROLE;
SET ROLE atk_user;
CREATE OR REPLACE FUNCTION atk_hooks.hook(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'hook(%) runs as %, superuser %', v, current_user,
                 (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
    RETURN v <> 'bad';
END
$$;
RESET ROLE;
SET ROLE atk_admin;
-- The check runs as the table's owner, not as the extension.
SELECT decoupled.append('codes', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 1, "c": "A1"}}]',
                                        upper)::jsonb, upper, upper + 1) > 0 AS appended
  FROM decoupled.frontiers WHERE name = 'codes';
-- A value the check refuses: 22023, reported as a whole.
SELECT decoupled.append('codes', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 2, "c": "bad"}}]',
                                        upper)::jsonb, upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'codes';
-- A type moved away and a domain made under its old name: a failed
-- conversion is diagnosed with the registered type, not the new one.
CREATE TYPE atk.e AS ENUM ('x', 'y');
CREATE TABLE atk.labelled (id int PRIMARY KEY, l atk.e);
SELECT decoupled.register_table('atk.labelled') > 0 AS registered;
ALTER TYPE atk.e SET SCHEMA atk_moved;
CREATE FUNCTION atk.evil3(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'evil3 runs as %', current_user;
    RETURN true;
END
$$;
CREATE DOMAIN atk.e AS text CHECK (atk.evil3(VALUE));
SELECT decoupled.append('labelled', format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"id": 1, "l": "no-label"}}]',
                                           upper)::jsonb, upper, upper + 1)
  FROM decoupled.frontiers WHERE name = 'labelled';
RESET ROLE;

------------------------------------------------------------------------------
-- 8. dry_run() and the caller's search_path
CREATE SCHEMA atk_open;
GRANT USAGE, CREATE ON SCHEMA atk_open TO atk_user;
SET ROLE atk_user;
CREATE FUNCTION atk_open.unnest(a text[]) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'lookalike unnest runs as %', current_user;
    RETURN QUERY SELECT x FROM pg_catalog.unnest(a) x;
END
$$;
-- And a type dry_run's variables would be resolved as, at its compilation.
CREATE FUNCTION atk_open.seen(v pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'lookalike text runs as %', current_user;
    RETURN true;
END
$$;
CREATE DOMAIN atk_open.text AS pg_catalog.text CHECK (atk_open.seen(VALUE));
RESET ROLE;
CREATE TABLE atk_open.dry_t (id int PRIMARY KEY);
SET search_path = atk_open, public;
SELECT * FROM decoupled.dry_run($$SELECT decoupled.create_cluster('atk_trial')$$);
-- The call itself still resolves names in the caller's path.
SELECT action, kind, name FROM decoupled.dry_run($$SELECT decoupled.register_table('dry_t')$$);
SHOW search_path;
RESET search_path;
-- Every other function of the extension in a language other than C sets
-- its own search_path (_maintain_view runs only inside replica_maintain,
-- which does; _restore_marker is empty).
SELECT p.oid::regprocedure AS without_search_path
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'decoupled'::regnamespace AND l.lanname NOT IN ('c', 'internal')
   AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')
 ORDER BY 1;

------------------------------------------------------------------------------
-- 9. Nothing a role builds on a PUBLIC history view keeps a dropped
-- collection's storage: a drop without cascade is refused while it is
-- there (as PostgreSQL refuses DROP TABLE under another role's view), and
-- with cascade finalization drops it too.
SELECT decoupled.create_materialized_view('atk_pinned', 'SELECT id FROM payroll WHERE id < 3') > 0
    AS created;
SELECT decoupled._storage(lifetime_id, 'history') AS pinned_history
  FROM decoupled.objects WHERE name = 'atk_pinned' \gset
SET ROLE atk_user;
CREATE VIEW atk_hooks.pin AS SELECT 1 AS x FROM :pinned_history WHERE false;
RESET ROLE;
SELECT regress_try($$SELECT decoupled.drop('atk_pinned')$$);
SELECT decoupled.drop('atk_pinned', cascade => true);
-- (A replica reading storage at that moment puts a round off: rounds until
-- it is finalized, 60 s at most.)
CREATE FUNCTION pg_temp.finalize_until(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. 600 LOOP
        PERFORM decoupled.finalize_dropped();
        IF (SELECT finalized_at IS NOT NULL FROM decoupled.catalog_objects
             WHERE name = what AND dropped_at IS NOT NULL ORDER BY lifetime_id DESC LIMIT 1) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END
$$;
SELECT pg_temp.finalize_until('atk_pinned') AS finalized;
SELECT finalized_at IS NOT NULL AS storage_removed FROM decoupled.catalog_objects
 WHERE name = 'atk_pinned';
SELECT to_regclass('atk_hooks.pin') AS pinning_view;

-- Nor a live view of another role's: a function of atk_user's whose body
-- reads the history of atk_user's table, called by a view of atk_admin's.
-- Dropping the table (with CASCADE: without, the function refuses it)
-- leaves its storage while the view lives.
CREATE TABLE atk_h2_t (k int PRIMARY KEY);
ALTER TABLE atk_h2_t OWNER TO atk_user;
SELECT decoupled.register_table('atk_h2_t') > 0 AS registered;
SELECT decoupled._storage(lifetime_id, 'history') AS h2_history
  FROM decoupled.objects WHERE name = 'atk_h2_t' \gset
SET ROLE atk_user;
CREATE FUNCTION atk_hooks.h5(i int) RETURNS int LANGUAGE sql IMMUTABLE
BEGIN ATOMIC SELECT i + 0 * (SELECT count(*) FROM :h2_history); END;
RESET ROLE;
GRANT USAGE ON SCHEMA atk_hooks TO atk_admin;
SET ROLE atk_admin;
SET search_path = atk, public;
SELECT decoupled.create_materialized_view('atk_victim', 'SELECT atk_hooks.h5(id) AS x FROM atk.t')
    > 0 AS created;
RESET search_path;
RESET ROLE;
SET ROLE atk_user;
SELECT regress_try('DROP TABLE atk_h2_t');
DROP TABLE atk_h2_t CASCADE;
RESET ROLE;
-- Ten rounds: each leaves the storage ("... is still read by materialized
-- view "atk_victim"", as a NOTICE).
SET client_min_messages = warning;
SELECT count(decoupled.finalize_dropped()) AS rounds FROM generate_series(1, 10);
RESET client_min_messages;
SELECT name, dropped_at IS NULL AS live FROM decoupled.catalog_objects
 WHERE name IN ('atk_victim', 'atk_h2_t') ORDER BY name;
SELECT decoupled.drop('atk_victim');
SET client_min_messages = warning;
SELECT pg_temp.finalize_until('atk_h2_t') AS finalized_now;
RESET client_min_messages;

------------------------------------------------------------------------------
-- 10. A schema's owner drops what others made in it, not its history: a
-- sink's table or a maintained view there goes only by its creator, an
-- admin or a superuser.
GRANT CREATE ON SCHEMA atk_hooks TO atk_admin;
SET ROLE atk_admin;
CREATE TABLE atk.plain (id int PRIMARY KEY) WITH (decoupled.registered = true);
SELECT decoupled.create_sink('atk_sink2', 'plain', 'atk_hooks.t_copy') > 0 AS created;
RESET ROLE;
CREATE MATERIALIZED VIEW atk_hooks.atk_kept WITH (decoupled.maintained = true) AS
    SELECT id FROM payroll WHERE id < 3;
SET ROLE atk_user;
DROP TABLE atk_hooks.t_copy;
DROP SCHEMA atk_hooks CASCADE;
RESET ROLE;
-- Nor through a cascade the catalog makes: a sink on a table there (no
-- relation of PostgreSQL's depends on a sink's input).
SET ROLE atk_admin;
CREATE TABLE atk_hooks.reg2 (id int PRIMARY KEY) WITH (decoupled.registered = true);
SELECT decoupled.create_sink('atk_sink3', 'reg2', 'atk.s3_copy') > 0 AS created;
RESET ROLE;
SET ROLE atk_user;
DROP TABLE atk_hooks.reg2 CASCADE;
RESET ROLE;
SELECT name, dropped_at IS NULL AS live FROM decoupled.catalog_objects
 WHERE name IN ('atk_sink2', 'atk_kept', 'atk_sink3', 'reg2') ORDER BY name;
-- Its creator (an admin here) may; so may a superuser, the schema's owner
-- once the catalog's objects are gone.
SET ROLE atk_admin;
SELECT decoupled.drop('atk_sink2');
SELECT decoupled.drop('atk_sink3');
RESET ROLE;
DROP MATERIALIZED VIEW atk_hooks.atk_kept;
SELECT name, dropped_at IS NULL AS live FROM decoupled.catalog_objects
 WHERE name IN ('atk_sink2', 'atk_kept', 'atk_sink3') ORDER BY name;
SET ROLE atk_user;
DROP SCHEMA atk_hooks CASCADE;
RESET ROLE;
SELECT name, dropped_at IS NULL AS live FROM decoupled.catalog_objects
 WHERE name = 'reg2';

------------------------------------------------------------------------------
-- 11. A view's steps and a replica's appends never run a domain's check
-- with the extension's rights: the touched groups' keys are written as
-- their base type, and a replica's values are converted as the view's
-- creator.  atk_code's check calls (through a superuser's function) a
-- function atk_user owns, which logs who runs it.
CREATE TABLE atk_log (who text, superuser boolean);
GRANT INSERT ON atk_log TO PUBLIC;
CREATE SCHEMA atk_h2 AUTHORIZATION atk_user;
GRANT USAGE ON SCHEMA atk_h2 TO PUBLIC;
SET ROLE atk_user;
CREATE FUNCTION atk_h2.hook(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.atk_log
    SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
    RETURN true;
END
$$;
RESET ROLE;
CREATE OR REPLACE FUNCTION atk_valid_code(v text) RETURNS boolean LANGUAGE sql
    AS 'SELECT atk_h2.hook(v)';
SET ROLE atk_admin;
CREATE TABLE atk.coded (id int PRIMARY KEY, c atk_code);
INSERT INTO atk.coded VALUES (1, 'x');
SELECT decoupled.register_table('atk.coded') > 0 AS registered;
SET search_path = atk, public;
SELECT decoupled.create_materialized_view('atk_coded_d', 'SELECT DISTINCT c FROM atk.coded') > 0
    AS created;
RESET search_path;
INSERT INTO atk.coded VALUES (2, 'y'), (3, 'x');
RESET ROLE;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.wait_for_upper('atk_coded_d', (SELECT upper - 1 FROM decoupled.frontiers
                                                 WHERE name = 'coded'), '60s') > 0 AS caught_up;
SELECT decoupled.verify('atk_coded_d') AS verified;
-- A replica's append to a view whose column is of that domain: as the
-- view's creator.  (This session acts as a replica nobody runs.)
DO $$ BEGIN
    PERFORM decoupled.create_cluster('atk_ext', replicas => 0, managed => false);
    PERFORM decoupled.create_replica('atk_ext', 'x', external => true);
END $$;
SET ROLE atk_admin;
SET search_path = atk, public;
SELECT decoupled.create_materialized_view('atk_coded_e', 'SELECT c FROM atk.coded', 'atk_ext') > 0
    AS created;
RESET search_path;
RESET ROLE;
SELECT decoupled.replica_start(replica_id, 'default', 1) AS atk_incarnation
  FROM decoupled.cluster_replicas WHERE cluster = 'atk_ext' \gset
SELECT decoupled.replica_append(:atk_incarnation, lifetime_id,
           format('[{"mz_timestamp": %s, "mz_diff": 1, "data": {"c": "z"}}]', f.upper)::jsonb,
           f.upper, f.upper + 1) > 0 AS appended
  FROM decoupled.objects o JOIN decoupled.frontiers f USING (name) WHERE o.name = 'atk_coded_e';
SELECT who, superuser FROM atk_log GROUP BY 1, 2 ORDER BY 1;
SELECT decoupled.replica_stop(:atk_incarnation);
SELECT decoupled.drop('atk_coded_d'), decoupled.drop('atk_coded_e'),
       decoupled.unregister_table('atk.coded');
SELECT decoupled.drop_cluster('atk_ext');

-- 12. The check says who runs it (a notice: the call may fail after it).
SET ROLE atk_admin;
CREATE FUNCTION atk.atk_note(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'check run by %, superuser: %', current_user,
        (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
    RETURN true;
END
$$;
CREATE DOMAIN atk.atk_noted AS int CHECK (atk.atk_note(VALUE));
CREATE TYPE atk.atk_pair AS (x atk.atk_noted);
SET search_path = atk;
\set VERBOSITY terse
SELECT decoupled.create_materialized_view('atk_literal',
    $q$SELECT 1 AS x WHERE '{1}'::atk.atk_noted[] IS NOT NULL$q$) > 0 AS created;
SELECT decoupled.create_materialized_view('atk_literal_row',
    $q$SELECT 1 AS x WHERE '(1)'::atk.atk_pair IS NOT NULL$q$) > 0 AS created;
CREATE MATERIALIZED VIEW atk.atk_literal_ddl WITH (decoupled.maintained) AS
    SELECT 1 AS x WHERE '{2}'::atk.atk_noted[] IS NOT NULL;
\set VERBOSITY default
RESET search_path;
RESET ROLE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'atk_admin';
SELECT name, strategy FROM decoupled.view_maintenance
 WHERE name IN ('atk_literal', 'atk_literal_row', 'atk_literal_ddl') ORDER BY 1;
SELECT decoupled.drop(name) FROM decoupled.objects
 WHERE name IN ('atk_literal', 'atk_literal_row', 'atk_literal_ddl');

-- 13. A registered table never becomes a view; a domain in use gets no NOT
-- NULL from a role that is not a superuser.
SET ROLE atk_admin;
CREATE TABLE atk.vt (v text);
SELECT decoupled.register_table('atk.vt') > 0 AS registered;
RESET ROLE;
SELECT decoupled.wait_for_capture('60 s') AS captured;  -- adopted: no capture trigger left
VACUUM atk.vt;  -- and none recorded
SET ROLE atk_admin;
CREATE FUNCTION atk.atk_as_view() RETURNS SETOF text LANGUAGE sql AS 'SELECT current_user::text';
CREATE RULE "_RETURN" AS ON SELECT TO atk.vt DO INSTEAD SELECT atk.atk_as_view() AS v;
SELECT relkind FROM pg_class WHERE oid = 'atk.vt'::regclass;
CREATE DOMAIN atk.atk_loose AS text;
CREATE TABLE atk.lt (id int PRIMARY KEY, v atk.atk_loose);
SELECT decoupled.register_table('atk.lt') > 0 AS registered;
ALTER DOMAIN atk.atk_loose SET NOT NULL;
ALTER DOMAIN atk.atk_loose DROP NOT NULL;  -- loosening changes no value's text
RESET ROLE;
SELECT decoupled.unregister_table('atk.vt'), decoupled.unregister_table('atk.lt');

-- 14. decoupled.as_of and SECURITY DEFINER functions.  atk_admin's function
-- shows its documents while its access list is open; atk_user, who may
-- call it but not read the list, sets a time when it was open.
SET ROLE atk_admin;
CREATE TABLE atk.acl (flag text PRIMARY KEY);
CREATE TABLE atk.docs (d text);
INSERT INTO atk.acl VALUES ('open');
INSERT INTO atk.docs VALUES ('doc 1');
SELECT decoupled.register_table('atk.acl') > 0 AS registered;
CREATE FUNCTION atk.read_docs() RETURNS SETOF text LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$SELECT d FROM atk.docs WHERE EXISTS (SELECT FROM atk.acl WHERE flag = 'open')$$;
GRANT EXECUTE ON FUNCTION atk.read_docs() TO atk_user;
RESET ROLE;
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT upper - 1 AS atk_open_at FROM decoupled.frontiers WHERE name = 'acl' \gset
DELETE FROM atk.acl;
INSERT INTO atk.docs VALUES ('doc 2, written after the list closed');
SELECT decoupled.wait_for_capture('60 s') AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SET ROLE atk_user;
SELECT atk.read_docs();
SET decoupled.as_of = :atk_open_at;
SELECT atk.read_docs();  -- the latest list: nothing
SELECT count(*) FROM atk.acl;  -- and the list itself is not atk_user's to read
RESET decoupled.as_of;
RESET ROLE;
-- Nor through a parallel plan of a function it may call, made when
-- atk_user called that function directly (where its time counted), then
-- run inside the SECURITY DEFINER function.
RESET ROLE;
SET ROLE atk_admin;
CREATE FUNCTION atk.acl_flags() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT flag FROM atk.acl;
END
$$;
CREATE FUNCTION atk.read_flags() RETURNS SETOF text LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT * FROM atk.acl_flags();
END
$$;
GRANT EXECUTE ON FUNCTION atk.acl_flags(), atk.read_flags() TO atk_user;
RESET ROLE;
SET SESSION AUTHORIZATION atk_user;
SET decoupled.as_of = :atk_open_at;
SET force_parallel_mode = on;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
SELECT * FROM atk.acl_flags();  -- not atk_user's to read
SELECT atk.read_flags();  -- the latest list: nothing
RESET force_parallel_mode;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
RESET decoupled.as_of;
RESET SESSION AUTHORIZATION;
-- Its owner's own time counts, set by the owner or in its SET clause.
SET ROLE atk_admin;
SET decoupled.as_of = :atk_open_at;
SELECT atk.read_docs();
RESET decoupled.as_of;
RESET ROLE;
SELECT decoupled.unregister_table('atk.acl');

------------------------------------------------------------------------------
-- 15. A range type's subtype_diff runs when PostgreSQL gathers statistics
-- of a column of it — ANALYZE of storage, autovacuum's too, as storage's
-- owner, a superuser.  Its function an ordinary role owns (and may
-- replace) is refused wherever a column of it would reach storage or a
-- sink's table: directly, in a domain, an array or a multirange.  A range
-- whose subtype_diff a superuser owns is fine.
SET ROLE atk_admin;
CREATE FUNCTION atk.diff(a float8, b float8) RETURNS float8
    LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN a - b; END';
CREATE TYPE atk.fr AS RANGE (subtype = float8, subtype_diff = atk.diff);
CREATE DOMAIN atk.fr_dom AS atk.fr;
CREATE TYPE atk.fr_builtin AS RANGE (subtype = float8, subtype_diff = float8mi);
CREATE TABLE atk.diffed (id int PRIMARY KEY, r atk.fr);
SELECT decoupled.register_table('atk.diffed');
CREATE TABLE atk.diffed_dom (id int PRIMARY KEY, r atk.fr_dom[]);
SELECT decoupled.register_table('atk.diffed_dom');
CREATE TABLE atk.diffed_multi (id int PRIMARY KEY, r atk.fr_multirange);
SELECT decoupled.register_table('atk.diffed_multi');
CREATE TABLE atk.diffed_ok (id int PRIMARY KEY, r atk.fr_builtin);
SELECT decoupled.register_table('atk.diffed_ok') > 0 AS registered;
SET search_path = atk;
SELECT decoupled.create_materialized_view('atk_diffed_mv',
    'SELECT id, atk.fr(1, 2) AS r FROM atk.diffed_ok');
RESET search_path;
SELECT decoupled.unregister_table('atk.diffed_ok');
RESET ROLE;

-- 16. CREATE SCHEMA's own statements pass the DDL checks as any other: no
-- child of a registered table made inside it.  And a check of inheritance
-- looks at the command's own relations: whatever else exists fails no
-- other role's DDL.
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO atk_admin', current_database()); END $$;
SET ROLE atk_admin;
CREATE TABLE atk.parent (id int PRIMARY KEY, v int);
SELECT decoupled.register_table('atk.parent') > 0 AS registered;
CREATE SCHEMA atk_sneak CREATE TABLE kid (extra int) INHERITS (atk.parent);
SELECT to_regclass('atk_sneak.kid') IS NULL AS no_child;
RESET ROLE;
SET client_min_messages = warning;
ALTER EVENT TRIGGER decoupled_ddl_end DISABLE;
CREATE TABLE atk_left_behind () INHERITS (atk.parent);
ALTER EVENT TRIGGER decoupled_ddl_end ENABLE ALWAYS;
RESET client_min_messages;
SET ROLE atk_user;
CREATE TEMP TABLE atk_unrelated (id int);
DROP TABLE atk_unrelated;
RESET ROLE;
DROP TABLE atk_left_behind;
SELECT decoupled.unregister_table('atk.parent');
DO $$ BEGIN EXECUTE format('REVOKE CREATE ON DATABASE %I FROM atk_admin', current_database()); END $$;

-- 17. verify() and the caller's temporary relations: a function of the
-- view's owner with a search_path of its own that does not name pg_temp
-- finds the session's temporary relations first.  A caller's temporary
-- view of the name it reads would run the caller's code as the owner.
SET ROLE atk_admin;
CREATE TABLE atk.secret (s text);
INSERT INTO atk.secret VALUES ('atk_admin only');
CREATE TABLE atk.fx (cur text PRIMARY KEY, r numeric);
INSERT INTO atk.fx VALUES ('usd', 2);
CREATE TABLE atk.atk_acct (id int PRIMARY KEY, bal numeric);
INSERT INTO atk.atk_acct SELECT g, g FROM generate_series(1, 5) g;
SELECT decoupled.register_table('atk.atk_acct') > 0 AS registered;
CREATE FUNCTION atk.fx_rate(c text) RETURNS numeric STABLE LANGUAGE sql
    SET search_path = atk AS 'SELECT r FROM fx WHERE cur = c';
SET search_path = atk;
SELECT decoupled.create_materialized_view('atk_conv',
    'SELECT id, bal * atk.fx_rate(''usd'') AS usd FROM atk.atk_acct') > 0 AS created;
RESET search_path;
GRANT SELECT ON atk.atk_conv TO atk_user;
SELECT decoupled.wait_for_upper('atk_conv', (SELECT upper - 1 FROM decoupled.frontiers
                                              WHERE name = 'atk_acct'), '60s') > 0 AS caught_up;
RESET ROLE;
CREATE TABLE atk_loot (who name, data text);
GRANT INSERT, SELECT ON atk_loot TO PUBLIC;
SET ROLE atk_user;
CREATE FUNCTION pg_temp.grab() RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.atk_loot SELECT current_user, string_agg(s, ',') FROM atk.secret;
    RETURN 2;
END $$;
CREATE TEMP VIEW fx AS SELECT 'usd'::text AS cur, pg_temp.grab() AS r;
GRANT SELECT ON pg_temp.fx TO atk_admin;
SELECT decoupled.verify('atk_conv');
SELECT count(*) AS looted FROM atk_loot;
DISCARD TEMP;
SELECT decoupled.verify('atk_conv') AS verified_without_them;
RESET ROLE;
-- The owner verifies in a session with temporary relations of its own.
SET ROLE atk_admin;
CREATE TEMP TABLE atk_scratch (x int);
SELECT decoupled.verify('atk_conv') AS owner_verified;
DROP TABLE atk_scratch;
RESET ROLE;

-- 18. Arrangements a reader's views add to another role's collection.
CREATE TABLE atk_wide (id int PRIMARY KEY, a int, b int, c int, d int, e int, f int);
INSERT INTO atk_wide SELECT g, g % 3, g % 5, g % 7, g % 11, g % 13, g % 17
  FROM generate_series(1, 200) g;
SELECT decoupled.register_table('atk_wide') > 0 AS registered;
GRANT SELECT ON atk_wide TO atk_admin;
SET ROLE atk_admin;
SET search_path = atk;
SELECT count(decoupled.create_materialized_view('atk_wide_' || k,
           format('SELECT %I, max(id) AS m FROM public.atk_wide GROUP BY %I', k, k))) AS created
  FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f']) k;
RESET search_path;
RESET ROLE;
SELECT count(DISTINCT a.index_name) AS arrangements
  FROM decoupled.catalog_arrangements a JOIN decoupled.objects o ON o.lifetime_id = a.input
 WHERE o.name = 'atk_wide';
-- The table's owner adds what its own views need.
SELECT decoupled.create_materialized_view('atk_wide_own',
           'SELECT a, c, max(id) AS m FROM atk_wide GROUP BY a, c') > 0 AS created;
SELECT count(DISTINCT a.index_name) AS arrangements
  FROM decoupled.catalog_arrangements a JOIN decoupled.objects o ON o.lifetime_id = a.input
 WHERE o.name = 'atk_wide';
-- Views without an arrangement of their own are still right.
UPDATE atk_wide SET f = f + 1 WHERE id % 4 = 0;
DELETE FROM atk_wide WHERE id % 9 = 0;
SELECT decoupled.wait_for_capture() AS captured;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT bool_and(decoupled.wait_for_upper(o.name, (SELECT upper - 1 FROM decoupled.frontiers
                                                   WHERE name = 'atk_wide'), '60s') > 0)
       AS caught_up,
       bool_and(decoupled.verify(o.name)) AS verified
  FROM decoupled.objects o WHERE o.name LIKE 'atk_wide_%';
SELECT decoupled.drop(o.name) FROM decoupled.objects o WHERE o.name LIKE 'atk_wide_%'
 ORDER BY o.name;
SELECT decoupled.unregister_table('atk_wide');
DROP TABLE atk_wide;

-- 19. What everyone may call, with the largest arguments: a kept sum's
-- aggregate that overflows its 128 bits carries into numeric (its state,
-- in memory aligned to 8 bytes, crashed the server there before).
SET ROLE atk_user;
SELECT decoupled._weighted_sum(9223372036854775807, 9223372036854775807) AS overflowing
  FROM generate_series(1, 3);
SELECT decoupled._weighted_sum(d, v) AS exact
  FROM (VALUES (9223372036854775807, 9223372036854775807),
               (9223372036854775807, 9223372036854775807),
               (9223372036854775807, 9223372036854775807),
               (-9223372036854775808, 9223372036854775807),
               (-9223372036854775808, -9223372036854775808)) x(d, v);
SELECT (9223372036854775807::numeric ^ 2 * 3 - 9223372036854775808::numeric * 9223372036854775807
        + 9223372036854775808::numeric ^ 2)::numeric(80, 0) AS expected;
SELECT decoupled._kept_sum_int8(9223372036854775807, 9223372036854775807) AS int8_sum,
       decoupled._kept_avg(9223372036854775807, -9223372036854775808) AS avg;
RESET ROLE;

-- 20. verify() and the caller's temporary types: a domain in pg_temp
-- named as a type the owner's function declares (its search_path does not
-- name pg_temp) is found first, and its CHECK would run the caller's code
-- as the owner.
SET ROLE atk_admin;
CREATE DOMAIN atk.atk_score AS numeric;
CREATE FUNCTION atk.normed(x numeric) RETURNS numeric IMMUTABLE LANGUAGE plpgsql
    SET search_path = atk AS $$ DECLARE v atk_score; BEGIN v := x; RETURN v; END $$;
SET search_path = atk;
SELECT decoupled.create_materialized_view('atk_normed',
    'SELECT id, atk.normed(bal) AS nb FROM atk.atk_acct') > 0 AS created;
RESET search_path;
GRANT SELECT ON atk.atk_normed TO atk_user;
SELECT decoupled.wait_for_upper('atk_normed', (SELECT upper - 1 FROM decoupled.frontiers
                                                WHERE name = 'atk_acct'), '60s') > 0 AS caught_up;
RESET ROLE;
SET ROLE atk_user;
CREATE FUNCTION pg_temp.grab2() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.atk_loot SELECT current_user, string_agg(s, ',') FROM atk.secret;
    RETURN true;
END $$;
CREATE DOMAIN pg_temp.atk_score AS numeric CHECK (pg_temp.grab2());
SELECT decoupled.verify('atk_normed');
-- A temporary range type (and its multirange) is a type of no relation too.
DROP DOMAIN pg_temp.atk_score;
CREATE TYPE pg_temp.atk_span AS RANGE (subtype = int4);
SELECT decoupled.verify('atk_normed');
SELECT count(*) AS looted FROM atk_loot;
DISCARD TEMP;
SELECT decoupled.verify('atk_normed') AS verified_without_them;
RESET ROLE;
SELECT decoupled.drop('atk_normed');

-- 21. A cascade from ALTER TYPE ... DROP ATTRIBUTE (or ALTER TABLE ... DROP
-- COLUMN) reaching a view's written plan drops the view only with the
-- rights DROP needs: the statement's issuer, not the drop trigger's own.
CREATE SCHEMA atk_t AUTHORIZATION atk_user;
SET ROLE atk_user;
CREATE TYPE atk_t.pair AS (x int, y int);
GRANT USAGE ON SCHEMA atk_t TO PUBLIC;
GRANT USAGE ON TYPE atk_t.pair TO PUBLIC;
RESET ROLE;
SELECT decoupled.create_materialized_view('atk_paired',
    'SELECT id, (ROW(id, id)::atk_t.pair).x AS x FROM payroll') > 0 AS created;
SET ROLE atk_user;
SET client_min_messages = warning;  -- (the NOTICE names the plan by its id)
ALTER TYPE atk_t.pair DROP ATTRIBUTE x CASCADE;
RESET client_min_messages;
RESET ROLE;
SELECT count(*) AS still_live FROM decoupled.objects WHERE name = 'atk_paired';
SELECT decoupled.drop('atk_paired');
DROP SCHEMA atk_t CASCADE;

-- 22. verify() computes with the settings every computation uses, not its
-- caller's: with standard_conforming_strings off, a backslash in a value
-- ended the literal the owner's function quoted correctly, and the rest
-- of the value ran as SQL with the owner's rights.
CREATE TABLE atk_names (id int PRIMARY KEY, name text NOT NULL);
SELECT decoupled.register_table('atk_names') > 0 AS registered;
GRANT INSERT ON atk_names TO atk_user;
GRANT SELECT ON atk_names TO atk_admin;
CREATE FUNCTION public.atk_noted() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.atk_loot VALUES (current_user, 'noted');
    RETURN '';
END $$;
GRANT EXECUTE ON FUNCTION public.atk_noted() TO PUBLIC;
SET ROLE atk_admin;
CREATE FUNCTION atk.label_dyn(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE 'SELECT ''label: '' || ''' || replace(s, '''', '''''') || '''' INTO r;
    -- A cursor of the owner's code stays with nobody's transaction.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE name = 'atk_left') THEN
        EXECUTE 'DECLARE atk_left CURSOR FOR SELECT 1';
    END IF;
    RETURN r;
END $$;
CREATE FUNCTION atk.label(s text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN atk.label_dyn(s);
END $$;
SET search_path = atk;
SELECT decoupled.create_materialized_view('atk_labels',
    'SELECT id, atk.label(name) AS l FROM public.atk_names') > 0 AS created;
RESET search_path;
GRANT SELECT ON atk.atk_labels TO atk_user;
RESET ROLE;
SET ROLE atk_user;
INSERT INTO atk_names VALUES (1, $x$\' || public.atk_noted() --$x$);
RESET ROLE;
SELECT decoupled.tick_tables() > 0 AS ticked;
SELECT decoupled.wait_for_upper('atk_labels', (SELECT upper - 1 FROM decoupled.frontiers
                                                WHERE name = 'atk_names'), '60s') > 0 AS caught_up;
SET ROLE atk_user;
SET standard_conforming_strings = off;
BEGIN;
SELECT decoupled.verify('atk_labels') AS verified;
SELECT count(*) AS cursors_left FROM pg_cursors;
COMMIT;
RESET standard_conforming_strings;
RESET ROLE;
SELECT count(*) AS noted_as_owner FROM atk_loot WHERE data = 'noted';
SELECT l FROM atk.atk_labels;
SELECT decoupled.drop('atk_labels');
SELECT decoupled.unregister_table('atk_names');
DROP TABLE atk_names;
DROP FUNCTION public.atk_noted();

-- Clean up.
SELECT decoupled.unregister_table('atk.codes'), decoupled.unregister_table('atk.labelled'),
       decoupled.unregister_table('atk.plain');
SELECT decoupled.drop('atk_conv');
SELECT decoupled.unregister_table('atk.atk_acct');
SELECT decoupled.drop('atk_sink'), decoupled.drop('payroll_mv');
SELECT decoupled.unregister_table('atk.t'), decoupled.unregister_table('payroll'),
       decoupled.unregister_table('cap');
SET client_min_messages = warning;
SELECT decoupled.finalize_dropped() >= 0 AS finalized;
-- verify()'s scratch tables use atk_code.
DISCARD TEMP;
DROP SCHEMA atk CASCADE;
DROP TABLE payroll, cap, atk_flag;
DROP DOMAIN atk_checked;
DROP FUNCTION atk_check(text);
DROP SCHEMA atk_open, atk_moved, atk_h2 CASCADE;
DROP TABLE atk_log, atk_loot;
DROP DOMAIN atk_code;
DROP FUNCTION atk_valid_code(text);
DROP OWNED BY atk_admin, atk_user;
DROP ROLE atk_admin;
DROP ROLE atk_user;
RESET client_min_messages;
