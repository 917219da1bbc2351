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
