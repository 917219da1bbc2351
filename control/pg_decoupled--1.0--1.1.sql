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
--
-- Every change a part in control/parts/ makes between the two releases is
-- repeated here: the fresh 1.1 install (built from the parts) and a 1.0
-- install updated by this script must end up with the same objects, which
-- t/021_upgrade.pl checks (docs/upgrades.md).  The whole script is one
-- transaction, and one catalog change: it bumps the catalog version once.

\echo Use "ALTER EXTENSION pg_decoupled UPDATE TO '1.1'" to load this file. \quit

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
        RAISE EXCEPTION 'invalid query for materialized view "%": %', v_name, v_message
            USING ERRCODE = v_state, DETAIL = v_detail, HINT = v_hint;
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
    -- The arrangements' indexes lock their inputs' storage against writers:
    -- take those locks first, in the order every writer takes them
    -- (ascending lifetime id, cur before dead), so that a replica appending
    -- to two of them (a source's outputs, a tick) cannot deadlock with us.
    IF v_strategy.arrangement_inputs IS NOT NULL THEN
        EXECUTE (SELECT 'LOCK TABLE ' || string_agg(decoupled._storage(i, p), ', ' ORDER BY i, p)
                        || ' IN SHARE MODE'
                   FROM (SELECT DISTINCT unnest(v_strategy.arrangement_inputs) AS i) x,
                        unnest(ARRAY['cur', 'dead']) AS p);
    END IF;

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
-- OID would not.  Kept from the definition by _restore_row.
ALTER TABLE decoupled.catalog_objects ADD COLUMN owner regrole;

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
BEGIN
    IF o.owner IS NOT NULL THEN
        o.definition := o.definition || jsonb_build_object('owner', o.owner::oid);
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
    -- pg_restore loads the catalog with COPY; the extension itself never
    -- copies into it.
    v_copy      boolean := TG_OP = 'INSERT' AND current_query() ~* '^\s*copy\s';
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
        NEW.owner := (NEW.definition->>'owner')::oid::regrole;
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

ALTER EVENT TRIGGER decoupled_ddl_end ENABLE;
ALTER EVENT TRIGGER decoupled_sql_drop ENABLE;

------------------------------------------------------------------------------
-- Last: the catalog is at the schema version of 1.1.
------------------------------------------------------------------------------

UPDATE decoupled.catalog_meta SET schema_version = 2;
