-- pg_decoupled 1.0 -> 1.1: moves the catalog from schema version 1 to 2.
--
-- What 1.1 changes:
--   * Versioned upgrades: the catalog's schema version moves with the
--     extension version (1.0: schema version 1, 1.1: schema version 2), and
--     the library opens both, so a server running the 1.1 library keeps
--     maintaining a catalog that has not been updated yet.
--   * decoupled.supported_schema_version() is STABLE (within an extension
--     script it is the schema version of the version being installed).
--   * PostgreSQL's own statements on the extension's objects (C15.1, in the
--     library): a maintained view's relation carries a comment saying what
--     maintains it (decoupled._describe_view), set at creation and, by this
--     script, on the views that have no comment yet.
--   * pg_dump and pg_restore (C15.2, 85_dump_restore.sql): the declaration
--     tables are the extension's configuration; catalog_objects.relation is
--     a regclass and catalog_objects.owner a regrole, so both travel by
--     name; a restore pauses the catalog (catalog_restore) until the
--     decoupled_restored event trigger, no member of the extension, comes
--     last; the capture worker ends at SIGTERM wherever it waits.
--   * Deployments (C10, 57_deployments.sql): create_deployment, promote,
--     drop_deployment; replica health per deployment; the configuration
--     the controller reconciles (C11.1) with who wrote it.
--   * The relay (C8): decoupled.relay, the in-process relay worker and the
--     external relay's segment (in the library).
--   * The capture worker's switch between trigger and WAL capture no longer
--     waits for a registration row that an unregister holds (a deadlock).
--   * A collection's stage and a kept-sums view's dstate are scratch in
--     memory (extension/scratch.hpp): a step that replaces the view's rows
--     (of its touched groups) appends with _replace_staged, which reads
--     them where they are, instead of staging their retractions with an
--     INSERT into the stage's table (which the 1.1 library drains for 1.0
--     catalogs).
--   * Every collection's history has its two parts apart as views too
--     (c<id>_history_cur, c<id>_history_dead; _create_history_parts, made
--     for existing collections at the end of this script): a kept-sums
--     step finds a group's new least or greatest value by an ordered index
--     probe of each, through an arrangement on the group keys and the
--     aggregated value.  An arrangement's index on dead ends with valid_to
--     (_arrange; those made before keep theirs).
--   * WAL capture locates an update's and a delete's old row by the
--     table's primary key where it has one (REPLICA IDENTITY DEFAULT; an
--     index on the key of cur and pending): _capture_key,
--     _capture_key_lookup and register_table.  Ticks and appends pair such
--     a table's retractions by the key too, so register_table drops its
--     cur's row hash index (tables registered under 1.0 have no key:
--     they keep it and pair by the row hash).  An old row nothing pending
--     touches is retracted by its key (a pending row with mz_diff 0) and
--     found by the tick: _capture_key_lookup, _capture_truncate and
--     _capture_resync (through _capture_held_negated) read such rows.
--   * Kept min/max (C13.2): a GROUP BY view whose aggregates are counts,
--     sums of integers and min/max of built-in types keeps them per group
--     (_stage_sums's filter, _merge_sums's replace and unknown); views
--     created before keep the strategy they were created with.
--   * A collection's changes at a time read dead by a range on valid_to
--     closed on both sides (_create_read_views, made anew for existing
--     collections at the end of this script; sinks' and subscriptions'
--     _changes_sql too): a dead analysed empty is no longer scanned whole
--     at every step.
--   * A kept-sums view's state has no index on emptied groups (dropped
--     from existing states at the end of this script): _merge_sums deletes
--     the groups it emptied by the ctids its statement returned, and an
--     update of a group's count can be HOT.
--   * A hot standby refuses catalog changes, appends, holds, subscriptions
--     and verify() with a clear error and hint; debug wait points for tests
--     (decoupled.wait_points, arm_wait_point, release_wait_point).
--   * Security: verify() writes only scratch tables it made; a relation
--     made from a collection's columns takes their types by OID
--     (_assert_column_types); append() is an entry point that writes only
--     into a collection its caller owns (_append); the time index's lock
--     is one SQL cannot take (_lock_time_index); domains whose checks call
--     a function a role other than a superuser owns are refused like those
--     such a role wrote.
--   * What a maintained view reads keeps its meaning: a function or view
--     it reads is not replaced (_refuse_replacing), a domain in use gets no
--     NOT VALID constraint (_refuse_type_change).
--   * A stalled WAL capture is a transition in status history
--     (_record_capture_health, from the controller's round).
--   * A change WAL capture cannot write stops capture of that table only:
--     after three failed passes the worker sets the table aside and takes it
--     again from its contents (_capture_set_aside, _capture_resync_table,
--     capture_resyncs) while the others go on; ticks leave a table set
--     aside alone.  The worker reads a registered table only while it is an
--     ordinary table (_assert_ordinary_table), and no ON SELECT rule makes
--     a registered table a view (_check_relation_ddl).
--
-- Every change a part in control/parts/ makes between the two releases is
-- repeated here: the fresh 1.1 install (built from the parts) and a 1.0
-- install updated by this script must end up with the same objects, which
-- t/021_upgrade.pl checks (docs/upgrades.md).  The whole script is one
-- transaction, and one catalog change: it bumps the catalog version once.

\echo Use "ALTER EXTENSION pg_decoupled UPDATE TO '1.1'" to load this file. \quit

-- Everything this update changes, locked first, all or none: the catalog's
-- tables and views, then every collection's relations (a view's relation,
-- the views over its history, its storage; later collections first).
-- Taken one by one as the script goes, a reader that held one of them and
-- waited for another the update already held was aborted as a deadlock
-- (a writer that read a registered table, then a view, in its
-- transaction).  Now the update never waits while holding any of them:
-- each lock waits 200 ms at most, and if one does not come the attempt
-- gives back what it took and tries again shortly — readers queue behind
-- a waiting attempt, so it gets its turn under load.  The caller's
-- lock_timeout, if set, bounds the whole (55P03: retry the update).
DO $$
DECLARE
    v_rels     regclass[];
    v_rel      regclass;
    v_timeout  text := current_setting('lock_timeout');
    v_deadline timestamptz;
BEGIN
    IF v_timeout::interval > interval '0' THEN
        v_deadline := clock_timestamp() + v_timeout::interval;
    END IF;
    SELECT array_agg(c.oid::regclass ORDER BY c.oid) INTO v_rels
      FROM pg_catalog.pg_class c
     WHERE c.relnamespace = 'decoupled'::regnamespace AND c.relkind IN ('r', 'v');
    SELECT v_rels || coalesce(array_agg(r.rel ORDER BY r.id DESC, r.ord), '{}') INTO v_rels
      FROM (SELECT o.lifetime_id AS id, p.ord, to_regclass(CASE WHEN p.part = 'relation'
                                                               THEN o.relation::oid::regclass::text
                                                               ELSE decoupled._storage(o.lifetime_id, p.part)
                                                          END) AS rel
              FROM decoupled.catalog_objects o,
                   unnest(ARRAY['relation', 'history', 'delta', 'before', 'history_cur',
                                'history_dead', 'cur', 'dead', 'state', 'dstate', 'stage',
                                'pending']) WITH ORDINALITY p(part, ord)
             WHERE o.dropped_at IS NULL
               AND (p.part <> 'relation' OR (o.kind = 'materialized view'
                                             AND o.relation IS NOT NULL
                                             AND EXISTS (SELECT FROM pg_catalog.pg_class r
                                                          WHERE r.oid = o.relation::oid)))) r
     WHERE r.rel IS NOT NULL;
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '200ms', true);
            FOREACH v_rel IN ARRAY v_rels LOOP
                EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_rel);
            END LOOP;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF v_deadline IS NOT NULL AND clock_timestamp() >= v_deadline THEN
                RAISE EXCEPTION 'could not lock pg_decoupled''s relations for the update within lock_timeout (%)',
                                v_timeout
                    USING ERRCODE = 'lock_not_available',
                          HINT = 'Something held them throughout; run the update again.';
            END IF;
        END;
        PERFORM pg_sleep(0.02 + random() * 0.05);
    END LOOP;
    PERFORM set_config('lock_timeout', v_timeout, true);
END
$$;

-- Refuses anything but a 1.0 catalog (C1.2: nothing is converted silently),
-- serializes with other catalog changes and wakes the controller at commit.
DO $$
DECLARE
    v_schema integer;
BEGIN
    SELECT schema_version INTO STRICT v_schema FROM decoupled.catalog_meta FOR UPDATE;
    IF v_schema <> 1 THEN
        RAISE EXCEPTION 'cannot update pg_decoupled from 1.0 to 1.1: the catalog is at schema version %', v_schema
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Extension version 1.0 has catalog schema version 1.',
                  HINT = 'The catalog was left unchanged.';
    END IF;
END
$$;
SELECT decoupled._begin_catalog_change();
-- The extension's DDL checks stay out of its own update: they read the
-- catalog's row type, which the update changes under them.
ALTER EVENT TRIGGER decoupled_ddl_end DISABLE;
ALTER EVENT TRIGGER decoupled_sql_drop DISABLE;

------------------------------------------------------------------------------
-- Changes of 1.1 (append new DDL below, in the order of control/parts/)
------------------------------------------------------------------------------

-- 10_catalog
ALTER FUNCTION decoupled.supported_schema_version() STABLE;

-- A name still held by a dropped view's relation says why.
CREATE OR REPLACE FUNCTION decoupled._check_free(name text, schema text, relname text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_dropped text;
BEGIN
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.name = _check_free.name AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a collection or sink named "%" already exists', name
            USING ERRCODE = 'duplicate_object';
    END IF;
    IF to_regclass(format('%I.%I', schema, relname)) IS NOT NULL THEN
        -- A dropped view's or source's relation goes at once, unless a
        -- transaction still reads it (a drop never waits): then it goes
        -- when that transaction ends (finalize_dropped).
        SELECT format('%s "%s"', o.kind, o.name) INTO v_dropped
          FROM decoupled.catalog_objects o
         WHERE o.relation = to_regclass(format('%I.%I', schema, relname))
           AND o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
         LIMIT 1;
        IF v_dropped IS NOT NULL THEN
            RAISE EXCEPTION 'relation "%" already exists in schema "%"', relname, schema
                USING ERRCODE = 'duplicate_table',
                      DETAIL = format('It belongs to dropped %s, which a transaction still open '
                                      'reads.', v_dropped),
                      HINT = 'It is removed once that transaction ends; try again then.';
        END IF;
        RAISE EXCEPTION 'relation "%" already exists in schema "%"', relname, schema
            USING ERRCODE = 'duplicate_table';
    END IF;
END
$$;

COMMENT ON FUNCTION decoupled.supported_schema_version() IS
    'The newest catalog schema version this build of pg_decoupled opens (older ones down to 1 open too).';

-- 60_materialized_views
-- The comment a maintained view's relation starts with, where psql shows
-- it (\dv+, obj_description): what maintains it, in which cluster, and how
-- (C15.1).  COMMENT ON replaces it like any comment.
CREATE FUNCTION decoupled._describe_view(id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o decoupled.catalog_objects;
BEGIN
    SELECT * INTO STRICT o FROM decoupled.catalog_objects WHERE lifetime_id = id;
    EXECUTE format('COMMENT ON VIEW %s IS %L', o.relation::regclass,
        format('Materialized view maintained by pg_decoupled in cluster "%s"; strategy %s%s. '
               'See decoupled.view_maintenance.',
               o.cluster,
               CASE WHEN o.definition->>'strategy' IN ('linear', 'sums', 'groups', 'partitions')
                    THEN 'incremental (' || (o.definition->>'strategy') || ')'
                    ELSE 'recompute' END,
               CASE WHEN o.definition->>'reason' IS NOT NULL
                    THEN ': ' || (o.definition->>'reason') ELSE '' END));
END
$$;

REVOKE ALL ON FUNCTION decoupled._describe_view(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION decoupled._create_materialized_view(name text, query text, cluster text,
                                                    retain_history interval, as_of bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := _create_materialized_view.name;
    v_owner   oid := decoupled._caller();
    schema    text := decoupled._caller_schema();
    v_sql     text;
    v_version bigint;
    v_id      bigint;
    v_plan    regclass;
    v_inputs  bigint[];
    v_direct  oid[];
    v_bad     regclass;
    v_cols    jsonb;
    v_as_of   bigint;
    v_min     record;
    v_message text;
    v_detail  text;
    v_hint    text;
    v_state   text;
    v_strategy record;
    v_lock    text;
BEGIN
    PERFORM decoupled._check_name('materialized view', v_name);
    IF query IS NULL THEN
        RAISE EXCEPTION 'query must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._check_retention(retain_history);
    IF as_of < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', as_of
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._check_create_in(schema,
        'A materialized view''s relation is created in the current schema.');
    v_sql := decoupled._mv_check_sql(query);

    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_materialized_view.cluster);
    PERFORM decoupled._check_free(v_name, schema, v_name);

    INSERT INTO decoupled.catalog_objects
           (name, kind, cluster, definition, written_plan, retain_history, created_in_version)
    VALUES (v_name, 'materialized view', _create_materialized_view.cluster,
            jsonb_build_object('schema', schema, 'query', query, 'owner', v_owner),
            '', retain_history, v_version)
    RETURNING lifetime_id INTO v_id;

    -- The written plan: analyzed once, in the caller's search_path, which
    -- is in force for that parse analysis only.  security_invoker: the
    -- relations it reads are checked, row-level security included, as
    -- whoever computes it — the view's owner.
    BEGIN
        PERFORM decoupled._create_plan_view(decoupled._storage(v_id, 'plan'), v_sql);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
                                v_hint = PG_EXCEPTION_HINT, v_state = RETURNED_SQLSTATE;
        -- The parser's own detail and hint, where it gave them: RAISE
        -- prints an empty one as an empty line.
        v_message := format('invalid query for materialized view "%s": %s', v_name, v_message);
        IF v_detail <> '' AND v_hint <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, DETAIL = v_detail,
                                  HINT = v_hint;
        ELSIF v_detail <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, DETAIL = v_detail;
        ELSIF v_hint <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, HINT = v_hint;
        END IF;
        RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state;
    END;
    v_plan := decoupled._storage(v_id, 'plan')::regclass;

    v_inputs := decoupled._plan_inputs(v_name, v_plan);
    v_direct := decoupled._plan_direct_relations(v_plan);
    SELECT r::regclass INTO v_bad FROM unnest(v_direct) r
     WHERE NOT has_table_privilege(v_owner, r, 'SELECT')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied for relation %', v_bad
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Materialized view "%s" reads it.', v_name);
    END IF;

    v_cols := decoupled._relation_columns(v_plan);
    PERFORM decoupled._check_columns('materialized view', v_name, v_cols);
    v_strategy := decoupled._mv_strategy(v_plan);
    -- The arrangements' indexes, and the time index of an input view that
    -- has none (its steps find the times at which its inputs changed),
    -- lock their inputs' storage against writers: take those locks first,
    -- in the order every writer takes them (ascending lifetime id, cur
    -- before dead), before the inputs' bounds below, so that a replica
    -- appending to two of them (a source's outputs, a tick) or stepping an
    -- input view (its storage, then its own inputs' bounds) cannot
    -- deadlock with us.
    v_lock := (SELECT 'LOCK TABLE ' || string_agg(decoupled._storage(l.i, l.p), ', '
                                                 ORDER BY l.i, l.p) || ' IN SHARE MODE'
                 FROM (SELECT a.i, a.p
                         FROM (SELECT unnest(v_strategy.arrangement_inputs) AS i) x,
                              LATERAL (VALUES (x.i, 'cur'), (x.i, 'dead')) a(i, p)
                       UNION
                       SELECT t.i, 'cur'
                         FROM unnest(v_inputs) t(i)
                        WHERE to_regclass(format('decoupled_storage.c%s_cur_mz_ts_idx', t.i)) IS NULL
                          AND to_regclass(decoupled._storage(t.i, 'cur')) IS NOT NULL) l(i, p));
    IF v_lock IS NOT NULL THEN
        EXECUTE v_lock;
    END IF;
    PERFORM decoupled._ensure_time_index(i) FROM unnest(v_inputs) i ORDER BY i;

    -- Admission (C3.2, C3.3): the first computation reads every input at
    -- as_of, so each must be readable there and stay so; locking their
    -- bounds keeps a publication round from passing it before commit.
    -- FOR UPDATE, as the commit-time permission check takes them: two
    -- transactions upgrading a shared lock there would deadlock.
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = ANY (v_inputs)
     ORDER BY b.lifetime_id FOR UPDATE;
    SELECT o.name, greatest(b.bound, f.since) AS readable_from INTO v_min
      FROM decoupled.catalog_objects o
      JOIN decoupled.catalog_frontiers f USING (lifetime_id)
      JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE o.lifetime_id = ANY (v_inputs)
     ORDER BY 2 DESC LIMIT 1;
    IF _create_materialized_view.as_of IS NOT NULL THEN
        IF _create_materialized_view.as_of < v_min.readable_from THEN
            RAISE EXCEPTION 'materialized view "%" cannot start at %: "%" may be compacted there',
                            v_name, _create_materialized_view.as_of, v_min.name
                USING ERRCODE = 'check_violation',
                      DETAIL = format('The compaction bound of "%s" is %s.', v_min.name,
                                      v_min.readable_from),
                      HINT = format('Choose as_of %s or later, or protect older history with a '
                                    'hold before it is compacted.', v_min.readable_from);
        END IF;
        v_as_of := _create_materialized_view.as_of;
    ELSIF v_inputs = '{}' THEN
        v_as_of := decoupled._next_timestamp(0);
    ELSE
        -- The latest time every input can already serve, if admitted.
        SELECT greatest(v_min.readable_from, min(f.upper) - 1) INTO v_as_of
          FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = ANY (v_inputs);
    END IF;

    UPDATE decoupled.catalog_objects o
       SET written_plan = (SELECT w.ev_action::text FROM pg_rewrite w
                            WHERE w.ev_class = v_plan AND w.rulename = '_RETURN'),
           definition = o.definition || jsonb_build_object(
               'columns', v_cols, 'plan', v_plan::oid, 'inputs', to_jsonb(v_inputs),
               'direct', to_jsonb(v_direct), 'as_of', v_as_of,
               'strategy', v_strategy.strategy, 'reason', v_strategy.reason)
     WHERE o.lifetime_id = v_id;
    INSERT INTO decoupled.view_steps (lifetime_id) VALUES (v_id);
    PERFORM decoupled._arrange(v_id, a.input, a.keys)
       FROM unnest(v_strategy.arrangement_inputs, v_strategy.arrangement_keys) AS a(input, keys);
    PERFORM decoupled._create_storage(v_id);
    IF v_strategy.strategy NOT IN ('linear', 'partitions') THEN
        -- Its steps replace rows where they are (_replace_staged) and never
        -- look a retraction up by its row hash: an index on that would
        -- only cost every row a step writes.  Nor does anything read its
        -- changes yet: without the time index a step rewrites a group's row
        -- in place (_ensure_time_index).
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_hash_idx');
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_ts_idx');
        -- Room on every page for the new rows of the groups a step touches:
        -- the first computation fills pages to 70%, and a later step's row
        -- is written where its old one was (no new page, no index entry).
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', decoupled._storage(v_id, 'cur'));
    END IF;
    IF v_strategy.strategy IN ('sums', 'groups') THEN
        PERFORM decoupled._create_kept_state(v_id, v_plan, v_owner, v_strategy.strategy = 'sums');
    END IF;
    PERFORM decoupled._create_public_view(v_id, schema, v_name);
    -- The view's data is derived from what its owner may read: only the
    -- owner reads it, and grants it on.
    EXECUTE format('REVOKE ALL ON %I.%I FROM PUBLIC', schema, v_name);
    EXECUTE format('GRANT SELECT ON %I.%I TO %s WITH GRANT OPTION', schema, v_name,
                   v_owner::regrole);
    EXECUTE format('GRANT SELECT ON %s TO %s', v_plan, v_owner::regrole);
    UPDATE decoupled.catalog_objects o
       SET relation = format('%I.%I', schema, v_name)::regclass
     WHERE o.lifetime_id = v_id;
    PERFORM decoupled._describe_view(v_id);

    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_as_of, v_as_of);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
    SELECT i, v_id, v_as_of FROM unnest(v_inputs) i;
    RETURN v_id;
END
$$;

SELECT decoupled._describe_view(o.lifetime_id)
  FROM decoupled.catalog_objects o
 WHERE o.kind = 'materialized view' AND o.dropped_at IS NULL AND o.relation IS NOT NULL
   AND obj_description(o.relation, 'pg_class') IS NULL;

-- 10_catalog
-- One row while pg_restore loads a dumped catalog into this one (C15.2,
-- 85_dump_restore.sql): nothing is maintained, ticked, captured or changed
-- until the restore has brought everything.  Runtime state: never dumped.
CREATE TABLE decoupled.catalog_restore (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    started_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION decoupled._restoring() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT FROM decoupled.catalog_restore)
$$;

------------------------------------------------------------------------

ALTER TABLE decoupled.catalog_objects ALTER COLUMN relation TYPE regclass;

CREATE OR REPLACE FUNCTION decoupled._begin_catalog_change() RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_schema  integer;
    v_version bigint;
BEGIN
    IF decoupled._restoring() THEN
        RAISE EXCEPTION 'cannot change the pg_decoupled catalog while a restore is in progress'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_restore is loading a dumped catalog into this database.',
                  HINT = 'Wait until the restore has finished (decoupled.restore shows it).';
    END IF;
    SELECT schema_version INTO STRICT v_schema FROM decoupled.catalog_meta FOR UPDATE;
    PERFORM decoupled._assert_schema_version(v_schema);
    UPDATE decoupled.catalog_meta
       SET catalog_version = catalog_version + 1, changed_at = now()
    RETURNING catalog_version INTO v_version;
    PERFORM decoupled._wake_controller_at_commit();
    RETURN v_version;
END
$$;

-- 33_drops
CREATE OR REPLACE FUNCTION decoupled._object_of_relation(rel oid) RETURNS decoupled.catalog_objects
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.* FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL
       AND (o.relation = rel
            OR (o.kind = 'materialized view' AND (o.definition->>'plan')::oid = rel))
       -- While pg_restore loads a dump, its objects are not guarded yet: it
       -- adds their constraints and triggers after their catalog rows.
       AND NOT decoupled._restoring()
     ORDER BY o.lifetime_id LIMIT 1
$$;

-- 85_dump_restore
------------------------------------------------------------------------------
-- pg_dump and pg_restore (brief C15.2)
------------------------------------------------------------------------------
--
-- What a dump carries.  The collections' storage (decoupled_storage.c<id>_*),
-- the views' relations and written plans, registered tables and sinks'
-- tables are ordinary objects to pg_dump: their definitions and contents
-- travel as they are.  The catalog's declaration tables are marked as the
-- extension's configuration (pg_extension_config_dump), so pg_dump writes
-- their rows too; runtime state — incarnations, sessions, holds, health,
-- status history, capture progress — is not marked and does not travel.
--
-- How a restore goes (a state machine with one durable state,
-- decoupled.catalog_restore):
--
--   fresh catalog --first restored row--> restoring --marker--> following
--
--   * The first row pg_restore loads into a declaration table of a fresh
--     catalog (the one CREATE EXTENSION just made: catalog version 1, no
--     collection) starts the restore: the install's defaults and every
--     runtime row are removed and catalog_restore gets its row.  Into a
--     catalog that is not fresh, restored rows are ordinary inserts, which
--     then collide with what is there: restore into a new database.
--   * While restoring, nothing acts on the half-loaded catalog: the
--     controller supervises no replica or adapter and ticks nothing, the
--     capture worker waits, catalog changes are refused, and the DDL guards
--     let pg_restore add constraints and triggers to the objects.
--   * Each restored row that names something of this database by OID is
--     bound again as it is loaded (_restore_row): a relation travels by name
--     (catalog_objects.relation is a regclass), an owner by role name
--     (catalog_objects.owner), a written plan is read back from the plan
--     view pg_restore just created, column types from the storage, a
--     captured table's OID from its collection.
--   * The end: pg_restore creates event triggers after everything else (in
--     its last pass, after data, constraints and privileges), so the
--     extension keeps one that is not its member — decoupled_restored,
--     which does nothing — and the ProcessUtility hook finishes the restore
--     when pg_restore creates it again (decoupled._finish_restore()).  A
--     restore that leaves it out (--section, a TOC list) ends with
--     decoupled.finish_restore().
--   * Finished: one catalog change wakes the controller; replicas start from
--     the restored uppers (views and sinks continue where their durable
--     progress was), and the capture worker, finding WAL-captured tables
--     but no slot, creates one and resynchronises their contents.

-- Marks the declaration tables and sequences for pg_dump.
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_meta', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_configuration', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_deployments', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_clusters', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_replicas', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_replicas_replica_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_adapters', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_adapter_stops', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_objects', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.lifetime_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.rowid_seq', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_frontiers', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_bounds', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_oracle', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_requirements', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.view_steps', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.catalog_arrangements', '');
SELECT pg_catalog.pg_extension_config_dump('decoupled.capture_relations', '');

-- Who created an object, by role: travels by name, where the definition's
-- OID would not.  Kept from the definition by _restore_row.  Text, as
-- regrole prints it, not regrole: a dump naming a role the restoring
-- server lacks would fail the whole COPY of catalog_objects and lose every
-- declaration; _rebind_object gives such an object to the restoring role.
ALTER TABLE decoupled.catalog_objects ADD COLUMN owner text;

-- A fresh catalog: what CREATE EXTENSION made, and nothing since.
CREATE FUNCTION decoupled._fresh_catalog() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT m.catalog_version = 1 FROM decoupled.catalog_meta m), false)
       AND NOT EXISTS (SELECT FROM decoupled.catalog_objects)
$$;

-- The restore starts: the install's defaults and all runtime rows go (the
-- dump brings the declarations, defaults included if they were kept).
-- pg_restore -j loads tables in parallel: the first to insert the restore
-- row clears the catalog; the others wait for it and only load.
CREATE FUNCTION decoupled._begin_restore() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO decoupled.catalog_restore DEFAULT VALUES ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM decoupled.catalog_holds;
    DELETE FROM decoupled.session_records;
    DELETE FROM decoupled.catalog_adapter_incarnations;
    DELETE FROM decoupled.catalog_replica_incarnations;
    DELETE FROM decoupled.replica_health;
    DELETE FROM decoupled.table_health;
    DELETE FROM decoupled.status_events;
    DELETE FROM decoupled.catalog_bound_queue;
    DELETE FROM decoupled.capture_progress;
    DELETE FROM decoupled.capture_relations;
    DELETE FROM decoupled.catalog_adapter_stops;
    DELETE FROM decoupled.catalog_adapters;
    DELETE FROM decoupled.catalog_replicas;
    DELETE FROM decoupled.catalog_clusters;
    DELETE FROM decoupled.catalog_deployments;
    DELETE FROM decoupled.catalog_configuration;
    DELETE FROM decoupled.catalog_oracle;
    DELETE FROM decoupled.catalog_meta;
END
$$;

-- A restored catalog_objects row, bound to this database's objects.
CREATE FUNCTION decoupled._rebind_object(o decoupled.catalog_objects)
RETURNS decoupled.catalog_objects
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_plan    regclass := to_regclass(format('decoupled_storage.c%s_plan', o.lifetime_id));
    v_storage regclass := coalesce(to_regclass(format('decoupled_storage.c%s_cur', o.lifetime_id)),
                                   o.relation);
    v_owner   regrole;
BEGIN
    IF o.owner IS NOT NULL THEN
        v_owner := to_regrole(o.owner);
        IF v_owner IS NULL THEN
            -- As pg_restore leaves the object's relations (ALTER ... OWNER
            -- TO that role fails): owned by the role restoring them.
            v_owner := current_user::regrole;
            RAISE WARNING 'role "%" does not exist: % "%" is now owned by "%"',
                          o.owner, o.kind, o.name, current_user
                USING DETAIL = 'pg_restore leaves its relations to the restoring role too; '
                               'the object is computed and read with that role''s rights.',
                      HINT = 'Create the roles before restoring (pg_dumpall --roles-only).';
        END IF;
        o.definition := o.definition || jsonb_build_object('owner', v_owner::oid);
    END IF;
    IF o.kind = 'materialized view' AND v_plan IS NOT NULL THEN
        o.definition := o.definition || jsonb_build_object(
            'plan', v_plan::oid, 'direct', to_jsonb(decoupled._plan_direct_relations(v_plan)));
        o.written_plan := (SELECT w.ev_action::text FROM pg_rewrite w
                            WHERE w.ev_class = v_plan AND w.rulename = '_RETURN');
    END IF;
    IF o.definition ? 'columns' AND v_storage IS NOT NULL THEN
        o.definition := jsonb_set(o.definition, '{columns}', (
            SELECT coalesce(jsonb_agg(CASE WHEN a.atttypid IS NULL THEN c
                                           ELSE c || jsonb_build_object('typid', a.atttypid) END
                                      ORDER BY n), '[]')
              FROM jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, n)
              LEFT JOIN pg_attribute a ON a.attrelid = v_storage AND a.attname = c->>'name'
                                      AND NOT a.attisdropped));
    END IF;
    RETURN o;
END
$$;

-- BEFORE INSERT on every dumped table (and UPDATE on catalog_objects).
CREATE FUNCTION decoupled._restore_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- pg_restore (and a plain dump's script) loads the catalog with COPY
    -- into each table FROM stdin; the extension itself never copies into
    -- it.  Only that statement: a COPY whose query calls a catalog
    -- function (COPY (SELECT decoupled.create_cluster(...)) TO STDOUT)
    -- writes the catalog too, and is no restore.
    v_copy      boolean := TG_OP = 'INSERT'
                           AND current_query() ~* ('^\s*copy\s+(decoupled\.)?"?' || TG_TABLE_NAME
                                                   || '"?[\s(].*\mfrom\s+stdin\M');
    v_restoring boolean := v_copy AND decoupled._restoring();
BEGIN
    IF v_copy AND NOT v_restoring THEN
        IF NOT decoupled._fresh_catalog() THEN
            RAISE EXCEPTION 'cannot restore a dumped pg_decoupled catalog into this one'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('This catalog has declarations of its own (catalog version %s).',
                                      (SELECT m.catalog_version FROM decoupled.catalog_meta m)),
                      HINT = 'Restore into a new database: one where CREATE EXTENSION pg_decoupled '
                             'has just run, or one pg_restore creates it in.';
        END IF;
        PERFORM decoupled._begin_restore();
        v_restoring := true;
    END IF;
    IF v_restoring THEN
        CASE TG_TABLE_NAME
            WHEN 'catalog_objects' THEN
                NEW := decoupled._rebind_object(NEW);
            WHEN 'capture_relations' THEN
                NEW.relation := (SELECT o.relation FROM decoupled.catalog_objects o
                                  WHERE o.lifetime_id = NEW.lifetime_id);
            WHEN 'catalog_meta' THEN
                IF NEW.schema_version > decoupled.supported_schema_version() THEN
                    RAISE EXCEPTION 'cannot restore a pg_decoupled catalog at schema version %',
                                    NEW.schema_version
                        USING ERRCODE = 'feature_not_supported',
                              DETAIL = format('This extension opens schema versions up to %s.',
                                              decoupled.supported_schema_version()),
                              HINT = 'Restore into a server with the pg_decoupled build that made the dump.';
                END IF;
                NEW.schema_version := decoupled.supported_schema_version();
            WHEN 'catalog_oracle' THEN
                -- Times never go back: the oracle continues past every
                -- restored upper.
                PERFORM decoupled._next_timestamp(NEW.high_water);
            ELSE
                NULL;
        END CASE;
    END IF;
    IF TG_TABLE_NAME = 'catalog_objects' THEN
        NEW.owner := (NEW.definition->>'owner')::oid::regrole::text;
    END IF;
    RETURN NEW;
END
$$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['catalog_meta', 'catalog_configuration', 'catalog_deployments',
                             'catalog_clusters', 'catalog_replicas', 'catalog_adapters',
                             'catalog_adapter_stops', 'catalog_frontiers', 'catalog_bounds',
                             'catalog_oracle', 'catalog_requirements', 'view_steps',
                             'catalog_arrangements', 'capture_relations'] LOOP
        EXECUTE format('CREATE TRIGGER decoupled_restore_row BEFORE INSERT ON decoupled.%I '
                       'FOR EACH ROW EXECUTE FUNCTION decoupled._restore_row()', t);
    END LOOP;
END
$$;
CREATE TRIGGER decoupled_restore_row BEFORE INSERT OR UPDATE ON decoupled.catalog_objects
    FOR EACH ROW EXECUTE FUNCTION decoupled._restore_row();

-- The restore is over: the catalog follows again.  True if one was in
-- progress.
CREATE FUNCTION decoupled._finish_restore() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT decoupled._restoring() THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM decoupled.catalog_meta) THEN
        RAISE EXCEPTION 'cannot finish the restore: the dump brought no pg_decoupled catalog'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Restore the whole dump (its data section included) into a new database.';
    END IF;
    -- This server's clock may be behind the dumped one's: time goes on from
    -- the latest restored upper.
    PERFORM decoupled._next_timestamp(coalesce(max(f.upper), 0)) FROM decoupled.catalog_frontiers f;
    DELETE FROM decoupled.catalog_restore;
    PERFORM decoupled._begin_catalog_change();
    RETURN true;
END
$$;

CREATE FUNCTION decoupled.finish_restore() RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT decoupled._finish_restore()
$$;
COMMENT ON FUNCTION decoupled.finish_restore() IS
    'End a restore that left out the decoupled_restored event trigger (pg_restore creates it last, which ends the restore by itself).';

CREATE VIEW decoupled.restore AS
    SELECT r.started_at FROM decoupled.catalog_restore r;
COMMENT ON VIEW decoupled.restore IS 'One row while pg_restore loads a dumped catalog.';

-- The end-of-restore marker.  It must not be the extension's member, or
-- pg_dump would leave it out; DROP EXTENSION drops it first (ddl_guard.cpp).
CREATE FUNCTION decoupled._restore_marker() RETURNS event_trigger
LANGUAGE plpgsql AS $$
BEGIN
END
$$;
CREATE EVENT TRIGGER decoupled_restored ON sql_drop WHEN TAG IN ('DROP ACCESS METHOD')
    EXECUTE FUNCTION decoupled._restore_marker();
DELETE FROM pg_catalog.pg_depend
 WHERE classid = 'pg_catalog.pg_event_trigger'::regclass AND deptype = 'e'
   AND objid = (SELECT e.oid FROM pg_catalog.pg_event_trigger e
                 WHERE e.evtname = 'decoupled_restored');

-- The owners of the objects 1.0 made (the trigger reads them from their
-- definitions).
UPDATE decoupled.catalog_objects SET definition = definition;

-- 90_privileges: what 1.1 adds is private, but for these.
REVOKE ALL ON decoupled.catalog_restore FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._restoring(), decoupled._fresh_catalog(),
    decoupled._begin_restore(), decoupled._rebind_object(decoupled.catalog_objects),
    decoupled._restore_row(),
    decoupled._finish_restore(), decoupled.finish_restore(), decoupled._restore_marker()
FROM PUBLIC;
GRANT SELECT ON decoupled.restore TO PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled.finish_restore() TO decoupled_admin;

------------------------------------------------------------------------------
-- Deployments (C10) and the reconciled configuration (C11.1)
------------------------------------------------------------------------------

-- 10_catalog
-- Each deployment's replicas report their own health; the configuration
-- says who wrote it.
ALTER TABLE decoupled.catalog_configuration ADD COLUMN written_by text,
    ADD COLUMN deployment text;
ALTER TABLE decoupled.replica_health ADD COLUMN deployment decoupled.object_name
    REFERENCES decoupled.catalog_deployments (name) ON DELETE CASCADE;
UPDATE decoupled.replica_health h
   SET deployment = coalesce((SELECT i.deployment FROM decoupled.catalog_replica_incarnations i
                               WHERE i.incarnation = h.incarnation),
                             decoupled._active_deployment());
ALTER TABLE decoupled.replica_health ALTER COLUMN deployment SET NOT NULL,
    DROP CONSTRAINT replica_health_pkey, ADD PRIMARY KEY (lifetime_id, replica_id, deployment);

CREATE OR REPLACE FUNCTION decoupled.declare_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name       text := declare_adapter.name;
    v_deployment text;
BEGIN
    PERFORM decoupled._check_name('adapter', v_name);
    PERFORM decoupled._begin_catalog_change();
    v_deployment := decoupled._active_deployment();
    IF EXISTS (SELECT FROM decoupled.catalog_adapters a
                WHERE a.name = v_name AND a.deployment = v_deployment) THEN
        RAISE EXCEPTION 'adapter "%" already exists in deployment "%"', v_name, v_deployment
            USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO decoupled.catalog_adapters (name, deployment) VALUES (v_name, v_deployment);
    -- A prewarming deployment serves the same front doors once promoted.
    INSERT INTO decoupled.catalog_adapters (name, deployment)
    SELECT v_name, d.name FROM decoupled.catalog_deployments d WHERE d.state = 'prewarming'
    ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION decoupled.declare_adapter(text) IS
    'Declare a SQL front door (adapter) in the active deployment (and in prewarming ones).';

CREATE OR REPLACE FUNCTION decoupled.drop_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name       text := drop_adapter.name;
    v_deployment text;
BEGIN
    PERFORM decoupled._check_name('adapter', v_name);
    PERFORM decoupled._begin_catalog_change();
    v_deployment := decoupled._active_deployment();
    -- Cascades to the adapter's incarnations and exactly their holds,
    -- sessions and subscriptions; peers are untouched.
    DELETE FROM decoupled.catalog_adapters a
     WHERE a.name = v_name AND a.deployment = v_deployment;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"', v_name, v_deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    DELETE FROM decoupled.catalog_adapters a
     WHERE a.name = v_name
       AND a.deployment IN (SELECT d.name FROM decoupled.catalog_deployments d
                             WHERE d.state = 'prewarming');
END
$$;
COMMENT ON FUNCTION decoupled.drop_adapter(text) IS
    'Drop an adapter of the active deployment (and of prewarming ones), releasing exactly its holds.';

-- 31_append
CREATE OR REPLACE FUNCTION decoupled._assert_write_authority(deployment text, incarnation bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := coalesce(_assert_write_authority.deployment,
                                  decoupled._active_deployment());
    v_state      text;
BEGIN
    SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
     WHERE d.name = v_deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist', v_deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_state = 'retired' AND _assert_write_authority.incarnation IS NOT NULL THEN
        -- Promotion retired it: its processes are fenced for good.
        RAISE EXCEPTION 'deployment "%" was retired', v_deployment
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'Another deployment was promoted; a retired deployment never '
                           'writes again.';
    END IF;
    IF v_state <> 'active' THEN
        RAISE EXCEPTION 'deployment "%" has no write authority', v_deployment
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('It is %s; only the active deployment writes.', v_state);
    END IF;
    IF _assert_write_authority.incarnation IS NOT NULL THEN
        PERFORM FROM decoupled.catalog_replica_incarnations i
         WHERE i.incarnation = _assert_write_authority.incarnation
           AND i.deployment = v_deployment AND i.retired_at IS NULL
           FOR SHARE;
        IF NOT FOUND THEN
            PERFORM FROM decoupled.catalog_adapter_incarnations i
             WHERE i.incarnation = _assert_write_authority.incarnation
               AND i.deployment = v_deployment AND i.retired_at IS NULL
               FOR SHARE;
        END IF;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'incarnation % is not current in deployment "%"',
                            _assert_write_authority.incarnation, v_deployment
                USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                      DETAIL = 'A newer incarnation replaced it, or it was retired; '
                               'a fenced writer can never write again.';
        END IF;
    END IF;
END
$$;

-- 40_permission
CREATE OR REPLACE FUNCTION decoupled.dry_run(sql text)
RETURNS TABLE (action text, kind text, name text, detail text)
-- No SET search_path: the call runs as written, in the caller's context.
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_function text;
    v_before   text[];
    v_after    text[];
    v_marker   constant text := 'pg_decoupled dry run';
    v_detail   text;
BEGIN
    v_function := substring(sql FROM '^\s*SELECT\s+decoupled\.([a-z_]+)\s*\(');
    IF v_function IS NULL OR sql ~ ';\s*\S'
       OR v_function NOT IN ('create_cluster', 'alter_cluster', 'drop_cluster',
                             'declare_adapter', 'drop_adapter', 'register_table',
                             'unregister_table', 'acquire_hold', 'release_hold',
                             'publish_bounds', 'apply_compaction', 'create_source',
                             'create_materialized_view', 'create_sink', 'drop',
                             'create_deployment', 'drop_deployment') THEN
        RAISE EXCEPTION 'dry_run takes one call of a catalog function'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the call as text, for example ''SELECT decoupled.create_cluster(...)''.';
    END IF;

    v_before := decoupled._catalog_inventory();
    BEGIN
        SET CONSTRAINTS ALL IMMEDIATE;
        EXECUTE sql;
        v_after := decoupled._catalog_inventory();
        RAISE EXCEPTION USING ERRCODE = 'DC999', MESSAGE = v_marker;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE <> 'DC999' OR SQLERRM <> v_marker THEN
            GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
            RETURN QUERY SELECT 'error'::text, NULL::text, NULL::text,
                                SQLSTATE || ': ' || SQLERRM
                                || CASE WHEN v_detail <> '' THEN ' (' || v_detail || ')' ELSE '' END;
            RETURN;
        END IF;
    END;
    RETURN QUERY
        SELECT 'create', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_after) e WHERE e <> ALL (v_before)
        UNION ALL
        SELECT 'drop', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_before) e WHERE e <> ALL (v_after)
        ORDER BY 1, 2, 3;
    RETURN QUERY SELECT 'admitted'::text, NULL::text, NULL::text, 'no admission error'::text;
END
$$;
COMMENT ON FUNCTION decoupled.dry_run(text) IS
    'Report what a catalog call would create or drop, or its admission error, without any effect.';

CREATE OR REPLACE FUNCTION decoupled._catalog_inventory() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(e), '{}') FROM (
        SELECT 'cluster:' || name FROM decoupled.catalog_clusters
        UNION ALL SELECT 'replica:' || cluster || '.' || name FROM decoupled.catalog_replicas
        UNION ALL SELECT 'deployment:' || name FROM decoupled.catalog_deployments
        UNION ALL SELECT 'adapter:' || name || ' (' || deployment || ')'
                    FROM decoupled.catalog_adapters
        UNION ALL SELECT kind || ':' || name FROM decoupled.catalog_objects WHERE dropped_at IS NULL
        UNION ALL SELECT 'requirement:' || c.name || ' for ' || r.name
                    FROM decoupled.catalog_requirements q
                    JOIN decoupled.catalog_objects c ON c.lifetime_id = q.lifetime_id
                    JOIN decoupled.catalog_objects r ON r.lifetime_id = q.required_by
        UNION ALL SELECT 'hold:' || o.name || ' at ' || h.frontier || ' (hold ' || h.hold_id || ')'
                    FROM decoupled.catalog_holds h JOIN decoupled.catalog_objects o USING (lifetime_id)
    ) x(e)
$$;

-- 50_replicas
CREATE OR REPLACE FUNCTION decoupled.replica_report(incarnation bigint, lifetime_id bigint, status text,
                                         error text DEFAULT NULL, hint text DEFAULT NULL,
                                         hydrated boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_replica_incarnations;
    v_before text;
    v_name   text;
BEGIN
    i := decoupled._live_incarnation(replica_report.incarnation);
    PERFORM FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = replica_report.lifetime_id AND o.dropped_at IS NULL;
    IF NOT FOUND THEN
        RETURN;  -- dropped meanwhile: the committer already wrote its history
    END IF;
    SELECT h.status INTO v_before FROM decoupled.replica_health h
     WHERE h.lifetime_id = replica_report.lifetime_id AND h.replica_id = i.replica_id
       AND h.deployment = i.deployment FOR UPDATE;
    INSERT INTO decoupled.replica_health AS h
           (lifetime_id, replica_id, deployment, incarnation, status, error, hint, hydrated,
            transition_at, updated_at)
    VALUES (replica_report.lifetime_id, i.replica_id, i.deployment, replica_report.incarnation,
            replica_report.status, replica_report.error, replica_report.hint,
            replica_report.hydrated, now(), now())
    ON CONFLICT (lifetime_id, replica_id, deployment) DO UPDATE
       SET incarnation = EXCLUDED.incarnation, status = EXCLUDED.status, error = EXCLUDED.error,
           hint = EXCLUDED.hint, hydrated = EXCLUDED.hydrated, updated_at = now(),
           transition_at = CASE WHEN h.status IS DISTINCT FROM EXCLUDED.status THEN now()
                                ELSE h.transition_at END
     WHERE h.incarnation <= EXCLUDED.incarnation;
    -- The history is the active deployment's: a prewarming replica's
    -- transitions are visible in decoupled.hydration only.
    IF FOUND AND v_before IS DISTINCT FROM replica_report.status
       AND i.deployment = decoupled._active_deployment() THEN
        SELECT r.name INTO v_name FROM decoupled.catalog_replicas r WHERE r.replica_id = i.replica_id;
        INSERT INTO decoupled.status_events (lifetime_id, replica, incarnation, status, error)
        VALUES (replica_report.lifetime_id, v_name, replica_report.incarnation,
                replica_report.status, replica_report.error);
    END IF;
END
$$;

-- 57_deployments (new in 1.1)
------------------------------------------------------------------------------
-- Deployments (brief C10) and the reconciled configuration (C11.1)
--
-- A deployment is one generation of workers.  Exactly one is `active` and
-- holds write authority (checked at every append, 31_append.sql); others
-- are `prewarming` — their replicas follow the catalog and hydrate but never
-- write — or `retired` for good.
--
--     create_deployment(n)          promote(n)
--   ------------------> prewarming -----------> active -----------> retired
--                           |                    (the previous active one
--                           | drop_deployment(n)  is retired in the same
--                           v                     transaction)
--                        (gone)
--
-- A replica keeps no state the catalog and the durable uppers cannot
-- rebuild (bgworker/replica_engine.hpp): outputs, kept sums and arrangements
-- are shared storage, written by whichever deployment holds authority.  So a
-- prewarming replica hydrates by installing each object and computing it
-- once from the durable state into private (temporary) storage: that proves
-- its plan, privileges and inputs, and warms its session's plans and the
-- buffer cache.  Promotion then hands over at the durable uppers: warmed
-- replicas continue from there, nothing is recomputed from scratch.
------------------------------------------------------------------------------

-- Objects that `deployment` has not hydrated yet: every live source output,
-- view and sink on a cluster with replicas needs one live incarnation of the
-- deployment, started since the server did (an incarnation a crash ended
-- has not been retired yet), that reported it hydrated.  (Objects of
-- clusters without replicas are paused in every deployment and wait for
-- none.)
CREATE FUNCTION decoupled._unhydrated(deployment text)
RETURNS TABLE (name text, kind text, cluster text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.name::text, o.kind, o.cluster::text
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
       AND EXISTS (SELECT FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = o.lifetime_id)
       AND EXISTS (SELECT FROM decoupled.catalog_replicas r WHERE r.cluster = o.cluster)
       AND NOT EXISTS (
           SELECT FROM decoupled.replica_health h
             JOIN decoupled.catalog_replica_incarnations i
               ON i.incarnation = h.incarnation AND i.retired_at IS NULL
              AND i.started_at >= pg_postmaster_start_time()
            WHERE h.lifetime_id = o.lifetime_id AND h.deployment = _unhydrated.deployment
              AND h.hydrated)
     ORDER BY o.name
$$;

CREATE FUNCTION decoupled._deployment_state(name text, lock boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_state text;
BEGIN
    IF lock THEN
        SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
         WHERE d.name = _deployment_state.name FOR UPDATE;
    ELSE
        SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
         WHERE d.name = _deployment_state.name;
    END IF;
    IF v_state IS NULL THEN
        RAISE EXCEPTION 'deployment "%" does not exist', name USING ERRCODE = 'undefined_object';
    END IF;
    RETURN v_state;
END
$$;

CREATE FUNCTION decoupled.create_deployment(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name   text := create_deployment.name;
    v_active text;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    PERFORM decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_deployments d WHERE d.name = v_name) THEN
        RAISE EXCEPTION 'deployment "%" already exists', v_name
            USING ERRCODE = 'duplicate_object',
                  DETAIL = format('It is %s.', decoupled._deployment_state(v_name)),
                  HINT = 'A deployment name is used once, retired ones included.';
    END IF;
    INSERT INTO decoupled.catalog_deployments (name, state) VALUES (v_name, 'prewarming');
    -- The new generation serves the same SQL front doors.
    v_active := decoupled._active_deployment();
    INSERT INTO decoupled.catalog_adapters (name, deployment)
    SELECT a.name, v_name FROM decoupled.catalog_adapters a WHERE a.deployment = v_active;
    INSERT INTO decoupled.catalog_adapter_stops (adapter, deployment)
    SELECT s.adapter, v_name FROM decoupled.catalog_adapter_stops s WHERE s.deployment = v_active;
END
$$;
COMMENT ON FUNCTION decoupled.create_deployment(text) IS
    'Add a prewarming deployment: its replicas follow the catalog and hydrate without writing.';

CREATE FUNCTION decoupled.drop_deployment(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name  text := drop_deployment.name;
    v_state text;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    PERFORM decoupled._begin_catalog_change();
    v_state := decoupled._deployment_state(v_name, true);
    IF v_state <> 'prewarming' THEN
        RAISE EXCEPTION 'deployment "%" is %', v_name, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Only a prewarming deployment can be dropped.',
                  HINT = CASE WHEN v_state = 'active'
                              THEN 'Promote another deployment first.'
                              ELSE 'A retired deployment stays in the catalog as a record.' END;
    END IF;
    -- Its adapters go with their incarnations (and those own no holds: no
    -- session attaches to a prewarming deployment); its replica
    -- incarnations end, fencing any process still running them.
    DELETE FROM decoupled.catalog_adapters a WHERE a.deployment = v_name;
    DELETE FROM decoupled.catalog_replica_incarnations i WHERE i.deployment = v_name;
    DELETE FROM decoupled.catalog_deployments d WHERE d.name = v_name;
END
$$;
COMMENT ON FUNCTION decoupled.drop_deployment(text) IS
    'Remove a prewarming deployment; its workers stop.';

-- Promotion (C10.2): wait until `name` is hydrated, then, in one
-- transaction, give it write authority and retire the active deployment:
-- the retired replicas' and adapters' incarnations end (fencing their
-- processes) and exactly the retired adapters' holds are released.  The
-- row lock on the active deployment waits for its in-flight appends, which
-- hold it shared (_assert_write_authority); later ones see it retired.
CREATE FUNCTION decoupled.promote(name text, wait_for_hydration interval DEFAULT '5 min')
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name     text := promote.name;
    v_state    text;
    v_retired  text;
    v_deadline timestamptz;
    v_missing  text;
    v_count    bigint;
    r          record;
BEGIN
    PERFORM decoupled._check_name('deployment', v_name);
    IF wait_for_hydration IS NULL OR wait_for_hydration < interval '0' THEN
        RAISE EXCEPTION 'wait_for_hydration must be a non-negative interval, got %',
                        coalesce(wait_for_hydration::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'decoupled.promote() needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It waits for the deployment''s replicas to commit their hydration.';
    END IF;
    IF decoupled._restoring() THEN
        PERFORM decoupled._begin_catalog_change();  -- its refusal, with the hint
    END IF;
    v_state := decoupled._deployment_state(v_name);
    PERFORM decoupled._refuse_promotion(v_name, v_state);

    -- Wait without locks: nothing blocks while the replicas hydrate.
    v_deadline := clock_timestamp() + wait_for_hydration;
    LOOP
        SELECT count(*), string_agg(format('%s "%s" on cluster "%s"', u.kind, u.name, u.cluster),
                                    ', ') FILTER (WHERE u.n <= 5)
          INTO v_count, v_missing
          FROM (SELECT x.*, row_number() OVER () AS n FROM decoupled._unhydrated(v_name) x) u;
        EXIT WHEN v_count = 0;
        IF clock_timestamp() >= v_deadline THEN
            RAISE EXCEPTION 'deployment "%" is not hydrated', v_name
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Not hydrated after %s: %s%s.', wait_for_hydration, v_missing,
                                      CASE WHEN v_count > 5
                                           THEN format(' and %s more', v_count - 5) ELSE '' END),
                      HINT = 'decoupled.hydration shows each replica''s progress; nothing was '
                             'changed.';
        END IF;
        PERFORM pg_sleep(least(0.1, greatest(extract(epoch FROM v_deadline - clock_timestamp()),
                                             0.001)));
        v_state := decoupled._deployment_state(v_name);
        PERFORM decoupled._refuse_promotion(v_name, v_state);
    END LOOP;

    -- The handover.  The catalog lock orders it with every other catalog
    -- change.  Then the locks an append takes, in the order it takes them:
    -- a replica step locks its incarnation, then its deployment (both
    -- shared), so promotion locks the active replica incarnations first and
    -- the deployment rows next — waiting for the appends in flight, and
    -- never holding one while it waits for the other.
    PERFORM decoupled._begin_catalog_change();
    PERFORM FROM decoupled.catalog_replica_incarnations i
      JOIN decoupled.catalog_deployments d ON d.name = i.deployment
     WHERE d.state = 'active' AND i.retired_at IS NULL
     ORDER BY i.incarnation FOR UPDATE OF i;
    PERFORM FROM decoupled.catalog_deployments d
     WHERE d.name = v_name OR d.state = 'active' ORDER BY d.name FOR UPDATE;
    v_state := decoupled._deployment_state(v_name);
    PERFORM decoupled._refuse_promotion(v_name, v_state);  -- a concurrent promote won
    UPDATE decoupled.catalog_deployments d SET state = 'retired', retired_at = now()
     WHERE d.state = 'active' RETURNING d.name INTO v_retired;
    UPDATE decoupled.catalog_deployments d SET state = 'active', promoted_at = now()
     WHERE d.name = v_name;
    UPDATE decoupled.catalog_replica_incarnations i SET retired_at = now(), status = 'stopped'
     WHERE i.deployment = v_retired AND i.retired_at IS NULL;
    FOR r IN SELECT i.incarnation FROM decoupled.catalog_adapter_incarnations i
              WHERE i.deployment = v_retired AND i.reclaimed_at IS NULL
    LOOP
        PERFORM decoupled._reclaim_incarnation(r.incarnation);
    END LOOP;
END
$$;
COMMENT ON FUNCTION decoupled.promote(text, interval) IS
    'Wait until a prewarming deployment is hydrated, then give it write authority and retire the active one.';

CREATE FUNCTION decoupled._refuse_promotion(name text, state text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF state = 'active' THEN
        RAISE EXCEPTION 'deployment "%" is already active', name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    ELSIF state = 'retired' THEN
        RAISE EXCEPTION 'deployment "%" is retired', name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A retired deployment never writes again.',
                  HINT = 'Create a new deployment with decoupled.create_deployment().';
    END IF;
END
$$;

-- A prewarming replica's step (C10.1): compute the object from the durable
-- state into private storage, never appending.  Returns whether it is
-- hydrated (a view whose inputs have no readable time yet is, once its
-- owner may read them).
CREATE FUNCTION decoupled.replica_prewarm(incarnation bigint, lifetime_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_replica_incarnations;
    o        decoupled.catalog_objects;
    id       bigint := replica_prewarm.lifetime_id;
    v_inputs bigint[];
    v_t      bigint;
    v_since  bigint;
    v_from   bigint;
    v_rows   bigint;
BEGIN
    i := decoupled._live_incarnation(replica_prewarm.incarnation);
    PERFORM decoupled._bound_step();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.lifetime_id = id AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object % was dropped', id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    IF o.kind = 'materialized view' THEN
        SELECT coalesce(array_agg(x.id::bigint), '{}') INTO v_inputs
          FROM jsonb_array_elements_text(o.definition->'inputs') AS x(id);
        IF v_inputs = '{}' THEN
            SELECT f.upper - 1, f.since INTO v_t, v_since FROM decoupled.catalog_frontiers f
             WHERE f.lifetime_id = id;
        ELSE
            SELECT min(f.upper) - 1, max(f.since) INTO v_t, v_since
              FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = ANY (v_inputs);
        END IF;
        IF v_t < greatest(v_since, 0) THEN
            -- Nothing readable yet, so nothing the active deployment could
            -- have computed either — and its inputs may be on a cluster
            -- only this deployment runs, which ticks once promoted: waiting
            -- for them kept promotion waiting for ever.  Hydrated once the
            -- owner may read the inputs; the first computation follows the
            -- first readable time, as it does on the active deployment.
            PERFORM FROM jsonb_array_elements_text(o.definition->'direct') AS x(rel)
             WHERE NOT coalesce(has_table_privilege((o.definition->>'owner')::oid,
                                                    x.rel::oid, 'SELECT'), true);
            RETURN NOT FOUND;
        END IF;
        EXECUTE format('CREATE TEMP TABLE decoupled_prewarm (LIKE %s) ON COMMIT DROP',
                       decoupled._storage(id, 'stage'));
        PERFORM decoupled._stage_plan((o.definition->>'plan')::oid::regclass,
                                      (o.definition->>'owner')::oid, v_t,
                                      'pg_temp.decoupled_prewarm'::regclass);
        DROP TABLE pg_temp.decoupled_prewarm;
    ELSIF o.kind = 'sink' THEN
        -- Read what the sink's next step would write.
        SELECT s.upper, f.upper INTO v_from, v_t
          FROM decoupled.catalog_frontiers s, decoupled.catalog_frontiers f
         WHERE s.lifetime_id = id AND f.lifetime_id = (o.definition->>'input')::bigint;
        IF NOT coalesce((SELECT has_table_privilege((o.definition->>'owner')::oid, c.relation,
                                                    'SELECT')
                           FROM decoupled.catalog_objects c
                          WHERE c.lifetime_id = (o.definition->>'input')::bigint), false) THEN
            RAISE EXCEPTION 'permission denied for the input of sink "%"', o.name
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'Its owner can no longer read it.';
        END IF;
        EXECUTE format('SELECT count(*) FROM (%s) x',
                       decoupled._changes_sql((o.definition->>'input')::bigint, false))
            INTO v_rows USING v_from, greatest(v_t, v_from), v_from;
    END IF;
    RETURN true;  -- a source's generator is installed by the replica itself
END
$$;

------------------------------------------------------------------------------
-- Configuration reconciliation (C11.1)
------------------------------------------------------------------------------

-- The calling process's decoupled.* settings that the whole installation
-- shares (set in postgresql.conf; session settings and credentials —
-- decoupled.replica_conninfo — are not the catalog's business).
CREATE FUNCTION decoupled._process_settings() RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(jsonb_object_agg(s.name, s.setting ORDER BY s.name), '{}')
      FROM pg_settings s
     WHERE s.name LIKE 'decoupled.%' AND s.context IN ('postmaster', 'sighup')
       AND s.name <> 'decoupled.replica_conninfo'
$$;

-- Records the caller's settings as the active configuration with a
-- conditional update on config_version; a concurrent writer's update makes
-- it read again and retry.  Only the active deployment's processes write:
-- for any other deployment it changes nothing.  Returns the version that
-- holds the caller's settings, or NULL when it was not allowed to write.
CREATE FUNCTION decoupled.reconcile_configuration(deployment text DEFAULT NULL,
                                                  written_by text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := coalesce(reconcile_configuration.deployment,
                                  decoupled._active_deployment());
    v_settings   jsonb := decoupled._process_settings();
    v_written_by text := coalesce(reconcile_configuration.written_by,
                                  format('%s (pid %s)', session_user, pg_backend_pid()));
    c            decoupled.catalog_configuration;
BEGIN
    IF decoupled._deployment_state(v_deployment) <> 'active' THEN
        RETURN NULL;  -- a prewarming deployment never overwrites the active configuration
    END IF;
    LOOP
        SELECT * INTO STRICT c FROM decoupled.catalog_configuration;
        IF c.settings = v_settings THEN
            RETURN c.config_version;
        END IF;
        UPDATE decoupled.catalog_configuration x
           SET settings = v_settings, config_version = c.config_version + 1,
               changed_at = now(), written_by = v_written_by, deployment = v_deployment
         WHERE x.config_version = c.config_version;
        IF FOUND THEN
            RETURN c.config_version + 1;
        END IF;
        -- Another writer got there first: read its version and try again.
    END LOOP;
END
$$;
COMMENT ON FUNCTION decoupled.reconcile_configuration(text, text) IS
    'Record this process''s decoupled.* settings as the active configuration (conditional on config_version).';

-- 80_views
CREATE OR REPLACE VIEW decoupled.deployments AS
    SELECT d.name::text, d.state, d.state = 'active' AS writes_enabled, d.created_at,
           d.promoted_at, d.retired_at,
           CASE WHEN d.state <> 'retired'
                THEN (SELECT count(*) FROM decoupled._unhydrated(d.name)) END AS unhydrated
      FROM decoupled.catalog_deployments d;

CREATE OR REPLACE VIEW decoupled.object_statuses AS
    SELECT o.name::text, o.kind, r.name::text AS replica,
           CASE WHEN r.replica_id IS NULL THEN 'paused'
                ELSE coalesce(h.status, 'created') END AS status,
           h.error,
           CASE WHEN r.replica_id IS NULL THEN 'no replica is running it' ELSE h.hint END
               AS hint,
           h.updated_at, h.transition_at, h.hydrated
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      LEFT JOIN decoupled.replica_health h
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = (SELECT d.name FROM decoupled.catalog_deployments d
                                 WHERE d.state = 'active')
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
    UNION ALL
    SELECT o.name::text, o.kind, NULL,
           CASE WHEN w.stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END,
           CASE WHEN w.stalled THEN coalesce('WAL capture: ' || w.last_error,
                                             'WAL capture is not running')
                ELSE h.error END,
           CASE WHEN w.stalled THEN 'Its writes wait in the WAL; see decoupled.capture.'
                ELSE h.hint END,
           h.updated_at, h.transition_at, NULL
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.table_health h USING (lifetime_id)
      LEFT JOIN LATERAL (
          SELECT c.status = 'stalled' AS stalled, c.last_error FROM decoupled.capture c
           WHERE EXISTS (SELECT FROM decoupled.capture_relations r
                          WHERE r.lifetime_id = o.lifetime_id)) w ON true
     WHERE o.dropped_at IS NULL AND o.kind = 'table';

CREATE OR REPLACE VIEW decoupled.hydration AS
    SELECT o.name::text, r.name::text AS replica, coalesce(h.hydrated, false) AS hydrated,
           d.name::text AS deployment, coalesce(h.status, 'created') AS status
      FROM decoupled.catalog_objects o
      JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      CROSS JOIN decoupled.catalog_deployments d
      LEFT JOIN (decoupled.replica_health h
                 JOIN decoupled.catalog_replica_incarnations i
                   ON i.incarnation = h.incarnation AND i.retired_at IS NULL
                  AND i.started_at >= pg_postmaster_start_time())
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = d.name
     WHERE o.dropped_at IS NULL AND o.kind <> 'table' AND d.state <> 'retired'
       AND EXISTS (SELECT FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = o.lifetime_id);

CREATE VIEW decoupled.configuration AS
    SELECT config_version, settings, written_by, deployment::text, changed_at
      FROM decoupled.catalog_configuration;

CREATE OR REPLACE VIEW decoupled.adapters AS
    SELECT a.name::text, a.deployment::text, i.incarnation, i.pid,
           CASE WHEN s.adapter IS NOT NULL THEN 'stopped'
                WHEN i.status IN ('starting', 'running')
                     AND coalesce(i.heartbeat_at, i.started_at)
                         < clock_timestamp() - interval '30 seconds' THEN 'stalled'
                ELSE i.status END AS status,
           i.heartbeat_at, s.stopped_at
      FROM decoupled.catalog_adapters a
      LEFT JOIN decoupled.catalog_adapter_incarnations i
             ON i.adapter = a.name AND i.deployment = a.deployment AND i.retired_at IS NULL
      LEFT JOIN decoupled.catalog_adapter_stops s
             ON s.adapter = a.name AND s.deployment = a.deployment
     WHERE a.deployment IN (SELECT d.name FROM decoupled.catalog_deployments d
                             WHERE d.state <> 'retired');

-- 90_privileges
REVOKE ALL ON FUNCTION decoupled._unhydrated(text), decoupled._deployment_state(text, boolean),
    decoupled.create_deployment(text), decoupled.drop_deployment(text),
    decoupled.promote(text, interval), decoupled._refuse_promotion(text, text),
    decoupled.replica_prewarm(bigint, bigint), decoupled._process_settings(),
    decoupled.reconcile_configuration(text, text)
FROM PUBLIC;
GRANT SELECT ON decoupled.configuration TO PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._unhydrated(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION
    decoupled.create_deployment(text), decoupled.drop_deployment(text),
    decoupled.promote(text, interval), decoupled.reconcile_configuration(text, text),
    decoupled.replica_prewarm(bigint, bigint)
TO decoupled_admin;

------------------------------------------------------------------------------
-- The relay (C8)
------------------------------------------------------------------------------

-- 20_controller
-- The relay (C8): its mode, process, liveness, fan-outs and followers.
CREATE FUNCTION decoupled._relay_state(
    OUT mode text, OUT pid integer, OUT alive boolean, OUT fanouts bigint,
    OUT last_fanout_at timestamptz, OUT followers integer, OUT segment text)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_relay_state';

-- 80_views
-- The relay that carries wake-ups out of the server (C8): in_process (the
-- relay worker's NOTIFY decoupled_wakeup; followers are LISTEN sessions, not
-- counted) or external (pg_decoupled_relayd's segment: its daemon, whether
-- its heartbeat is fresh, and the processes attached to it).
CREATE VIEW decoupled.relay AS
    SELECT * FROM decoupled._relay_state();

-- 90_privileges
REVOKE ALL ON FUNCTION decoupled._relay_state() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._relay_state() TO PUBLIC;
GRANT SELECT ON decoupled.relay TO PUBLIC;

------------------------------------------------------------------------------
-- WAL capture switches never wait for a registration row a drop holds
------------------------------------------------------------------------------

-- 34_wal_capture
CREATE FUNCTION decoupled._lock_registration(id bigint, rel oid) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = id AND o.dropped_at IS NULL AND o.relation = rel FOR SHARE NOWAIT;
    RETURN FOUND;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._capture_adopt(id bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_rel oid;
BEGIN
    SELECT o.relation INTO v_rel FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = id AND o.kind = 'table' AND o.dropped_at IS NULL;
    IF v_rel IS NULL OR NOT decoupled._lock_for_switch(v_rel) THEN
        RETURN false;
    END IF;
    -- Again under the table's lock.  A drop or unregister in flight may
    -- hold the row and wait for the table: never wait for the row.
    IF NOT decoupled._lock_registration(id, v_rel)
       OR EXISTS (SELECT FROM decoupled.capture_relations c WHERE c.lifetime_id = id) THEN
        RETURN false;
    END IF;
    -- Pending too, as briefly (its key index is made below): a transaction
    -- that ticked the table holds pending until it ends, and waiting for
    -- it here, with the table held, would hold up every user of the table
    -- meanwhile — and deadlock with that transaction once it reads the
    -- table.
    IF NOT decoupled._lock_for_switch(decoupled._storage(id, 'pending')::regclass) THEN
        RETURN false;
    END IF;
    PERFORM decoupled._set_capture_switching(true);
    INSERT INTO decoupled.capture_relations (relation, lifetime_id) VALUES (v_rel, id);
    PERFORM decoupled._index_pending_key(id, true);
    PERFORM decoupled._drop_capture_triggers(v_rel);
    PERFORM decoupled._invalidate_relation(v_rel);
    PERFORM decoupled._set_capture_switching(false);
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._capture_release(id bigint) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_rel oid;
BEGIN
    SELECT c.relation INTO v_rel FROM decoupled.capture_relations c WHERE c.lifetime_id = id;
    IF v_rel IS NULL OR NOT decoupled._lock_for_switch(v_rel) THEN
        RETURN false;
    END IF;
    IF NOT decoupled._lock_registration(id, v_rel)
       OR NOT decoupled._lock_for_switch(decoupled._storage(id, 'pending')::regclass) THEN
        -- Pending as briefly as the table (_capture_adopt says why).
        RETURN false;
    END IF;
    -- Its triggers write pending rows in their writers' transactions, which
    -- must be as durable as those; and what capture wrote there and no tick
    -- moved yet, the slot will not deliver again once the table is gone
    -- from capture_relations.
    IF NOT decoupled._set_pending_logged(id, true, true) THEN
        RETURN false;
    END IF;
    PERFORM decoupled._set_capture_switching(true);
    PERFORM decoupled._create_capture_triggers(v_rel, decoupled._storage(id, 'pending'));
    PERFORM decoupled._index_pending_key(id, false);
    DELETE FROM decoupled.capture_relations c WHERE c.lifetime_id = id;
    PERFORM decoupled._invalidate_relation(v_rel);
    PERFORM decoupled._set_capture_switching(false);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION decoupled._lock_registration(bigint, oid) FROM PUBLIC;

------------------------------------------------------------------------------
-- Hot standby: clear refusals; debug wait points for tests
------------------------------------------------------------------------------

-- 20_controller
-- Debug wait points (extension/wait_points.hpp), for tests; superuser only.
-- A session that names a point in decoupled.wait_points waits there while
-- arm_wait_point(name) holds it, until release_wait_point(name).
CREATE FUNCTION decoupled.wait_point_key(name text) RETURNS bigint
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_point_key';
CREATE FUNCTION decoupled._wait_point(name text) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_point';
CREATE FUNCTION decoupled.arm_wait_point(name text) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_lock(decoupled.wait_point_key(name))
$$;
CREATE FUNCTION decoupled.release_wait_point(name text) RETURNS boolean
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_unlock(decoupled.wait_point_key(name))
$$;
-- How many sessions wait at the point now.
CREATE FUNCTION decoupled.wait_point_waiters(name text) RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*) FROM pg_locks l
     WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND l.classid::bigint = (decoupled.wait_point_key(name) >> 32) & 4294967295
       AND l.objid::bigint = decoupled.wait_point_key(name) & 4294967295
$$;

-- 10_catalog, 31_append, 40_permission, 60_materialized_views
CREATE OR REPLACE FUNCTION decoupled._begin_catalog_change() RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_schema  integer;
    v_version bigint;
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot change the pg_decoupled catalog on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  HINT = 'Run catalog changes on the primary; the standby follows it.';
    END IF;
    IF decoupled._restoring() THEN
        RAISE EXCEPTION 'cannot change the pg_decoupled catalog while a restore is in progress'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_restore is loading a dumped catalog into this database.',
                  HINT = 'Wait until the restore has finished (decoupled.restore shows it).';
    END IF;
    SELECT schema_version INTO STRICT v_schema FROM decoupled.catalog_meta FOR UPDATE;
    PERFORM decoupled._assert_schema_version(v_schema);
    UPDATE decoupled.catalog_meta
       SET catalog_version = catalog_version + 1, changed_at = now()
    RETURNING catalog_version INTO v_version;
    PERFORM decoupled._wake_controller_at_commit();
    RETURN v_version;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._session_owner(OUT adapter text, OUT deployment text,
                                         OUT incarnation bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_attached bigint;
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'holds and subscriptions cannot be taken on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'Protection is recorded durably, and a standby writes nothing.',
                  HINT = 'Take holds and subscriptions on the primary; AS OF reads within '
                         'retain_history work here without them.';
    END IF;
    adapter := coalesce(nullif(current_setting('decoupled.adapter', true), ''), 'default');
    deployment := decoupled._active_deployment();
    IF NOT EXISTS (SELECT FROM decoupled.catalog_adapters a
                    WHERE a.name = _session_owner.adapter
                      AND a.deployment = _session_owner.deployment) THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"',
                        _session_owner.adapter, _session_owner.deployment
            USING ERRCODE = 'undefined_object',
                  HINT = 'Declare it with decoupled.declare_adapter(), or set decoupled.adapter.';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_adapter_stops s
                WHERE s.adapter = _session_owner.adapter
                  AND s.deployment = _session_owner.deployment) THEN
        RAISE EXCEPTION 'adapter "%" is stopped', _session_owner.adapter
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'decoupled.start_adapter() starts it again; its holds stay meanwhile.';
    END IF;
    v_attached := decoupled._session_attachment(_session_owner.adapter);
    IF v_attached IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM decoupled.catalog_adapter_incarnations i
                        WHERE i.incarnation = v_attached AND i.retired_at IS NULL) THEN
            RAISE EXCEPTION 'incarnation % of adapter "%" that this session attached to was retired',
                            v_attached, _session_owner.adapter
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'Its holds are released; the session cannot take protection '
                               'from its successor.',
                      HINT = 'Reconnect to attach to the adapter''s current incarnation.';
        END IF;
        incarnation := v_attached;
        RETURN;
    END IF;
    -- First protected operation: attach to the live incarnation, which
    -- adapterd registers when it starts.
    FOR attempt IN 1 .. 500 LOOP
        SELECT a.incarnation INTO incarnation FROM decoupled.catalog_adapter_incarnations a
         WHERE a.adapter = _session_owner.adapter AND a.deployment = _session_owner.deployment
           AND a.retired_at IS NULL;
        EXIT WHEN FOUND;
        PERFORM pg_sleep(0.01);
    END LOOP;
    IF incarnation IS NULL THEN
        RAISE EXCEPTION 'adapter "%" has no running incarnation', _session_owner.adapter
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Its adapterd has not started: see decoupled.supervised.';
    END IF;
    INSERT INTO decoupled.session_records
           (adapter, deployment, incarnation, session_pid, connected_at, role)
    VALUES (_session_owner.adapter, _session_owner.deployment, incarnation, pg_backend_pid(),
            decoupled._backend_start(), session_user)
    ON CONFLICT DO NOTHING;
    PERFORM decoupled._session_attach(_session_owner.adapter, incarnation);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._acquire_hold(collection text, as_of bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record := decoupled._protection_request(collection, as_of, 'held');
BEGIN
    -- Checked again, authoritatively, when adapterd writes the durable hold
    -- and at commit (C3.2); this only reports the common case early.
    IF r.frontier < r.bound THEN
        RAISE EXCEPTION 'hold on "%" is below its compaction bound', (r.o).name
            USING ERRCODE = 'check_violation',
                  DETAIL = format('The hold would be at %s; the bound is %s and history before it '
                                  'may already be compacted.', r.frontier, r.bound),
                  HINT = format('Hold at %s or later.', r.bound);
    END IF;
    -- Tests stop here: checked early, not yet protected.
    PERFORM decoupled._wait_point('acquire_hold:checked');
    IF as_of IS NULL THEN
        RETURN (decoupled._protect_latest((r.o).lifetime_id, r.frontier, false)).hold_id;
    END IF;
    RETURN decoupled._protect((r.o).lifetime_id, r.frontier, false);
END
$$;
COMMENT ON FUNCTION decoupled.acquire_hold(text, bigint) IS
    'Protect reads of a collection at times >= as_of (NULL: the latest readable time); returns the hold id.';

CREATE OR REPLACE FUNCTION decoupled._assert_write_authority(deployment text, incarnation bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := coalesce(_assert_write_authority.deployment,
                                  decoupled._active_deployment());
    v_state      text;
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot append on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  HINT = 'Append on the primary; the standby receives its history.';
    END IF;
    SELECT d.state INTO v_state FROM decoupled.catalog_deployments d
     WHERE d.name = v_deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist', v_deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_state = 'retired' AND _assert_write_authority.incarnation IS NOT NULL THEN
        -- Promotion retired it: its processes are fenced for good.
        RAISE EXCEPTION 'deployment "%" was retired', v_deployment
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'Another deployment was promoted; a retired deployment never '
                           'writes again.';
    END IF;
    IF v_state <> 'active' THEN
        RAISE EXCEPTION 'deployment "%" has no write authority', v_deployment
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('It is %s; only the active deployment writes.', v_state);
    END IF;
    IF _assert_write_authority.incarnation IS NOT NULL THEN
        PERFORM FROM decoupled.catalog_replica_incarnations i
         WHERE i.incarnation = _assert_write_authority.incarnation
           AND i.deployment = v_deployment AND i.retired_at IS NULL
           FOR SHARE;
        IF NOT FOUND THEN
            PERFORM FROM decoupled.catalog_adapter_incarnations i
             WHERE i.incarnation = _assert_write_authority.incarnation
               AND i.deployment = v_deployment AND i.retired_at IS NULL
               FOR SHARE;
        END IF;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'incarnation % is not current in deployment "%"',
                            _assert_write_authority.incarnation, v_deployment
                USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                      DETAIL = 'A newer incarnation replaced it, or it was retired; '
                               'a fenced writer can never write again.';
        END IF;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._verify(name text, as_of bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_t       bigint;
    v_before  text := current_setting('decoupled.as_of');
    v_differs boolean;
    v_plan_t  text;
    v_view_t  text;
BEGIN
    o := decoupled._collection(_verify.name);
    v_plan_t := format('decoupled_verify_%s', o.lifetime_id);
    v_view_t := format('decoupled_verify_view_%s', o.lifetime_id);
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'verify() cannot run on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'It computes the view into temporary tables, which a standby cannot create.',
                  HINT = 'Run it on the primary.';
    END IF;
    IF o.kind <> 'materialized view' THEN
        RAISE EXCEPTION '"%" is not a materialized view', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT decoupled._caller_can_select(o.relation) THEN
        RAISE EXCEPTION 'permission denied for materialized view "%"', o.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT coalesce(_verify.as_of, f.upper - 1) INTO v_t FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = o.lifetime_id;
    IF _verify.as_of IS NULL AND NOT EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                             WHERE f.lifetime_id = o.lifetime_id
                                               AND f.since < f.upper) THEN
        RAISE EXCEPTION 'materialized view "%" has no readable time yet', o.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Wait for its first computation with decoupled.wait_for_upper().';
    END IF;
    IF v_t < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', v_t
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Scratch tables of this view, made once per session and emptied at
    -- each call: many verify() calls in one transaction lock the same two
    -- relations instead of piling up locks on dropped ones.
    IF to_regclass('pg_temp.' || v_plan_t) IS NULL THEN
        EXECUTE format('CREATE TEMP TABLE %I (LIKE %s)', v_plan_t,
                       decoupled._storage(o.lifetime_id, 'stage'));
        EXECUTE format('CREATE TEMP TABLE %I (k text)', v_view_t);
    ELSE
        EXECUTE format('TRUNCATE pg_temp.%I, pg_temp.%I', v_plan_t, v_view_t);
    END IF;
    -- The view's own history at v_t first: it checks that v_t is readable.
    PERFORM set_config('decoupled.as_of', v_t::text, true);
    EXECUTE format('INSERT INTO pg_temp.%I SELECT ROW(%s)::text FROM %s', v_view_t,
                   decoupled._cols(o.lifetime_id), decoupled._storage(o.lifetime_id, 'history'));
    PERFORM set_config('decoupled.as_of', v_before, true);
    PERFORM decoupled._stage_plan((o.definition->>'plan')::oid::regclass,
                                  (o.definition->>'owner')::oid, v_t,
                                  format('pg_temp.%I', v_plan_t)::regclass);
    EXECUTE format('SELECT EXISTS ((SELECT mz_key FROM pg_temp.%1$I '
                   '               EXCEPT ALL SELECT k FROM pg_temp.%2$I) '
                   '              UNION ALL '
                   '              (SELECT k FROM pg_temp.%2$I '
                   '               EXCEPT ALL SELECT mz_key FROM pg_temp.%1$I))',
                   v_plan_t, v_view_t)
        INTO v_differs;
    RETURN NOT v_differs;
END
$$;
COMMENT ON FUNCTION decoupled.verify(text, bigint) IS
    'Recompute a materialized view from its inputs at as_of (default: latest readable) and compare.';

-- The least upper of `inputs`: how far a view over them can step.  Its own
-- function for a generic plan kept for the session: with the array inline,
-- the plan cache planned a custom plan at every step.
CREATE FUNCTION decoupled._inputs_upper(inputs bigint[]) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN (SELECT min(f.upper) FROM decoupled.catalog_frontiers f
             WHERE f.lifetime_id = ANY (inputs));
END
$$;
REVOKE ALL ON FUNCTION decoupled._inputs_upper(bigint[]) FROM PUBLIC;

-- A step that replaces the view's rows (of the touched groups, or all of
-- them) with what it staged: the append core's write for such a step
-- (work_mem as _append_staged's, 31_append.sql).
CREATE FUNCTION decoupled._replace_staged(lifetime_id bigint, expected_upper bigint,
                                          new_upper bigint, ts bigint, filter text DEFAULT NULL)
    RETURNS void LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    AS 'MODULE_PATHNAME', 'decoupled_replace_staged';
REVOKE ALL ON FUNCTION decoupled._replace_staged(bigint, bigint, bigint, bigint, text) FROM PUBLIC;
-- A relation's live rows as the statistics system counts them, else the
-- planner's estimate (pg_class.reltuples is -1 until the first ANALYZE),
-- for the step-size rules.
CREATE FUNCTION decoupled._estimated_rows(rel regclass) RETURNS double precision
    LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_estimated_rows';
REVOKE ALL ON FUNCTION decoupled._estimated_rows(regclass) FROM PUBLIC;
-- Kept min/max (C13.2): a sums view's state keeps a group's extremes; the
-- groups whose extreme a retraction reached are computed afresh (a filter
-- for _stage_sums) and replace their state rows (_merge_sums's `replace`,
-- its `unknown` names them).
DROP FUNCTION decoupled._stage_sums(regclass, oid, bigint, regclass, boolean);
CREATE FUNCTION decoupled._stage_sums(plan regclass, owner oid, ts bigint, target regclass,
                                     initial boolean, filter text DEFAULT NULL)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_sums';
REVOKE ALL ON FUNCTION decoupled._stage_sums(regclass, oid, bigint, regclass, boolean, text) FROM PUBLIC;
DROP FUNCTION decoupled._merge_sums(regclass, regclass, regclass);
CREATE FUNCTION decoupled._merge_sums(plan regclass, state regclass, dstate regclass,
                                     replace text DEFAULT NULL,
                                     OUT groups bigint, OUT filter text, OUT unknown text)
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_merge_sums';
REVOKE ALL ON FUNCTION decoupled._merge_sums(regclass, regclass, regclass, text) FROM PUBLIC;

-- One maintenance step of a materialized view by a replica (C5.3), run
-- by replica_maintain and replica_maintain_many (below) as the extension:
-- compare (upper = expected_upper) and, for each time t at which an input
-- changed below every input's upper, append the difference between the plan
-- at t and the view's current state, at t.  Times without input changes
-- only move the upper.  Losing the race to a sibling is not an error: the
-- actual upper is returned.  caught_up: the view reached its inputs'
-- frontier.  required: what the view now requires of its inputs (NULL if
-- nothing was stepped); the caller advances the requirements (C3.4).
CREATE FUNCTION decoupled._maintain_view(incarnation bigint, lifetime_id bigint,
                                         expected_upper bigint,
                                         authority_checked boolean DEFAULT false,
                                         OUT upper bigint, OUT caught_up boolean,
                                         OUT required bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- Computations per call: a view far behind catches up in bounded steps.
    c_max_steps constant integer := 16;
    o        decoupled.catalog_objects;
    id       bigint := _maintain_view.lifetime_id;
    v_inputs bigint[];
    v_as_of  bigint;
    v_target bigint;
    v_times  bigint[];
    v_t      bigint;
    v_bad    regclass;
    v_plan   regclass;
    v_owner  oid;
    v_stage  regclass;
    v_strategy  text;
    v_cur       regclass;
    v_state     regclass := to_regclass(decoupled._storage(id, 'state'));
    v_dstate    regclass := to_regclass(decoupled._storage(id, 'dstate'));
    v_partial   boolean;
    v_groups    bigint;
    v_filter    text;
    v_unknown   text;
    v_steps_inc integer := 0;
    v_steps_rec integer := 0;
    v_next      bigint;
    v_replace   boolean;
    v_work_mem  text;
BEGIN
    IF authority_checked THEN
        upper := decoupled._lock_output_row(id, 'materialized view');
    ELSE
        upper := decoupled._lock_output(_maintain_view.incarnation, id, 'materialized view');
    END IF;
    caught_up := false;
    required := NULL;
    IF upper <> expected_upper THEN
        RETURN;
    END IF;
    -- Its storage without waiting (ZD004, retried shortly): a transaction
    -- creating views over this one may hold it (extension/write_locks.hpp).
    PERFORM decoupled._lock_storage_nowait(id);
    -- Named only now that the view is known to live: a view dropped and
    -- finalized meanwhile is ZD002 (_lock_output), not a missing relation.
    v_stage := decoupled._storage(id, 'stage')::regclass;
    v_cur := decoupled._storage(id, 'cur')::regclass;
    -- A step is maintenance: its sorts and hashes get decoupled.step_work_mem
    -- (until the step returns), not a client's work_mem.  A large step's
    -- changes otherwise spilled to disk (docs/performance.md).
    v_work_mem := current_setting('decoupled.step_work_mem', true);
    IF v_work_mem <> '-1' THEN
        PERFORM set_config('work_mem', v_work_mem, true);
    END IF;
    SELECT * INTO o FROM decoupled.catalog_objects c WHERE c.lifetime_id = id;
    SELECT coalesce(array_agg(x.id::bigint), '{}') INTO v_inputs
      FROM jsonb_array_elements_text(o.definition->'inputs') AS x(id);
    v_as_of := (o.definition->>'as_of')::bigint;
    v_plan := (o.definition->>'plan')::oid::regclass;
    v_owner := (o.definition->>'owner')::oid;
    v_strategy := o.definition->>'strategy';

    -- The owner reads the inputs, as PostgreSQL checks for a view: a revoked
    -- privilege stalls the view instead of leaking data.
    SELECT x.rel::oid::regclass INTO v_bad
      FROM jsonb_array_elements_text(o.definition->'direct') AS x(rel)
     WHERE NOT coalesce(has_table_privilege((o.definition->>'owner')::oid, x.rel::oid, 'SELECT'),
                        true)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied for relation %', v_bad
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The owner of materialized view "%s" can no longer read it.',
                                  o.name);
    END IF;

    IF v_inputs = '{}' THEN
        v_target := decoupled._next_timestamp(upper) + 1;
    ELSE
        v_target := decoupled._inputs_upper(v_inputs);
    END IF;
    IF v_target <= upper THEN
        caught_up := true;
        RETURN;
    END IF;

    v_times := decoupled._change_times(v_inputs, upper, v_target, c_max_steps);
    IF upper = v_as_of AND NOT v_as_of = ANY (v_times) THEN
        v_times := (ARRAY[v_as_of] || v_times)[1:c_max_steps];  -- the first computation
    END IF;
    FOREACH v_t IN ARRAY v_times LOOP
        -- After the first computation, a step of an incremental view costs
        -- what changed (C13.1); the rest, and large changes, recompute.
        -- v_replace: the step staged the new rows of the groups v_filter
        -- names (all, if NULL), which replace the view's rows there.
        v_replace := false;
        IF v_strategy = 'linear' AND upper > v_as_of THEN
            PERFORM decoupled._stage_delta(v_plan, v_owner, v_t, v_stage);
            v_steps_inc := v_steps_inc + 1;
        ELSIF v_strategy = 'sums' AND upper > v_as_of THEN
            -- The changes' counts and sums added to the kept state; the
            -- touched groups' rows, from the state, replace the view's.
            PERFORM decoupled._stage_sums(v_plan, v_owner, v_t, v_dstate, false);
            SELECT g.groups, g.filter, g.unknown INTO v_groups, v_filter, v_unknown
              FROM decoupled._merge_sums(v_plan, v_state, v_dstate) g;
            IF v_unknown IS NOT NULL THEN
                -- A retraction reached a kept min or max: those groups'
                -- state, computed afresh at t, replaces theirs.
                PERFORM decoupled._stage_sums(v_plan, v_owner, v_t, v_dstate, true, v_unknown);
                PERFORM decoupled._merge_sums(v_plan, v_state, v_dstate, v_unknown);
            END IF;
            IF v_groups > 0 THEN
                PERFORM decoupled._stage_kept(v_plan, v_owner, v_t, v_state, v_stage, v_filter);
                v_replace := true;
            END IF;
            v_steps_inc := v_steps_inc + 1;
        ELSE
            IF v_strategy = 'sums' THEN
                -- The first computation: the state starts from the input at t.
                PERFORM decoupled._stage_sums(v_plan, v_owner, v_t, v_dstate, true);
                PERFORM decoupled._merge_sums(v_plan, v_state, v_dstate);
            END IF;
            v_partial := false;
            v_filter := NULL;
            IF v_strategy = 'partitions' AND upper > v_as_of THEN
                -- The touched partitions' rows at t and just before t, staged
                -- as the view's difference; -1: recompute in full instead.
                v_groups := decoupled._stage_partitions(v_plan, v_owner, v_t, v_stage,
                    decoupled._estimated_rows(v_cur));
                v_partial := v_groups >= 0;
            END IF;
            IF v_strategy = 'groups' AND upper > v_as_of THEN
                SELECT g.groups, g.filter INTO v_groups, v_filter
                  FROM decoupled._touched_groups(v_plan, v_owner, v_t) g;
                v_partial := v_groups = 0 OR NOT decoupled._recompute_in_full(v_groups,
                    decoupled._estimated_rows(v_cur));
            END IF;
            IF v_partial THEN
                v_steps_inc := v_steps_inc + 1;
            ELSE
                v_steps_rec := v_steps_rec + 1;
                v_filter := NULL;
            END IF;
            IF NOT v_partial OR (v_strategy = 'groups' AND v_groups > 0) THEN
                -- The plan at t — for the touched groups only, if partial —
                -- replaces the view's rows (of those groups).
                PERFORM decoupled._stage_plan(v_plan, v_owner, v_t, v_stage, v_filter);
                v_replace := true;
            END IF;
        END IF;
        -- After the last time an input changed before their frontier, the
        -- view is final up to that frontier too: the append moves the upper
        -- there at once (one frontier update and publication a step, not
        -- two).
        v_next := CASE WHEN cardinality(v_times) < c_max_steps
                            AND v_t = v_times[cardinality(v_times)]
                       THEN v_target ELSE v_t + 1 END;
        IF v_replace THEN
            PERFORM decoupled._replace_staged(id, upper, v_next, v_t, v_filter);
        ELSE
            PERFORM decoupled._append_staged(id, upper, v_next);
        END IF;
        upper := v_next;
    END LOOP;
    IF v_steps_inc + v_steps_rec > 0 THEN
        UPDATE decoupled.view_steps s
           SET incremental = s.incremental + v_steps_inc, recompute = s.recompute + v_steps_rec
         WHERE s.lifetime_id = id;
    END IF;
    IF cardinality(v_times) < c_max_steps THEN
        IF upper < v_target THEN
            -- No input changed in [upper, v_target): the view is final there too.
            UPDATE decoupled.catalog_frontiers f SET upper = v_target, changed_at = now()
             WHERE f.lifetime_id = id;
            PERFORM decoupled._queue_for_publication(ARRAY[id]);
            PERFORM decoupled._notify_upper_at_commit();
            upper := v_target;
        END IF;
        caught_up := true;
    END IF;
    required := decoupled._required_frontier(v_as_of, upper);
END
$$;

-- One step of one view (_maintain_view), its requirements advanced.
CREATE OR REPLACE FUNCTION decoupled.replica_maintain(incarnation bigint, lifetime_id bigint,
                                           expected_upper bigint,
                                           OUT upper bigint, OUT caught_up boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
DECLARE
    v_required bigint;
BEGIN
    PERFORM decoupled._bound_step();
    SELECT m.upper, m.caught_up, m.required INTO upper, caught_up, v_required
      FROM decoupled._maintain_view(replica_maintain.incarnation, replica_maintain.lifetime_id,
                                    replica_maintain.expected_upper) m;
    IF v_required IS NOT NULL THEN
        PERFORM decoupled._advance_requirements(replica_maintain.lifetime_id, v_required);
    END IF;
    -- Tests stop a step here: computed and appended, not yet committed.
    PERFORM decoupled._wait_point('replica_maintain:computed');
END
$$;

-- The steps of several views in one transaction, for a replica's pass
-- with many views to step (ten views ticked ten times a second): one call,
-- one set of settings, one advance of all their requirements, instead of a
-- call, a savepoint and an advance per view — what a small step spent
-- besides its own work.  Views are stepped in the order given, each in a
-- subtransaction of its own: a view's error is returned with it (its
-- SQLSTATE and message) and rolls back that view only; a fenced
-- incarnation (ZD001) fails the whole call.  After the first view, no
-- further one starts once budget_ms have passed since the call began (the
-- views stepped become visible together, at commit): the views returned
-- are those stepped, in order.
CREATE FUNCTION decoupled.replica_maintain_many(incarnation bigint, lifetime_ids bigint[],
                                                expected_uppers bigint[], budget_ms integer)
RETURNS TABLE (lifetime_id bigint, upper bigint, caught_up boolean, error_state text,
               error_message text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    v_started  timestamptz := clock_timestamp();
    v_live     decoupled.catalog_replica_incarnations;
    v_ids      bigint[] := '{}';
    v_required bigint[] := '{}';
    v_req      bigint;
BEGIN
    IF cardinality(lifetime_ids) IS DISTINCT FROM cardinality(expected_uppers) THEN
        RAISE EXCEPTION 'lifetime_ids and expected_uppers must have the same length'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._bound_step();
    -- Write authority once for all the views (each view's own check, in
    -- its subtransaction, was 5% of a small step): the locks it takes
    -- hold until the call's transaction ends.  A fenced incarnation fails
    -- the call, as it would at any view; so does a deployment without
    -- write authority, whose views then each take a step of their own that
    -- says so (bgworker/replica_engine.cpp).
    v_live := decoupled._live_incarnation(replica_maintain_many.incarnation);
    PERFORM decoupled._assert_write_authority(v_live.deployment, v_live.incarnation);
    FOR k IN 1 .. coalesce(cardinality(lifetime_ids), 0) LOOP
        EXIT WHEN k > 1
              AND clock_timestamp() - v_started >= make_interval(secs => budget_ms / 1000.0);
        lifetime_id := lifetime_ids[k];
        error_state := NULL;
        error_message := NULL;
        BEGIN
            SELECT m.upper, m.caught_up, m.required INTO upper, caught_up, v_req
              FROM decoupled._maintain_view(replica_maintain_many.incarnation, lifetime_ids[k],
                                            expected_uppers[k], true) m;
            PERFORM decoupled._wait_point('replica_maintain:computed');
        EXCEPTION
            -- Not in OTHERS: a cancel, and a failed ASSERT.  The call's own
            -- statement timeout ends the call (each view then takes a step
            -- of its own, which finds the slow one); a view's code that
            -- raised 57014 itself, or an ASSERT of its code, is that
            -- view's error — before, it failed every pass's batch.
            WHEN query_canceled OR assert_failure THEN
                GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE,
                                        error_message = MESSAGE_TEXT;
                IF error_state = '57014'
                   AND current_setting('statement_timeout')::interval > interval '0'
                   AND clock_timestamp() - statement_timestamp()
                       >= current_setting('statement_timeout')::interval - interval '50 ms' THEN
                    RAISE;
                END IF;
                upper := NULL;
                caught_up := NULL;
                v_req := NULL;
            WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE,
                                        error_message = MESSAGE_TEXT;
                IF error_state = 'ZD001' THEN
                    RAISE;  -- fenced: nothing of this call may commit
                END IF;
                upper := NULL;
                caught_up := NULL;
                v_req := NULL;
        END;
        IF v_req IS NOT NULL THEN
            v_ids := v_ids || lifetime_ids[k];
            v_required := v_required || v_req;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        PERFORM decoupled._advance_requirements_of(v_ids, v_required);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION decoupled._maintain_view(bigint, bigint, bigint, boolean),
    decoupled.replica_maintain_many(bigint, bigint[], bigint[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled.replica_maintain_many(bigint, bigint[], bigint[], integer)
    TO decoupled_admin;

-- Unregistering drops the table's history and gives it back its replica
-- identity: like registering, only for whoever owns the table (an admin
-- who does not may drop views and sources, not other roles' tables'
-- history).
CREATE FUNCTION decoupled._check_table_owner(tbl regclass, verb text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- A relation gone (its DROP unregisters it first, so hardly ever) has
    -- no owner left to ask: whoever may call this may clean up after it.
    IF NOT coalesce(pg_has_role(decoupled._caller(),
                                (SELECT c.relowner FROM pg_class c WHERE c.oid = tbl), 'USAGE'),
                    true) THEN
        RAISE EXCEPTION 'must be owner of table "%" to %', tbl, verb
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.unregister_table(tbl regclass) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._unregister_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_version bigint;
    o         decoupled.catalog_objects;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.relation = tbl AND c.kind = 'table' AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', tbl USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._check_table_owner(tbl, 'unregister it');
    PERFORM decoupled._refuse_dependents(format('table "%s"', o.name), ARRAY[o.lifetime_id]);
    PERFORM decoupled._drop_object(o, v_version);
END
$$;

CREATE OR REPLACE FUNCTION decoupled.drop(name text, cascade boolean DEFAULT false) RETURNS void
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._drop(name text, cascade boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_version bigint;
    v_roots   bigint[];
    v_victim  decoupled.catalog_objects;
    v_cascaded text[];
BEGIN
    IF _drop.cascade IS NULL THEN
        RAISE EXCEPTION 'cascade must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    o := decoupled._collection(_drop.name);
    IF o.kind = 'table' THEN
        PERFORM decoupled._check_table_owner(o.relation, 'unregister it');
    END IF;
    IF o.definition ? 'parent' THEN
        RAISE EXCEPTION 'cannot drop subsource "%"', o.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = format('Drop its source "%s" instead.',
                                (SELECT p.name FROM decoupled.catalog_objects p
                                  WHERE p.lifetime_id = (o.definition->>'parent')::bigint));
    END IF;
    SELECT array_agg(s.lifetime_id) INTO v_roots FROM decoupled.catalog_objects s
     WHERE s.dropped_at IS NULL
       AND (s.lifetime_id = o.lifetime_id OR (s.definition->>'parent')::bigint = o.lifetime_id);
    IF NOT _drop.cascade THEN
        PERFORM decoupled._refuse_dependents(format('%s "%s"', o.kind, o.name), v_roots);
        PERFORM decoupled._refuse_foreign_dependents(format('%s "%s"', o.kind, o.name), v_roots);
    END IF;
    -- Said as PostgreSQL says what a DROP ... CASCADE takes with it.
    SELECT array_agg(format('drop cascades to %s "%s"', s.kind, s.name)
                     ORDER BY s.lifetime_id DESC)
      INTO v_cascaded FROM decoupled.catalog_objects s
     WHERE s.lifetime_id = ANY (decoupled._dependents(v_roots))
       AND NOT s.lifetime_id = ANY (v_roots) AND s.dropped_at IS NULL;
    IF cardinality(v_cascaded) = 1 THEN
        RAISE NOTICE '%', v_cascaded[1];
    ELSIF cardinality(v_cascaded) > 1 THEN
        RAISE NOTICE 'drop cascades to % other objects', cardinality(v_cascaded)
            USING DETAIL = array_to_string(v_cascaded, E'\n');
    END IF;
    -- Dependents first: their plans read the storage of what they depend on.
    FOR v_victim IN SELECT * FROM decoupled.catalog_objects s
                     WHERE s.lifetime_id = ANY (v_roots || decoupled._dependents(v_roots))
                     ORDER BY s.lifetime_id DESC
    LOOP
        PERFORM decoupled._drop_object(v_victim, v_version);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION decoupled._check_table_owner(regclass, text),
    decoupled._unregister_table(regclass), decoupled._drop(text, boolean) FROM PUBLIC;

-- An object's error as the reader may see it: errors of a view's, a
-- source's or a table's maintenance may quote its data (a CHECK's or a
-- function's message), so they are shown to whoever may read the object's
-- relation (SELECT on it, as every path to its history asks); others see
-- that there is one.  (One without a relation has no data yet.)  Bound at creation like every view's functions: no
-- caller's search_path takes part.
CREATE FUNCTION decoupled._visible_error(error text, relation oid, name text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN error IS NULL OR relation IS NULL  -- nothing yet to read it through
                  OR coalesce(has_table_privilege(relation, 'SELECT'), false) THEN error
                ELSE format('an error (shown to roles that may read "%s")', name) END
$$;

-- The worker's last error and the registered table whose changes it came
-- from (NULL: none), read together.
CREATE FUNCTION decoupled._capture_error(OUT last_error text, OUT lifetime_id bigint)
RETURNS record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_capture_error';

CREATE OR REPLACE VIEW decoupled.capture AS
    WITH s AS (SELECT * FROM decoupled._capture_state()),
         n AS (SELECT count(*) FILTER (WHERE c.relation IS NOT NULL) AS wal_tables,
                      count(*) FILTER (WHERE c.relation IS NULL) AS trigger_tables
                 FROM decoupled.catalog_objects o
                 LEFT JOIN decoupled.capture_relations c USING (lifetime_id)
                WHERE o.kind = 'table' AND o.dropped_at IS NULL),
         w AS (SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                           ELSE pg_current_wal_lsn() END AS lsn)
    SELECT current_setting('decoupled.capture') AS setting,
           current_setting('wal_level') AS wal_level,
           CASE WHEN current_setting('decoupled.capture') <> 'wal'
                  OR current_setting('wal_level') <> 'logical' THEN
                    CASE WHEN n.wal_tables > 0 THEN 'releasing' ELSE 'off' END
                WHEN n.wal_tables = 0 AND n.trigger_tables = 0 THEN 'idle'
                WHEN s.pid IS NULL OR s.last_error IS NOT NULL
                  OR (s.progress_at < now() - interval '30 s'
                      AND w.lsn > s.captured_through) THEN 'stalled'
                ELSE 'running' END AS status,
           n.wal_tables, n.trigger_tables, s.pid AS worker_pid,
           sl.slot_name::text, sl.active AS slot_active,
           p.captured_lsn, p.captured_at, s.captured_through, s.progress_at,
           CASE WHEN sl.slot_name IS NOT NULL
                THEN pg_wal_lsn_diff(w.lsn, s.captured_through)::bigint END AS lag_bytes,
           pg_wal_lsn_diff(w.lsn, sl.restart_lsn)::bigint AS retained_wal_bytes,
           -- A table's error only to those who may read the table (one gone
           -- since: to nobody); one of no table's to all.
           CASE WHEN e.lifetime_id IS NULL THEN e.last_error
                ELSE decoupled._visible_error(
                         e.last_error,
                         coalesce((SELECT o.relation::oid FROM decoupled.catalog_objects o
                                    WHERE o.lifetime_id = e.lifetime_id), 0::oid),
                         coalesce((SELECT o.name::text FROM decoupled.catalog_objects o
                                    WHERE o.lifetime_id = e.lifetime_id), 'a dropped table'))
                END AS last_error,
           s.error_at
      FROM s CROSS JOIN n CROSS JOIN w CROSS JOIN decoupled._capture_error() e
      LEFT JOIN pg_replication_slots sl ON sl.slot_name = 'pg_decoupled'
      LEFT JOIN decoupled.capture_progress p ON true;

CREATE OR REPLACE VIEW decoupled.object_statuses AS
    SELECT o.name::text, o.kind, r.name::text AS replica,
           CASE WHEN r.replica_id IS NULL THEN 'paused'
                ELSE coalesce(h.status, 'created') END AS status,
           decoupled._visible_error(h.error, o.relation, o.name) AS error,
           CASE WHEN r.replica_id IS NULL THEN 'no replica is running it' ELSE h.hint END
               AS hint,
           h.updated_at, h.transition_at, h.hydrated
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      LEFT JOIN decoupled.replica_health h
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = (SELECT d.name FROM decoupled.catalog_deployments d
                                 WHERE d.state = 'active')
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
    UNION ALL
    SELECT o.name::text, o.kind, NULL,
           CASE WHEN w.stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END,
           CASE WHEN w.stalled THEN coalesce('WAL capture: ' || w.last_error,
                                             'WAL capture is not running')
                ELSE decoupled._visible_error(h.error, o.relation, o.name) END,
           CASE WHEN w.stalled THEN 'Its writes wait in the WAL; see decoupled.capture.'
                ELSE h.hint END,
           h.updated_at, h.transition_at, NULL
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.table_health h USING (lifetime_id)
      LEFT JOIN LATERAL (
          SELECT c.status = 'stalled' AS stalled, c.last_error FROM decoupled.capture c
           WHERE EXISTS (SELECT FROM decoupled.capture_relations r
                          WHERE r.lifetime_id = o.lifetime_id)) w ON true
     WHERE o.dropped_at IS NULL AND o.kind = 'table';

CREATE OR REPLACE VIEW decoupled.status_history AS
    SELECT o.name::text, e.replica, e.status,
           decoupled._visible_error(e.error, o.relation, o.name) AS error, e.occurred_at,
           e.incarnation
      FROM decoupled.status_events e
      JOIN decoupled.catalog_objects o USING (lifetime_id);
REVOKE ALL ON FUNCTION decoupled._capture_error(),
    decoupled._visible_error(text, oid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._capture_error(),
    decoupled._visible_error(text, oid, text) TO PUBLIC;

CREATE OR REPLACE FUNCTION decoupled.wait_for_capture(timeout interval DEFAULT '10 s') RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_deadline timestamptz := clock_timestamp() + timeout;
    v_wal      boolean := current_setting('decoupled.capture') = 'wal'
                          AND current_setting('wal_level') = 'logical';
BEGIN
    IF timeout IS NULL THEN
        RAISE EXCEPTION 'timeout must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF timeout < interval '0' THEN
        RAISE EXCEPTION 'timeout must be a non-negative interval'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        EXIT WHEN NOT EXISTS (
            SELECT FROM decoupled.catalog_objects o
             WHERE o.kind = 'table' AND o.dropped_at IS NULL AND o.relation IS NOT NULL
               AND v_wal <> EXISTS (SELECT FROM decoupled.capture_relations c
                                     WHERE c.lifetime_id = o.lifetime_id));
        IF clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
    IF NOT EXISTS (SELECT FROM decoupled.capture_relations) THEN
        RETURN true;  -- nothing is captured from the WAL
    END IF;
    -- A table set aside has its changes in its pending changes only once
    -- it was taken again from its contents.
    LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM decoupled.capture_resyncs r
                               WHERE r.resynced_lsn IS NULL);
        IF clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
    -- In milliseconds, at most what an integer holds: a timeout beyond
    -- 24.8 days waits that long.
    RETURN decoupled._wait_captured(least(greatest(
        extract(epoch FROM v_deadline - clock_timestamp()) * 1000, 0), 2147483647)::integer);
END
$$;

-- The views, rules and SQL-body functions that read `tbl` as parsed
-- before it was registered: the read rewrite applies at parse analysis,
-- so what was stored before reads the table itself, whatever
-- decoupled.as_of says (one parsed after depends on its history view).
CREATE FUNCTION decoupled._readers_without_history(tbl regclass) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(x.what ORDER BY x.what)
      FROM (SELECT DISTINCT
                   CASE WHEN d.classid = 'pg_proc'::regclass
                        THEN format('function %s', d.objid::regprocedure)
                        WHEN c.relkind = 'v' THEN format('view %s', c.oid::regclass)
                        ELSE format('rule %I on %s', r.rulename, c.oid::regclass) END AS what,
                   d.classid, d.objid
              FROM pg_depend d
              LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
              LEFT JOIN pg_class c ON c.oid = r.ev_class
             WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = tbl
               AND (d.classid = 'pg_proc'::regclass
                    OR (d.classid = 'pg_rewrite'::regclass AND r.ev_class <> tbl
                        AND c.relkind <> 'm'))) x
     WHERE NOT EXISTS (
           SELECT FROM pg_depend h
            WHERE h.classid = x.classid AND h.objid = x.objid
              AND h.refclassid = 'pg_class'::regclass
              AND h.refobjid = (SELECT to_regclass(decoupled._storage(o.lifetime_id, 'history'))
                                  FROM decoupled.catalog_objects o
                                 WHERE o.relation = tbl AND o.kind = 'table'
                                   AND o.dropped_at IS NULL))
$$;
REVOKE ALL ON FUNCTION decoupled._readers_without_history(regclass) FROM PUBLIC;

-- 90_privileges: superuser only.
REVOKE ALL ON FUNCTION decoupled.wait_point_key(text), decoupled._wait_point(text),
    decoupled.arm_wait_point(text), decoupled.release_wait_point(text),
    decoupled.wait_point_waiters(text)
FROM PUBLIC;

------------------------------------------------------------------------------
-- Compaction never waits for storage a view's creation locks
------------------------------------------------------------------------------

-- 40_permission
CREATE OR REPLACE FUNCTION decoupled._apply_compaction(every boolean, cluster text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_since bigint;
    v_count integer := 0;
BEGIN
    FOR r IN SELECT f.lifetime_id, f.since, f.upper, b.bound
               FROM decoupled.catalog_frontiers f
               JOIN decoupled.catalog_bounds b USING (lifetime_id)
               JOIN decoupled.catalog_objects o USING (lifetime_id)
              WHERE o.dropped_at IS NULL AND f.since < least(b.bound, f.upper)
                AND (every OR o.cluster IS NOT DISTINCT FROM _apply_compaction.cluster)
              ORDER BY f.lifetime_id
                FOR UPDATE OF f SKIP LOCKED
    LOOP
        v_since := decoupled._compacted_since(r.since, r.bound, r.upper);
        CONTINUE WHEN v_since <= r.since;
        -- Storage comes before bound rows in the lock order too: a view's
        -- creation holds its inputs' storage (SHARE, building arrangements)
        -- while it waits for their bound rows, which our caller may hold.
        -- Storage someone locks against writers is compacted by a later
        -- round, never waited for.
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE NOWAIT',
                           decoupled._storage(r.lifetime_id, 'dead'));
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        EXECUTE format('DELETE FROM %s WHERE valid_to <= $1', decoupled._storage(r.lifetime_id, 'dead'))
            USING v_since;
        UPDATE decoupled.catalog_frontiers f SET since = v_since, changed_at = now()
         WHERE f.lifetime_id = r.lifetime_id;
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

------------------------------------------------------------------------------
-- Change times by index skips, from a kept plan (extension/change_times.cpp)
------------------------------------------------------------------------------

-- 60_materialized_views
CREATE OR REPLACE FUNCTION decoupled._change_times(inputs bigint[], from_ts bigint, to_ts bigint,
                                        max_count integer) RETURNS bigint[]
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_change_times';

-- Helpers every step calls, no longer planned at every call: in C, or
-- PL/pgSQL with generic plans kept for the session.
CREATE OR REPLACE FUNCTION decoupled._storage(lifetime_id bigint, part text) RETURNS text
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_storage_name';

CREATE OR REPLACE FUNCTION decoupled._queue_for_publication(ids bigint[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO decoupled.catalog_bound_queue (lifetime_id)
    SELECT x.id FROM (SELECT DISTINCT unnest(ids) AS id) x
     WHERE x.id IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_bound_queue q WHERE q.lifetime_id = x.id
                          FOR KEY SHARE SKIP LOCKED);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._required_frontier(as_of bigint, upper bigint) RETURNS bigint
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_required_frontier';

CREATE OR REPLACE FUNCTION decoupled._advance_requirements(id bigint, frontier bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM decoupled._advance_requirements_of(ARRAY[id], ARRAY[frontier]);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                           typed boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
-- PL/pgSQL, not SQL: a view's step calls it, and its statement is planned
-- once per session, not at every call.
BEGIN
    RETURN (SELECT string_agg(prefix || quote_ident(c->>'name')
                              || CASE WHEN typed THEN ' ' || (c->>'type') ELSE '' END,
                              ', ' ORDER BY ord)
              FROM decoupled.catalog_objects o,
                   jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
             WHERE o.lifetime_id = _cols.lifetime_id);
END
$$;

-- Storage rows no longer have a primary key (30_storage): mz_rowid only
-- orders identical copies, and every row written to cur and dead paid for
-- the index.
-- The history's two parts apart: its rows kept in cur, and those kept in
-- dead, gated alike.  A step that needs a group's least or greatest value
-- at as_of reads each part ordered by an index on it and stops at the
-- first row (extension/delta_plan.cpp, ordered extremes): through the
-- union of both, whose branches filter, the planner cannot order by an
-- index.
CREATE FUNCTION decoupled._create_history_parts(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_history_parts.lifetime_id;
    names text := decoupled._cols(id);
BEGIN
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%4$s) AND mz_ts <= decoupled.as_of()',
        decoupled._storage(id, 'history_cur'), names, decoupled._storage(id, 'cur'), id);
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%4$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history_dead'), names, decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s, %s TO PUBLIC', decoupled._storage(id, 'history_cur'),
                   decoupled._storage(id, 'history_dead'));
END
$$;
REVOKE ALL ON FUNCTION decoupled._create_history_parts(bigint) FROM PUBLIC;

-- The time index of a collection's rows in cur (mz_ts), made if it is
-- missing: what finds the times at which the collection changed for the
-- views, sinks and subscriptions that read its changes.  A materialized view
-- whose steps replace rows has none until such a reader appears: without
-- it a step rewrites a group's row in place (a HOT update: no index entry,
-- one WAL record; docs/performance.md), with it every write moves the row.
-- Once made it stays.  The index takes a SHARE lock on cur until the
-- caller commits: only short transactions call this (creating a view or a
-- sink, a replica's heartbeat), never a reader's.  Two callers (replicas
-- of one cluster, a heartbeat and a view's creation) make it one after the
-- other: the second waits for the first's commit on an advisory lock, and
-- IF NOT EXISTS, which reads the catalog after locking cur, then finds it.
CREATE FUNCTION decoupled._ensure_time_index(lifetime_id bigint,
                                             wait boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_name text := 'c' || _ensure_time_index.lifetime_id || '_cur_mz_ts_idx';
    v_cur  text := decoupled._storage(_ensure_time_index.lifetime_id, 'cur');
    -- 0x64635449: "dcTI", the extension's time indexes.
    c_class constant integer := 1684231241;
    v_key   integer := (_ensure_time_index.lifetime_id % 2147483647)::integer;
BEGIN
    IF to_regclass(v_cur) IS NULL
       OR to_regclass('decoupled_storage.' || quote_ident(v_name)) IS NOT NULL THEN
        RETURN;
    END IF;
    IF _ensure_time_index.wait THEN
        PERFORM pg_advisory_xact_lock(c_class, v_key);
    ELSIF NOT pg_try_advisory_xact_lock(c_class, v_key) THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (mz_ts)', v_name, v_cur);
END
$$;
REVOKE ALL ON FUNCTION decoupled._ensure_time_index(bigint, boolean) FROM PUBLIC;

-- The views a collection's history is read through at decoupled.as_of:
-- c<id>_history (its rows then), c<id>_delta (its changes then: rows
-- inserted (+1) and retracted (-1) at as_of; incremental views read their
-- input through it, extension/delta_plan.cpp) and c<id>_before (its rows
-- just before as_of: an incremental join step reads the inputs after the
-- changed one there).  Their branches are gated by a one-time filter:
-- without as_of they are skipped before reading a page.  The changes find
-- their rows of dead inserted at as_of and retracted since by a range on
-- valid_to closed on both sides (its upper bound always true):
-- `valid_to > as_of()` alone is, for a dead without statistics (compaction
-- empties it faster than ANALYZE runs), a third of its rows to the
-- planner, and every step of every view over the collection scanned all of
-- dead (a ten-view step's reading of 400 changes took 126 ms instead of 1;
-- docs/performance.md), where the index holds only the rows retracted
-- after as_of; with statistics the estimate is the histogram's either way.
-- The history and before views keep their one-sided range: steps read
-- them by keys, through an arrangement on (keys, valid_to), and a range
-- guessed small would take the planner from the arrangement to the time
-- index, whose range is every row retracted since as_of — all of a
-- backlog when a view catches up.
CREATE FUNCTION decoupled._create_read_views(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_read_views.lifetime_id;
    names text := decoupled._cols(id);
    cur   text := decoupled._storage(id, 'cur');
    dead  text := decoupled._storage(id, 'dead');
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%5$s) AND mz_ts <= decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history'), names, cur, dead, id);
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s, 1::bigint AS mz_diff FROM %3$s '
        ' WHERE decoupled._history_gate(%5$s) AND mz_ts = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, 1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to > decoupled.as_of() AND valid_to <= 9223372036854775807 '
        '  AND valid_from = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, -1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to = decoupled.as_of()',
        decoupled._storage(id, 'delta'), names, cur, dead, id);
    EXECUTE format(
        'CREATE OR REPLACE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND mz_ts < decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND valid_from < decoupled.as_of() AND valid_to >= decoupled.as_of()',
        decoupled._storage(id, 'before'), names, cur, dead, id);
    EXECUTE format('GRANT SELECT ON %s, %s, %s TO PUBLIC', decoupled._storage(id, 'history'),
                   decoupled._storage(id, 'delta'), decoupled._storage(id, 'before'));
END
$$;
REVOKE ALL ON FUNCTION decoupled._create_read_views(bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION decoupled._create_storage(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id   bigint := _create_storage.lifetime_id;
    defs text := decoupled._cols(id, '', true);
BEGIN
    -- mz_rowid only orders identical copies (the oldest is retracted first);
    -- nothing looks a row up by it, so it has no index: every row written
    -- to cur and dead would pay for one.
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, mz_ts bigint NOT NULL, '
                   'mz_hash integer NOT NULL, %s)', decoupled._storage(id, 'cur'), defs);
    EXECUTE format('CREATE INDEX ON %s (mz_hash)', decoupled._storage(id, 'cur'));
    -- Maintained views and sinks find the times at which a collection changed
    -- (the time index; a view whose steps replace rows drops its own until
    -- something reads its changes: _ensure_time_index).
    EXECUTE format('CREATE INDEX ON %s (mz_ts)', decoupled._storage(id, 'cur'));
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, valid_from bigint NOT NULL, '
                   'valid_to bigint NOT NULL, %s, CHECK (valid_from < valid_to))',
                   decoupled._storage(id, 'dead'), defs);
    EXECUTE format('CREATE INDEX ON %s (valid_to)', decoupled._storage(id, 'dead'));
    EXECUTE format('CREATE UNLOGGED TABLE %s (mz_ts bigint NOT NULL, mz_diff bigint NOT NULL, '
                   'mz_key text NOT NULL, mz_hash integer NOT NULL, %s)',
                   decoupled._storage(id, 'stage'), defs);
    PERFORM decoupled._create_read_views(id);
    PERFORM decoupled._create_history_parts(id);
END
$$;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.conrelid::regclass AS rel, c.conname
               FROM pg_catalog.pg_constraint c
               JOIN pg_catalog.pg_class t ON t.oid = c.conrelid
              WHERE c.connamespace = 'decoupled_storage'::regnamespace AND c.contype = 'p'
                AND t.relname ~ '^c[0-9]+_(cur|dead)$'
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.rel, r.conname);
    END LOOP;
END
$$;

-- Advances the requirements of outputs ids[k] on their inputs to
-- frontiers[k] (C3.4) and queues the inputs whose bounds may move as a
-- result.  The commit-time permission check locks the bound row of every
-- requirement that moved; they are all locked here first, in ascending id
-- (the global lock order), so that a step and a publication never take two
-- of them in opposite orders.
CREATE FUNCTION decoupled._advance_requirements_of(ids bigint[], frontiers bigint[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan
AS $$
-- PL/pgSQL, not SQL: its statements are planned once per session, not at
-- every step; generic plans, since the ids differ at every call.
DECLARE
    v_moved  bigint[];
    v_locked bigint[];
BEGIN
    v_locked := ARRAY(SELECT b.lifetime_id FROM decoupled.catalog_bounds b
                       WHERE b.lifetime_id IN (SELECT q.lifetime_id
                                                 FROM decoupled.catalog_requirements q
                                                 JOIN unnest(ids, frontiers) AS a(id, frontier)
                                                   ON q.required_by = a.id
                                                  AND q.frontier < a.frontier)
                       ORDER BY b.lifetime_id FOR UPDATE SKIP LOCKED);
    WITH moved AS (
        UPDATE decoupled.catalog_requirements q SET frontier = a.frontier, changed_at = now()
          FROM unnest(ids, frontiers) AS a(id, frontier)
         WHERE q.required_by = a.id AND q.frontier < a.frontier
           AND (q.lifetime_id = ANY (v_locked)
                OR NOT EXISTS (SELECT FROM decoupled.catalog_bounds b
                                WHERE b.lifetime_id = q.lifetime_id))
        RETURNING q.lifetime_id)
    SELECT array_agg(DISTINCT m.lifetime_id) INTO v_moved FROM moved m;
    IF v_moved IS NOT NULL THEN
        PERFORM decoupled._queue_for_publication(v_moved);
    END IF;
END
$$;

-- The idle views of a replica's pass, advanced in one transaction (C5.3):
-- with ten views ticked ten times a second, most steps only move a view's
-- upper to its inputs' (nothing changed there), and a transaction per view
-- — its round trips, the incarnation and deployment checks, the commit —
-- was what such a step cost.  For each view of `lifetime_ids`, in
-- ascending id (inputs before readers), whose upper is still
-- expected_uppers[k]: nothing to do, or no input changed up to the inputs'
-- upper, which becomes the view's; returned with its upper.  A view not
-- returned takes its own step (replica_maintain): a lost race, its first
-- computation, a change to compute, an owner who can no longer read an
-- input (the step says so), an input that itself takes a step in this
-- pass, or a frontier or catalog row another transaction holds (never
-- waited for: a drop of a view in a transaction still open holds its
-- catalog row and its requirements).
CREATE FUNCTION decoupled.replica_advance_idle(incarnation bigint, lifetime_ids bigint[],
                                               expected_uppers bigint[])
RETURNS TABLE (lifetime_id bigint, upper bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    i          decoupled.catalog_replica_incarnations;
    r          record;
    v_inputs   bigint[];
    v_as_of    bigint;
    v_target   bigint;
    v_stepping bigint[] := '{}';
    v_ids      bigint[] := '{}';
    v_required bigint[] := '{}';
BEGIN
    i := decoupled._live_incarnation(replica_advance_idle.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    FOR r IN SELECT f.lifetime_id AS id, f.upper, e.expected, c.definition
               FROM unnest(lifetime_ids, expected_uppers) AS e(id, expected)
               JOIN decoupled.catalog_frontiers f ON f.lifetime_id = e.id
               JOIN decoupled.catalog_objects c ON c.lifetime_id = e.id
              WHERE c.dropped_at IS NULL AND c.kind = 'materialized view'
              ORDER BY f.lifetime_id
                FOR UPDATE OF f SKIP LOCKED FOR SHARE OF c SKIP LOCKED
    LOOP
        SELECT coalesce(array_agg(x.id::bigint), '{}') INTO v_inputs
          FROM jsonb_array_elements_text(r.definition->'inputs') AS x(id);
        v_as_of := (r.definition->>'as_of')::bigint;
        IF r.upper <> r.expected OR r.upper = v_as_of OR v_inputs = '{}'
           OR v_inputs && v_stepping
           OR EXISTS (SELECT FROM jsonb_array_elements_text(r.definition->'direct') AS x(rel)
                       WHERE NOT coalesce(has_table_privilege((r.definition->>'owner')::oid,
                                                              x.rel::oid, 'SELECT'), true)) THEN
            v_stepping := v_stepping || r.id;
            CONTINUE;
        END IF;
        v_target := decoupled._inputs_upper(v_inputs);
        IF v_target > r.upper THEN
            IF cardinality(decoupled._change_times(v_inputs, r.upper, v_target, 1)) > 0 THEN
                v_stepping := v_stepping || r.id;
                CONTINUE;
            END IF;
            -- Now, not at the end: a reader of this view later in the loop
            -- sees its new upper.
            UPDATE decoupled.catalog_frontiers f SET upper = v_target, changed_at = now()
             WHERE f.lifetime_id = r.id;
            v_ids := v_ids || r.id;
            v_required := v_required || decoupled._required_frontier(v_as_of, v_target);
        END IF;
        lifetime_id := r.id;
        upper := greatest(v_target, r.upper);
        RETURN NEXT;
    END LOOP;
    IF cardinality(v_ids) > 0 THEN
        PERFORM decoupled._advance_requirements_of(v_ids, v_required);
        PERFORM decoupled._queue_for_publication(v_ids);
        PERFORM decoupled._notify_upper_at_commit();
    END IF;
END
$$;
REVOKE ALL ON FUNCTION decoupled._advance_requirements_of(bigint[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled.replica_advance_idle(bigint, bigint[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled.replica_advance_idle(bigint, bigint[], bigint[])
    TO decoupled_admin;

-- Sessions that run through the update (replicas, adapterd, the capture
-- worker, clients) compiled the extension's PL/pgSQL functions against the
-- old row type of catalog_objects; rewriting each function's catalog row
-- (its cost, unchanged) makes every session compile it anew at its next
-- call.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS fn, p.procost
               FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
              WHERE p.pronamespace = 'decoupled'::regnamespace AND l.lanname IN ('plpgsql', 'sql')
    LOOP
        EXECUTE format('ALTER FUNCTION %s COST %s', f.fn, f.procost);
    END LOOP;
END
$$;

-- CREATE SCHEMA's own statements are checked as well, and inheritance
-- only for the relations a command made or changed (33_drops.sql).
DROP EVENT TRIGGER decoupled_ddl_end;
DROP FUNCTION decoupled._check_inheritance();

-- No registered table (nor a sink's table) takes part in inheritance or
-- partitioning on either side: writes through a parent or to a child
-- would bypass capture, and a child's rows would show in its reads.
-- Checked for the relations a command made or changed (`relations`), so
-- that nothing some other command left behind fails everyone's DDL.
CREATE FUNCTION decoupled._check_inheritance(relations oid[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v record;
BEGIN
    SELECT i.inhrelid::regclass AS child, i.inhparent::regclass AS parent,
           o.relation = i.inhparent AS is_parent, o.kind,
           CASE WHEN o.kind = 'table' THEN format('registered table "%s"', o.relation::regclass)
                ELSE format('the table of sink "%s"', o.name) END AS what
      INTO v
      FROM pg_inherits i
      JOIN decoupled.catalog_objects o
        ON o.dropped_at IS NULL AND o.kind IN ('table', 'sink')
       AND o.relation IN (i.inhrelid, i.inhparent)
     WHERE i.inhrelid = ANY (relations) OR i.inhparent = ANY (relations)
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    ELSIF v.is_parent THEN
        RAISE EXCEPTION 'cannot inherit from %', v.what
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = CASE WHEN v.kind = 'table'
                                THEN 'Writes to a child would bypass its capture.'
                                ELSE 'A child''s rows would show in its output.' END;
    END IF;
    RAISE EXCEPTION '% cannot become a partition or an inheritance child of "%"', v.what, v.parent
        USING ERRCODE = 'feature_not_supported',
              DETAIL = CASE WHEN v.kind = 'table'
                            THEN 'Writes through the parent would bypass its capture.'
                            ELSE 'It belongs to the extension while the sink lives.' END,
              HINT = CASE WHEN v.kind = 'table'
                          THEN 'Unregister it with decoupled.unregister_table() first.'
                          ELSE 'Drop the sink with decoupled.drop() first.' END;
END
$$;

REVOKE ALL ON FUNCTION decoupled._check_inheritance(oid[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION decoupled._on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r           record;
    v_relations oid[] := '{}';
BEGIN
    IF to_regclass('decoupled.catalog_objects') IS NULL THEN
        RETURN;
    END IF;
    -- CREATE SCHEMA's own statements (CREATE TABLE ... INHERITS, CREATE
    -- TRIGGER, ...) are listed here with their own tags.
    FOR r IN SELECT c.classid, c.objid, c.command_tag FROM pg_event_trigger_ddl_commands() c LOOP
        IF r.classid = 'pg_trigger'::regclass THEN
            PERFORM decoupled._check_trigger(r.objid);
        ELSIF r.classid = 'pg_rewrite'::regclass THEN
            PERFORM decoupled._check_relation_ddl(w.ev_class, r.command_tag)
               FROM pg_rewrite w WHERE w.oid = r.objid;
        ELSIF r.classid = 'pg_class'::regclass THEN
            PERFORM decoupled._check_relation_ddl(r.objid, r.command_tag);
            v_relations := v_relations || r.objid;
        END IF;
    END LOOP;
    PERFORM decoupled._check_inheritance(v_relations);
END
$$;
CREATE EVENT TRIGGER decoupled_ddl_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
                 'CREATE VIEW', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'CREATE RULE',
                 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE SCHEMA', 'IMPORT FOREIGN SCHEMA')
    EXECUTE FUNCTION decoupled._on_ddl_end();
-- Columns of a range type whose subtype_diff (or canonical function) a
-- role other than a superuser owns: 1.1 refuses them (_check_columns);
-- where 1.0 accepted one, its relations keep no statistics of it, so that
-- ANALYZE of them never runs that function with the extension's rights.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT c.oid::regclass AS rel, a.attname
          FROM decoupled.catalog_objects o
          CROSS JOIN LATERAL jsonb_array_elements(o.definition->'columns') col
          JOIN pg_class c
            ON (c.relnamespace = 'decoupled_storage'::regnamespace
                AND c.relname LIKE 'c' || o.lifetime_id || '\_%')
            OR (o.kind = 'sink' AND c.oid = o.relation)
          JOIN pg_attribute a
            ON a.attrelid = c.oid AND a.attname = col->>'name' AND NOT a.attisdropped
         WHERE o.dropped_at IS NULL AND c.relkind IN ('r', 'p')
           AND EXISTS (SELECT FROM decoupled._column_types(jsonb_build_array(col)) x(oid)
                         JOIN pg_range g ON g.rngtypid = x.oid
                         JOIN pg_proc p ON p.oid IN (g.rngsubdiff, g.rngcanonical)
                         JOIN pg_roles w ON w.oid = p.proowner
                        WHERE NOT w.rolsuper)
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET STATISTICS 0', r.rel, r.attname);
    END LOOP;
END
$$;

-- Whatever session_replication_role says (33_drops.sql).
ALTER EVENT TRIGGER decoupled_ddl_end ENABLE ALWAYS;
ALTER EVENT TRIGGER decoupled_sql_drop ENABLE ALWAYS;

-- 32_registered_tables, 34_wal_capture
-- Retractions located by the primary key (C14.2): a table registered with
-- one keeps REPLICA IDENTITY DEFAULT; its cur and pending get an index on
-- the key; the capture worker looks old rows up by key.  Tables registered
-- by 1.0 keep REPLICA IDENTITY FULL and are captured as before.

-- The columns of `rel`'s primary key, in the table's column order, when
-- capture can locate retractions by them (brief C14.2): every key column
-- of a built-in type, so that the capture worker's lookup of an old row by
-- key runs only PostgreSQL's own input functions and operators, and the
-- key checked at once (a deferrable one lets a transaction hold two rows
-- with one key for a while, and "the row with this key" would be
-- ambiguous).  NULL otherwise: the table then needs REPLICA IDENTITY FULL.
CREATE FUNCTION decoupled._capture_key(rel regclass) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT jsonb_agg(a.attname ORDER BY a.attnum)
      FROM pg_index x JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey)
     WHERE x.indrelid = rel AND x.indisprimary AND x.indimmediate
    HAVING bool_and(a.atttypid < 16384) AND count(*) > 0
$$;

CREATE OR REPLACE FUNCTION decoupled._register_table(tbl regclass, retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
-- Its copy of the table reads the table, not its history, whatever the
-- caller's decoupled.as_of.
SET decoupled.as_of = ''
AS $$
DECLARE
    v_columns jsonb;
    r         record;
    v_version bigint;
    v_id      bigint;
    v_ts      bigint;
    v_pending text;
    v_identity text;
    v_key     jsonb;
    v_wanted  text;
    v_stale   text[];
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._check_retention(retain_history);
    -- The snapshot below must see every write committed before capture
    -- starts: only a fresh snapshot per statement does.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'register_table needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- Lock the table before reading its shape, and before the catalog
    -- version row (tables first, then the catalog: the order DROP TABLE
    -- takes too).  Writers wait from here to commit.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    SELECT c.relname::text AS relname, c.relkind, c.relpersistence, n.nspname::text AS nspname,
           c.relowner, c.relrowsecurity OR c.relforcerowsecurity AS rls, c.relispartition,
           c.reloftype <> 0 AS typed
      INTO r
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT pg_has_role(decoupled._caller(), r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table "%" to register it', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF r.relkind = 'p' THEN
        RAISE EXCEPTION 'cannot register partitioned table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Register an ordinary table.';
    ELSIF r.relkind <> 'r' THEN
        RAISE EXCEPTION '"%" is not an ordinary table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF r.relpersistence <> 'p' THEN
        RAISE EXCEPTION 'cannot register temporary or unlogged table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A collection''s history must survive a crash; use a permanent table.';
    END IF;
    IF r.rls THEN
        RAISE EXCEPTION 'cannot register table "%" because it has row-level security', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history would be read without the table''s policies.';
    END IF;
    IF r.relispartition OR EXISTS (SELECT FROM pg_inherits i
                                    WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RAISE EXCEPTION 'cannot register table "%" because it takes part in inheritance', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Writes through a parent or to a child would bypass its capture.';
    END IF;
    IF r.nspname IN ('decoupled', 'decoupled_storage', 'pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'cannot register system table "%"', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = tbl AND attnum > 0 AND attisdropped) THEN
        RAISE EXCEPTION 'cannot register table "%" because it has dropped columns', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;
    -- ALTER TYPE ... CASCADE would change a typed table's columns.
    IF r.typed THEN
        RAISE EXCEPTION 'cannot register typed table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'ALTER TYPE ... CASCADE would change its shape under its history.',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;

    v_version := decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.relation = tbl AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'table "%" is already registered', tbl USING ERRCODE = 'duplicate_object';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.name = r.relname AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a collection named "%" already exists', r.relname
            USING ERRCODE = 'duplicate_object';
    END IF;

    v_columns := decoupled._relation_columns(tbl);
    PERFORM decoupled._check_columns('table', r.relname, v_columns);
    -- Its relation is recorded once the capture triggers exist: the DDL
    -- event trigger refuses trigger changes on a registered table.
    INSERT INTO decoupled.catalog_objects
           (name, kind, definition, retain_history, created_in_version)
    VALUES (r.relname, 'table',
            jsonb_build_object('schema', r.nspname, 'columns', v_columns),
            retain_history, v_version)
    RETURNING lifetime_id INTO v_id;

    PERFORM decoupled._create_storage(v_id);
    v_pending := decoupled._storage(v_id, 'pending');
    EXECUTE format('CREATE TABLE %s (mz_diff bigint NOT NULL, %s)',
                   v_pending, decoupled._cols(v_id, '', true));

    -- Writers are excluded since the LOCK above, so the snapshot below and
    -- the captured changes neither overlap nor leave a gap.  Capture starts
    -- with triggers; where capture is from the WAL, the capture worker
    -- adopts the table soon after (34_wal_capture.sql).
    PERFORM decoupled._create_capture_triggers(tbl, v_pending);
    -- What WAL capture retracts for an update or a delete (C14.2): with a
    -- primary key, the row its old key names (REPLICA IDENTITY DEFAULT: the
    -- WAL carries the key; the capture worker finds the row in storage,
    -- through an index on the key of cur, and of pending while the table is
    -- captured from the WAL, _index_pending_key); without one, the
    -- old row itself (REPLICA IDENTITY FULL: the whole row is in the WAL).
    -- Unregistering gives the table its own identity back.
    v_key := decoupled._capture_key(tbl);
    IF v_key IS NOT NULL THEN
        EXECUTE format('CREATE INDEX ON %s (%s)', decoupled._storage(v_id, 'cur'),
                       (SELECT string_agg(quote_ident(k), ', ') FROM jsonb_array_elements_text(v_key) k));
        -- Ticks find a retracted row's copies through the key as well
        -- (append_core.cpp), so cur needs no index on the row hash: with
        -- random hashes, every row inserted into it landed on another leaf
        -- page, 40% of what writing a tick's inserted rows cost.
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_hash_idx');
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('key', v_key)
         WHERE o.lifetime_id = v_id;
    END IF;
    SELECT CASE c.relreplident WHEN 'd' THEN 'DEFAULT' WHEN 'n' THEN 'NOTHING'
                WHEN 'f' THEN 'FULL'
                ELSE (SELECT format('USING INDEX %I', i.relname)
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = tbl AND x.indisreplident) END
      INTO v_identity FROM pg_class c WHERE c.oid = tbl;
    v_wanted := CASE WHEN v_key IS NULL THEN 'FULL' ELSE 'DEFAULT' END;
    IF v_identity IS DISTINCT FROM v_wanted THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', tbl, v_wanted);
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('replica_identity', v_identity)
         WHERE o.lifetime_id = v_id;
    END IF;
    UPDATE decoupled.catalog_objects o SET relation = tbl WHERE o.lifetime_id = v_id;

    v_ts := decoupled._next_timestamp(0);
    EXECUTE format('INSERT INTO %s SELECT nextval(''decoupled.rowid_seq''), $1, '
                   'hashtext(ROW(%s)::text), %s FROM ONLY %s t',
                   decoupled._storage(v_id, 'cur'), decoupled._cols(v_id, 't.'),
                   decoupled._cols(v_id, 't.'), tbl)
        USING v_ts;
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_ts, v_ts + 1);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_ts);
    IF current_setting('decoupled.capture') = 'wal'
       AND current_setting('wal_level') <> 'logical' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = 'Set wal_level = logical and restart the server: its writes are then '
                         'captured from the WAL, at no cost to its writers.';
    ELSIF current_setting('decoupled.capture') = 'trigger' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = CASE WHEN current_setting('wal_level') = 'logical'
                              THEN 'Set decoupled.capture = ''wal'' and reload the '
                                   'configuration: its writes are then captured from the WAL, '
                                   'at no cost to its writers.'
                              ELSE 'Set wal_level = logical and decoupled.capture = ''wal'' and '
                                   'restart the server: its writes are then captured from the '
                                   'WAL, at no cost to its writers.' END;
    END IF;
    v_stale := decoupled._readers_without_history(tbl);
    IF v_stale IS NOT NULL THEN
        RAISE WARNING '% made before table "%" was registered read its latest state, whatever '
                      'decoupled.as_of says',
                      CASE WHEN cardinality(v_stale) = 1 THEN 'one view or function'
                           ELSE cardinality(v_stale) || ' views or functions' END, tbl
            USING DETAIL = array_to_string(v_stale, ', ') || '.',
                  HINT = 'Create them again (CREATE OR REPLACE with the same definition) to '
                         'read its history; so do materialized views built on them.';
    END IF;
    RETURN v_id;
END
$$;

-- For a table whose retractions are located by its primary key (the key
-- is in its definition): the positions of the key's columns in a captured
-- row (mz_diff is 0), and the statement that finds the live rows of a
-- batch's keys — one text[] parameter per key column, the n-th elements
-- being the n-th key — as (n, the row's text), from the collection's
-- current and pending rows, through the indexes on their key (cur's made
-- at registration, pending's at adoption); a pending retraction by key
-- (mz_diff 0, index_tick.cpp) retracts the key's current row.  NULLs for
-- other tables.
CREATE FUNCTION decoupled._capture_key_lookup(id bigint, OUT key_fields integer[],
                                              OUT statement text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_def  jsonb;
    v_cur  text := decoupled._storage(id, 'cur');
    v_pend text := decoupled._storage(id, 'pending');
    v_cols text := decoupled._cols(id, 'c.');
    k      record;
BEGIN
    SELECT o.definition INTO v_def FROM decoupled.catalog_objects o WHERE o.lifetime_id = id;
    IF v_def->'key' IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(c.ord::integer ORDER BY n.i),
           string_agg(format('pg_catalog.unnest($%s::pg_catalog.text[])', n.i), ', '
                      ORDER BY n.i) AS args,
           string_agg(format('mz_k%s', n.i), ', ' ORDER BY n.i) AS names,
           string_agg(format('k.mz_k%s::%s%s AS mz_k%s', n.i, format_type(a.atttypid, a.atttypmod),
                             CASE WHEN a.attcollation <> 0
                                  THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END,
                             n.i), ', ' ORDER BY n.i) AS typed,
           string_agg(format('c.%I OPERATOR(pg_catalog.=) k.mz_k%s', n.name, n.i), ' AND ' ORDER BY n.i) AS on_key,
           string_agg(format('p.%I OPERATOR(pg_catalog.=) k.mz_k%s', n.name, n.i), ' AND ' ORDER BY n.i) AS on_key_p
      INTO k
      FROM jsonb_array_elements_text(v_def->'key') WITH ORDINALITY AS n(name, i)
      JOIN jsonb_array_elements(v_def->'columns') WITH ORDINALITY AS c(col, ord)
        ON c.col->>'name' = n.name
      JOIN pg_attribute a ON a.attrelid = v_cur::regclass AND a.attname = n.name;
    key_fields := k.array_agg;
    -- Each key is an index probe in both, whatever the statistics said when
    -- the plan was made (it is kept for the worker's life): OFFSET 0 keeps
    -- each lateral subquery a parameterized scan rather than a join the
    -- planner could turn into a hash join over the whole table.
    statement := format(
        'WITH k AS (SELECT k.mz_n, %1$s FROM ROWS FROM (%2$s) WITH ORDINALITY AS k(%3$s, mz_n)), '
        '     x AS (SELECT k.mz_n, y.* FROM k CROSS JOIN LATERAL ( '
        '             SELECT 1::pg_catalog.int8 AS mz_d, ROW(%4$s)::pg_catalog.text AS mz_row '
        '               FROM %5$s c WHERE %6$s AND NOT EXISTS ( '
        '                     SELECT FROM %7$s p WHERE %8$s AND p.mz_diff OPERATOR(pg_catalog.=) 0) '
        '             OFFSET 0) y '
        '           UNION ALL '
        '           SELECT k.mz_n, y.* FROM k CROSS JOIN LATERAL ( '
        '             SELECT c.mz_diff, ROW(%4$s)::pg_catalog.text '
        '               FROM %7$s c WHERE %6$s AND c.mz_diff OPERATOR(pg_catalog.<>) 0 '
        '             OFFSET 0) y) '
        'SELECT x.mz_n, x.mz_row FROM x GROUP BY x.mz_n, x.mz_row '
        'HAVING pg_catalog.sum(x.mz_d) > 0',
        k.typed, k.args, k.names, v_cols, v_cur, k.on_key, v_pend, k.on_key_p);
END
$$;

-- The index on a keyed table's pending rows (C14.2) by which the capture
-- worker finds old rows there: made when the table is adopted for WAL
-- capture and dropped when it is released, so that trigger capture's
-- writers, whose statements insert into pending, do not pay for it.
CREATE FUNCTION decoupled._index_pending_key(id bigint, wanted boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_key  jsonb;
    v_name text := 'c' || id || '_pending_key';
BEGIN
    SELECT o.definition->'key' INTO v_key FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = id;
    IF v_key IS NULL THEN
        RETURN;
    END IF;
    IF wanted THEN
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%s)', v_name,
                       decoupled._storage(id, 'pending'),
                       (SELECT string_agg(quote_ident(k), ', ')
                          FROM jsonb_array_elements_text(v_key) k));
    ELSE
        EXECUTE format('DROP INDEX IF EXISTS decoupled_storage.%I', v_name);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION decoupled._capture_key(regclass), decoupled._capture_key_lookup(bigint),
    decoupled._index_pending_key(bigint, boolean) FROM PUBLIC;

-- A statement that yields every row collection `id` holds — its current
-- rows and what is pending — negated, as rows of its pending table.  A
-- pending retraction by key (mz_diff 0, index_tick.cpp) has retracted its
-- key's current row already: that row is not retracted twice.
CREATE FUNCTION decoupled._capture_held_negated(id bigint) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key    jsonb := (SELECT o.definition->'key' FROM decoupled.catalog_objects o
                        WHERE o.lifetime_id = id);
    v_pend   text := decoupled._storage(id, 'pending');
    v_marked text := '';
BEGIN
    IF v_key IS NOT NULL THEN
        v_marked := format(' WHERE NOT EXISTS (SELECT FROM %s p '
                           '  WHERE p.mz_diff OPERATOR(pg_catalog.=) 0 AND %s)', v_pend,
                           (SELECT string_agg(format('p.%1$I OPERATOR(pg_catalog.=) c.%1$I', k),
                                              ' AND ')
                              FROM jsonb_array_elements_text(v_key) k));
    END IF;
    RETURN format('SELECT -1, %1$s FROM %2$s c%3$s '
                  'UNION ALL SELECT -p.mz_diff, %4$s FROM %5$s p '
                  ' WHERE p.mz_diff OPERATOR(pg_catalog.<>) 0',
                  decoupled._cols(id, 'c.'), decoupled._storage(id, 'cur'), v_marked,
                  decoupled._cols(id, 'p.'), v_pend);
END
$$;

-- A truncation in the WAL: every row the collection holds at that point of
-- the commit order (its current rows and what is pending) is retracted.
CREATE OR REPLACE FUNCTION decoupled._capture_truncate(id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('INSERT INTO %s %s', decoupled._storage(id, 'pending'),
                   decoupled._capture_held_negated(id));
END
$$;

-- The slot was lost under WAL-captured tables (dropped by hand, or by a
-- DROP EXTENSION that rolled back): what they wrote since is not in any
-- slot.  With their writers excluded, each table's pending changes get the
-- difference between its contents and its collection (current rows and
-- pending), and capture skips every transaction that committed before —
-- as registration takes a table's contents.  The new slot exists already.
CREATE OR REPLACE FUNCTION decoupled._capture_resync() RETURNS pg_lsn
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r     record;
    v_lsn pg_lsn;
BEGIN
    FOR r IN SELECT c.lifetime_id, c.relation FROM decoupled.capture_relations c
              ORDER BY c.lifetime_id LOOP
        EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', r.relation::regclass);
    END LOOP;
    -- Read below as this worker (a superuser): each must still be an
    -- ordinary table (its lock keeps it one), never a view running its
    -- owner's query.
    PERFORM decoupled._assert_ordinary_table(c.relation) FROM decoupled.capture_relations c;
    -- The new slot cannot deliver what the lost one held: what is pending
    -- and what this writes there must survive a crash by themselves.
    PERFORM decoupled._set_pending_logged(c.lifetime_id, true, false)
       FROM decoupled.capture_relations c ORDER BY c.lifetime_id;
    -- Every transaction that wrote them committed before this point; every
    -- later one commits after it.
    v_lsn := pg_current_wal_insert_lsn();
    PERFORM decoupled._capture_take_contents(c.lifetime_id, c.relation)
       FROM decoupled.capture_relations c ORDER BY c.lifetime_id;
    INSERT INTO decoupled.capture_progress AS p (slot_name, captured_lsn)
    VALUES ('pg_decoupled', v_lsn)
    ON CONFLICT (only_row) DO UPDATE SET captured_lsn = EXCLUDED.captured_lsn, captured_at = now();
    RETURN v_lsn;
END
$$;

REVOKE ALL ON FUNCTION decoupled._capture_held_negated(bigint) FROM PUBLIC;

------------------------------------------------------------------------------
-- Last: the catalog is at the schema version of 1.1.
------------------------------------------------------------------------------

UPDATE decoupled.catalog_meta SET schema_version = 2;

-- The arrangement of `input` on `keys` for view `view_id`: an index on the
-- input's cur and dead storage over the key expressions, e.g. "(k % 10),
-- (s)" (built-in functions only: storage is written with the extension's
-- rights), created unless another view already has it.  Keys PostgreSQL cannot index (not
-- immutable) get none: the view's steps then read the input without it.
-- Dead's ends with valid_to: a probe at t passes over the key's rows
-- retracted by t (not yet compacted, or kept for older readers) within the
-- index, without reading them — a step is at or near the latest time,
-- where nearly all of dead is such rows.  An index it finds already there
-- (IF NOT EXISTS) may be one whose users are all dropped: the storage lock
-- its CREATE INDEX holds until commit keeps _drop_unused_arrangements off
-- it until this view's row is there to see.
CREATE OR REPLACE FUNCTION decoupled._arrange(view_id bigint, input bigint, keys text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_expr  text := keys;
    v_name  text := 'c' || input || '_a' || substr(md5(v_expr), 1, 12);
    v_cur   regclass := decoupled._storage(input, 'cur')::regclass;
    v_fixed text;
    v_wide  text;
BEGIN
    -- Columns only.  An index evaluates its expressions on every row the
    -- input's history gets — a row the view's WHERE leaves out too — so an
    -- expression that fails there ((s)::int, 100 / v) would stop the
    -- input's ticks, and every view over it.  Keyed by an expression, the
    -- view's steps read the input without an arrangement.
    IF v_expr !~ '^\(("([^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\)(, \(("([^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)\))*$' THEN
        RETURN;
    END IF;
    -- Every arrangement costs each write of the input's history an index
    -- entry in cur and in dead, paid by the input's ticks (its owner's) and
    -- every view over it.  A role that may only read the input adds at most
    -- a few: once the input has four, its views read the
    -- input without one of their own (their steps are slower, the input's
    -- writes are not).  The input's owner (and whoever acts as it) adds as
    -- many as its own views need.
    IF NOT EXISTS (SELECT FROM decoupled.catalog_arrangements a
                    WHERE a.input = _arrange.input AND a.index_name = v_name)
       AND (SELECT count(DISTINCT a.index_name) FROM decoupled.catalog_arrangements a
             WHERE a.input = _arrange.input) >= 4
       AND NOT (SELECT pg_has_role((v.definition->>'owner')::oid, c.relowner, 'USAGE')
                  FROM decoupled.catalog_objects v, decoupled.catalog_objects i
                  JOIN pg_class c ON c.oid = i.relation
                 WHERE v.lifetime_id = _arrange.view_id AND i.lifetime_id = _arrange.input) THEN
        RETURN;
    END IF;
    -- Likewise one key value wider than a btree entry holds would stop
    -- the input's ticks (_equality_index_columns).
    SELECT e.fixed, e.wide INTO v_fixed, v_wide
      FROM decoupled._equality_index_columns(v_cur, v_expr) e;
    BEGIN
        IF v_fixed IS NOT NULL THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%s)', v_name || '_cur',
                           v_cur, v_fixed);
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%s, valid_to)', v_name || '_dead',
                           decoupled._storage(input, 'dead'), v_fixed);
        ELSIF v_wide IS NOT NULL THEN
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING hash (%s)', v_name || '_cur',
                           v_cur, v_wide);
            EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING hash (%s)', v_name || '_dead',
                           decoupled._storage(input, 'dead'), v_wide);
        ELSE
            RETURN;
        END IF;
    EXCEPTION WHEN invalid_object_definition OR feature_not_supported
                   OR undefined_function OR undefined_object OR datatype_mismatch THEN
        RETURN;
    END;
    INSERT INTO decoupled.catalog_arrangements (input, index_name, expression, view_id)
    VALUES (_arrange.input, v_name, v_expr, _arrange.view_id) ON CONFLICT DO NOTHING;
END
$$;

-- Drops the arrangements `view_id` (being dropped) was the last user of
-- (_drop_unused_arrangements: without waiting; what it cannot drop now,
-- finalize_dropped drops in a later round).
CREATE OR REPLACE FUNCTION decoupled._unarrange(view_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM decoupled.catalog_arrangements a WHERE a.view_id = _unarrange.view_id) THEN
        PERFORM decoupled._drop_unused_arrangements();
    END IF;
END
$$;

-- Drops the arrangements whose users are all dropped: both indexes of
-- each (on the input's cur and on its dead) and then its rows, which stay
-- until then — a drop never waits for a step, a tick or a reader that has
-- the input's storage open (NOWAIT), so an arrangement it could not drop
-- is found again by the next call (finalize_dropped makes one every
-- maintenance round) rather than left for good, where every later write
-- into the input's history would maintain it for nobody.  The rows of
-- dropped views go too where a live view uses the same arrangement.
-- Whether one does is asked again once both storage tables are held: a
-- view that adopts the indexes (_arrange, CREATE INDEX IF NOT EXISTS)
-- holds that storage until it commits, so then its row is visible to the
-- new statement's snapshot — which a transaction snapshot would not be:
-- outside READ COMMITTED this does nothing.  Returns how many
-- arrangements it dropped.
CREATE FUNCTION decoupled._drop_unused_arrangements() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_index text;
    v_table text;
    v_count integer := 0;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    FOR r IN
        SELECT DISTINCT a.input, a.index_name
          FROM decoupled.catalog_arrangements a
          JOIN decoupled.catalog_objects o ON o.lifetime_id = a.view_id
         WHERE o.dropped_at IS NOT NULL
         ORDER BY a.input, a.index_name
    LOOP
        BEGIN
            FOREACH v_index IN ARRAY ARRAY[r.index_name || '_cur', r.index_name || '_dead'] LOOP
                v_table := (SELECT x.indrelid::regclass::text FROM pg_index x
                             WHERE x.indexrelid = to_regclass(format('decoupled_storage.%I', v_index)));
                IF v_table IS NOT NULL THEN
                    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', v_table);
                END IF;
            END LOOP;
            IF NOT EXISTS (SELECT FROM decoupled.catalog_arrangements b
                             JOIN decoupled.catalog_objects p ON p.lifetime_id = b.view_id
                            WHERE b.input = r.input AND b.index_name = r.index_name
                              AND p.dropped_at IS NULL) THEN
                EXECUTE format('DROP INDEX IF EXISTS decoupled_storage.%I, decoupled_storage.%I',
                               r.index_name || '_cur', r.index_name || '_dead');
                v_count := v_count + 1;
            END IF;
            DELETE FROM decoupled.catalog_arrangements a
             USING decoupled.catalog_objects o
             WHERE a.input = r.input AND a.index_name = r.index_name
               AND o.lifetime_id = a.view_id AND o.dropped_at IS NOT NULL;
        EXCEPTION WHEN lock_not_available THEN
            NULL;  -- its storage is open: both indexes stay for a later round
        END;
    END LOOP;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION decoupled._drop_unused_arrangements() FROM PUBLIC;
-- 1.0 forgot an arrangement at its last user's drop even when the drop
-- of its indexes failed for a lock, and never tried again: such indexes
-- (named c<input>_a<md5>_cur and _dead, without a row) go now.  With the
-- catalog's arrangements held (no view adopts one meanwhile); waiting up
-- to a second for each storage table, and naming what stays.
DO $$
DECLARE
    r      record;
    v_lock text := current_setting('lock_timeout');
BEGIN
    LOCK TABLE decoupled.catalog_arrangements IN SHARE ROW EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', '1s', true);
    FOR r IN SELECT format('decoupled_storage.%I', i.relname) AS index, x.indrelid::regclass AS storage
               FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
              WHERE i.relnamespace = 'decoupled_storage'::regnamespace
                AND i.relname ~ '^c[0-9]+_a[0-9a-f]{12}_(cur|dead)$'
                AND NOT EXISTS (SELECT FROM decoupled.catalog_arrangements a
                                 WHERE a.index_name = regexp_replace(i.relname, '_(cur|dead)$', ''))
    LOOP
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', r.storage);
            EXECUTE format('DROP INDEX %s', r.index);
        EXCEPTION WHEN lock_not_available THEN
            RAISE WARNING 'index % is used by no view but could not be dropped', r.index
                USING DETAIL = format('%s was in use.', r.storage),
                      HINT = format('Drop it when %s is idle: DROP INDEX %s;', r.storage, r.index);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock, true);
END
$$;

-- The history's parts apart (decoupled._create_history_parts): every
-- collection's storage has them, and a drop removes them with the rest.
CREATE OR REPLACE FUNCTION decoupled.finalize_dropped() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id    bigint;
    v_count integer := 0;
    v_lock   text := current_setting('lock_timeout');
    v_tables text;
BEGIN
    PERFORM set_config('lock_timeout', '50ms', true);
    -- Written plans first: they read the storage of other collections.
    PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'))
       FROM decoupled.catalog_objects o
      WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
        AND o.kind = 'materialized view';
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
                 ORDER BY o.lifetime_id DESC
    LOOP
        -- Its frontier row before its storage (the global lock order), and
        -- without waiting: a writer that locked it before the drop committed
        -- may still be at work; this collection waits for a later round.
        PERFORM FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id
            FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                  WHERE f.lifetime_id = v_id) THEN
            CONTINUE;
        END IF;
        BEGIN
            PERFORM decoupled._drop_public_view(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['plan', 'delta', 'before', 'history', 'history_cur',
                                 'history_dead']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'DROP VIEW ' || v_tables;
            END IF;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['state', 'dstate', 'cur', 'dead', 'stage', 'pending']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'DROP TABLE ' || v_tables;
            END IF;
            -- A sink's table is its creator's data: hand it over.
            PERFORM decoupled._hand_over_sink_table(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id AND o.kind = 'sink';
            DELETE FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id;
            DELETE FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_id;
            UPDATE decoupled.catalog_objects o SET finalized_at = now() WHERE o.lifetime_id = v_id;
            v_count := v_count + 1;
        EXCEPTION
            WHEN lock_not_available THEN
                NULL;  -- a reader still has it open: next round
            WHEN dependent_objects_still_exist THEN
                RAISE NOTICE 'storage of dropped collection % is still used by a view', v_id
                    USING HINT = 'Drop the views that read it; finalization retries.';
        END;
    END LOOP;
    -- Arrangements whose drop could not get its locks at once.
    PERFORM decoupled._drop_unused_arrangements();
    PERFORM set_config('lock_timeout', v_lock, true);
    RETURN v_count;
END
$$;
DO $$
DECLARE
    v_id bigint;
BEGIN
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE to_regclass(decoupled._storage(o.lifetime_id, 'cur')) IS NOT NULL
                   AND to_regclass(decoupled._storage(o.lifetime_id, 'dead')) IS NOT NULL
                   AND to_regclass(decoupled._storage(o.lifetime_id, 'history_cur')) IS NULL
                 ORDER BY o.lifetime_id
    LOOP
        -- Storage, not the extension's own: as when made at run time.
        PERFORM decoupled._create_history_parts(v_id);
        EXECUTE format('ALTER EXTENSION pg_decoupled DROP VIEW %s',
                       decoupled._storage(v_id, 'history_cur'));
        EXECUTE format('ALTER EXTENSION pg_decoupled DROP VIEW %s',
                       decoupled._storage(v_id, 'history_dead'));
    END LOOP;
END
$$;
-- 60_materialized_views: sinks and subscriptions read dead by closed ranges.
-- The SQL of a collection's changes as (mz_ts, mz_diff, columns...): rows
-- inserted (cur.mz_ts, dead.valid_from) and retracted (dead.valid_to) at
-- times in [$1, $2), preceded, `with_snapshot`, by its state at $3 as
-- insertions at $3.  Unconsolidated; used by sinks and subscriptions.
-- Rows of dead are found by ranges on valid_to closed on both sides (the
-- upper bound always true): a dead analysed empty is not scanned whole
-- (_create_read_views).
CREATE OR REPLACE FUNCTION decoupled._changes_sql(lifetime_id bigint, with_snapshot boolean) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN with_snapshot THEN format(
               'SELECT $3, 1, %1$s FROM %2$s WHERE mz_ts <= $3 '
               'UNION ALL SELECT $3, 1, %1$s FROM %3$s '
               ' WHERE valid_from <= $3 AND valid_to > $3 AND valid_to <= 9223372036854775807 '
               'UNION ALL ', c.cols, c.cur, c.dead) ELSE '' END
           || format(
               'SELECT mz_ts, 1, %1$s FROM %2$s WHERE mz_ts >= $1 AND mz_ts < $2 '
               'UNION ALL SELECT valid_from, 1, %1$s FROM %3$s '
               ' WHERE valid_to >= $1 AND valid_to <= 9223372036854775807 '
               '   AND valid_from >= $1 AND valid_from < $2 '
               'UNION ALL SELECT valid_to, -1, %1$s FROM %3$s WHERE valid_to >= $1 AND valid_to < $2',
               c.cols, c.cur, c.dead)
      FROM (SELECT decoupled._cols(lifetime_id) AS cols,
                   decoupled._storage(lifetime_id, 'cur') AS cur,
                   decoupled._storage(lifetime_id, 'dead') AS dead) c
$$;

-- Every collection's changes read by a range on dead's valid_to closed on
-- both sides (_create_read_views, which makes its history and before
-- views as 1.0 did).  An extension's script replaces only its own objects:
-- the views join the extension for the replacement and leave it again,
-- storage as before.
DO $$
DECLARE
    v_id   bigint;
    v_view text;
BEGIN
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE to_regclass(decoupled._storage(o.lifetime_id, 'history')) IS NOT NULL
                   AND to_regclass(decoupled._storage(o.lifetime_id, 'delta')) IS NOT NULL
                   AND to_regclass(decoupled._storage(o.lifetime_id, 'before')) IS NOT NULL
                 ORDER BY o.lifetime_id
    LOOP
        FOREACH v_view IN ARRAY ARRAY['history', 'delta', 'before'] LOOP
            EXECUTE format('ALTER EXTENSION pg_decoupled ADD VIEW %s',
                           decoupled._storage(v_id, v_view));
        END LOOP;
        PERFORM decoupled._create_read_views(v_id);
        FOREACH v_view IN ARRAY ARRAY['history', 'delta', 'before'] LOOP
            EXECUTE format('ALTER EXTENSION pg_decoupled DROP VIEW %s',
                           decoupled._storage(v_id, v_view));
        END LOOP;
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Rounds compact before they publish: a publication's bound rows, which
-- every view step over the collections locks too, are not held through
-- compaction's deletes
------------------------------------------------------------------------------

-- 40_permission
CREATE OR REPLACE FUNCTION decoupled._maintain_tables() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count integer := decoupled._apply_compaction(false, NULL);
BEGIN
    PERFORM decoupled.finalize_dropped();
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, NULL));
    RETURN v_count;
END
$$;

-- 50_replicas
CREATE OR REPLACE FUNCTION decoupled.replica_compact(incarnation bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i         decoupled.catalog_replica_incarnations;
    v_cluster text;
    v_count   integer;
BEGIN
    i := decoupled._live_incarnation(replica_compact.incarnation);
    SELECT r.cluster INTO v_cluster FROM decoupled.catalog_replicas r
     WHERE r.replica_id = i.replica_id;
    -- Compaction first: the bound rows a publication locks stay locked
    -- until commit (as in _maintain_tables).
    v_count := decoupled._apply_compaction(false, v_cluster);
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, v_cluster));
    RETURN v_count;
END
$$;

-- 70_sinks: a sink makes its input's time index (_ensure_time_index).
CREATE OR REPLACE FUNCTION decoupled._create_sink(name text, from_collection text, into_table text,
                                       cluster text, snapshot boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := _create_sink.name;
    v_owner   oid := decoupled._caller();
    v_input   decoupled.catalog_objects;
    v_parts   text[];
    v_schema  text;
    v_table   text;
    v_version bigint;
    v_id      bigint;
    v_as_of   bigint;
    schema    text := decoupled._caller_schema();
BEGIN
    PERFORM decoupled._check_name('sink', v_name);
    IF snapshot IS NULL THEN
        RAISE EXCEPTION 'snapshot must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF into_table IS NULL THEN
        RAISE EXCEPTION 'into_table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    BEGIN
        v_parts := parse_ident(into_table);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table USING ERRCODE = 'invalid_name';
    END;
    IF cardinality(v_parts) > 2 THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table
            USING ERRCODE = 'invalid_name', HINT = 'Give a table name, optionally schema-qualified.';
    END IF;
    v_schema := CASE WHEN cardinality(v_parts) = 2 THEN v_parts[1] ELSE schema END;
    v_table := v_parts[cardinality(v_parts)];
    IF v_schema IS NULL OR to_regnamespace(quote_ident(v_schema)) IS NULL THEN
        RAISE EXCEPTION 'schema "%" does not exist', coalesce(v_schema, 'NULL')
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    PERFORM decoupled._check_create_in(v_schema, 'A sink creates its table.');

    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_sink.cluster);
    v_input := decoupled._collection(from_collection);
    IF v_input.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; a sink reads a collection', v_input.name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_input.relation IS NULL OR NOT decoupled._caller_can_select(v_input.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', v_input.kind, v_input.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM decoupled._check_free(v_name, v_schema, v_table);
    PERFORM decoupled._check_columns(v_input.kind, v_input.name, v_input.definition->'columns');
    -- Its steps read the input's changes by time.
    PERFORM decoupled._ensure_time_index(v_input.lifetime_id);

    -- Start at the latest time the input serves that its permission allows;
    -- the bound lock keeps publication from passing it before commit (FOR
    -- UPDATE, as the commit-time permission check takes it).
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_input.lifetime_id FOR UPDATE;
    SELECT greatest(b.bound, f.since, f.upper - 1) INTO v_as_of
      FROM decoupled.catalog_frontiers f JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE f.lifetime_id = v_input.lifetime_id;

    EXECUTE format('CREATE TABLE %I.%I (mz_timestamp bigint NOT NULL, mz_diff bigint NOT NULL, %s)',
                   v_schema, v_table, decoupled._cols(v_input.lifetime_id, '', true));
    EXECUTE format('GRANT SELECT ON %I.%I TO %s WITH GRANT OPTION', v_schema, v_table,
                   v_owner::regrole);
    INSERT INTO decoupled.catalog_objects
           (name, kind, cluster, relation, definition, created_in_version)
    VALUES (v_name, 'sink', _create_sink.cluster, format('%I.%I', v_schema, v_table)::regclass,
            jsonb_build_object('input', v_input.lifetime_id, 'snapshot', snapshot,
                               'as_of', v_as_of, 'owner', v_owner, 'schema', v_schema,
                               'table', v_table, 'columns', v_input.definition->'columns'),
            v_version)
    RETURNING lifetime_id INTO v_id;
    -- A sink has no history of its own: its upper is its output progress.
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, NULL, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
        VALUES (v_input.lifetime_id, v_id, v_as_of);
    RETURN v_id;
END
$$;

-- 50_replicas: a replica makes the time index of a view a subscription reads.
CREATE OR REPLACE FUNCTION decoupled.replica_heartbeat(incarnation bigint, status text DEFAULT 'running',
                                            error text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    PERFORM decoupled._live_incarnation(replica_heartbeat.incarnation);
    UPDATE decoupled.catalog_replica_incarnations i
       SET heartbeat_at = now(), status = replica_heartbeat.status, error = replica_heartbeat.error
     WHERE i.incarnation = replica_heartbeat.incarnation;
    -- A subscription reads a view's changes by time from its subscriber's
    -- own transaction, which must not take the lock an index needs: a
    -- replica of the view's cluster in the active deployment makes the
    -- view's time index, here, within a second (until then the
    -- subscription's reads scan the view's rows).
    -- In ascending lifetime id, as steps lock storage.
    FOR v_id IN
        SELECT o.lifetime_id
          FROM decoupled.catalog_replica_incarnations i
          JOIN decoupled.catalog_replicas r USING (replica_id)
          JOIN decoupled.catalog_deployments d ON d.name = i.deployment AND d.state = 'active'
          JOIN decoupled.catalog_objects o ON o.cluster = r.cluster
         WHERE i.incarnation = replica_heartbeat.incarnation
           AND replica_heartbeat.status = 'running'
           AND o.kind = 'materialized view' AND o.dropped_at IS NULL
           AND o.lifetime_id IN (SELECT s.lifetime_id FROM decoupled._shared_holds() s
                                  WHERE s.subscription)
         ORDER BY o.lifetime_id
    LOOP
        PERFORM decoupled._ensure_time_index(v_id, wait => false);
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Kept sums' state without an index on emptied groups: _merge_sums deletes
-- the groups it emptied by the ctids its statement returned, and updates
-- of a group's counts and sums can be HOT
------------------------------------------------------------------------------

-- 60_materialized_views
-- What grouped views keep besides their history: an index on the view's
-- key columns (its rows of a group are found by them) and, for 'sums',
-- the state c<id>_state (keys, mz_n, mz_nn_j, mz_s_j) with a unique index on the
-- keys (NULL matching NULL) and nothing else — an index on any other column
-- would make every update of a group a non-HOT update (_merge_sums deletes
-- emptied groups by the ctids its statements return) — and its scratch
-- c<id>_dstate.
-- The owner reads the state: its select list is computed from it.
CREATE OR REPLACE FUNCTION decoupled._create_kept_state(id bigint, plan regclass, owner oid, sums boolean)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_kept  record := decoupled._mv_kept_state(plan);
    v_state text := decoupled._storage(id, 'state');
    v_cur   text := decoupled._storage(id, 'cur');
    v_fixed text;
    v_wide  text;
BEGIN
    SELECT e.fixed, e.wide INTO v_fixed, v_wide
      FROM decoupled._equality_index_columns(v_cur::regclass, v_kept.keys) e;
    IF v_fixed IS NOT NULL THEN
        EXECUTE format('CREATE INDEX ON %s (%s)', v_cur, v_fixed);
    ELSIF v_wide IS NOT NULL THEN
        EXECUTE format('CREATE INDEX ON %s USING hash (%s)', v_cur, v_wide);
    END IF;
    IF NOT sums THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %s (%s)', v_state, v_kept.columns);
    EXECUTE format('CREATE UNIQUE INDEX ON %s (%s) NULLS NOT DISTINCT', v_state, v_kept.keys);
    EXECUTE format('CREATE UNLOGGED TABLE %s (LIKE %s)', decoupled._storage(id, 'dstate'), v_state);
    EXECUTE format('GRANT SELECT ON %s TO %s', v_state, owner::regrole);
END
$$;

-- The existing states' partial indexes go (their tables are storage, no
-- member of the extension).
DO $$
DECLARE
    v_index regclass;
BEGIN
    FOR v_index IN
        SELECT i.indexrelid::regclass
          FROM decoupled.catalog_objects o
          JOIN pg_index i ON i.indrelid = to_regclass(decoupled._storage(o.lifetime_id, 'state'))
         WHERE pg_get_expr(i.indpred, i.indrelid) = '(mz_n = 0)'
         ORDER BY o.lifetime_id
    LOOP
        EXECUTE format('DROP INDEX %s', v_index);
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Maintenance never waits for a transaction that creates views
-- (extension/write_locks.hpp): a replica's step takes its output's storage
-- without waiting (_lock_storage_nowait, _maintain_view, replica_append),
-- publication skips and queues again bound rows it cannot lock, requirements
-- on such inputs stay until a later step, adapterd's round does not wait
-- for them either
------------------------------------------------------------------------------

-- 30_storage, 40_permission, 50_replicas (60_materialized_views above)
CREATE OR REPLACE FUNCTION decoupled._publish_bounds(ids bigint[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count  integer;
    v_locked bigint[];
BEGIN
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    -- One lock order for everyone who locks several bound rows.
    v_locked := ARRAY(SELECT b.lifetime_id FROM decoupled.catalog_bounds b
                       WHERE b.lifetime_id = ANY (ids)
                       ORDER BY b.lifetime_id FOR UPDATE SKIP LOCKED);
    IF cardinality(v_locked) < cardinality(ids) THEN
        PERFORM decoupled._queue_for_publication(ARRAY(
            SELECT b.lifetime_id FROM decoupled.catalog_bounds b
             WHERE b.lifetime_id = ANY (ids) AND b.lifetime_id <> ALL (v_locked)));
        ids := v_locked;
    END IF;
    WITH proposal AS (
        SELECT b.lifetime_id,
               decoupled._propose_bound(
                   f.upper, decoupled._retain_ms(o.retain_history), b.bound,
                   (SELECT min(q.frontier) FROM decoupled.catalog_requirements q
                     WHERE q.lifetime_id = b.lifetime_id),
                   (SELECT min(h.frontier) FROM decoupled.catalog_holds h
                     WHERE h.lifetime_id = b.lifetime_id)) AS bound
          FROM decoupled.catalog_bounds b
          JOIN decoupled.catalog_frontiers f USING (lifetime_id)
          JOIN decoupled.catalog_objects o USING (lifetime_id)
         WHERE b.lifetime_id = ANY (ids) AND o.dropped_at IS NULL)
    UPDATE decoupled.catalog_bounds b SET bound = p.bound, changed_at = now()
      FROM proposal p
     WHERE b.lifetime_id = p.lifetime_id AND p.bound > b.bound;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.replica_append(incarnation bigint, lifetime_id bigint, updates jsonb,
                                         expected_upper bigint, new_upper bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
BEGIN
    i := decoupled._live_incarnation(replica_append.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    -- Its storage without waiting (ZD004, retried shortly): a transaction
    -- creating views over the collection may hold it (write_locks.hpp).
    PERFORM decoupled._lock_storage_nowait(replica_append.lifetime_id);
    SELECT c.upper INTO v_upper FROM decoupled._compare_and_append(
        replica_append.lifetime_id, updates, expected_upper, new_upper) c;
    IF v_upper IS NULL THEN
        RAISE EXCEPTION 'collection % was dropped', replica_append.lifetime_id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    RETURN v_upper;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._adapter_apply(incarnation bigint, lids bigint[], mins bigint[],
                                         pending bigint[], publish boolean) RETURNS bigint[]
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_adapter_incarnations;
    v_failed  bigint[] := '{}';
    v_bound   bigint;
    v_changed bigint[];
    k         integer;
    v_timeout text := current_setting('lock_timeout');
BEGIN
    SELECT * INTO i FROM decoupled.catalog_adapter_incarnations a
     WHERE a.incarnation = _adapter_apply.incarnation;
    -- The bounds of the collections whose durable holds this round may
    -- write, in the one lock order of everyone who locks several bound rows
    -- (ascending id), and FOR UPDATE as the commit-time permission check
    -- takes them (a shared lock would have to be upgraded there, and two
    -- upgraders deadlock): publication cannot pass them before this commits.
    -- Not waited for beyond a moment (far below deadlock_timeout): a
    -- transaction creating several views holds its inputs' bound rows
    -- outside that order (extension/write_locks.hpp); adapterd tries the
    -- round again shortly (ZD004).
    PERFORM set_config('lock_timeout', '20ms', true);
    BEGIN
        PERFORM FROM decoupled.catalog_bounds b
         WHERE b.lifetime_id IN (SELECT l FROM unnest(lids, pending) AS p(l, w)
                                  WHERE w >= 0 OR publish)
         ORDER BY b.lifetime_id FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        RAISE EXCEPTION 'compaction bounds of held collections are locked by another transaction'
            USING ERRCODE = 'ZD004',  -- busy: the protocol's own class
                  HINT = 'adapterd tries again shortly.';
    END;
    PERFORM set_config('lock_timeout', v_timeout, true);
    FOR k IN 1 .. coalesce(cardinality(lids), 0) LOOP
        CONTINUE WHEN pending[k] < 0;
        SELECT b.bound INTO v_bound FROM decoupled.catalog_bounds b
          JOIN decoupled.catalog_objects o USING (lifetime_id)
         WHERE b.lifetime_id = lids[k] AND o.dropped_at IS NULL;
        IF NOT FOUND THEN
            v_failed := v_failed || ARRAY[lids[k], 9223372036854775807];  -- dropped
            CONTINUE;
        END IF;
        -- Holds below the bound are refused; those at or above it protected.
        IF pending[k] < v_bound THEN
            v_failed := v_failed || ARRAY[lids[k], v_bound];
        END IF;
        INSERT INTO decoupled.catalog_holds (adapter, deployment, incarnation, lifetime_id, frontier)
        VALUES (i.adapter, i.deployment, i.incarnation, lids[k], greatest(pending[k], v_bound))
        ON CONFLICT (incarnation, lifetime_id) DO UPDATE
           SET frontier = least(catalog_holds.frontier, EXCLUDED.frontier), acquired_at = now()
         WHERE catalog_holds.frontier > EXCLUDED.frontier;
    END LOOP;
    IF publish THEN
        WITH kept AS (SELECT * FROM unnest(lids, mins) AS k(lifetime_id, frontier)),
        gone AS (
            DELETE FROM decoupled.catalog_holds h
             WHERE h.incarnation = _adapter_apply.incarnation
               AND NOT EXISTS (SELECT FROM kept k WHERE k.lifetime_id = h.lifetime_id)
            RETURNING h.lifetime_id),
        raised AS (
            UPDATE decoupled.catalog_holds h SET frontier = k.frontier
              FROM kept k
             WHERE h.incarnation = _adapter_apply.incarnation
               AND h.lifetime_id = k.lifetime_id AND h.frontier < k.frontier
            RETURNING h.lifetime_id)
        SELECT array_agg(lifetime_id) INTO v_changed
          FROM (SELECT lifetime_id FROM gone UNION SELECT lifetime_id FROM raised) c;
        PERFORM decoupled._queue_for_publication(v_changed);
    END IF;
    RETURN v_failed;
END
$$;

CREATE FUNCTION decoupled._lock_storage_nowait(lifetime_id bigint) RETURNS void
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_lock_storage_nowait';
REVOKE ALL ON FUNCTION decoupled._lock_storage_nowait(bigint) FROM PUBLIC;

-- 33_drops: DROP EXTENSION gives registered tables their own replica
-- identity back (the DDL guard in the library calls it).
CREATE FUNCTION decoupled._give_back_replica_identities() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET session_replication_role = replica
AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT c.relation::oid::regclass AS tbl, c.definition->>'replica_identity' AS identity
               FROM decoupled.catalog_objects c
              WHERE c.kind = 'table' AND c.dropped_at IS NULL AND c.definition ? 'replica_identity'
                AND EXISTS (SELECT FROM pg_class r WHERE r.oid = c.relation::oid)
              ORDER BY c.lifetime_id
    LOOP
        BEGIN
            EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', o.tbl, o.identity);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'table % keeps REPLICA IDENTITY FULL: %', o.tbl, SQLERRM
                USING HINT = format('Registration set it; its own was REPLICA IDENTITY %s.',
                                    o.identity);
        END;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION decoupled._give_back_replica_identities() FROM PUBLIC;

-- 32_registered_tables: tick_tables() is an entry point, so its WARNING of a
-- table that stalled quotes the error only to a caller who may read the
-- table (an error may quote its rows).
CREATE FUNCTION decoupled._tick_tables() RETURNS integer
LANGUAGE C SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_tick_tables';
REVOKE ALL ON FUNCTION decoupled._tick_tables() FROM PUBLIC;
CREATE OR REPLACE FUNCTION decoupled.tick_tables() RETURNS integer
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';

-- 60_materialized_views: a kept sum of integers adds a step's changes in
-- 128-bit integers (decoupled._weighted_sum), not numeric.
CREATE FUNCTION decoupled._weighted_sum_step(internal, bigint, bigint) RETURNS internal
    LANGUAGE C PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_weighted_sum_step';
CREATE FUNCTION decoupled._weighted_sum_final(internal) RETURNS numeric
    LANGUAGE C PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_weighted_sum_final';
CREATE AGGREGATE decoupled._weighted_sum(bigint, bigint) (
    SFUNC = decoupled._weighted_sum_step, STYPE = internal,
    FINALFUNC = decoupled._weighted_sum_final, SSPACE = 48, PARALLEL = SAFE);
-- 90_privileges: the view's owner evaluates it (as a fresh install's
-- blanket REVOKE and then GRANT leave it).
REVOKE ALL ON FUNCTION decoupled._weighted_sum_step(internal, bigint, bigint),
    decoupled._weighted_sum_final(internal), decoupled._weighted_sum(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._weighted_sum(bigint, bigint) TO PUBLIC;

-- 20_controller: catalog_version() in PL/pgSQL, its plan kept (a replica asks
-- at every pass).
CREATE OR REPLACE FUNCTION decoupled.catalog_version() RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT m.catalog_version FROM decoupled.catalog_meta m);
END
$$;

-- 30_storage: rows' ids taken 64 at a time by each session (mz_rowid only
-- orders identical copies with the same mz_ts).
ALTER SEQUENCE decoupled.rowid_seq CACHE 64;

-- 30_storage: reads of registered tables decided at plan time
-- (extension/read_rewrite.cpp, "Decided at plan time").
CREATE FUNCTION decoupled._reads_at_plan_time() RETURNS boolean
    LANGUAGE C IMMUTABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_reads_at_plan_time';
-- 90_privileges: as a fresh install's blanket REVOKE leaves it.
REVOKE ALL ON FUNCTION decoupled._reads_at_plan_time() FROM PUBLIC;

------------------------------------------------------------------------------
-- A stalled WAL capture is recorded in status history (C6.3)
------------------------------------------------------------------------------

-- 10_catalog
CREATE INDEX status_events_object ON decoupled.status_events (lifetime_id, event_id);

-- 34_wal_capture
-- A stalled WAL capture in status history (brief C6.3): each WAL-captured
-- table's shown status (decoupled.object_statuses) becomes a row of
-- history when it differs from the table's last one — a capture stall
-- differs from a failing tick's — and `running` (or the failing tick's
-- `stalled`) again when capture resumes.  The controller's round calls it about once a
-- second.  A capture worker that is not running yet in the first 30 s
-- after the server started is starting, not stalled: no row.
CREATE FUNCTION decoupled._record_capture_health() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_stalled boolean;
    v_error   text;
    v_count   integer;
BEGIN
    IF NOT EXISTS (SELECT FROM decoupled.capture_relations) THEN
        RETURN 0;
    END IF;
    SELECT c.status = 'stalled'
           AND (c.worker_pid IS NOT NULL
                OR pg_postmaster_start_time() < now() - interval '30 s'),
           coalesce('WAL capture: ' || c.last_error, 'WAL capture is not running')
      INTO v_stalled, v_error
      FROM decoupled.capture c;
    INSERT INTO decoupled.status_events (lifetime_id, status, error)
    SELECT t.lifetime_id, t.status, t.error
      FROM (SELECT r.lifetime_id,
                   CASE WHEN v_stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END
                       AS status,
                   CASE WHEN v_stalled THEN v_error ELSE h.error END AS error,
                   (SELECT CASE WHEN e.error LIKE 'WAL capture%' THEN 'capture stalled'
                                ELSE e.status END
                      FROM decoupled.status_events e
                     WHERE e.lifetime_id = r.lifetime_id AND e.replica IS NULL
                     ORDER BY e.event_id DESC LIMIT 1) AS last_event
              FROM decoupled.capture_relations r
              JOIN decoupled.catalog_objects o USING (lifetime_id)
              LEFT JOIN decoupled.table_health h USING (lifetime_id)
             WHERE o.dropped_at IS NULL) t
     WHERE CASE WHEN v_stalled THEN 'capture stalled' ELSE t.status END
           <> coalesce(t.last_event, 'running');
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
-- 90_privileges: as a fresh install's blanket REVOKE leaves it.
REVOKE ALL ON FUNCTION decoupled._record_capture_health() FROM PUBLIC;

-- 40_permission
CREATE OR REPLACE FUNCTION decoupled._maintain_tables() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count integer := decoupled._apply_compaction(false, NULL);
BEGIN
    PERFORM decoupled._record_capture_health();
    PERFORM decoupled.finalize_dropped();
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, NULL));
    RETURN v_count;
END
$$;

------------------------------------------------------------------------------
-- Security (issue: a review as an attacker): verify() uses only scratch
-- tables it made; typed columns by the type's OID; constraints added to a
-- domain in use only by a superuser; append() only by the collection's
-- owner (an entry point); the time index's lock out of SQL's reach
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                typed boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
-- PL/pgSQL, not SQL: a view's step calls it, and its statement is planned
-- once per session, not at every call.
--
-- Typed, a column's type is the type it was registered with, by OID: its
-- recorded name only while that name still reads as that type (it keeps a
-- type modifier), else the type's name now.  A type renamed or moved away,
-- and another one created under its old name (a domain whose checks would
-- run with the extension's rights when history or a sink is written), is
-- never picked up by name; _assert_column_types checks the relation made.
BEGIN
    RETURN (SELECT string_agg(prefix || quote_ident(c->>'name')
                              || CASE WHEN NOT typed THEN ''
                                      WHEN c ? 'typid'
                                           AND to_regtype(regexp_replace(c->>'type', ' COLLATE .*$', ''))
                                               IS DISTINCT FROM (c->>'typid')::oid
                                      THEN ' ' || format_type((c->>'typid')::oid, NULL)
                                           || coalesce(substring(c->>'type' FROM ' COLLATE .*$'), '')
                                      ELSE ' ' || (c->>'type') END,
                              ', ' ORDER BY ord)
              FROM decoupled.catalog_objects o,
                   jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
             WHERE o.lifetime_id = _cols.lifetime_id);
END
$$;

CREATE FUNCTION decoupled._assert_column_types(rel regclass, lifetime_id bigint) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad text;
BEGIN
    SELECT c->>'name' INTO v_bad
      FROM decoupled.catalog_objects o,
           jsonb_array_elements(o.definition->'columns') c
      LEFT JOIN pg_attribute a ON a.attrelid = rel AND a.attname = c->>'name'
                              AND a.attnum > 0 AND NOT a.attisdropped
     WHERE o.lifetime_id = _assert_column_types.lifetime_id AND c ? 'typid'
       AND a.atttypid IS DISTINCT FROM (c->>'typid')::oid
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'the type of column "%" changed while % was created', v_bad, rel
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Try again.';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._create_storage(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id   bigint := _create_storage.lifetime_id;
    defs text := decoupled._cols(id, '', true);
BEGIN
    -- mz_rowid only orders identical copies (the oldest is retracted first);
    -- nothing looks a row up by it, so it has no index: every row written
    -- to cur and dead would pay for one.
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, mz_ts bigint NOT NULL, '
                   'mz_hash integer NOT NULL, %s)', decoupled._storage(id, 'cur'), defs);
    EXECUTE format('CREATE INDEX ON %s (mz_hash)', decoupled._storage(id, 'cur'));
    -- Maintained views and sinks find the times at which a collection changed
    -- (the time index; a view whose steps replace rows drops its own until
    -- something reads its changes: _ensure_time_index).
    EXECUTE format('CREATE INDEX ON %s (mz_ts)', decoupled._storage(id, 'cur'));
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint NOT NULL, valid_from bigint NOT NULL, '
                   'valid_to bigint NOT NULL, %s, CHECK (valid_from < valid_to))',
                   decoupled._storage(id, 'dead'), defs);
    EXECUTE format('CREATE INDEX ON %s (valid_to)', decoupled._storage(id, 'dead'));
    EXECUTE format('CREATE UNLOGGED TABLE %s (mz_ts bigint NOT NULL, mz_diff bigint NOT NULL, '
                   'mz_key text NOT NULL, mz_hash integer NOT NULL, %s)',
                   decoupled._storage(id, 'stage'), defs);
    PERFORM decoupled._assert_column_types(decoupled._storage(id, part)::regclass, id)
       FROM unnest(ARRAY['cur', 'dead', 'stage']) part;
    PERFORM decoupled._create_read_views(id);
    PERFORM decoupled._create_history_parts(id);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._register_table(tbl regclass, retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
-- Its copy of the table reads the table, not its history, whatever the
-- caller's decoupled.as_of.
SET decoupled.as_of = ''
AS $$
DECLARE
    v_columns jsonb;
    r         record;
    v_version bigint;
    v_id      bigint;
    v_ts      bigint;
    v_pending text;
    v_identity text;
    v_key     jsonb;
    v_wanted  text;
    v_stale   text[];
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._check_retention(retain_history);
    -- The snapshot below must see every write committed before capture
    -- starts: only a fresh snapshot per statement does.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'register_table needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- A regclass made from a number names no relation when none has it.
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
            USING ERRCODE = 'undefined_table';
    END IF;
    -- Lock the table before reading its shape, and before the catalog
    -- version row (tables first, then the catalog: the order DROP TABLE
    -- takes too).  Writers wait from here to commit.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    -- (Dropped between the two.)
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl) THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
            USING ERRCODE = 'undefined_table';
    END IF;
    SELECT c.relname::text AS relname, c.relkind, c.relpersistence, n.nspname::text AS nspname,
           c.relowner, c.relrowsecurity OR c.relforcerowsecurity AS rls, c.relispartition,
           c.reloftype <> 0 AS typed
      INTO r
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT pg_has_role(decoupled._caller(), r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table "%" to register it', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF r.relkind = 'p' THEN
        RAISE EXCEPTION 'cannot register partitioned table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Register an ordinary table.';
    ELSIF r.relkind <> 'r' THEN
        RAISE EXCEPTION '"%" is not an ordinary table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF r.relpersistence <> 'p' THEN
        RAISE EXCEPTION 'cannot register temporary or unlogged table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A collection''s history must survive a crash; use a permanent table.';
    END IF;
    IF r.rls THEN
        RAISE EXCEPTION 'cannot register table "%" because it has row-level security', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history would be read without the table''s policies.';
    END IF;
    IF r.relispartition OR EXISTS (SELECT FROM pg_inherits i
                                    WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RAISE EXCEPTION 'cannot register table "%" because it takes part in inheritance', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Writes through a parent or to a child would bypass its capture.';
    END IF;
    IF r.nspname IN ('decoupled', 'decoupled_storage', 'pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'cannot register system table "%"', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_attribute WHERE attrelid = tbl AND attnum > 0) THEN
        RAISE EXCEPTION 'cannot register table "%" because it has no columns', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'History keeps rows by their columns.';
    END IF;
    IF EXISTS (SELECT FROM pg_attribute WHERE attrelid = tbl AND attnum > 0 AND attisdropped) THEN
        RAISE EXCEPTION 'cannot register table "%" because it has dropped columns', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;
    -- ALTER TYPE ... CASCADE would change a typed table's columns.
    IF r.typed THEN
        RAISE EXCEPTION 'cannot register typed table "%"', tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'ALTER TYPE ... CASCADE would change its shape under its history.',
                  HINT = 'Copy it into a new table (CREATE TABLE ... AS) and register the copy.';
    END IF;

    v_version := decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.relation = tbl AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'table "%" is already registered', tbl USING ERRCODE = 'duplicate_object';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.name = r.relname AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a collection named "%" already exists', r.relname
            USING ERRCODE = 'duplicate_object';
    END IF;

    v_columns := decoupled._relation_columns(tbl);
    PERFORM decoupled._check_columns('table', r.relname, v_columns);
    -- Its relation is recorded once the capture triggers exist: the DDL
    -- event trigger refuses trigger changes on a registered table.
    INSERT INTO decoupled.catalog_objects
           (name, kind, definition, retain_history, created_in_version)
    VALUES (r.relname, 'table',
            jsonb_build_object('schema', r.nspname, 'columns', v_columns),
            retain_history, v_version)
    RETURNING lifetime_id INTO v_id;

    PERFORM decoupled._create_storage(v_id);
    v_pending := decoupled._storage(v_id, 'pending');
    EXECUTE format('CREATE TABLE %s (mz_diff bigint NOT NULL, %s)',
                   v_pending, decoupled._cols(v_id, '', true));
    PERFORM decoupled._assert_column_types(v_pending::regclass, v_id);

    -- Writers are excluded since the LOCK above, so the snapshot below and
    -- the captured changes neither overlap nor leave a gap.  Capture starts
    -- with triggers; where capture is from the WAL, the capture worker
    -- adopts the table soon after (34_wal_capture.sql).
    PERFORM decoupled._create_capture_triggers(tbl, v_pending);
    -- What WAL capture retracts for an update or a delete (C14.2): with a
    -- primary key, the row its old key names (REPLICA IDENTITY DEFAULT: the
    -- WAL carries the key; the capture worker finds the row in storage,
    -- through an index on the key of cur, and of pending while the table is
    -- captured from the WAL, _index_pending_key); without one, the
    -- old row itself (REPLICA IDENTITY FULL: the whole row is in the WAL).
    -- Unregistering gives the table its own identity back.
    v_key := decoupled._capture_key(tbl);
    IF v_key IS NOT NULL THEN
        EXECUTE format('CREATE INDEX ON %s (%s)', decoupled._storage(v_id, 'cur'),
                       (SELECT string_agg(quote_ident(k), ', ') FROM jsonb_array_elements_text(v_key) k));
        -- Ticks find a retracted row's copies through the key as well
        -- (append_core.cpp), so cur needs no index on the row hash: with
        -- random hashes, every row inserted into it landed on another leaf
        -- page, 40% of what writing a tick's inserted rows cost.
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_hash_idx');
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('key', v_key)
         WHERE o.lifetime_id = v_id;
    END IF;
    SELECT CASE c.relreplident WHEN 'd' THEN 'DEFAULT' WHEN 'n' THEN 'NOTHING'
                WHEN 'f' THEN 'FULL'
                ELSE (SELECT format('USING INDEX %I', i.relname)
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = tbl AND x.indisreplident) END
      INTO v_identity FROM pg_class c WHERE c.oid = tbl;
    v_wanted := CASE WHEN v_key IS NULL THEN 'FULL' ELSE 'DEFAULT' END;
    IF v_identity IS DISTINCT FROM v_wanted THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', tbl, v_wanted);
        UPDATE decoupled.catalog_objects o
           SET definition = o.definition || jsonb_build_object('replica_identity', v_identity)
         WHERE o.lifetime_id = v_id;
    END IF;
    UPDATE decoupled.catalog_objects o SET relation = tbl WHERE o.lifetime_id = v_id;

    v_ts := decoupled._next_timestamp(0);
    PERFORM decoupled._take_table_rows(v_id, tbl, 1, v_ts);
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_ts, v_ts + 1);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_ts);
    IF current_setting('decoupled.capture') = 'wal'
       AND current_setting('wal_level') <> 'logical' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = 'Set wal_level = logical and restart the server: its writes are then '
                         'captured from the WAL, at no cost to its writers.';
    ELSIF current_setting('decoupled.capture') = 'trigger' THEN
        RAISE NOTICE 'table "%" is captured by triggers, in its writers'' transactions', tbl
            USING HINT = CASE WHEN current_setting('wal_level') = 'logical'
                              THEN 'Set decoupled.capture = ''wal'' and reload the '
                                   'configuration: its writes are then captured from the WAL, '
                                   'at no cost to its writers.'
                              ELSE 'Set wal_level = logical and decoupled.capture = ''wal'' and '
                                   'restart the server: its writes are then captured from the '
                                   'WAL, at no cost to its writers.' END;
    END IF;
    v_stale := decoupled._readers_without_history(tbl);
    IF v_stale IS NOT NULL THEN
        RAISE WARNING '% made before table "%" was registered read its latest state, whatever '
                      'decoupled.as_of says',
                      CASE WHEN cardinality(v_stale) = 1 THEN 'one view or function'
                           ELSE cardinality(v_stale) || ' views or functions' END, tbl
            USING DETAIL = array_to_string(v_stale, ', ') || '.',
                  HINT = 'Create them again (CREATE OR REPLACE with the same definition) to '
                         'read its history; so do materialized views built on them.';
    END IF;
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._create_sink(name text, from_collection text, into_table text,
                                       cluster text, snapshot boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := _create_sink.name;
    v_owner   oid := decoupled._caller();
    v_input   decoupled.catalog_objects;
    v_parts   text[];
    v_schema  text;
    v_table   text;
    v_version bigint;
    v_id      bigint;
    v_as_of   bigint;
    v_before_history boolean;
    schema    text := decoupled._caller_schema();
BEGIN
    PERFORM decoupled._check_name('sink', v_name);
    IF snapshot IS NULL THEN
        RAISE EXCEPTION 'snapshot must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF into_table IS NULL THEN
        RAISE EXCEPTION 'into_table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    BEGIN
        v_parts := parse_ident(into_table);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table USING ERRCODE = 'invalid_name';
    END;
    IF cardinality(v_parts) > 2 THEN
        RAISE EXCEPTION 'invalid table name "%"', into_table
            USING ERRCODE = 'invalid_name', HINT = 'Give a table name, optionally schema-qualified.';
    END IF;
    v_schema := CASE WHEN cardinality(v_parts) = 2 THEN v_parts[1] ELSE schema END;
    v_table := v_parts[cardinality(v_parts)];
    IF v_schema IS NULL OR to_regnamespace(quote_ident(v_schema)) IS NULL THEN
        RAISE EXCEPTION 'schema "%" does not exist', coalesce(v_schema, 'NULL')
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    PERFORM decoupled._check_create_in(v_schema, 'A sink creates its table.');

    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_sink.cluster);
    v_input := decoupled._collection(from_collection);
    IF v_input.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; a sink reads a collection', v_input.name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF v_input.relation IS NULL OR NOT decoupled._caller_can_select(v_input.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', v_input.kind, v_input.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM decoupled._check_free(v_name, v_schema, v_table);
    PERFORM decoupled._check_columns(v_input.kind, v_input.name, v_input.definition->'columns');
    -- Its steps read the input's changes by time.
    PERFORM decoupled._ensure_time_index(v_input.lifetime_id);

    -- Start at the latest time the input serves that its permission allows;
    -- the bound lock keeps publication from passing it before commit (FOR
    -- UPDATE, as the commit-time permission check takes it).
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_input.lifetime_id FOR UPDATE;
    -- Where a source has not ticked yet (since = upper), as_of is the
    -- first time it will be read at, and a sink without snapshot starts
    -- with the changes there: a source's state at its creation was empty
    -- (before_history).  A view's state at its first time is computed from
    -- what its inputs held before: that is its snapshot.
    SELECT greatest(b.bound, f.since, f.upper - 1),
           v_input.kind = 'source' AND greatest(b.bound, f.since, f.upper - 1) >= f.upper
      INTO v_as_of, v_before_history
      FROM decoupled.catalog_frontiers f JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE f.lifetime_id = v_input.lifetime_id;

    EXECUTE format('CREATE TABLE %I.%I (mz_timestamp bigint NOT NULL, mz_diff bigint NOT NULL, %s)',
                   v_schema, v_table, decoupled._cols(v_input.lifetime_id, '', true));
    PERFORM decoupled._assert_column_types(format('%I.%I', v_schema, v_table)::regclass,
                                           v_input.lifetime_id);
    EXECUTE format('GRANT SELECT ON %I.%I TO %s WITH GRANT OPTION', v_schema, v_table,
                   v_owner::regrole);
    INSERT INTO decoupled.catalog_objects
           (name, kind, cluster, relation, definition, created_in_version)
    VALUES (v_name, 'sink', _create_sink.cluster, format('%I.%I', v_schema, v_table)::regclass,
            jsonb_build_object('input', v_input.lifetime_id, 'snapshot', snapshot,
                               'as_of', v_as_of, 'before_history', v_before_history, 'owner', v_owner, 'schema', v_schema,
                               'table', v_table, 'columns', v_input.definition->'columns'),
            v_version)
    RETURNING lifetime_id INTO v_id;
    -- A sink has no history of its own: its upper is its output progress.
    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, NULL, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
        VALUES (v_input.lifetime_id, v_id, v_as_of);
    RETURN v_id;
END
$$;

CREATE FUNCTION decoupled._lock_time_index(lifetime_id bigint, wait boolean) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_lock_time_index';

CREATE OR REPLACE FUNCTION decoupled._ensure_time_index(lifetime_id bigint,
                                             wait boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_name text := 'c' || _ensure_time_index.lifetime_id || '_cur_mz_ts_idx';
    v_cur  text := decoupled._storage(_ensure_time_index.lifetime_id, 'cur');
BEGIN
    IF to_regclass(v_cur) IS NULL
       OR to_regclass('decoupled_storage.' || quote_ident(v_name)) IS NOT NULL THEN
        RETURN;
    END IF;
    IF NOT decoupled._lock_time_index(_ensure_time_index.lifetime_id, _ensure_time_index.wait) THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (mz_ts)', v_name, v_cur);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._verify(name text, as_of bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_t       bigint;
    v_before  text := current_setting('decoupled.as_of');
    v_differs boolean;
    v_plan_t  text;
    v_view_t  text;
    v_exact   text;
    v_collated text;
    v_cursors text[];
    v_cursor  text;
BEGIN
    o := decoupled._collection(_verify.name);
    v_plan_t := format('decoupled_verify_%s', o.lifetime_id);
    v_view_t := format('decoupled_verify_view_%s', o.lifetime_id);
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'verify() cannot run on a hot standby'
            USING ERRCODE = 'read_only_sql_transaction',
                  DETAIL = 'It computes the view into temporary tables, which a standby cannot create.',
                  HINT = 'Run it on the primary.';
    END IF;
    IF o.kind <> 'materialized view' THEN
        RAISE EXCEPTION '"%" is not a materialized view', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT decoupled._caller_can_select(o.relation) THEN
        RAISE EXCEPTION 'permission denied for materialized view "%"', o.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The recomputation below runs the owner's code, with the owner's
    -- rights, in this session — whose temporary schema is its caller's, and
    -- is searched first for relations and types (the names PostgreSQL looks
    -- up there: never functions, operators or collations) by any of the
    -- owner's functions with a search_path of its own that does not name
    -- pg_temp: a caller's temporary view of the name such a function reads,
    -- or a temporary domain of the name of a type it declares, whose CHECK
    -- calls the caller's function, would run the caller's code as the
    -- owner.  (A replica's session has no temporary schema.)  So a caller
    -- who cannot act as the owner verifies in a session whose temporary
    -- schema holds only verify()'s own tables and their row types.
    IF NOT pg_has_role(decoupled._caller(), (o.definition->>'owner')::oid, 'USAGE')
       AND (EXISTS (SELECT FROM pg_class c
                     WHERE c.relnamespace = pg_my_temp_schema()
                       AND NOT (c.relname ~ '^decoupled_verify_(view_)?[0-9]+$'
                                AND c.relkind = 'r' AND c.relowner = current_user::regrole
                                AND NOT c.relhastriggers AND NOT c.relhasrules))
            -- A type of no relation (a relation's row type and its array
            -- go with the relation, checked above).
            OR EXISTS (SELECT FROM pg_type t
                        WHERE t.typnamespace = pg_my_temp_schema() AND t.typrelid = 0
                          AND NOT EXISTS (SELECT FROM pg_type e
                                           WHERE e.oid = t.typelem AND e.typrelid <> 0))) THEN
        RAISE EXCEPTION 'cannot verify materialized view "%" in a session with temporary relations or types',
                        o.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'verify() recomputes the view with its owner''s rights in this session, '
                           'where the owner''s functions would find these relations or types '
                           'before their own.',
                  HINT = 'Call it in a session without temporary relations or types (or after '
                         'DISCARD TEMP), or as the view''s owner.';
    END IF;
    SELECT coalesce(_verify.as_of, f.upper - 1) INTO v_t FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = o.lifetime_id;
    IF _verify.as_of IS NULL AND NOT EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                             WHERE f.lifetime_id = o.lifetime_id
                                               AND f.since < f.upper) THEN
        RAISE EXCEPTION 'materialized view "%" has no readable time yet', o.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Wait for its first computation with decoupled.wait_for_upper(); '
                         'decoupled.object_statuses says whether it is stalled, and why.';
    END IF;
    IF v_t < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', v_t
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Scratch tables of this view, made once per session and emptied at
    -- each call: many verify() calls in one transaction lock the same two
    -- relations instead of piling up locks on dropped ones.  Only tables
    -- this function made are used again: the temporary schema is the
    -- session's, and a table its caller made there under these names could
    -- carry triggers or rules that would run with the extension's rights.
    IF to_regclass('pg_temp.' || v_plan_t) IS NULL
       AND to_regclass('pg_temp.' || v_view_t) IS NULL THEN
        EXECUTE format('CREATE TEMP TABLE %I (LIKE %s)', v_plan_t,
                       decoupled._storage(o.lifetime_id, 'stage'));
        EXECUTE format('CREATE TEMP TABLE %I (LIKE %s)', v_view_t,
                       decoupled._storage(o.lifetime_id, 'stage'));
    ELSIF (SELECT count(*) FROM pg_class c
            WHERE c.oid IN (to_regclass('pg_temp.' || v_plan_t), to_regclass('pg_temp.' || v_view_t))
              AND c.relkind = 'r' AND c.relowner = current_user::regrole
              AND NOT c.relhastriggers AND NOT c.relhasrules) = 2 THEN
        EXECUTE format('TRUNCATE pg_temp.%I, pg_temp.%I', v_plan_t, v_view_t);
        -- Made by the 1.0 version of this function, which kept row texts only.
        IF NOT EXISTS (SELECT FROM pg_attribute a
                        WHERE a.attrelid = to_regclass('pg_temp.' || v_view_t)
                          AND a.attname = 'mz_key') THEN
            EXECUTE format('DROP TABLE pg_temp.%I', v_view_t);
            EXECUTE format('CREATE TEMP TABLE %I (LIKE %s)', v_view_t,
                           decoupled._storage(o.lifetime_id, 'stage'));
        END IF;
    ELSE
        RAISE EXCEPTION 'a temporary relation named "%" or "%" is in the way', v_plan_t, v_view_t
            USING ERRCODE = 'duplicate_table',
                  DETAIL = 'verify() computes the view into temporary tables of these names '
                           'that it makes itself.',
                  HINT = 'Drop the temporary relation, or call verify() in another session.';
    END IF;
    -- The view's own history at v_t first: it checks that v_t is readable.
    -- Its rows' texts in UTC, as its computation below prints them whatever
    -- the view's TimeZone (decoupled._row_text, extension/written_plan.cpp).
    PERFORM set_config('decoupled.as_of', v_t::text, true);
    EXECUTE format('INSERT INTO pg_temp.%1$I (mz_ts, mz_diff, mz_key, mz_hash, %2$s) '
                   'SELECT 0, 1, ROW(%2$s)::text, 0, %2$s FROM %3$s', v_view_t,
                   decoupled._cols(o.lifetime_id), decoupled._storage(o.lifetime_id, 'history'));
    PERFORM set_config('decoupled.as_of', v_before, true);
    v_cursors := ARRAY(SELECT c.name FROM pg_cursors c);
    PERFORM decoupled._stage_plan((o.definition->>'plan')::oid::regclass,
                                  (o.definition->>'owner')::oid, v_t,
                                  format('pg_temp.%I', v_plan_t)::regclass);
    -- Cursors the owner's code declared stay with its caller's transaction
    -- (a replica's end with its step's): fetched there, their queries would
    -- run with the caller's rights.  Closed here; nothing of the owner's
    -- stays behind.
    FOREACH v_cursor IN ARRAY ARRAY(SELECT c.name FROM pg_cursors c
                                     WHERE c.name <> ALL (v_cursors)) LOOP
        EXECUTE format('CLOSE %I', v_cursor);
    END LOOP;
    -- Rows compare as their texts, but columns whose equal values may
    -- print differently as values, by their type's equality
    -- (_compared_by_value): a group of 'b' and 'B' under a nondeterministic
    -- collation (of 5 and 5.00, of 0 and -0, of '1 day' and '24 hours')
    -- may keep either spelling, in the view as in PostgreSQL's own GROUP BY,
    -- DISTINCT or min().
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
               FILTER (WHERE NOT decoupled._compared_by_value(a.atttypid, a.attcollation)),
           string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
               FILTER (WHERE decoupled._compared_by_value(a.atttypid, a.attcollation))
      INTO v_exact, v_collated
      FROM pg_attribute a
     WHERE a.attrelid = (o.definition->>'plan')::oid AND a.attnum > 0 AND NOT a.attisdropped;
    v_exact := CASE WHEN v_collated IS NULL THEN 'mz_key'
                    ELSE format('ROW(%s)::text, %s', coalesce(v_exact, ''), v_collated) END;
    EXECUTE format('SELECT EXISTS ((SELECT %3$s FROM pg_temp.%1$I '
                   '               EXCEPT ALL SELECT %3$s FROM pg_temp.%2$I) '
                   '              UNION ALL '
                   '              (SELECT %3$s FROM pg_temp.%2$I '
                   '               EXCEPT ALL SELECT %3$s FROM pg_temp.%1$I))',
                   v_plan_t, v_view_t, v_exact)
        INTO v_differs;
    RETURN NOT v_differs;
END
$$;


CREATE OR REPLACE FUNCTION decoupled.append(collection text, updates jsonb, expected_upper bigint,
                                 new_upper bigint, deployment text DEFAULT NULL,
                                 incarnation bigint DEFAULT NULL) RETURNS bigint
LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';

CREATE FUNCTION decoupled._append(collection text, updates jsonb, expected_upper bigint,
                                  new_upper bigint, deployment text, incarnation bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
-- Row keys are the rows' text: pin every setting that changes it.
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
DECLARE
    o        decoupled.catalog_objects;
    v_result record;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink, not a collection', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NOT NULL
       AND NOT coalesce(pg_has_role(decoupled._caller(),
                                    (SELECT c.relowner FROM pg_class c WHERE c.oid = o.relation),
                                    'USAGE'), false) THEN
        RAISE EXCEPTION 'must be owner of % "%" to append to its history', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A collection''s history is written by its owner, its capture and '
                           'its replicas only.';
    END IF;
    IF expected_upper IS NULL OR new_upper IS NULL THEN
        RAISE EXCEPTION 'expected_upper and new_upper must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF new_upper <= expected_upper THEN
        RAISE EXCEPTION 'new upper must be beyond the expected upper'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Expected upper %s, new upper %s.', expected_upper, new_upper);
    END IF;
    IF updates IS NULL OR jsonb_typeof(updates) <> 'array' THEN
        RAISE EXCEPTION 'updates must be a JSON array of {"mz_timestamp", "mz_diff", "data"} objects'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._assert_write_authority(deployment, incarnation);

    SELECT * INTO v_result
      FROM decoupled._compare_and_append(o.lifetime_id, updates, expected_upper, new_upper);
    IF v_result.upper IS NULL THEN
        RAISE EXCEPTION '% "%" was dropped', o.kind, o.name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT v_result.appended THEN
        RAISE EXCEPTION 'append to % "%" lost the race for its interval', o.kind, o.name
            USING ERRCODE = 'serialization_failure',
                  DETAIL = format('Expected upper %s, but the actual upper is %s; nothing was '
                                  'appended.', expected_upper, v_result.upper),
                  HINT = 'Read the upper again and append what is still missing from there.';
    END IF;
    RETURN new_upper;
END
$$;

-- 90_privileges: as a fresh install's blanket REVOKE leaves them.
REVOKE ALL ON FUNCTION decoupled._assert_column_types(regclass, bigint),
    decoupled._lock_time_index(bigint, boolean),
    decoupled._append(text, jsonb, bigint, bigint, text, bigint) FROM PUBLIC;

------------------------------------------------------------------------------
-- What a maintained view reads keeps its meaning: a function or view it
-- reads is not replaced, a domain it uses gets no NOT VALID constraint, and
-- a domain whose check calls a function a role other than a superuser owns
-- is refused like one such a role wrote
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION decoupled._refuse_type_change(typ oid, change text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_users text;
BEGIN
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id)
      INTO v_users
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.definition ? 'columns'
       AND typ IN (SELECT decoupled._column_types(o.definition->'columns'));
    IF v_users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot % type % while collections or sinks use it', change, typ::regtype
            USING ERRCODE = CASE WHEN change = 'add a constraint to' THEN 'insufficient_privilege'
                                 ELSE 'feature_not_supported' END,
                  DETAIL = 'Used by: ' || v_users || '.  '
                           || CASE WHEN change = 'add a constraint to'
                                   THEN 'A constraint that a role other than a superuser wrote '
                                        'would run with the extension''s rights whenever their '
                                        'history is written.'
                                   WHEN change = 'add a NOT VALID constraint to'
                                   THEN 'Rows of their history that break it could no longer '
                                        'be read back.'
                                   ELSE 'Their history matches rows by their text: rows written '
                                        'before the change could no longer be retracted.' END,
                  HINT = CASE WHEN change = 'rename a value of'
                              THEN 'Add a value with ALTER TYPE ... ADD VALUE instead, or first '
                              WHEN change = 'add a constraint to'
                              THEN 'Ask a superuser to add it, or first '
                              WHEN change = 'add a NOT VALID constraint to'
                              THEN 'Add it validated, or first '
                              ELSE 'Create a new type instead, or first ' END
                         || 'drop what uses the type (decoupled.drop(), '
                            'decoupled.unregister_table()).';
    END IF;
END
$$;

CREATE FUNCTION decoupled._refuse_replacing(cls oid, obj oid, what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_users text;
BEGIN
    WITH RECURSIVE deps(classid, objid) AS (
        SELECT cls, obj
        UNION
        -- What depends on it, a view's rule standing for its view.
        SELECT coalesce(r.cls, d.classid), coalesce(r.ev_class, d.objid)
          FROM deps x
          JOIN pg_depend d ON d.refclassid = x.classid AND d.refobjid = x.objid
                          AND d.deptype = 'n'
          LEFT JOIN LATERAL (SELECT 'pg_class'::regclass::oid AS cls, rw.ev_class
                               FROM pg_rewrite rw
                              WHERE d.classid = 'pg_rewrite'::regclass AND rw.oid = d.objid) r
                 ON true
    )
    SELECT string_agg(format('materialized view "%s"', o.name), ', ' ORDER BY o.lifetime_id)
      INTO v_users
      FROM deps x
      JOIN decoupled.catalog_objects o
        ON o.kind = 'materialized view' AND o.dropped_at IS NULL
       AND (o.definition->>'plan')::oid = x.objid
     WHERE x.classid = 'pg_class'::regclass;
    IF v_users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot replace % while maintained views use it', what
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Used by: ' || v_users || '.  Their history was computed with its '
                           'current definition.',
                  HINT = 'Create it under another name, or first drop what uses it '
                         '(decoupled.drop()).';
    END IF;
END
$$;


-- 90_privileges: as a fresh install's blanket REVOKE leaves it.
REVOKE ALL ON FUNCTION decoupled._refuse_replacing(oid, oid, text) FROM PUBLIC;

------------------------------------------------------------------------------
-- Security, second round: domains inside range types and behind operators
-- are looked through; a replica appends only to what it maintains; the
-- storage of dropped collections is locked without waiting before it goes
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION decoupled.finalize_dropped() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id    bigint;
    v_count integer := 0;
    v_lock   text := current_setting('lock_timeout');
    v_tables text;
BEGIN
    PERFORM set_config('lock_timeout', '50ms', true);
    -- Written plans first: they read the storage of other collections.
    PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'))
       FROM decoupled.catalog_objects o
      WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
        AND o.kind = 'materialized view';
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
                 ORDER BY o.lifetime_id DESC
    LOOP
        -- Its frontier row before its storage (the global lock order), and
        -- without waiting: a writer that locked it before the drop committed
        -- may still be at work; this collection waits for a later round.
        PERFORM FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id
            FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                  WHERE f.lifetime_id = v_id) THEN
            CONTINUE;
        END IF;
        BEGIN
            PERFORM decoupled._drop_public_view(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['plan', 'delta', 'before', 'history', 'history_cur',
                                 'history_dead']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            -- Locked without waiting first: lock_timeout is not enough
            -- (the controller's round waited on it for as long as any role
            -- that may read a history view kept a lock on it).
            IF v_tables IS NOT NULL THEN
                EXECUTE 'LOCK TABLE ' || v_tables || ' IN ACCESS EXCLUSIVE MODE NOWAIT';
                EXECUTE 'DROP VIEW ' || v_tables;
            END IF;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['state', 'dstate', 'cur', 'dead', 'stage', 'pending']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'LOCK TABLE ' || v_tables || ' IN ACCESS EXCLUSIVE MODE NOWAIT';
                EXECUTE 'DROP TABLE ' || v_tables;
            END IF;
            -- A sink's table is its creator's data: hand it over.
            PERFORM decoupled._hand_over_sink_table(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id AND o.kind = 'sink';
            DELETE FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id;
            DELETE FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_id;
            UPDATE decoupled.catalog_objects o SET finalized_at = now() WHERE o.lifetime_id = v_id;
            v_count := v_count + 1;
        EXCEPTION
            WHEN lock_not_available THEN
                NULL;  -- a reader still has it open: next round
            WHEN dependent_objects_still_exist THEN
                RAISE NOTICE 'storage of dropped collection % is still used by a view', v_id
                    USING HINT = 'Drop the views that read it; finalization retries.';
        END;
    END LOOP;
    -- Arrangements whose drop could not get its locks at once.
    PERFORM decoupled._drop_unused_arrangements();
    PERFORM set_config('lock_timeout', v_lock, true);
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.replica_append(incarnation bigint, lifetime_id bigint, updates jsonb,
                                         expected_upper bigint, new_upper bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
BEGIN
    i := decoupled._live_incarnation(replica_append.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    -- Only what this replica maintains: a source or a view of its cluster
    -- (dropped ones too: the append then says so, ZD002).  A registered
    -- table's history is its capture's alone.
    IF NOT EXISTS (SELECT FROM decoupled.catalog_objects o
                     JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
                    WHERE o.lifetime_id = replica_append.lifetime_id
                      AND o.kind IN ('source', 'materialized view')
                      AND r.replica_id = i.replica_id) THEN
        RAISE EXCEPTION 'replica incarnation % does not maintain collection %',
                        replica_append.incarnation, replica_append.lifetime_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Its storage without waiting (ZD004, retried shortly): a transaction
    -- creating views over the collection may hold it (write_locks.hpp).
    PERFORM decoupled._lock_storage_nowait(replica_append.lifetime_id);
    SELECT c.upper INTO v_upper FROM decoupled._compare_and_append(
        replica_append.lifetime_id, updates, expected_upper, new_upper) c;
    IF v_upper IS NULL THEN
        RAISE EXCEPTION 'collection % was dropped', replica_append.lifetime_id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    RETURN v_upper;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._column_types(columns jsonb) RETURNS SETOF oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE types(oid) AS (
        SELECT coalesce((c->>'typid')::oid,
                        regexp_replace(c->>'type', ' COLLATE .*$', '')::regtype::oid)
          FROM jsonb_array_elements(columns) c
        UNION
        SELECT n.oid
          FROM types x JOIN pg_type t ON t.oid = x.oid,
               LATERAL (SELECT t.typbasetype WHERE t.typtype = 'd'
                        UNION ALL
                        SELECT t.typelem WHERE t.typcategory = 'A' AND t.typelem <> 0
                        UNION ALL
                        -- A range's subtype, a multirange's range.
                        SELECT r.rngsubtype FROM pg_range r WHERE r.rngtypid = t.oid
                        UNION ALL
                        SELECT r.rngtypid FROM pg_range r WHERE r.rngmultitypid = t.oid
                        UNION ALL
                        SELECT a.atttypid FROM pg_attribute a
                         WHERE t.typrelid <> 0 AND a.attrelid = t.typrelid AND a.attnum > 0
                           AND NOT a.attisdropped) n(oid))
    SELECT oid FROM types
$$;

CREATE OR REPLACE FUNCTION decoupled._check_columns(what text, name text, columns jsonb) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_bad  text;
    v_type regtype;
BEGIN
    SELECT c->>'name' INTO v_bad FROM jsonb_array_elements(columns) c
     WHERE c->>'name' LIKE 'mz\_%' OR c->>'name' IN ('valid_from', 'valid_to')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'column name "%" of % "%" is reserved', v_bad, what, name
            USING ERRCODE = 'reserved_name', HINT = 'Rename the column.';
    END IF;
    -- A superuser's domain whose check calls a function another role owns
    -- (and may replace) is such a domain too — directly, or behind an
    -- operator.
    SELECT t.oid::regtype INTO v_type
      FROM decoupled._column_types(columns) x(oid)
      JOIN pg_type t ON t.oid = x.oid
      JOIN pg_roles r ON r.oid = t.typowner
     WHERE t.typtype = 'd'
       AND ((NOT r.rolsuper AND EXISTS (SELECT FROM pg_constraint c WHERE c.contypid = t.oid))
            OR EXISTS (SELECT FROM pg_constraint c
                         JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass
                                         AND d.objid = c.oid
                         LEFT JOIN pg_operator op ON d.refclassid = 'pg_operator'::regclass
                                                 AND op.oid = d.refobjid
                         JOIN pg_proc p
                           ON p.oid = CASE WHEN d.refclassid = 'pg_proc'::regclass
                                           THEN d.refobjid
                                           ELSE op.oprcode::oid END
                         JOIN pg_roles o ON o.oid = p.proowner
                        WHERE c.contypid = t.oid AND NOT o.rolsuper))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot use domain % in % "%"', v_type, what, name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its constraints were written by a role that is not a superuser, or '
                           'call a function such a role owns, and would run with the '
                           'extension''s rights when history is written.',
                  HINT = 'Use its base type, or a domain owned by a superuser.';
    END IF;
    -- A range type's subtype_diff runs wherever PostgreSQL gathers the
    -- statistics of a column of it (ANALYZE, autovacuum's too) or plans
    -- with them — of storage and sinks' tables as their owner, the
    -- extension's.  (Its canonical function is C: a superuser's.)
    SELECT t.oid::regtype INTO v_type
      FROM decoupled._column_types(columns) x(oid)
      JOIN pg_type t ON t.oid = x.oid
      JOIN pg_range g ON g.rngtypid = t.oid
      JOIN pg_proc p ON p.oid IN (g.rngsubdiff, g.rngcanonical)
      JOIN pg_roles o ON o.oid = p.proowner
     WHERE NOT o.rolsuper
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot use range type % in % "%"', v_type, what, name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its subtype_diff function is owned by a role that is not a '
                           'superuser, and would run with the extension''s rights whenever '
                           'the statistics of its history are gathered.',
                  HINT = 'Use a range type without subtype_diff, or one whose function a '
                         'superuser owns.';
    END IF;
    -- A registered table's captured rows travel as text (decoding prints
    -- the WAL's values with the catalog of their time, the capture worker
    -- reads them back with today's): a type whose text may not read back
    -- — it names catalog objects, which may be gone or renamed by then, or
    -- it has no input at all — would stop capture for every table.
    IF what = 'table' THEN
        SELECT t.oid::regtype INTO v_type
          FROM decoupled._column_types(columns) x(oid) JOIN pg_type t ON t.oid = x.oid
         WHERE t.typinput::oid IN (
                   'regclassin'::regproc, 'regtypein'::regproc, 'regprocin'::regproc,
                   'regprocedurein'::regproc, 'regoperin'::regproc, 'regoperatorin'::regproc,
                   'regrolein'::regproc, 'regnamespacein'::regproc, 'regconfigin'::regproc,
                   'regdictionaryin'::regproc, 'regcollationin'::regproc, 'aclitemin'::regproc,
                   'pg_node_tree_in'::regproc, 'pg_ndistinct_in'::regproc,
                   'pg_dependencies_in'::regproc, 'pg_mcv_list_in'::regproc,
                   'brin_bloom_summary_in'::regproc, 'brin_minmax_multi_summary_in'::regproc)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'cannot register table "%": a column holds type %', name, v_type
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Captured rows travel as text, and a value of this type may not '
                               'read back from it (it names catalog objects, or has no input).',
                      HINT = 'Store such a value as oid or text.';
        END IF;
    END IF;
END
$$;


-- The session after: append values of collections with domains converted as
-- their owner; types of a failed conversion by OID; dry_run runs only its
-- call in the caller's search_path.
CREATE FUNCTION decoupled._column_type(c jsonb) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN c ? 'typid'
                     AND to_regtype(regexp_replace(c->>'type', ' COLLATE .*$', ''))
                         IS DISTINCT FROM (c->>'typid')::oid
                THEN format_type((c->>'typid')::oid, NULL)
                     || coalesce(substring(c->>'type' FROM ' COLLATE .*$'), '')
                ELSE c->>'type' END
$$;

CREATE OR REPLACE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                typed boolean DEFAULT false) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
-- PL/pgSQL, not SQL: a view's step calls it, and its statement is planned
-- once per session, not at every call.  Typed, each column's type is
-- _column_type's; _assert_column_types checks the relation made.
BEGIN
    RETURN (SELECT string_agg(prefix || quote_ident(c->>'name')
                              || CASE WHEN typed THEN ' ' || decoupled._column_type(c) ELSE '' END,
                              ', ' ORDER BY ord)
              FROM decoupled.catalog_objects o,
                   jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
             WHERE o.lifetime_id = _cols.lifetime_id);
END
$$;


REVOKE ALL ON FUNCTION decoupled._column_type(jsonb) FROM PUBLIC;

-- The replica protocol moves from decoupled_admin to decoupled_replica
-- (10_catalog, 90_privileges): an admin must not write another role's
-- view history.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'decoupled_replica') THEN
        CREATE ROLE decoupled_replica NOLOGIN;
    END IF;
END
$$;
COMMENT ON ROLE decoupled_replica IS
    'What pg_decoupled replica processes log in as: writes every maintained view''s history.';
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'decoupled'::regnamespace AND p.proname LIKE 'replica\_%'
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM decoupled_admin', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO decoupled_replica', f);
    END LOOP;
END
$$;

-- _diagnose_values takes the column types from its caller and reads no
-- catalog: it runs as a collection's owner (31_append, 90_privileges).
DROP FUNCTION decoupled._diagnose_values(bigint, text, jsonb);
CREATE FUNCTION decoupled._diagnose_values(types jsonb, name text, updates jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_error text;
BEGIN
    FOR r IN SELECT u.n, d.key, d.value, types->>d.key AS type
               FROM jsonb_array_elements(updates) WITH ORDINALITY u(v, n),
                    jsonb_each(u.v->'data') d
              WHERE types ? d.key
              ORDER BY u.n
    LOOP
        BEGIN
            EXECUTE format('SELECT x.%1$I FROM jsonb_to_record($1) AS x(%1$I %2$s)', r.key, r.type)
                USING jsonb_build_object(r.key, r.value);
        EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
            RAISE EXCEPTION 'update % of the append to "%" has an invalid value for column "%": %',
                            r.n, name, r.key, r.value
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = v_error,
                      HINT = format('Column "%s" has type %s.', r.key, r.type);
        END;
    END LOOP;
END
$$;

-- As a fresh install's blanket REVOKE and GRANT leave it.
REVOKE ALL ON FUNCTION decoupled._diagnose_values(jsonb, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._diagnose_values(jsonb, text, jsonb) TO PUBLIC;

-- Finalization drops what a role built on a dropped collection's history
-- views (33_drops).

-- A view's, source's or sink's history is dropped through DROP SCHEMA or
-- DROP OWNED only by its creator, an admin or a superuser (33_drops).
-- A view's, source's or sink's relation goes by PostgreSQL's rules (a
-- schema's owner drops what others made in it, a table's owner what
-- depends on it): its history goes only by the catalog's — its creator,
-- decoupled_admin, a superuser.  A registered table's history is its
-- table's owner's, whoever that is.
CREATE FUNCTION decoupled._refuse_drop_without_rights(ids bigint[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_denied text;
BEGIN
    SELECT format('%s "%s"', o.kind, o.name) INTO v_denied
      FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = ANY (ids) AND o.kind <> 'table'
       AND NOT decoupled._caller_is_admin()
       AND NOT coalesce(EXISTS (SELECT FROM pg_roles r
                                 WHERE r.oid = (o.definition->>'owner')::oid)
                        AND pg_has_role(decoupled._caller(), (o.definition->>'owner')::oid,
                                        'USAGE'),
                        false)
     ORDER BY o.lifetime_id
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied to drop %', v_denied
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its history is dropped with it: only its creator, members of '
                           'decoupled_admin and superusers may, also through DROP SCHEMA, '
                           'DROP OWNED or a cascade.',
                  HINT = 'Ask one of them to drop it with decoupled.drop().';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION decoupled._refuse_drop_without_rights(bigint[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION decoupled._on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_roots   bigint[];
    v_plans   boolean;
    v_what    text;
    v_cascade boolean;
    v_victim  decoupled.catalog_objects;
    v_version bigint;
    v_column  record;
    v_victims bigint[];
BEGIN
    IF to_regclass('decoupled.catalog_objects') IS NULL THEN
        RETURN;  -- the extension itself is being dropped
    END IF;
    -- Capture triggers go only with their registration (or their table).
    IF EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                WHERE d.object_type = 'trigger' AND d.address_names[3] LIKE 'decoupled_capture_%'
                  AND NOT decoupled._capture_switching()
                  AND EXISTS (SELECT FROM decoupled.catalog_objects o
                               WHERE o.kind = 'table' AND o.dropped_at IS NULL
                                 AND o.relation = to_regclass(format('%I.%I', d.address_names[1],
                                                                     d.address_names[2])))) THEN
        RAISE EXCEPTION 'cannot drop the capture triggers of a registered table'
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Unregister it with decoupled.unregister_table() instead.';
    END IF;
    -- A registered table's and a sink's table's shape is fixed (DROP TYPE
    -- ... CASCADE would take a column away).
    SELECT o.kind, o.name, d.address_names[3] AS col INTO v_column
      FROM pg_event_trigger_dropped_objects() d
      JOIN decoupled.catalog_objects o
        ON o.dropped_at IS NULL AND o.kind IN ('table', 'sink') AND o.relation = d.objid
     WHERE d.classid = 'pg_class'::regclass AND d.objsubid <> 0
       AND NOT EXISTS (SELECT FROM pg_event_trigger_dropped_objects() w
                        WHERE w.classid = d.classid AND w.objid = d.objid AND w.objsubid = 0)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop column "%" of % "%"', v_column.col, v_column.kind,
                        v_column.name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history and its output are kept in its shape.',
                  HINT = 'Drop it with decoupled.drop() first.';
    END IF;
    -- Nor may a column of a relation whose row type a live collection or
    -- sink holds go (DROP TYPE, DROP DOMAIN or DROP COLLATION ... CASCADE
    -- takes an attribute of a composite type, or a table's column, away):
    -- that row type's values would print otherwise under history, which
    -- matches rows by their text (ALTER TYPE ... DROP ATTRIBUTE is refused
    -- the same way, in ddl_guard.cpp).
    PERFORM decoupled._refuse_type_change(c.reltype, 'drop a column of')
       FROM pg_event_trigger_dropped_objects() d
       JOIN pg_class c ON c.oid = d.objid
      WHERE d.classid = 'pg_class'::regclass AND d.objsubid <> 0 AND c.reltype <> 0
        AND NOT EXISTS (SELECT FROM pg_event_trigger_dropped_objects() w
                         WHERE w.classid = d.classid AND w.objid = d.objid AND w.objsubid = 0);
    -- Probed, then read again under the catalog lock, so that no object
    -- created meanwhile on top of them is missed.
    FOR attempt IN 1 .. 2 LOOP
        SELECT array_agg(DISTINCT o.lifetime_id), bool_or(o.relation IS DISTINCT FROM d.objid)
          INTO v_roots, v_plans
          FROM pg_event_trigger_dropped_objects() d
          JOIN decoupled.catalog_objects o
            ON o.dropped_at IS NULL
           AND (o.relation = d.objid
                OR (o.kind = 'materialized view' AND (o.definition->>'plan')::oid = d.objid))
         WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0;
        IF v_roots IS NULL THEN
            RETURN;
        END IF;
        EXIT WHEN v_version IS NOT NULL;
        v_version := decoupled._begin_catalog_change();
    END LOOP;
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id) INTO v_what
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = ANY (v_roots);
    PERFORM decoupled._refuse_drop_without_rights(v_roots);
    v_roots := decoupled._with_subsources(v_roots);
    -- PostgreSQL cascaded only through relations.  A statement that is no
    -- DROP cascaded if it took a written plan away.
    v_cascade := coalesce(decoupled._drop_cascades(), v_plans);
    IF NOT v_cascade THEN
        PERFORM decoupled._refuse_dependents(v_what, v_roots);
        PERFORM decoupled._refuse_foreign_dependents(v_what, v_roots);
    END IF;
    v_victims := v_roots || decoupled._dependents(v_roots);
    -- What the catalog cascades to (a sink: no relation of PostgreSQL's
    -- depends on its input) goes by the same rights.
    PERFORM decoupled._refuse_drop_without_rights(v_victims);
    FOR v_victim IN SELECT * FROM decoupled.catalog_objects o
                     WHERE o.lifetime_id = ANY (v_victims)
                     ORDER BY o.lifetime_id DESC
    LOOP
        PERFORM decoupled._drop_object(v_victim, v_version);
    END LOOP;
END
$$;

-- An ALTER TABLE that keeps a registered table's shape, key and capture
-- goes through (extension/ddl_guard.cpp, alter_keeps_shape).
CREATE FUNCTION decoupled._alter_keeps_shape() RETURNS boolean
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_alter_keeps_shape';
REVOKE ALL ON FUNCTION decoupled._alter_keeps_shape() FROM PUBLIC;
CREATE OR REPLACE FUNCTION decoupled._check_relation_ddl(rel oid, command_tag text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o decoupled.catalog_objects := decoupled._object_of_relation(rel);
BEGIN
    IF o.lifetime_id IS NULL
       OR (o.kind = 'table' AND command_tag = 'CREATE RULE'
           AND EXISTS (SELECT FROM pg_class c WHERE c.oid = rel AND c.relkind = 'r'))
       OR (o.kind = 'table' AND command_tag = 'ALTER TABLE' AND decoupled._alter_keeps_shape()) THEN
        RETURN;
    ELSIF o.kind = 'table' AND command_tag = 'CREATE RULE' THEN
        -- An ON SELECT rule turns an empty table into a view: whatever
        -- reads the table (capture taking it again, as a superuser) would
        -- run its owner's query.
        RAISE EXCEPTION 'cannot turn registered table "%" into a view', rel::regclass
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Unregister it with decoupled.unregister_table() first.';
    ELSIF o.kind = 'table' THEN
        RAISE EXCEPTION 'cannot alter registered table "%"', rel::regclass
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history is kept in its shape and captured by its key: only '
                           'defaults, statistics, storage and other options, CHECK, NOT NULL '
                           'and foreign-key constraints, the owner, clustering and its '
                           'owner''s own triggers may change.',
                  HINT = 'Unregister it with decoupled.unregister_table() first.';
    ELSIF o.relation IS DISTINCT FROM rel THEN
        RAISE EXCEPTION 'cannot change the written plan of materialized view "%"', o.name
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Drop the view with decoupled.drop() and create it anew.';
    END IF;
    RAISE EXCEPTION 'cannot change the relation of % "%"', o.kind, o.name
        USING ERRCODE = 'feature_not_supported',
              DETAIL = format('%s is refused: the relation belongs to the extension while the '
                              '%s lives.', command_tag, o.kind),
              HINT = format('GRANT, REVOKE and COMMENT ON work on it; to change it otherwise, '
                            'drop the %s with decoupled.drop() and create it anew.', o.kind);
END
$$;


-- Bounds and NULLs (a docs probe): replica counts up to 64, an append's upper at
-- most 10 s past the clock, a view's as_of not in the future, NULL arguments
-- 22004; a refused restore leaves no sequence behind the ids in use.
CREATE OR REPLACE FUNCTION decoupled._check_replica_count(cluster_name text, replicas integer) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Each replica is a process (a background worker where the cluster is
    -- managed): a count far beyond what a server runs only fills the log.
    IF replicas IS NULL OR replicas < 0 OR replicas > 64 THEN
        RAISE EXCEPTION 'invalid replica count % for cluster "%"',
                        coalesce(replicas::text, 'NULL'), cluster_name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A cluster has from 0 to 64 replicas; with zero its objects are paused.';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._check_retention(retain interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF retain IS NULL THEN
        RAISE EXCEPTION 'retain_history must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF retain < interval '0' THEN
        RAISE EXCEPTION 'retain_history must not be negative, got %', retain
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._lock_cluster(cluster_name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF cluster_name IS NULL THEN
        RAISE EXCEPTION 'cluster must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM FROM decoupled.catalog_clusters c WHERE c.name = cluster_name FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', cluster_name
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.create_cluster(name text, replicas integer DEFAULT 1,
                                         managed boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name text := create_cluster.name;
BEGIN
    PERFORM decoupled._check_name('cluster', v_name);
    PERFORM decoupled._check_replica_count(v_name, replicas);
    IF create_cluster.managed IS NULL THEN
        RAISE EXCEPTION 'managed must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._begin_catalog_change();
    IF EXISTS (SELECT FROM decoupled.catalog_clusters c WHERE c.name = v_name) THEN
        RAISE EXCEPTION 'cluster "%" already exists', v_name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor)
        VALUES (v_name, true, replicas);
    PERFORM decoupled._resize_cluster(v_name, replicas);
    -- An unmanaged cluster starts like a managed one; its replicas are then
    -- added and removed one by one.
    IF NOT create_cluster.managed THEN
        UPDATE decoupled.catalog_clusters c SET managed = false, replication_factor = NULL
         WHERE c.name = v_name;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._append(collection text, updates jsonb, expected_upper bigint,
                                  new_upper bigint, deployment text, incarnation bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
-- Row keys are the rows' text: pin every setting that changes it.
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
DECLARE
    o        decoupled.catalog_objects;
    v_result record;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink, not a collection', o.name USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NOT NULL
       AND NOT coalesce(pg_has_role(decoupled._caller(),
                                    (SELECT c.relowner FROM pg_class c WHERE c.oid = o.relation),
                                    'USAGE'), false) THEN
        RAISE EXCEPTION 'must be owner of % "%" to append to its history', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A collection''s history is written by its owner, its capture and '
                           'its replicas only.';
    END IF;
    -- A maintained view is its query's result at every time, a source its
    -- generator's output: rows appended by hand would stay wrong for good
    -- (verify() false, a generator's values skipped).
    IF o.kind IN ('materialized view', 'source') THEN
        RAISE EXCEPTION 'cannot append to % "%"', o.kind, o.name
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Its replicas write its history.',
                  HINT = CASE WHEN o.kind = 'source' THEN 'Register a table and write to it instead.'
                              ELSE 'Write to the collections it reads.' END;
    END IF;
    IF expected_upper IS NULL OR new_upper IS NULL THEN
        RAISE EXCEPTION 'expected_upper and new_upper must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF new_upper <= expected_upper THEN
        RAISE EXCEPTION 'new upper must be beyond the expected upper'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Expected upper %s, new upper %s.', expected_upper, new_upper);
    END IF;
    -- An upper far ahead of the clock would pull every later tick, the
    -- oracle and every source that follows it that far ahead (a tick's time
    -- is past every table's upper); at the end of time nothing ticks again.
    -- So an append moves an upper at most 10 s past the wall clock (or one
    -- millisecond past the expected upper, while the oracle runs ahead of a
    -- clock that went back).
    IF new_upper > greatest((extract(epoch FROM clock_timestamp()) * 1000)::bigint + 10000,
                            expected_upper + 1) THEN
        RAISE EXCEPTION 'new upper % is more than 10 s ahead of the clock', new_upper
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The oracle''s time is %s.', decoupled.oracle_now()),
                  HINT = 'Append up to the current time; later times with later appends.';
    END IF;
    IF updates IS NULL OR jsonb_typeof(updates) <> 'array' THEN
        RAISE EXCEPTION 'updates must be a JSON array of {"mz_timestamp", "mz_diff", "data"} objects'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._assert_write_authority(deployment, incarnation);

    SELECT * INTO v_result
      FROM decoupled._compare_and_append(o.lifetime_id, updates, expected_upper, new_upper);
    IF v_result.upper IS NULL THEN
        RAISE EXCEPTION '% "%" was dropped', o.kind, o.name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT v_result.appended THEN
        RAISE EXCEPTION 'append to % "%" lost the race for its interval', o.kind, o.name
            USING ERRCODE = 'serialization_failure',
                  DETAIL = format('Expected upper %s, but the actual upper is %s; nothing was '
                                  'appended.', expected_upper, v_result.upper),
                  HINT = 'Read the upper again and append what is still missing from there.';
    END IF;
    IF o.kind <> 'table' OR jsonb_array_length(updates) = 0 THEN
        RETURN new_upper;  -- (an append of nothing only moves the upper)
    END IF;
    IF jsonb_array_length(coalesce(o.definition->'key', '[]')) > 0 THEN
        PERFORM decoupled._refuse_duplicate_key(o, expected_upper);
    END IF;
    -- From now on the table's history differs from the table by what was
    -- appended: its ticks take a captured retraction that finds no current
    -- row (an append retracted it) as retracting nothing.
    IF NOT coalesce((o.definition->>'appended')::boolean, false) THEN
        UPDATE decoupled.catalog_objects c SET definition = c.definition || '{"appended": true}'
         WHERE c.lifetime_id = o.lifetime_id;
    END IF;
    RETURN new_upper;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._release_hold(id bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
    v_adapter     text;
BEGIN
    IF _release_hold.id IS NULL THEN
        RAISE EXCEPTION 'hold id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT s.incarnation INTO v_incarnation FROM decoupled._shared_holds() s
     WHERE s.hold_id = _release_hold.id;
    -- The durable protection is lifted lazily, at adapterd's next hold
    -- publication (decoupled.publish_holds() runs one now).
    PERFORM decoupled._hold_release(_release_hold.id, decoupled._caller_is_admin());
    -- A hold of a retired incarnation protected nothing since it was
    -- retired: released now, and said, as at the session's other protected
    -- operations (C7.4).
    IF v_incarnation IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_adapter_incarnations i
                        WHERE i.incarnation = v_incarnation AND i.retired_at IS NULL) THEN
        SELECT i.adapter INTO v_adapter FROM decoupled.catalog_adapter_incarnations i
         WHERE i.incarnation = v_incarnation;
        RAISE EXCEPTION '%',
                        CASE WHEN v_adapter IS NULL
                             THEN format('incarnation %s that hold %s was taken under belongs to a '
                                         'catalog dropped since', v_incarnation, _release_hold.id)
                             ELSE format('incarnation %s of adapter "%s" that hold %s was taken '
                                         'under was retired', v_incarnation, v_adapter,
                                         _release_hold.id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Its holds were released when it was retired; compaction may have '
                           'passed this one since.  It is gone now.',
                  HINT = 'Reconnect to attach to the adapter''s current incarnation.';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.create_replica(cluster text, name text, external boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._begin_replica_change(create_replica.cluster, create_replica.name);
    IF EXISTS (SELECT FROM decoupled.catalog_replicas r
                WHERE r.cluster = create_replica.cluster AND r.name = create_replica.name) THEN
        RAISE EXCEPTION 'replica "%" already exists in cluster "%"',
                        create_replica.name, create_replica.cluster
            USING ERRCODE = 'duplicate_object';
    END IF;
    PERFORM decoupled._check_replica_count(create_replica.cluster,
                                           (SELECT count(*)::integer + 1
                                              FROM decoupled.catalog_replicas r
                                             WHERE r.cluster = create_replica.cluster));
    INSERT INTO decoupled.catalog_replicas (cluster, name, external)
    VALUES (create_replica.cluster, create_replica.name, coalesce(create_replica.external, false));
END
$$;

CREATE OR REPLACE FUNCTION decoupled._create_source(name text, generator text, cluster text, options jsonb,
                                         retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_version bigint;
    v_tick    bigint;
    v_epoch   bigint;
    v_id      bigint;
    v_out     record;
    v_name    text;
    v_out_id  bigint;
    schema    text := decoupled._caller_schema();
BEGIN
    PERFORM decoupled._check_name('source', _create_source.name);
    IF generator IS NULL THEN
        RAISE EXCEPTION 'generator must not be null' USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Generators: counter, auction.';
    END IF;
    IF NOT EXISTS (SELECT FROM decoupled._generator_outputs(generator)) THEN
        RAISE EXCEPTION 'unknown load generator "%"', generator
            USING ERRCODE = 'undefined_object', HINT = 'Generators: counter, auction.';
    END IF;
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'options must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT FROM jsonb_object_keys(options) k WHERE k <> 'tick') THEN
        RAISE EXCEPTION 'unknown source option "%"',
                        (SELECT k FROM jsonb_object_keys(options) k WHERE k <> 'tick' LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Sources accept: tick.';
    END IF;
    v_tick := decoupled._tick_ms(options);
    PERFORM decoupled._check_retention(retain_history);
    PERFORM decoupled._check_create_in(schema, 'A source''s relations are created in the current schema.');
    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_source.cluster);
    FOR v_out IN SELECT * FROM decoupled._generator_outputs(generator) LOOP
        v_name := _create_source.name || CASE WHEN v_out.role = '' THEN '' ELSE '_' || v_out.role END;
        PERFORM decoupled._check_name('source', v_name);
        PERFORM decoupled._check_free(v_name, schema, v_name);
    END LOOP;

    -- Ticks fall on multiples of the tick: every replica agrees on them.
    v_epoch := (decoupled._next_timestamp(0) / v_tick + 1) * v_tick;
    FOR v_out IN SELECT * FROM decoupled._generator_outputs(generator) ORDER BY role LOOP
        v_name := _create_source.name || CASE WHEN v_out.role = '' THEN '' ELSE '_' || v_out.role END;
        INSERT INTO decoupled.catalog_objects
               (name, kind, cluster, definition, retain_history, created_in_version)
        VALUES (v_name, 'source', _create_source.cluster,
                jsonb_build_object('generator', generator, 'role', v_out.role,
                                   'tick_ms', v_tick, 'epoch', v_epoch,
                                   'schema', schema, 'columns', v_out.columns)
                || CASE WHEN v_out.role = '' THEN jsonb_build_object('options', options)
                        ELSE jsonb_build_object('parent', v_id) END,
                retain_history, v_version)
        RETURNING lifetime_id INTO v_out_id;
        IF v_out.role = '' THEN
            v_id := v_out_id;
        END IF;
        PERFORM decoupled._create_storage(v_out_id);
        PERFORM decoupled._create_public_view(v_out_id, schema, v_name);
        -- Its public view is the relation whose privileges gate every path
        -- to its history (AS OF reads, holds, subscriptions, sinks).
        UPDATE decoupled.catalog_objects o SET relation = format('%I.%I', schema, v_name)::regclass
         WHERE o.lifetime_id = v_out_id;
        INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper)
            VALUES (v_out_id, v_epoch, v_epoch);
        INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_out_id, v_epoch);
    END LOOP;
    RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.prune_status_history(retention interval DEFAULT '7 days')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count bigint;
BEGIN
    IF retention IS NULL THEN
        RAISE EXCEPTION 'retention must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF retention < interval '0' THEN
        RAISE EXCEPTION 'retention must not be negative, got %', retention
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Status history older than the retention goes; ''0'' prunes all of it.';
    END IF;
    DELETE FROM decoupled.status_events e WHERE e.occurred_at < now() - retention;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.retire_incarnation(adapter text, incarnation bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._check_name('adapter', adapter);
    IF retire_incarnation.incarnation IS NULL THEN
        RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM FROM decoupled.catalog_adapter_incarnations i
     WHERE i.adapter = retire_incarnation.adapter AND i.incarnation = retire_incarnation.incarnation
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" has no incarnation %', adapter, retire_incarnation.incarnation
            USING ERRCODE = 'undefined_object';
    END IF;
    -- Exactly this owner's holds and sessions; a peer's are never touched.
    PERFORM decoupled._reclaim_incarnation(retire_incarnation.incarnation);
END
$$;

-- The ordinary views a written plan reads through that read one of its
-- registered tables without its history.
CREATE FUNCTION decoupled._readers_without_history_of_plan(plan regclass) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE reached(rel) AS (
        SELECT plan::oid
        UNION
        SELECT d.refobjid
          FROM reached r
          JOIN pg_class c ON c.oid = r.rel AND c.relkind = 'v'
          JOIN pg_rewrite w ON w.ev_class = c.oid AND w.rulename = '_RETURN'
          JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                          AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> c.oid)
    SELECT array_agg(DISTINCT x.what ORDER BY x.what)
      FROM reached t
      JOIN decoupled.catalog_objects o
        ON o.kind = 'table' AND o.dropped_at IS NULL AND o.relation = t.rel
     CROSS JOIN LATERAL unnest(decoupled._readers_without_history(o.relation)) AS x(what)
     WHERE x.what IN (SELECT format('view %s', v.rel::regclass)
                        FROM reached v JOIN pg_class c ON c.oid = v.rel AND c.relkind = 'v')
$$;
REVOKE ALL ON FUNCTION decoupled._readers_without_history_of_plan(regclass) FROM PUBLIC;

CREATE OR REPLACE FUNCTION decoupled._create_materialized_view(name text, query text, cluster text,
                                                    retain_history interval, as_of bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_stale    text[];
    v_name    text := _create_materialized_view.name;
    v_owner   oid := decoupled._caller();
    schema    text := decoupled._caller_schema();
    v_sql     text;
    v_version bigint;
    v_id      bigint;
    v_plan    regclass;
    v_inputs  bigint[];
    v_direct  oid[];
    v_bad     regclass;
    v_cols    jsonb;
    v_as_of   bigint;
    v_min     record;
    v_message text;
    v_detail  text;
    v_hint    text;
    v_state   text;
    v_strategy record;
    v_lock    text;
BEGIN
    PERFORM decoupled._check_name('materialized view', v_name);
    IF query IS NULL THEN
        RAISE EXCEPTION 'query must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM decoupled._check_retention(retain_history);
    IF as_of < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', as_of
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM decoupled._check_create_in(schema,
        'A materialized view''s relation is created in the current schema.');
    v_sql := decoupled._mv_check_sql(query);

    v_version := decoupled._begin_catalog_change();
    PERFORM decoupled._lock_cluster(_create_materialized_view.cluster);
    PERFORM decoupled._check_free(v_name, schema, v_name);

    INSERT INTO decoupled.catalog_objects
           (name, kind, cluster, definition, written_plan, retain_history, created_in_version)
    VALUES (v_name, 'materialized view', _create_materialized_view.cluster,
            -- The creator's TimeZone, DateStyle and text search
            -- configuration: every computation uses them
            -- (extension/written_plan.cpp, view_settings).
            jsonb_build_object('schema', schema, 'query', query, 'owner', v_owner,
                               'settings', jsonb_build_object(
                                   'TimeZone', current_setting('TimeZone'),
                                   'DateStyle', current_setting('DateStyle'),
                                   'default_text_search_config',
                                   current_setting('default_text_search_config'))),
            '', retain_history, v_version)
    RETURNING lifetime_id INTO v_id;

    -- The written plan: analyzed once, in the caller's search_path, which
    -- is in force for that parse analysis only.  security_invoker: the
    -- relations it reads are checked, row-level security included, as
    -- whoever computes it — the view's owner.
    BEGIN
        PERFORM decoupled._create_plan_view(decoupled._storage(v_id, 'plan'), v_sql);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
                                v_hint = PG_EXCEPTION_HINT, v_state = RETURNED_SQLSTATE;
        -- The parser's own detail and hint, where it gave them: RAISE
        -- prints an empty one as an empty line.
        v_message := format('invalid query for materialized view "%s": %s', v_name, v_message);
        IF v_detail <> '' AND v_hint <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, DETAIL = v_detail,
                                  HINT = v_hint;
        ELSIF v_detail <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, DETAIL = v_detail;
        ELSIF v_hint <> '' THEN
            RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state, HINT = v_hint;
        END IF;
        RAISE EXCEPTION USING MESSAGE = v_message, ERRCODE = v_state;
    END;
    v_plan := decoupled._storage(v_id, 'plan')::regclass;

    v_inputs := decoupled._plan_inputs(v_name, v_plan);
    -- An ordinary view parsed before its table was registered reads the
    -- table itself: computed AS OF a time, the view would read the
    -- table's latest state instead (registration warned about it).
    v_stale := decoupled._readers_without_history_of_plan(v_plan);
    IF v_stale IS NOT NULL THEN
        RAISE EXCEPTION 'materialized view "%" would read registered tables through %, made '
                        'before they were registered', v_name, array_to_string(v_stale, ', ')
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'They read the table itself, its latest state, whatever time the '
                           'view is computed at.',
                  HINT = 'Create them again (CREATE OR REPLACE VIEW with the same definition) '
                         'to read its history.';
    END IF;
    v_direct := decoupled._plan_direct_relations(v_plan);
    SELECT r::regclass INTO v_bad FROM unnest(v_direct) r
     WHERE NOT has_table_privilege(v_owner, r, 'SELECT')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied for relation %', v_bad
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Materialized view "%s" reads it.', v_name);
    END IF;

    v_cols := decoupled._relation_columns(v_plan);
    PERFORM decoupled._check_columns('materialized view', v_name, v_cols);
    v_strategy := decoupled._mv_strategy(v_plan);
    -- The arrangements' indexes, and the time index of an input view that
    -- has none (its steps find the times at which its inputs changed),
    -- lock their inputs' storage against writers: take those locks first,
    -- in the order every writer takes them (ascending lifetime id, cur
    -- before dead), before the inputs' bounds below, so that a replica
    -- appending to two of them (a source's outputs, a tick) or stepping an
    -- input view (its storage, then its own inputs' bounds) cannot
    -- deadlock with us.
    v_lock := (SELECT 'LOCK TABLE ' || string_agg(decoupled._storage(l.i, l.p), ', '
                                                 ORDER BY l.i, l.p) || ' IN SHARE MODE'
                 FROM (SELECT a.i, a.p
                         FROM (SELECT unnest(v_strategy.arrangement_inputs) AS i) x,
                              LATERAL (VALUES (x.i, 'cur'), (x.i, 'dead')) a(i, p)
                       UNION
                       SELECT t.i, 'cur'
                         FROM unnest(v_inputs) t(i)
                        WHERE to_regclass(format('decoupled_storage.c%s_cur_mz_ts_idx', t.i)) IS NULL
                          AND to_regclass(decoupled._storage(t.i, 'cur')) IS NOT NULL) l(i, p));
    IF v_lock IS NOT NULL THEN
        EXECUTE v_lock;
    END IF;
    PERFORM decoupled._ensure_time_index(i) FROM unnest(v_inputs) i ORDER BY i;

    -- Admission (C3.2, C3.3): the first computation reads every input at
    -- as_of, so each must be readable there and stay so; locking their
    -- bounds keeps a publication round from passing it before commit.
    -- FOR UPDATE, as the commit-time permission check takes them: two
    -- transactions upgrading a shared lock there would deadlock.
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = ANY (v_inputs)
     ORDER BY b.lifetime_id FOR UPDATE;
    SELECT o.name, greatest(b.bound, f.since) AS readable_from INTO v_min
      FROM decoupled.catalog_objects o
      JOIN decoupled.catalog_frontiers f USING (lifetime_id)
      JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE o.lifetime_id = ANY (v_inputs)
     ORDER BY 2 DESC LIMIT 1;
    IF _create_materialized_view.as_of IS NOT NULL THEN
        IF _create_materialized_view.as_of < v_min.readable_from THEN
            RAISE EXCEPTION 'materialized view "%" cannot start at %: "%" may be compacted there',
                            v_name, _create_materialized_view.as_of, v_min.name
                USING ERRCODE = 'check_violation',
                      DETAIL = format('The compaction bound of "%s" is %s.', v_min.name,
                                      v_min.readable_from),
                      HINT = format('Choose as_of %s or later, or protect older history with a '
                                    'hold before it is compacted.', v_min.readable_from);
        END IF;
        -- A time that has not come: the view would wait for its inputs to
        -- reach it (at the end of time, for ever) while looking hydrated.
        IF _create_materialized_view.as_of > decoupled.oracle_now() THEN
            RAISE EXCEPTION 'materialized view "%" cannot start at %: that time has not come',
                            v_name, _create_materialized_view.as_of
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('Choose as_of up to decoupled.oracle_now() (now %s).',
                                    decoupled.oracle_now());
        END IF;
        v_as_of := _create_materialized_view.as_of;
    ELSIF v_inputs = '{}' THEN
        v_as_of := decoupled._next_timestamp(0);
    ELSE
        -- The latest time every input can already serve, if admitted.
        SELECT greatest(v_min.readable_from, min(f.upper) - 1) INTO v_as_of
          FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = ANY (v_inputs);
    END IF;

    UPDATE decoupled.catalog_objects o
       SET written_plan = (SELECT w.ev_action::text FROM pg_rewrite w
                            WHERE w.ev_class = v_plan AND w.rulename = '_RETURN'),
           definition = o.definition || jsonb_build_object(
               'columns', v_cols, 'plan', v_plan::oid, 'inputs', to_jsonb(v_inputs),
               'direct', to_jsonb(v_direct), 'as_of', v_as_of,
               'strategy', v_strategy.strategy, 'reason', v_strategy.reason)
     WHERE o.lifetime_id = v_id;
    INSERT INTO decoupled.view_steps (lifetime_id) VALUES (v_id);
    PERFORM decoupled._arrange(v_id, a.input, a.keys)
       FROM unnest(v_strategy.arrangement_inputs, v_strategy.arrangement_keys) AS a(input, keys);
    PERFORM decoupled._create_storage(v_id);
    IF v_strategy.strategy NOT IN ('linear', 'partitions') THEN
        -- Its steps replace rows where they are (_replace_staged) and never
        -- look a retraction up by its row hash: an index on that would
        -- only cost every row a step writes.  Nor does anything read its
        -- changes yet: without the time index a step rewrites a group's row
        -- in place (_ensure_time_index).
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_hash_idx');
        EXECUTE format('DROP INDEX decoupled_storage.%I', 'c' || v_id || '_cur_mz_ts_idx');
        -- Room on every page for the new rows of the groups a step touches:
        -- the first computation fills pages to 70%, and a later step's row
        -- is written where its old one was (no new page, no index entry).
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', decoupled._storage(v_id, 'cur'));
    END IF;
    IF v_strategy.strategy IN ('sums', 'groups') THEN
        PERFORM decoupled._create_kept_state(v_id, v_plan, v_owner, v_strategy.strategy = 'sums');
    END IF;
    PERFORM decoupled._create_public_view(v_id, schema, v_name);
    -- The view's data is derived from what its owner may read: only the
    -- owner reads it, and grants it on.
    EXECUTE format('REVOKE ALL ON %I.%I FROM PUBLIC', schema, v_name);
    EXECUTE format('GRANT SELECT ON %I.%I TO %s WITH GRANT OPTION', schema, v_name,
                   v_owner::regrole);
    EXECUTE format('GRANT SELECT ON %s TO %s', v_plan, v_owner::regrole);
    UPDATE decoupled.catalog_objects o
       SET relation = format('%I.%I', schema, v_name)::regclass
     WHERE o.lifetime_id = v_id;
    PERFORM decoupled._describe_view(v_id);

    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_as_of, v_as_of);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
    SELECT i, v_id, v_as_of FROM unnest(v_inputs) i;
    RETURN v_id;
END
$$;


-- Capture: TRUNCATEs retract what is pending consolidated (34_wal_capture);
-- a stall before the first pass since a start is reported, and says whether
-- the worker runs (80_views); unregistering a table views read says so
-- (32_registered_tables, 33_drops).
DROP FUNCTION decoupled._refuse_dependents(text, bigint[]);
CREATE FUNCTION decoupled._refuse_dependents(what text, ids bigint[], verb text DEFAULT 'drop')
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_list text;
BEGIN
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id) INTO v_list
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = ANY (decoupled._dependents(ids));
    IF v_list IS NOT NULL THEN
        RAISE EXCEPTION 'cannot % % because other objects depend on it', verb, what
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Depending on it: ' || v_list || '.',
                  HINT = CASE WHEN verb = 'drop'
                              THEN 'Use decoupled.drop(name, cascade => true) to drop them too.'
                              ELSE 'Drop them first: they read its history.' END;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._unregister_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_version bigint;
    o         decoupled.catalog_objects;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.relation = tbl AND c.kind = 'table' AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', tbl USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._check_table_owner(tbl, 'unregister it');
    PERFORM decoupled._refuse_dependents(format('table "%s"', o.name), ARRAY[o.lifetime_id],
                                         'unregister');
    PERFORM decoupled._refuse_foreign_dependents(format('table "%s"', o.name),
                                                 ARRAY[o.lifetime_id], 'unregister');
    PERFORM decoupled._drop_object(o, v_version);
END
$$;

CREATE OR REPLACE FUNCTION decoupled._record_capture_health() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_stalled boolean;
    v_error   text;
    v_count   integer;
BEGIN
    IF NOT EXISTS (SELECT FROM decoupled.capture_relations) THEN
        RETURN 0;
    END IF;
    SELECT c.status = 'stalled'
           AND (c.worker_pid IS NOT NULL
                OR pg_postmaster_start_time() < now() - interval '30 s'),
           -- As decoupled.object_statuses says it.
           CASE WHEN c.last_error IS NOT NULL THEN 'WAL capture: ' || c.last_error
                WHEN c.worker_pid IS NULL THEN 'WAL capture is not running'
                ELSE 'WAL capture has made no progress for 30 s with changes waiting' END
      INTO v_stalled, v_error
      FROM decoupled.capture c;
    INSERT INTO decoupled.status_events (lifetime_id, status, error)
    SELECT t.lifetime_id, t.status, t.error
      FROM (SELECT r.lifetime_id,
                   CASE WHEN v_stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END
                       AS status,
                   CASE WHEN v_stalled THEN v_error ELSE h.error END AS error,
                   (SELECT CASE WHEN e.error LIKE 'WAL capture%' THEN 'capture stalled'
                                ELSE e.status END
                      FROM decoupled.status_events e
                     WHERE e.lifetime_id = r.lifetime_id AND e.replica IS NULL
                     ORDER BY e.event_id DESC LIMIT 1) AS last_event
              FROM decoupled.capture_relations r
              JOIN decoupled.catalog_objects o USING (lifetime_id)
              LEFT JOIN decoupled.table_health h USING (lifetime_id)
             WHERE o.dropped_at IS NULL) t
     WHERE CASE WHEN v_stalled THEN 'capture stalled' ELSE t.status END
           <> coalesce(t.last_event, 'running');
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

REVOKE ALL ON FUNCTION decoupled._refuse_dependents(text, bigint[], text) FROM PUBLIC;
CREATE OR REPLACE VIEW decoupled.capture AS
    WITH s AS (SELECT * FROM decoupled._capture_state()),
         n AS (SELECT count(*) FILTER (WHERE c.relation IS NOT NULL) AS wal_tables,
                      count(*) FILTER (WHERE c.relation IS NULL) AS trigger_tables
                 FROM decoupled.catalog_objects o
                 LEFT JOIN decoupled.capture_relations c USING (lifetime_id)
                WHERE o.kind = 'table' AND o.dropped_at IS NULL),
         w AS (SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                           ELSE pg_current_wal_lsn() END AS lsn)
    SELECT current_setting('decoupled.capture') AS setting,
           current_setting('wal_level') AS wal_level,
           CASE WHEN current_setting('decoupled.capture') <> 'wal'
                  OR current_setting('wal_level') <> 'logical' THEN
                    CASE WHEN n.wal_tables > 0 THEN 'releasing' ELSE 'off' END
                WHEN n.wal_tables = 0 AND n.trigger_tables = 0 THEN 'idle'
                WHEN s.pid IS NULL OR s.last_error IS NOT NULL
                  OR (s.progress_at < now() - interval '30 s'
                      AND (s.captured_through IS NULL
                           OR w.lsn > s.captured_through)) THEN 'stalled'
                ELSE 'running' END AS status,
           n.wal_tables, n.trigger_tables, s.pid AS worker_pid,
           sl.slot_name::text, sl.active AS slot_active,
           p.captured_lsn, p.captured_at, s.captured_through, s.progress_at,
           -- Before the worker's first pass since a start, from the
           -- position it recorded last.
           CASE WHEN sl.slot_name IS NOT NULL
                THEN pg_wal_lsn_diff(w.lsn, coalesce(s.captured_through, p.captured_lsn))::bigint
                END AS lag_bytes,
           pg_wal_lsn_diff(w.lsn, sl.restart_lsn)::bigint AS retained_wal_bytes,
           -- A table's error only to those who may read the table (one gone
           -- since: to nobody); one of no table's to all.
           CASE WHEN e.lifetime_id IS NULL THEN e.last_error
                ELSE decoupled._visible_error(
                         e.last_error,
                         coalesce((SELECT o.relation::oid FROM decoupled.catalog_objects o
                                    WHERE o.lifetime_id = e.lifetime_id), 0::oid),
                         coalesce((SELECT o.name::text FROM decoupled.catalog_objects o
                                    WHERE o.lifetime_id = e.lifetime_id), 'a dropped table'))
                END AS last_error,
           s.error_at
      FROM s CROSS JOIN n CROSS JOIN w CROSS JOIN decoupled._capture_error() e
      LEFT JOIN pg_replication_slots sl ON sl.slot_name = 'pg_decoupled'
      LEFT JOIN decoupled.capture_progress p ON true;
CREATE OR REPLACE VIEW decoupled.object_statuses AS
    SELECT o.name::text, o.kind, r.name::text AS replica,
           CASE WHEN r.replica_id IS NULL THEN 'paused'
                WHEN q.silent THEN 'stalled'
                ELSE coalesce(h.status, 'created') END AS status,
           CASE WHEN q.silent
                THEN format('replica "%s" has not reported for %s s', r.name, q.seconds)
                ELSE decoupled._visible_error(h.error, o.relation, o.name) END AS error,
           CASE WHEN r.replica_id IS NULL THEN 'no replica is running it'
                WHEN q.silent THEN 'It is hung, gone, or busy in one long step; see '
                                   'decoupled.replica_statuses.'
                ELSE h.hint END
               AS hint,
           h.updated_at, h.transition_at, h.hydrated
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
      LEFT JOIN decoupled.replica_health h
             ON h.lifetime_id = o.lifetime_id AND h.replica_id = r.replica_id
            AND h.deployment = (SELECT d.name FROM decoupled.catalog_deployments d
                                 WHERE d.state = 'active')
      -- What the replica last said of the object holds only while it still
      -- reports (every second).
      LEFT JOIN LATERAL (
          SELECT coalesce(i.heartbeat_at, i.started_at)
                     < clock_timestamp() - interval '30 seconds' AS silent,
                 floor(extract(epoch FROM clock_timestamp()
                                          - coalesce(i.heartbeat_at, i.started_at))) AS seconds
            FROM decoupled.catalog_replica_incarnations i
           WHERE i.incarnation = h.incarnation AND i.retired_at IS NULL
             AND h.status IN ('starting', 'running')) q ON true
     WHERE o.dropped_at IS NULL AND o.kind <> 'table'
    UNION ALL
    SELECT o.name::text, o.kind, NULL,
           CASE WHEN w.stalled THEN 'stalled' ELSE coalesce(h.status, 'running') END,
           CASE WHEN NOT coalesce(w.stalled, false)
                THEN decoupled._visible_error(h.error, o.relation, o.name)
                WHEN w.last_error IS NOT NULL THEN 'WAL capture: ' || w.last_error
                WHEN w.worker_pid IS NULL THEN 'WAL capture is not running'
                ELSE 'WAL capture has made no progress for 30 s with changes waiting' END,
           CASE WHEN w.stalled THEN 'Its writes wait in the WAL; see decoupled.capture.'
                ELSE h.hint END,
           h.updated_at, h.transition_at, NULL
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.table_health h USING (lifetime_id)
      LEFT JOIN LATERAL (
          SELECT c.status = 'stalled' AS stalled, c.last_error, c.worker_pid
            FROM decoupled.capture c
           WHERE EXISTS (SELECT FROM decoupled.capture_relations r
                          WHERE r.lifetime_id = o.lifetime_id)) w ON true
     WHERE o.dropped_at IS NULL AND o.kind = 'table';

-- Second security probe: finalization never drops a live object with what it
-- cascades to; dry_run's types qualified; a replica's upper at most a day
-- and 10 s past the clock.
CREATE OR REPLACE FUNCTION decoupled.finalize_dropped() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_id    bigint;
    v_count integer := 0;
    v_lock   text := current_setting('lock_timeout');
    v_tables text;
    v_live   bigint[];
    v_broken text;
BEGIN
    PERFORM set_config('lock_timeout', '50ms', true);
    -- Written plans first: they read the storage of other collections.
    PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'))
       FROM decoupled.catalog_objects o
      WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
        AND o.kind = 'materialized view';
    FOR v_id IN SELECT o.lifetime_id FROM decoupled.catalog_objects o
                 WHERE o.dropped_at IS NOT NULL AND o.finalized_at IS NULL
                 ORDER BY o.lifetime_id DESC
    LOOP
        -- Its frontier row before its storage (the global lock order), and
        -- without waiting: a writer that locked it before the drop committed
        -- may still be at work; this collection waits for a later round.
        PERFORM FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id
            FOR UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT FROM decoupled.catalog_frontiers f
                                  WHERE f.lifetime_id = v_id) THEN
            CONTINUE;
        END IF;
        BEGIN
            PERFORM decoupled._drop_public_view(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['plan', 'delta', 'before', 'history', 'history_cur',
                                 'history_dead']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            -- Locked without waiting first: lock_timeout is not enough
            -- (the controller's round waited on it for as long as any role
            -- that may read a history view kept a lock on it).
            -- CASCADE: the history views are PUBLIC, and whatever a role
            -- built on them (a view, a function's body) reads a collection
            -- that is gone; it must not keep the storage forever.  But no
            -- live object of the catalog goes with it (a maintained view
            -- calling a function whose body read this history): then the
            -- storage stays, and the round says why.
            IF v_tables IS NOT NULL THEN
                EXECUTE 'LOCK TABLE ' || v_tables || ' IN ACCESS EXCLUSIVE MODE NOWAIT';
                v_live := ARRAY(SELECT o.lifetime_id FROM decoupled.catalog_objects o
                                 WHERE o.dropped_at IS NULL);
                EXECUTE 'DROP VIEW ' || v_tables || ' CASCADE';
                SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ') INTO v_broken
                  FROM decoupled.catalog_objects o
                 WHERE o.lifetime_id = ANY (v_live) AND o.dropped_at IS NOT NULL;
                IF v_broken IS NOT NULL THEN
                    RAISE EXCEPTION 'storage of dropped collection % is still read by %', v_id,
                                    v_broken
                        USING ERRCODE = 'dependent_objects_still_exist';
                END IF;
            END IF;
            SELECT string_agg(r::text, ', ') INTO v_tables
              FROM unnest(ARRAY['state', 'dstate', 'cur', 'dead', 'stage', 'pending']) part,
                   LATERAL to_regclass(decoupled._storage(v_id, part)) r
             WHERE r IS NOT NULL;
            IF v_tables IS NOT NULL THEN
                EXECUTE 'LOCK TABLE ' || v_tables || ' IN ACCESS EXCLUSIVE MODE NOWAIT';
                EXECUTE 'DROP TABLE ' || v_tables;
            END IF;
            -- A sink's table is its creator's data: hand it over.
            PERFORM decoupled._hand_over_sink_table(o) FROM decoupled.catalog_objects o
             WHERE o.lifetime_id = v_id AND o.kind = 'sink';
            DELETE FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_id;
            DELETE FROM decoupled.catalog_bounds b WHERE b.lifetime_id = v_id;
            UPDATE decoupled.catalog_objects o SET finalized_at = now() WHERE o.lifetime_id = v_id;
            v_count := v_count + 1;
        EXCEPTION
            WHEN lock_not_available THEN
                NULL;  -- a reader still has it open: next round
            WHEN dependent_objects_still_exist THEN
                GET STACKED DIAGNOSTICS v_broken = MESSAGE_TEXT;
                RAISE NOTICE '%', v_broken
                    USING HINT = 'Drop what reads it (a function of theirs may); finalization '
                                 'retries.';
        END;
    END LOOP;
    -- Arrangements whose drop could not get its locks at once.
    PERFORM decoupled._drop_unused_arrangements();
    PERFORM set_config('lock_timeout', v_lock, true);
    RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION decoupled.dry_run(sql text)
RETURNS TABLE (action text, kind text, name text, detail text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    -- Types qualified too: PL/pgSQL resolves them when it compiles the
    -- function, in the caller's path.
    v_path     constant pg_catalog.text := pg_catalog.current_setting('search_path');
    v_function pg_catalog.text;
    v_before   pg_catalog.text[];
    v_after    pg_catalog.text[];
    v_marker   constant pg_catalog.text := 'pg_decoupled dry run';
    v_detail   pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF sql IS NULL THEN
        RAISE EXCEPTION 'sql must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Keywords and unquoted names in any case, as PostgreSQL reads them.
    v_function := pg_catalog.lower((pg_catalog.regexp_match(
        sql, '^\s*SELECT\s+decoupled\.([a-z_]+)\s*\(', 'i'))[1]);
    -- A release takes effect at once, and no rollback brings the hold
    -- back (README, "Holds"): running it here would release it for good.
    IF v_function = 'release_hold' THEN
        RAISE EXCEPTION 'dry_run cannot try release_hold'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A release takes effect at once; the rollback that ends a dry run '
                           'would not bring the hold back.',
                  HINT = 'decoupled.session_holds lists the holds this session may release.';
    END IF;
    IF v_function IS NULL OR sql ~ ';\s*\S'
       OR v_function NOT IN ('create_cluster', 'alter_cluster', 'drop_cluster',
                             'declare_adapter', 'drop_adapter', 'register_table',
                             'unregister_table', 'acquire_hold',
                             'publish_bounds', 'apply_compaction', 'create_source',
                             'create_materialized_view', 'create_sink', 'drop',
                             'create_deployment', 'drop_deployment', 'create_replica',
                             'drop_replica') THEN
        RAISE EXCEPTION 'dry_run takes one call of a catalog function'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the call as text, for example ''SELECT decoupled.create_cluster(...)''.';
    END IF;

    v_before := decoupled._catalog_inventory();
    BEGIN
        SET CONSTRAINTS ALL IMMEDIATE;
        PERFORM pg_catalog.set_config('search_path', v_path, true);
        EXECUTE sql;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        v_after := decoupled._catalog_inventory();
        RAISE EXCEPTION USING ERRCODE = 'DC999', MESSAGE = v_marker;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE <> 'DC999' OR SQLERRM <> v_marker THEN
            GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
            RETURN QUERY SELECT 'error'::text, NULL::text, NULL::text,
                                SQLSTATE || ': ' || SQLERRM
                                || CASE WHEN v_detail <> '' THEN ' (' || v_detail || ')' ELSE '' END;
            PERFORM pg_catalog.set_config('search_path', v_path, true);
            RETURN;
        END IF;
    END;
    RETURN QUERY
        SELECT 'create', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_after) e WHERE e <> ALL (v_before)
        UNION ALL
        SELECT 'drop', split_part(e, ':', 1), substr(e, length(split_part(e, ':', 1)) + 2), NULL
          FROM unnest(v_before) e WHERE e <> ALL (v_after)
        ORDER BY 1, 2, 3;
    RETURN QUERY SELECT 'admitted'::text, NULL::text, NULL::text, 'no admission error'::text;
    PERFORM pg_catalog.set_config('search_path', v_path, true);
END
$$;

CREATE OR REPLACE FUNCTION decoupled.replica_append(incarnation bigint, lifetime_id bigint, updates jsonb,
                                         expected_upper bigint, new_upper bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
    v_lock  text := current_setting('lock_timeout');
BEGIN
    i := decoupled._live_incarnation(replica_append.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    -- Only what this replica maintains: a source or a view of its cluster
    -- (dropped ones too: the append then says so, ZD002).  A registered
    -- table's history is its capture's alone.
    IF NOT EXISTS (SELECT FROM decoupled.catalog_objects o
                     JOIN decoupled.catalog_replicas r ON r.cluster = o.cluster
                    WHERE o.lifetime_id = replica_append.lifetime_id
                      AND o.kind IN ('source', 'materialized view')
                      AND r.replica_id = i.replica_id) THEN
        RAISE EXCEPTION 'replica incarnation % does not maintain collection %',
                        replica_append.incarnation, replica_append.lifetime_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- No upper far ahead of the clock (it would pull the oracle and every
    -- tick along, _append): a source's tick, at most a day, ahead, and 10 s.
    IF new_upper > (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 86400000 + 10000 THEN
        RAISE EXCEPTION 'new upper % is more than a day ahead of the clock', new_upper
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Its frontier row a moment at most: a sibling replica's append holds
    -- it that long, and a session that holds it longer (an open
    -- apply_compaction()) fails the append with 55P03, which the replica
    -- tries again shortly, as busy storage.
    PERFORM set_config('lock_timeout', '200ms', true);
    PERFORM FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = replica_append.lifetime_id FOR UPDATE;
    PERFORM set_config('lock_timeout', v_lock, true);
    -- Its storage without waiting (ZD004, retried shortly): a transaction
    -- creating views over the collection may hold it (write_locks.hpp).
    PERFORM decoupled._lock_storage_nowait(replica_append.lifetime_id);
    SELECT c.upper INTO v_upper FROM decoupled._compare_and_append(
        replica_append.lifetime_id, updates, expected_upper, new_upper) c;
    IF v_upper IS NULL THEN
        RAISE EXCEPTION 'collection % was dropped', replica_append.lifetime_id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    RETURN v_upper;
END
$$;


-- Third probe round: a TRUNCATE's consolidated retraction keeps whole rows (an
-- array column broke it); the oracle follows only the uppers it handed out
-- (not a source's next tick).
CREATE OR REPLACE FUNCTION decoupled._drop_collection(lifetime_id bigint, catalog_version bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id         bigint := _drop_collection.lifetime_id;
    v_released bigint[];
BEGIN
    UPDATE decoupled.catalog_objects o
       SET dropped_at = now(), dropped_in_version = catalog_version,
           -- A sink's table goes to its creator at finalization, unless
           -- the sink goes with DROP OWNED BY its creator: then the table
           -- goes too, as everything of the creator's (handed over after
           -- the statement it would keep the role from being dropped).
           definition = CASE WHEN o.kind = 'sink'
                              AND decoupled._dropping_owned_by((o.definition->>'owner')::oid)
                             THEN o.definition || '{"drop_table": true}'
                             ELSE o.definition END
     WHERE o.lifetime_id = id;
    -- Time never goes back, even once nothing uses this upper any more:
    -- an upper the oracle handed out (a registered table's, a view's
    -- without inputs).  Not a source's, which runs ahead to its next tick
    -- (up to a day), nor a view's over one (extension/oracle.cpp).
    -- Only when it moves: the row stays locked until the drop commits, and
    -- every other drop would wait for it.
    UPDATE decoupled.catalog_oracle
       SET high_water = x.upper
      FROM (SELECT f.upper FROM decoupled.catalog_frontiers f
              JOIN decoupled.catalog_objects o USING (lifetime_id)
             WHERE f.lifetime_id = id
               AND (o.kind = 'table'
                    OR (o.kind = 'materialized view'
                        AND o.definition->'inputs' = '[]'::jsonb))) x
     WHERE high_water < x.upper;
    DELETE FROM decoupled.catalog_holds h WHERE h.lifetime_id = id;
    WITH released AS (
        DELETE FROM decoupled.catalog_requirements q
         WHERE q.lifetime_id = id OR q.required_by = id
        RETURNING q.lifetime_id)
    SELECT array_agg(r.lifetime_id) INTO v_released FROM released r WHERE r.lifetime_id <> id;
    PERFORM decoupled._queue_for_publication(v_released);
    -- Its own entries are left to the publications: they skip dropped
    -- collections, and a delete here would wait for one draining them.
    INSERT INTO decoupled.status_events (lifetime_id, status) VALUES (id, 'dropped');
END
$$;

CREATE OR REPLACE FUNCTION decoupled._capture_held_negated(id bigint) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key    jsonb := (SELECT o.definition->'key' FROM decoupled.catalog_objects o
                        WHERE o.lifetime_id = id);
    v_pend   text := decoupled._storage(id, 'pending');
    v_marked text := '';
    -- Each group's row, as a row of pending (array_agg of an array column
    -- would make one array of a dimension more).
    v_fields text := (SELECT string_agg(format('(s.mz_r).%I', c->>'name'), ', ' ORDER BY ord)
                        FROM decoupled.catalog_objects o,
                             jsonb_array_elements(o.definition->'columns')
                                 WITH ORDINALITY AS x(c, ord)
                       WHERE o.lifetime_id = id);
BEGIN
    IF v_key IS NOT NULL THEN
        v_marked := format(' WHERE NOT EXISTS (SELECT FROM %s p '
                           '  WHERE p.mz_diff OPERATOR(pg_catalog.=) 0 AND %s)', v_pend,
                           (SELECT string_agg(format('p.%1$I OPERATOR(pg_catalog.=) c.%1$I', k),
                                              ' AND ')
                              FROM jsonb_array_elements_text(v_key) k));
    END IF;
    RETURN format('SELECT -s.mz_net, %6$s '
                  '  FROM (SELECT pg_catalog.sum(x.mz_d) AS mz_net, '
                  '               (pg_catalog.array_agg(ROW(0, %7$s)::%5$s))[1] AS mz_r '
                  '          FROM (SELECT 1 AS mz_d, ROW(%1$s)::pg_catalog.text AS mz_k, %1$s '
                  '                  FROM %2$s c%3$s '
                  '                UNION ALL '
                  '                SELECT p.mz_diff, ROW(%4$s)::pg_catalog.text, %4$s FROM %5$s p '
                  '                 WHERE p.mz_diff OPERATOR(pg_catalog.<>) 0) x '
                  '         GROUP BY x.mz_k '
                  '        HAVING pg_catalog.sum(x.mz_d) OPERATOR(pg_catalog.<>) 0) s',
                  decoupled._cols(id, 'c.'), decoupled._storage(id, 'cur'), v_marked,
                  decoupled._cols(id, 'p.'), v_pend, v_fields, decoupled._cols(id, 'x.'));
END
$$;

CREATE OR REPLACE FUNCTION decoupled._finish_restore() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT decoupled._restoring() THEN
        -- A restore the catalog refused (it has declarations of its own)
        -- still set its sequences back to the dump's values: SEQUENCE SET
        -- is no COPY the catalog can refuse.  Ids in use are never handed
        -- out again.  (rowid_seq only orders identical copies of a row.)
        PERFORM setval('decoupled.lifetime_id_seq',
                       greatest(max(o.lifetime_id), (SELECT s.last_value
                                                      FROM decoupled.lifetime_id_seq s)))
           FROM decoupled.catalog_objects o HAVING max(o.lifetime_id) IS NOT NULL;
        PERFORM setval(pg_get_serial_sequence('decoupled.catalog_replicas', 'replica_id'),
                       greatest(max(r.replica_id),
                                (SELECT s.last_value
                                   FROM decoupled.catalog_replicas_replica_id_seq s)))
           FROM decoupled.catalog_replicas r HAVING max(r.replica_id) IS NOT NULL;
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM decoupled.catalog_meta) THEN
        RAISE EXCEPTION 'cannot finish the restore: the dump brought no pg_decoupled catalog'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Restore the whole dump (its data section included) into a new database.';
    END IF;
    -- This server's clock may be behind the dumped one's: time goes on from
    -- the latest restored upper.
    -- (The uppers the oracle handed out, as extension/oracle.cpp seeds it.)
    PERFORM decoupled._next_timestamp(coalesce(max(f.upper), 0))
       FROM decoupled.catalog_frontiers f JOIN decoupled.catalog_objects o USING (lifetime_id)
      WHERE o.kind = 'table'
         OR (o.kind = 'materialized view' AND o.definition->'inputs' = '[]'::jsonb);
    DELETE FROM decoupled.catalog_restore;
    PERFORM decoupled._begin_catalog_change();
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION decoupled._subscribe_start(collection text, as_of bigint, up_to bigint,
                                           OUT lifetime_id bigint, OUT start_at bigint,
                                           OUT hold_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    r record := decoupled._protection_request(collection, as_of, 'subscribed to');
BEGIN
    -- Rows become JSON with the extension's rights: only through built-in
    -- conversions (a user's cast from their own type would run there).
    IF NOT decoupled._builtin_types((r.o).definition->'columns') THEN
        RAISE EXCEPTION 'cannot subscribe to % "%": it has columns of user-defined types',
                        (r.o).kind, (r.o).name
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Subscribe to a materialized view that casts them to built-in types.';
    END IF;
    start_at := r.frontier;
    -- The latest time, but not past the end asked for: up_to already
    -- reached gives its state just before it, and no change.
    IF as_of IS NULL AND up_to <= start_at THEN
        start_at := up_to - 1;
    END IF;
    IF start_at < greatest(r.since, r.bound) THEN
        RAISE EXCEPTION '% "%" cannot be subscribed to from %: its history there is compacted',
                        (r.o).kind, (r.o).name, start_at
            USING ERRCODE = 'snapshot_too_old',
                  DETAIL = format('Its compaction bound is %s.', greatest(r.since, r.bound));
    END IF;
    IF up_to <= start_at THEN
        RAISE EXCEPTION 'up_to must be beyond as_of'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('as_of is %s, up_to %s.', start_at, up_to);
    END IF;
    IF (up_to IS NULL OR up_to > r.upper)
       AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'a subscription that waits for new changes needs a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Its transaction''s snapshot would never show them.';
    END IF;
    lifetime_id := (r.o).lifetime_id;
    IF as_of IS NULL THEN
        SELECT p.hold_id, p.held_at INTO hold_id, start_at
          FROM decoupled._protect_latest(lifetime_id, start_at, true) p;
        IF up_to <= start_at THEN
            RAISE EXCEPTION 'up_to must be beyond as_of'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('as_of is %s, up_to %s.', start_at, up_to);
        END IF;
    ELSE
        hold_id := decoupled._protect(lifetime_id, start_at, true);
    END IF;
END
$$;

-- Drops refused while PostgreSQL objects outside the extension read the history.
CREATE FUNCTION decoupled._foreign_dependents(ids bigint[]) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH rels AS (
        SELECT r::oid AS rel
          FROM unnest(ids) i,
               unnest(ARRAY['plan', 'delta', 'before', 'history', 'history_cur', 'history_dead',
                            'state', 'dstate', 'cur', 'dead', 'stage', 'pending']) part,
               LATERAL to_regclass(decoupled._storage(i, part)) r
         WHERE r IS NOT NULL
        UNION
        SELECT o.relation FROM decoupled.catalog_objects o
         WHERE o.lifetime_id = ANY (ids) AND o.kind IN ('source', 'materialized view')
           AND o.relation IS NOT NULL),
    -- Each dependent with the relation it belongs to (a rule's view, a
    -- constraint's, trigger's, default's or policy's table).
    deps AS (
        SELECT CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 'pg_class'::regclass
                    ELSE d.classid END AS classid,
               CASE WHEN d.classid = 'pg_rewrite'::regclass THEN w.ev_class
                    ELSE d.objid END AS objid,
               CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 0 ELSE d.objsubid END AS objsubid,
               CASE d.classid
                    WHEN 'pg_class'::regclass THEN d.objid
                    WHEN 'pg_rewrite'::regclass THEN w.ev_class
                    WHEN 'pg_constraint'::regclass THEN c.conrelid
                    WHEN 'pg_trigger'::regclass THEN t.tgrelid
                    WHEN 'pg_attrdef'::regclass THEN a.adrelid
                    WHEN 'pg_policy'::regclass THEN p.polrelid END AS of_rel
          FROM pg_depend d
          LEFT JOIN pg_rewrite w ON d.classid = 'pg_rewrite'::regclass AND w.oid = d.objid
          LEFT JOIN pg_constraint c ON d.classid = 'pg_constraint'::regclass AND c.oid = d.objid
          LEFT JOIN pg_trigger t ON d.classid = 'pg_trigger'::regclass AND t.oid = d.objid
          LEFT JOIN pg_attrdef a ON d.classid = 'pg_attrdef'::regclass AND a.oid = d.objid
          LEFT JOIN pg_policy p ON d.classid = 'pg_policy'::regclass AND p.oid = d.objid
         WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid IN (SELECT rel FROM rels)
           AND d.deptype = 'n')
    SELECT string_agg(DISTINCT pg_describe_object(x.classid, x.objid, x.objsubid), ', ')
      FROM deps x
     WHERE (x.of_rel IS NULL
            OR NOT (x.of_rel IN (SELECT rel FROM rels)
                    OR x.of_rel IN (SELECT c.oid FROM pg_class c
                                     WHERE c.relnamespace = 'decoupled_storage'::regnamespace)
                    OR x.of_rel IN (SELECT o.relation FROM decoupled.catalog_objects o
                                     WHERE o.relation IS NOT NULL)))
       AND NOT EXISTS (SELECT FROM pg_depend e
                        WHERE e.classid = x.classid AND e.objid = x.objid AND e.deptype = 'e')
$$;

CREATE FUNCTION decoupled._refuse_foreign_dependents(what text, ids bigint[],
                                                     verb text DEFAULT 'drop')
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_list text := decoupled._foreign_dependents(ids);
BEGIN
    IF v_list IS NOT NULL THEN
        RAISE EXCEPTION 'cannot % % because other objects depend on it', verb, what
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Reading its history: ' || v_list || '.',
                  HINT = 'Drop them first, or use decoupled.drop(name, cascade => true) to drop '
                         'them with its history.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION decoupled._foreign_dependents(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._refuse_foreign_dependents(text, bigint[], text) FROM PUBLIC;

-- No relation of the catalog in a temporary schema; an empty search_path says so.
CREATE OR REPLACE FUNCTION decoupled._check_create_in(schema text, what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF schema IS NULL THEN
        RAISE EXCEPTION 'no schema has been selected to create in'
            USING ERRCODE = 'invalid_schema_name', DETAIL = what,
                  HINT = 'Set search_path to a schema that exists.';
    END IF;
    -- The relation would go with the session while the catalog keeps its
    -- object running (and a dump would name a relation that is gone).
    IF EXISTS (SELECT FROM pg_namespace n
                WHERE n.nspname = schema
                  AND (n.oid = pg_my_temp_schema() OR pg_is_other_temp_schema(n.oid))) THEN
        RAISE EXCEPTION 'cannot create the relation of a collection or sink in temporary schema "%"',
                        schema
            USING ERRCODE = 'feature_not_supported', DETAIL = what,
                  HINT = 'Put a permanent schema first in search_path.';
    END IF;
    -- The name as it is (the text form takes no identifier: quotes would be
    -- part of the name).
    IF NOT has_schema_privilege(decoupled._caller(), schema, 'CREATE') THEN
        RAISE EXCEPTION 'permission denied for schema %', schema
            USING ERRCODE = 'insufficient_privilege', DETAIL = what;
    END IF;
END
$$;

-- DROP ... CASCADE takes what reads a view's relation at once.
CREATE OR REPLACE FUNCTION decoupled._drop_public_view(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lock text;
BEGIN
    IF o.relation IS NULL OR o.kind NOT IN ('source', 'materialized view') THEN
        RETURN;
    END IF;
    -- Only this collection's own view: once it is gone, its OID may be
    -- another relation's.
    IF NOT EXISTS (SELECT FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid
                    WHERE w.ev_class = o.relation
                      AND d.refobjid = to_regclass(decoupled._storage(o.lifetime_id, 'history'))) THEN
        RETURN;
    END IF;
    -- CASCADE: a drop without cascade was refused while anything outside
    -- the extension read it (_refuse_foreign_dependents), so what goes
    -- with it here was asked for, and goes now, as PostgreSQL's DROP ...
    -- CASCADE takes it, not at finalization.
    v_lock := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '10ms', true);
    BEGIN
        EXECUTE format('DROP VIEW IF EXISTS %s CASCADE', o.relation::regclass);
    EXCEPTION WHEN lock_not_available THEN
        NULL;  -- a reader holds it: finalization takes it
    END;
    PERFORM set_config('lock_timeout', v_lock, true);
END
$$;

-- A subscription reads rows whatever their columns are named.
CREATE OR REPLACE FUNCTION decoupled._subscribe_batch(lifetime_id bigint, from_ts bigint, to_ts bigint,
                                           snapshot_at bigint)
RETURNS TABLE (mz_timestamp bigint, mz_diff bigint, data jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    id     bigint := _subscribe_batch.lifetime_id;
    v_cols text := decoupled._cols(id);
    v_sql  text;
    v_rel  oid;
    v_kind text;
    v_name text;
BEGIN
    -- (c.*: the row, even where a column is named c.)
    -- Called only by subscribe(), whose caller may have lost the privilege
    -- since the subscription started.
    SELECT o.relation, o.kind, o.name INTO v_rel, v_kind, v_name
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = id;
    IF v_rel IS NULL OR NOT decoupled._caller_can_select(v_rel) THEN
        RAISE EXCEPTION 'permission denied for % "%"', v_kind, v_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    v_sql := decoupled._changes_sql(id, snapshot_at IS NOT NULL);
    RETURN QUERY EXECUTE format(
        'SELECT mz_ts, sum(mz_diff)::bigint, mz_row FROM ( '
        '  SELECT c.mz_ts, c.mz_diff, to_jsonb(c.*) - ''mz_ts'' - ''mz_diff'' AS mz_row '
        '    FROM (%s) c(mz_ts, mz_diff, %s)) x '
        ' GROUP BY mz_ts, mz_row HAVING sum(mz_diff) <> 0 ORDER BY mz_ts, mz_row', v_sql, v_cols)
        USING from_ts, to_ts, snapshot_at;
    -- Read first, checked after: since only grows, and history goes in the
    -- transaction that moves it.  A subscription that lost its protection
    -- (its incarnation was retired) fails instead of missing changes.
    IF (SELECT f.since FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = id)
       > coalesce(snapshot_at, from_ts - 1) THEN
        RAISE EXCEPTION '% "%" was compacted past the subscription''s frontier', v_kind, v_name
            USING ERRCODE = 'snapshot_too_old',
                  HINT = 'Its hold was released (its adapter incarnation was retired); subscribe again.';
    END IF;
END
$$;

-- A process silent for 30 s is stalled.
CREATE OR REPLACE VIEW decoupled.cluster_replicas AS
    SELECT r.cluster::text, r.name::text AS replica, d.name::text AS deployment,
           i.incarnation, i.pid,
           CASE WHEN i.status IN ('starting', 'running')
                     AND coalesce(i.heartbeat_at, i.started_at)
                         < clock_timestamp() - interval '30 seconds'
                THEN 'stalled' ELSE i.status END AS status,
           r.replica_id, i.host, r.external, i.heartbeat_at
      FROM decoupled.catalog_replicas r
      CROSS JOIN decoupled.catalog_deployments d
      LEFT JOIN decoupled.catalog_replica_incarnations i
             ON i.replica_id = r.replica_id AND i.deployment = d.name
            AND i.retired_at IS NULL
     WHERE d.state <> 'retired';

CREATE OR REPLACE VIEW decoupled.replica_statuses AS
    SELECT r.cluster::text AS name, r.name::text AS replica, i.deployment::text,
           i.incarnation,
           CASE WHEN s.silent THEN 'stalled' ELSE i.status END AS status,
           CASE WHEN s.silent
                THEN format('replica has not reported for %s s',
                            floor(extract(epoch FROM clock_timestamp()
                                                     - coalesce(i.heartbeat_at, i.started_at))))
                ELSE i.error END AS error,
           CASE WHEN s.silent
                THEN 'It is hung, gone, or busy in one long step; an external replica must be '
                     'started again by whoever runs it.'
                ELSE i.hint END AS hint,
           coalesce(i.heartbeat_at, i.started_at) AS updated_at
      FROM decoupled.catalog_replica_incarnations i
      JOIN decoupled.catalog_replicas r USING (replica_id)
      CROSS JOIN LATERAL (SELECT i.status IN ('starting', 'running')
                                 AND coalesce(i.heartbeat_at, i.started_at)
                                     < clock_timestamp() - interval '30 seconds' AS silent) s
     WHERE i.retired_at IS NULL;


-- Holds and subscriptions at the latest time survive a bound published meanwhile.
CREATE OR REPLACE FUNCTION decoupled._protection_request(collection text, as_of bigint, verb text,
                                              OUT o decoupled.catalog_objects,
                                              OUT frontier bigint, OUT since bigint,
                                              OUT upper bigint, OUT bound bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; only collections can be %', o.name, verb
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NULL OR NOT decoupled._caller_can_select(o.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Protecting history needs the privilege to read it.';
    END IF;
    IF as_of < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', as_of
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One statement, one snapshot: read apart, a bound published in
    -- between could pass the latest time read before it.
    SELECT f.since, f.upper, b.bound INTO since, upper, bound
      FROM decoupled.catalog_frontiers f
      LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE f.lifetime_id = (o).lifetime_id;
    -- The latest readable time; with no retained history the bound may
    -- have reached the upper, and the hold is at it (readable from the
    -- next tick on).
    frontier := coalesce(as_of, greatest(since, bound, upper - 1));
END
$$;

CREATE FUNCTION decoupled._protect_latest(lifetime_id bigint, frontier bigint, subscription boolean,
                                          OUT hold_id bigint, OUT held_at bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    attempt integer := 1;
BEGIN
    held_at := frontier;
    LOOP
        BEGIN
            hold_id := decoupled._protect(_protect_latest.lifetime_id, held_at, subscription);
            RETURN;
        EXCEPTION WHEN check_violation THEN
            IF attempt >= 10 AND current_setting('transaction_isolation') <> 'read committed' THEN
                RAISE EXCEPTION 'the latest time this transaction can read of collection "%" is compacted',
                                (SELECT o.name FROM decoupled.catalog_objects o
                                  WHERE o.lifetime_id = _protect_latest.lifetime_id)
                    USING ERRCODE = 'check_violation',
                          DETAIL = format('Its snapshot sees the collection up to %s; compaction '
                                          'has passed that time since.', held_at),
                          HINT = 'Take the hold in a new transaction, or under READ COMMITTED.';
            ELSIF attempt >= 10 THEN
                RAISE;
            END IF;
        END;
        attempt := attempt + 1;
        SELECT greatest(f.since, b.bound, f.upper - 1) INTO held_at
          FROM decoupled.catalog_frontiers f
          LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
         WHERE f.lifetime_id = _protect_latest.lifetime_id;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION decoupled._protect_latest(bigint, bigint, boolean) FROM PUBLIC;

-- An append may not give a registered table's key a second current row.
CREATE FUNCTION decoupled._refuse_duplicate_key(o decoupled.catalog_objects, expected_upper bigint)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_names text;
    v_c     text;
    v_n     text;
    v_null  text;
    v_p     text;
    v_dup   text;
    v_cur   text := decoupled._storage(o.lifetime_id, 'cur');
BEGIN
    SELECT string_agg(format('%I', k), ', ' ORDER BY n), string_agg(format('c.%I', k), ', ' ORDER BY n),
           string_agg(format('n.%I', k), ', ' ORDER BY n),
           string_agg(format('n.%I IS NULL', k), ' OR ' ORDER BY n),
           string_agg(format('p.%I', k), ', ' ORDER BY n)
      INTO v_names, v_c, v_n, v_null, v_p
      FROM jsonb_array_elements_text(o.definition->'key') WITH ORDINALITY AS x(k, n);
    EXECUTE format('SELECT ROW(%1$s)::text FROM %2$s n WHERE n.mz_ts >= $1 AND (%3$s) LIMIT 1',
                   v_n, v_cur, v_null)
       INTO v_dup USING expected_upper;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'append would give registered table "%" a row without a key', o.name
            USING ERRCODE = 'not_null_violation',
                  DETAIL = format('Its primary key (%s) is %s; nothing was appended.', v_names, v_dup);
    END IF;
    -- Current rows, and the changes captured but not ticked yet (a row the
    -- table got before the append, which its next tick makes current).
    EXECUTE format('WITH appended AS MATERIALIZED (SELECT %4$s FROM %3$s n WHERE n.mz_ts >= $1) '
                   'SELECT ROW(%1$s)::text FROM ('
                   '  SELECT %2$s, 1::bigint AS mz_d FROM %3$s c '
                   '   WHERE (%2$s) IN (SELECT * FROM appended) '
                   '  UNION ALL '
                   '  SELECT %5$s, p.mz_diff FROM %6$s p '
                   '   WHERE (%5$s) IN (SELECT * FROM appended)) x '
                   ' GROUP BY %1$s HAVING sum(mz_d) > 1 LIMIT 1',
                   v_names, v_c, v_cur, v_n, v_p, decoupled._storage(o.lifetime_id, 'pending'))
       INTO v_dup USING expected_upper;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'append would give registered table "%" two current rows with key (%)=%',
                        o.name, v_names, v_dup
            USING ERRCODE = 'unique_violation',
                  DETAIL = 'Its captured updates and deletes find a row by its primary key, '
                           'which must name at most one current row; nothing was appended.',
                  HINT = 'Retract the current row with that key in the same append.';
    END IF;
END
$$;

REVOKE ALL ON FUNCTION decoupled._refuse_duplicate_key(decoupled.catalog_objects, bigint) FROM PUBLIC;

-- The output's frontier row, once the caller checked its write authority
-- in this transaction (_lock_output; replica_maintain_many, once for all
-- its views): its upper.
CREATE FUNCTION decoupled._lock_output_row(lifetime_id bigint, kind text)
RETURNS bigint
-- lock_timeout: the frontier row a moment at most.  A sibling replica's
-- step holds it that long (its upper is then returned); a session that
-- holds it longer (an open apply_compaction()) fails this step with 55P03,
-- which the replica tries again shortly, as busy storage.
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '200ms' AS $$
#variable_conflict use_column
DECLARE
    v_upper bigint;
BEGIN
    -- The objects row without waiting: a drop of this output in a
    -- transaction still open holds it, and a replica waiting for that
    -- transaction would hold up every other object it maintains.
    SELECT f.upper INTO v_upper FROM decoupled.catalog_frontiers f
      JOIN decoupled.catalog_objects c USING (lifetime_id)
     WHERE f.lifetime_id = _lock_output_row.lifetime_id AND c.dropped_at IS NULL
       AND c.kind = _lock_output_row.kind
       FOR UPDATE OF f FOR SHARE OF c SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT FROM decoupled.catalog_objects c
                              WHERE c.lifetime_id = _lock_output_row.lifetime_id
                                AND c.dropped_at IS NULL) THEN
        RAISE EXCEPTION '% % is being changed by another transaction', kind, lifetime_id
            USING ERRCODE = 'ZD004',  -- busy: tried again shortly (extension/write_locks.hpp)
                  DETAIL = 'A transaction that drops or alters it has not ended yet.';
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% % was dropped', kind, lifetime_id
            USING ERRCODE = 'ZD002',  -- dropped meanwhile: the protocol's own class
                  DETAIL = 'The catalog dropped it after the replica last read it.';
    END IF;
    RETURN v_upper;
END
$$;

REVOKE ALL ON FUNCTION decoupled._lock_output_row(bigint, text) FROM PUBLIC;

-- A drop in an open transaction never holds up a replica's other objects.
CREATE OR REPLACE FUNCTION decoupled._lock_output(incarnation bigint, lifetime_id bigint, kind text)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    i := decoupled._live_incarnation(_lock_output.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    RETURN decoupled._lock_output_row(_lock_output.lifetime_id, _lock_output.kind);
END
$$;


-- A sink without snapshot over an input with no history yet writes its first changes.
CREATE OR REPLACE FUNCTION decoupled.replica_sink(incarnation bigint, lifetime_id bigint,
                                       expected_upper bigint,
                                       OUT upper bigint, OUT caught_up boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET array_nulls = on SET xmloption = content
AS $$
#variable_conflict use_column
DECLARE
    o        decoupled.catalog_objects;
    id       bigint := replica_sink.lifetime_id;
    v_input  bigint;
    v_as_of  bigint;
    v_target bigint;
    v_from   bigint;
    v_cols   text;
    v_sql    text;
BEGIN
    upper := decoupled._lock_output(replica_sink.incarnation, id, 'sink');
    caught_up := false;
    IF upper <> expected_upper THEN
        RETURN;
    END IF;
    SELECT * INTO o FROM decoupled.catalog_objects c WHERE c.lifetime_id = id;
    v_input := (o.definition->>'input')::bigint;
    v_as_of := (o.definition->>'as_of')::bigint;
    SELECT f.upper INTO v_target FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = v_input;
    -- The owner must still be allowed to read the input (a revoked
    -- privilege stalls the sink), and the table must still be the sink's
    -- own: the extension's, addressed by OID, so no trigger runs here.
    IF NOT coalesce((SELECT has_table_privilege((o.definition->>'owner')::oid, i.relation, 'SELECT')
                       FROM decoupled.catalog_objects i
                      WHERE i.lifetime_id = v_input), false) THEN
        RAISE EXCEPTION 'permission denied for the input of sink "%"', o.name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its owner can no longer read it.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_class c JOIN pg_extension e ON e.extowner = c.relowner
                    WHERE c.oid = o.relation AND e.extname = 'pg_decoupled') THEN
        RAISE EXCEPTION 'the table of sink "%" is gone or no longer the extension''s', o.name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    caught_up := true;
    IF v_target <= upper THEN
        RETURN;
    END IF;

    v_cols := decoupled._cols(v_input);
    v_from := upper;
    IF upper = v_as_of AND NOT ((o.definition->>'before_history')::boolean IS TRUE
                                AND NOT (o.definition->>'snapshot')::boolean) THEN
        v_from := v_as_of + 1;  -- later changes only: the state at as_of is the snapshot
    END IF;
    v_sql := decoupled._changes_sql(v_input,
                                    upper = v_as_of AND (o.definition->>'snapshot')::boolean);
    -- Consolidated per (time, row): a row's copies become one line.  The
    -- mz_ names are reserved, so they cannot clash with the columns.
    EXECUTE format(
        'INSERT INTO %1$s (mz_timestamp, mz_diff, %3$s) '
        'SELECT mz_ts, mz_net, %3$s FROM ( '
        '  SELECT DISTINCT ON (mz_ts, mz_key) *, '
        '         sum(mz_diff) OVER (PARTITION BY mz_ts, mz_key) AS mz_net '
        '    FROM (SELECT c.*, ROW(%4$s)::text AS mz_key '
        '            FROM (%5$s) c(mz_ts, mz_diff, %3$s)) x '
        '   ORDER BY mz_ts, mz_key) y '
        ' WHERE mz_net <> 0 ORDER BY mz_ts, mz_key',
        o.relation::regclass, NULL, v_cols, decoupled._cols(v_input, 'c.'), v_sql)
        USING v_from, v_target, v_as_of;
    UPDATE decoupled.catalog_frontiers f SET upper = v_target, changed_at = now()
     WHERE f.lifetime_id = id;
    PERFORM decoupled._notify_upper_at_commit();
    upper := v_target;
    PERFORM decoupled._advance_requirements(id, decoupled._required_frontier(v_as_of, upper));
END
$$;


-- Indexes for equality look-ups by wide keys, of types whose values hash.
CREATE FUNCTION decoupled._hashable(type oid) RETURNS boolean
    LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_hashable';
REVOKE ALL ON FUNCTION decoupled._hashable(oid) FROM PUBLIC;
CREATE FUNCTION decoupled._equality_index_columns(rel regclass, keys text,
                                                  OUT fixed text, OUT wide text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(k.col, ', ' ORDER BY k.n) FILTER (WHERE t.typlen > 0),
           (array_agg(k.col ORDER BY k.n)
              FILTER (WHERE t.typlen < 0 AND decoupled._hashable(t.oid)))[1]
      FROM regexp_matches(keys, '("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)', 'g')
           WITH ORDINALITY AS m(g, n)
     CROSS JOIN LATERAL (SELECT m.g[1] AS col, m.n) k
      JOIN pg_attribute a ON a.attrelid = rel AND quote_ident(a.attname) = k.col
                         AND a.attnum > 0 AND NOT a.attisdropped
      JOIN pg_type t ON t.oid = a.atttypid
$$;

REVOKE ALL ON FUNCTION decoupled._equality_index_columns(regclass, text) FROM PUBLIC;

-- WAL-captured tables one of whose changes capture could not write, again
-- and again (a row an append retracted that a later update needs, say; a
-- domain's CHECK that now fails).  Such a table is set aside so that the
-- others' capture goes on: from a pass that commits its row here with
-- resynced_lsn NULL, capture skips every change of it and ticks leave it
-- alone (its upper stays; decoupled.object_statuses shows it stalled), until
-- the worker has taken it again from its contents (_capture_resync_table):
-- then capture skips its changes in transactions that committed before
-- resynced_lsn, which those contents hold.  A row goes once capture has
-- passed resynced_lsn.  Runtime state, not dumped: a restore takes every
-- table again anyway.
CREATE TABLE decoupled.capture_resyncs (
    lifetime_id  bigint PRIMARY KEY
                 REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    resynced_lsn pg_lsn,
    error        text NOT NULL,
    failed_at    timestamptz NOT NULL DEFAULT now(),
    resynced_at  timestamptz
);

REVOKE ALL ON decoupled.capture_resyncs FROM PUBLIC;

-- Before the capture worker reads a registered table itself, under a lock
-- that keeps it so: it is still an ordinary table (_check_relation_ddl
-- refuses an ON SELECT rule on it, which would make it a view whose query,
-- its owner's, would run with the worker's rights).
CREATE FUNCTION decoupled._assert_ordinary_table(rel oid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = rel AND c.relkind = 'r') THEN
        RAISE EXCEPTION 'registered table % is no longer an ordinary table', rel::regclass
            USING ERRCODE = 'wrong_object_type';
    END IF;
END
$$;

REVOKE ALL ON FUNCTION decoupled._assert_ordinary_table(oid) FROM PUBLIC;

-- Sets aside a WAL-captured table whose change capture could not write
-- (capture_resyncs), in the capture pass that skips its changes; returns
-- its name.
CREATE FUNCTION decoupled._capture_set_aside(id bigint, error text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- Not 'WAL capture …': that is how _record_capture_health tells a stall
    -- of capture as a whole.
    v_error text := 'capture could not take a change of this table (' || error
                    || '); it is taken again from its contents';
BEGIN
    INSERT INTO decoupled.capture_resyncs AS r (lifetime_id, resynced_lsn, error)
    VALUES (id, NULL, _capture_set_aside.error)
    ON CONFLICT (lifetime_id) DO UPDATE
       SET resynced_lsn = NULL, error = EXCLUDED.error, failed_at = now(), resynced_at = NULL;
    PERFORM decoupled._table_health(id, 'stalled', v_error);
    UPDATE decoupled.table_health h
       SET hint = 'Capture of the other tables goes on; this one is taken again from its '
                  'contents as soon as its writers let it (a lock for a moment).'
     WHERE h.lifetime_id = id;
    RETURN (SELECT o.name::text FROM decoupled.catalog_objects o WHERE o.lifetime_id = id);
END
$$;

REVOKE ALL ON FUNCTION decoupled._capture_set_aside(bigint, text) FROM PUBLIC;

-- Collection `id`'s pending changes get the difference between table
-- `rel`'s contents and the collection (its current rows and what is
-- pending): what taking the table again from its contents writes.
CREATE FUNCTION decoupled._capture_take_contents(id bigint, rel oid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('INSERT INTO %s %s', decoupled._storage(id, 'pending'),
                   decoupled._capture_held_negated(id));
    -- The table by a scan, not a query (_take_table_rows): this worker is a
    -- superuser, and planning a query over the table runs its owner's code.
    PERFORM decoupled._take_table_rows(id, rel, 1);
END
$$;

REVOKE ALL ON FUNCTION decoupled._capture_take_contents(bigint, oid) FROM PUBLIC;

-- Takes a table set aside (_capture_set_aside) again from its contents, as
-- _capture_resync does for all after a lost slot: with its writers
-- excluded, its pending changes get the difference between its contents
-- and its collection, and capture skips its changes in every transaction
-- that committed before this point.  No tick time lies between the change
-- capture failed on and this point (ticks left the table alone), so its
-- history at every tick is still the table as it was.  NULL when writers
-- kept the table past 50 ms (the worker tries again a second later) or the
-- table is no longer captured from the WAL (its row goes).
CREATE FUNCTION decoupled._capture_resync_table(id bigint) RETURNS pg_lsn
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_rel  oid;
    v_lsn  pg_lsn;
    v_lock text := current_setting('lock_timeout');
BEGIN
    SELECT c.relation INTO v_rel FROM decoupled.capture_relations c
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE c.lifetime_id = id AND o.dropped_at IS NULL;
    IF v_rel IS NULL THEN
        DELETE FROM decoupled.capture_resyncs r WHERE r.lifetime_id = id;
        RETURN NULL;
    END IF;
    BEGIN
        -- Each try holds up capture of every table and the table's new
        -- writers while it waits: briefly (the worker tries once a second).
        PERFORM set_config('lock_timeout', '50ms', true);
        EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', v_rel::regclass);
        -- What this writes into pending, taken from the table's contents,
        -- no slot can deliver again: it must survive a crash by itself.
        IF NOT decoupled._set_pending_logged(id, true, false) THEN
            RAISE lock_not_available;
        END IF;
        PERFORM set_config('lock_timeout', v_lock, true);
    EXCEPTION WHEN lock_not_available THEN
        RETURN NULL;
    END;
    PERFORM decoupled._assert_ordinary_table(v_rel);
    v_lsn := pg_current_wal_insert_lsn();
    PERFORM decoupled._capture_take_contents(id, v_rel);
    UPDATE decoupled.capture_resyncs r SET resynced_lsn = v_lsn, resynced_at = now()
     WHERE r.lifetime_id = id;
    PERFORM decoupled._table_health(id, 'running', NULL);
    RETURN v_lsn;
END
$$;

REVOKE ALL ON FUNCTION decoupled._capture_resync_table(bigint) FROM PUBLIC;

-- NULL arguments are refused (22004), not answered with NULL: the two
-- waits are no longer STRICT.
CREATE OR REPLACE FUNCTION decoupled.wait_for_controller(
    catalog_version bigint, timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_wait_for_controller';
CREATE OR REPLACE FUNCTION decoupled.wait_for_upper(collection text, ts bigint,
                                                    timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_wait_for_upper';

-- A row's text in UTC, as history's writers print it: the key of a row a
-- step stages while computing in its view's TimeZone (written_plan.cpp).
CREATE FUNCTION decoupled._row_text(record) RETURNS text
    LANGUAGE C STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_row_text';
REVOKE ALL ON FUNCTION decoupled._row_text(record) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION decoupled._row_text(record) TO PUBLIC;

-- stop_adapter() ends the adapter's process at once (a start right after
-- makes a new incarnation, not nothing).
CREATE OR REPLACE FUNCTION decoupled.stop_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := decoupled._adapter_change(stop_adapter.name);
BEGIN
    INSERT INTO decoupled.catalog_adapter_stops (adapter, deployment)
    VALUES (stop_adapter.name, v_deployment) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE NOTICE 'adapter "%" is already stopped', stop_adapter.name;
        RETURN;
    END IF;
    -- Its process ends now, not when the controller next looks: a
    -- start_adapter() right after would otherwise undo the stop before the
    -- controller saw it, and the old incarnation would go on.  The
    -- controller starts none while the stop stands, and a new incarnation
    -- once it is lifted.
    PERFORM pg_terminate_backend(s.pid) FROM decoupled.supervision() s
     WHERE s.kind = 'adapterd' AND s.name = stop_adapter.name
       AND s.deployment = v_deployment AND s.pid > 0;
END
$$;


-- A replica step's hard deadline and advisory-lock hygiene
-- (extension/step_deadline.cpp); replica_maintain, replica_maintain_many and
-- replica_prewarm call it.
CREATE FUNCTION decoupled._bound_step() RETURNS void
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_bound_step';
REVOKE ALL ON FUNCTION decoupled._bound_step() FROM PUBLIC;

-- Unlogged pending changes (C14.1, docs/architecture.md "WAL capture").
-- What capture writes into a WAL-captured table's pending changes is
-- already in the WAL: the slot can deliver it again.  So a table's pending
-- relation is made UNLOGGED once a tick leaves it empty (writes to it then
-- log nothing: capture's inserts and the tick's deletes were a fifth of
-- the WAL under writers), and the slot is confirmed only up to what ticks
-- have moved into history.  A crash empties unlogged relations; capture
-- then decodes each such table again from the last tick that moved it.
-- How far that is, per table: capture_ticked.ticked_lsn — capture's
-- position as the last tick of the WAL-captured tables saw it; every
-- change committed before it is in history, for every table that tick
-- moved — unless the table has a row in capture_lagging: a table a tick
-- did not move (it failed, or was set aside) keeps the position of the
-- last tick that did.  Both are written by ticks
-- (extension/append_core.cpp).
CREATE TABLE decoupled.capture_ticked (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    ticked_lsn pg_lsn NOT NULL,
    ticked_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE decoupled.capture_lagging (
    lifetime_id bigint PRIMARY KEY
                REFERENCES decoupled.capture_relations (lifetime_id) ON DELETE CASCADE,
    ticked_lsn  pg_lsn NOT NULL
);

-- One row while the unlogged pending relations hold what capture wrote
-- into them: a crash empties this table with them.  The capture worker
-- that finds it empty decodes the unlogged tables again from their ticked
-- position, and writes the row with what it decoded; ticks unlog no
-- pending relation until the row is there.
CREATE UNLOGGED TABLE decoupled.capture_unlogged_intact (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row)
);

-- Every WAL-captured table whose pending relation is unlogged, and the
-- position capture must decode it again from after a crash
-- (capture_ticked, capture_lagging).  The capture worker confirms the slot
-- no further than the least of them.
CREATE FUNCTION decoupled._unlogged_pending(OUT lifetime_id bigint, OUT ticked_lsn pg_lsn)
RETURNS SETOF record
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.lifetime_id, coalesce(l.ticked_lsn, k.ticked_lsn, '0/0'::pg_lsn)
      FROM decoupled.capture_relations c
      JOIN pg_class p ON p.relname = 'c' || c.lifetime_id || '_pending'
                     AND p.relnamespace = 'decoupled_storage'::regnamespace
      LEFT JOIN decoupled.capture_lagging l ON l.lifetime_id = c.lifetime_id
      LEFT JOIN decoupled.capture_ticked k ON true
     WHERE p.relpersistence = 'u'
$$;

-- Makes collection `id`'s pending relation logged (`logged`) or unlogged,
-- under an ACCESS EXCLUSIVE lock on it: without waiting for it when
-- `nowait` (false: another transaction holds it, nothing changed).  Making
-- it logged writes its rows to the WAL: from then on they are as durable
-- as the position capture recorded with them.
CREATE FUNCTION decoupled._set_pending_logged(id bigint, logged boolean, nowait boolean)
RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_pend    regclass := to_regclass(decoupled._storage(id, 'pending'));
    v_wanted  "char" := CASE WHEN logged THEN 'p' ELSE 'u' END;
BEGIN
    IF v_pend IS NULL OR (SELECT c.relpersistence FROM pg_class c WHERE c.oid = v_pend) = v_wanted
    THEN
        RETURN true;
    END IF;
    BEGIN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE%s', v_pend,
                       CASE WHEN nowait THEN ' NOWAIT' ELSE '' END);
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    EXECUTE format('ALTER TABLE %s SET %s', v_pend,
                   CASE WHEN logged THEN 'LOGGED' ELSE 'UNLOGGED' END);
    IF logged THEN
        DELETE FROM decoupled.capture_lagging l WHERE l.lifetime_id = id;
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON decoupled.capture_ticked, decoupled.capture_lagging,
              decoupled.capture_unlogged_intact FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._unlogged_pending() FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._set_pending_logged(bigint, boolean, boolean) FROM PUBLIC;

-- The rows of a registered table (ordinary, read ONLY) into its
-- collection's pending changes with mz_diff `diff`, or into its cur at
-- `ts`; returns how many.  Read by a scan of its heap, never by a query:
-- planning a query over the table runs its owner's code (the constant
-- calls of its index and statistics expressions, folded by the planner),
-- and the callers read with the extension's rights
-- (extension/table_contents.cpp).
CREATE FUNCTION decoupled._take_table_rows(id bigint, source oid, diff bigint,
                                           ts bigint DEFAULT NULL) RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_take_table_rows';
REVOKE ALL ON FUNCTION decoupled._take_table_rows(bigint, oid, bigint, bigint) FROM PUBLIC;

-- The TRUNCATE capture reads the table by a scan (_take_table_rows).
CREATE OR REPLACE FUNCTION decoupled._capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET decoupled.as_of = '' AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format('INSERT INTO %s SELECT 1, n.* FROM decoupled_new n', TG_ARGV[0]);
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format('INSERT INTO %s SELECT -1, o.* FROM decoupled_old o', TG_ARGV[0]);
    ELSIF TG_OP = 'UPDATE' THEN
        EXECUTE format('INSERT INTO %s SELECT -1, o.* FROM decoupled_old o '
                       'UNION ALL SELECT 1, n.* FROM decoupled_new n', TG_ARGV[0]);
    ELSIF TG_OP = 'TRUNCATE' THEN
        -- TRUNCATE removes every row, including rows committed after an older
        -- snapshot: only a fresh snapshot sees exactly what it removes.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'cannot truncate registered table "%" at isolation level %',
                            TG_RELID::regclass, current_setting('transaction_isolation')
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Truncate it in a READ COMMITTED transaction, or use DELETE.';
        END IF;
        -- Read by a scan (_take_table_rows): this function runs with the
        -- extension's rights.  Its argument is pending's name, c<id>_pending.
        PERFORM decoupled._take_table_rows(
                    substring(TG_ARGV[0] FROM '\.c([0-9]+)_pending$')::bigint, TG_RELID, -1);
    END IF;
    RETURN NULL;
END
$$;

-- Incarnations above every one this server handed out in an earlier life
-- of the extension (a catalog dropped and created again restarts the
-- sequence, and sessions of the dropped one may still be attached).
CREATE FUNCTION decoupled._claim_incarnation(candidate bigint) RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_claim_incarnation';
CREATE FUNCTION decoupled._next_incarnation() RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_next    bigint := nextval('decoupled.incarnation_seq');
    v_claimed bigint := decoupled._claim_incarnation(v_next);
BEGIN
    IF v_claimed <> v_next THEN
        PERFORM setval('decoupled.incarnation_seq', v_claimed);
    END IF;
    RETURN v_claimed;
END
$$;
REVOKE ALL ON FUNCTION decoupled._claim_incarnation(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._next_incarnation() FROM PUBLIC;
CREATE OR REPLACE FUNCTION decoupled.replica_start(replica_id bigint, deployment text, pid integer,
                                        host text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
BEGIN
    PERFORM FROM decoupled.catalog_replicas r WHERE r.replica_id = replica_start.replica_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica % does not exist', replica_start.replica_id
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM FROM decoupled.catalog_deployments d
     WHERE d.name = replica_start.deployment AND d.state <> 'retired';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'deployment "%" does not exist or is retired', replica_start.deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    UPDATE decoupled.catalog_replica_incarnations i
       SET retired_at = now(), status = 'stopped'
     WHERE i.replica_id = replica_start.replica_id AND i.deployment = replica_start.deployment
       AND i.retired_at IS NULL;
    BEGIN
        INSERT INTO decoupled.catalog_replica_incarnations
               (replica_id, deployment, incarnation, pid, host, status, heartbeat_at)
        VALUES (replica_start.replica_id, replica_start.deployment,
                decoupled._next_incarnation(), replica_start.pid, replica_start.host,
                'starting', now())
        RETURNING incarnation INTO v_incarnation;
    EXCEPTION WHEN unique_violation THEN
        -- Two processes started this replica at once; the other registered
        -- first and is the live incarnation.
        RAISE EXCEPTION 'replica % was started by another process at the same time',
                        replica_start.replica_id
            USING ERRCODE = 'ZD003',  -- lost race: the protocol's own class
                  DETAIL = 'Only one incarnation of a replica is live in a deployment.';
    END;
    RETURN v_incarnation;
END
$$;
CREATE OR REPLACE FUNCTION decoupled._adapter_start(adapter text, deployment text, pid integer)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_incarnation bigint;
BEGIN
    PERFORM FROM decoupled.catalog_adapters a
     WHERE a.name = _adapter_start.adapter AND a.deployment = _adapter_start.deployment FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"', adapter, deployment
            USING ERRCODE = 'undefined_object';
    END IF;
    IF EXISTS (SELECT FROM decoupled.catalog_adapter_stops s
                WHERE s.adapter = _adapter_start.adapter AND s.deployment = _adapter_start.deployment)
    THEN
        RAISE EXCEPTION 'adapter "%" is stopped', adapter
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE decoupled.catalog_adapter_incarnations i SET retired_at = now(), status = 'stopped'
     WHERE i.adapter = _adapter_start.adapter AND i.deployment = _adapter_start.deployment
       AND i.retired_at IS NULL;
    BEGIN
        INSERT INTO decoupled.catalog_adapter_incarnations
               (adapter, deployment, incarnation, pid, status, heartbeat_at)
        VALUES (adapter, deployment, decoupled._next_incarnation(), pid, 'running', now())
        RETURNING incarnation INTO v_incarnation;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'adapter "%" was started by another process at the same time', adapter
            USING ERRCODE = 'ZD003',  -- lost race: the protocol's own class
                  DETAIL = 'Only one incarnation of an adapter is live in a deployment.';
    END;
    RETURN v_incarnation;
END
$$;

-- A retired incarnation's session holds are not listed.
CREATE OR REPLACE VIEW decoupled.session_holds AS
    SELECT s.hold_id, s.session_pid, i.adapter::text, i.deployment::text, s.incarnation,
           o.name::text AS collection, s.frontier, s.subscription
      FROM decoupled._shared_holds() s
      JOIN decoupled.catalog_objects o USING (lifetime_id)
      JOIN decoupled.catalog_adapter_incarnations i USING (incarnation)
     WHERE o.dropped_at IS NULL
       -- A retired incarnation's holds protect nothing (its session's next
       -- protected operation says so); nor do those of a dropped catalog.
       AND i.retired_at IS NULL;

-- verify() compares by value every column whose equal values may print
-- differently (_compared_by_value), not only numeric, float and
-- nondeterministic collations.
CREATE FUNCTION decoupled._compared_by_value(type oid, collation oid) RETURNS boolean
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_compared_by_value';
REVOKE ALL ON FUNCTION decoupled._compared_by_value(oid, oid) FROM PUBLIC;

-- A sink dropped with DROP OWNED BY its creator takes its table with it;
-- DROP OWNED drops what the roles own in the catalog's terms first.
CREATE FUNCTION decoupled._dropping_owned_by(role oid) RETURNS boolean
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_dropping_owned_by';
CREATE FUNCTION decoupled._drop_owned_catalog(roles oid[], cascade boolean) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_mine bigint[];
    v_deps text;
    v_name text;
BEGIN
    SELECT coalesce(array_agg(o.lifetime_id), '{}') INTO v_mine
      FROM decoupled.catalog_objects o
      LEFT JOIN pg_class c ON c.oid = o.relation::oid
     WHERE o.dropped_at IS NULL
       AND ((o.definition->>'owner')::oid = ANY (roles) OR c.relowner = ANY (roles));
    IF cardinality(v_mine) = 0 THEN
        RETURN;
    END IF;
    IF NOT cascade THEN
        SELECT string_agg(format('%s "%s"', d.kind, d.name), ', ' ORDER BY d.lifetime_id)
          INTO v_deps
          FROM decoupled.catalog_objects d
         WHERE d.lifetime_id = ANY (decoupled._dependents(v_mine)) AND d.dropped_at IS NULL
           AND NOT d.lifetime_id = ANY (v_mine);
        IF v_deps IS NOT NULL THEN
            RAISE EXCEPTION 'cannot drop objects owned by % because other objects depend on them',
                            (SELECT string_agg(format('role "%s"', r::regrole), ', ')
                               FROM unnest(roles) r)
                USING ERRCODE = 'dependent_objects_still_exist',
                      DETAIL = format('Built on them: %s.', v_deps),
                      HINT = 'Use DROP OWNED ... CASCADE to drop them too, or drop them first '
                             'with decoupled.drop().';
        END IF;
    END IF;
    FOR v_name IN SELECT o.name FROM decoupled.catalog_objects o
                   WHERE o.lifetime_id = ANY (v_mine) AND o.kind IN ('materialized view', 'sink')
                   ORDER BY o.lifetime_id DESC
    LOOP
        -- One dropped before may have taken it along.
        IF EXISTS (SELECT FROM decoupled.catalog_objects o
                    WHERE o.name = v_name AND o.dropped_at IS NULL) THEN
            PERFORM decoupled._drop(v_name, true);
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION decoupled._dropping_owned_by(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION decoupled._drop_owned_catalog(oid[], boolean) FROM PUBLIC;
CREATE OR REPLACE FUNCTION decoupled._hand_over_sink_table(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation)
       AND coalesce((o.definition->>'drop_table')::boolean, false) THEN
        -- Dropped with DROP OWNED BY its creator (_drop_collection).
        EXECUTE format('DROP TABLE %s', o.relation::regclass);
    ELSIF EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation)
       AND EXISTS (SELECT FROM pg_roles r WHERE r.oid = (o.definition->>'owner')::oid) THEN
        EXECUTE format('ALTER TABLE %s OWNER TO %s', o.relation::regclass,
                       (o.definition->>'owner')::oid::regrole);
    END IF;
END
$$;
