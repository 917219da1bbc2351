------------------------------------------------------------------------------
-- Collections, part 4: drops (brief C1.6, C2.6)
--
-- Marking an object dropped and releasing what it held, its catalog
-- dependents, what goes at once and what finalization removes later
-- (finalize_dropped); and PostgreSQL's own DDL on the extension's
-- relations: the sql_drop and ddl_command_end event triggers and the
-- checks extension/ddl_guard.cpp calls.
------------------------------------------------------------------------------

-- Marks a collection (or sink) dropped in the committing transaction,
-- releasing exactly its holds and requirements — the ones it held on its
-- inputs too, whose bounds may then move; storage goes later
-- (finalization).
CREATE FUNCTION decoupled._drop_collection(lifetime_id bigint, catalog_version bigint)
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

-- Every live object that requires one of `ids`, directly or through
-- others (views over views), not counting `ids` themselves.
CREATE FUNCTION decoupled._dependents(ids bigint[]) RETURNS bigint[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE deps(id) AS (
        SELECT unnest(ids)
        UNION
        SELECT q.required_by FROM decoupled.catalog_requirements q JOIN deps ON q.lifetime_id = deps.id)
    SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}')
      FROM deps d JOIN decoupled.catalog_objects o ON o.lifetime_id = d.id
     WHERE o.dropped_at IS NULL AND d.id <> ALL (ids)
$$;

-- `verb`: what the caller was asked to do ('drop', 'unregister').
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

-- What PostgreSQL objects outside the extension read the history of `ids`
-- (their storage, or a view's or source's relation): a role's view over a
-- registered table (it embeds the history views), over a maintained view,
-- a function whose body reads them.  Finalization drops those with the
-- storage (CASCADE), so a drop without cascade is refused while they
-- exist, as PostgreSQL refuses DROP TABLE under a view.
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

-- DROP EXTENSION gives every live registered table the replica identity it
-- had before registration set FULL (C14.1), as unregister_table does: the
-- DDL guard calls this right before PostgreSQL drops the extension, with
-- the tables already locked (extension/ddl_guard.cpp), which lets these
-- ALTER TABLEs past the event trigger that refuses them on a registered
-- table (_alter_keeps_shape is true meanwhile; the triggers fire whatever
-- session_replication_role says).  One that cannot take it back
-- (its identity index gone, say) keeps FULL, with a WARNING that says how
-- it was; the drop goes on.
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

-- Drops one object in the committing transaction: its catalog rows, then
-- what can go at once without waiting for a reader (capture triggers, the
-- written plan, the public view); finalization removes the rest.
CREATE FUNCTION decoupled._drop_object(o decoupled.catalog_objects, catalog_version bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Unregistered first: the event trigger refuses to drop capture
    -- triggers of a registered table.
    PERFORM decoupled._drop_collection(o.lifetime_id, catalog_version);
    IF o.kind = 'table' THEN
        -- Captured from the WAL or by triggers: neither any more.
        DELETE FROM decoupled.capture_relations c WHERE c.lifetime_id = o.lifetime_id;
        IF EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation) THEN
            PERFORM decoupled._drop_capture_triggers(o.relation);
            PERFORM decoupled._invalidate_relation(o.relation);
            -- The replica identity registration set goes back to the table's own.
            IF o.definition ? 'replica_identity' THEN
                EXECUTE format('ALTER TABLE %s REPLICA IDENTITY %s', o.relation::regclass,
                               o.definition->>'replica_identity');
            END IF;
        END IF;
    END IF;
    IF o.kind = 'materialized view' THEN
        PERFORM decoupled._unarrange(o.lifetime_id);
        PERFORM decoupled._drop_quietly('VIEW', decoupled._storage(o.lifetime_id, 'plan'));
    END IF;
    PERFORM decoupled._drop_public_view(o);
END
$$;

-- DROP <kind> IF EXISTS <name>, unless a reader holds it or a view still
-- depends on it: then finalization retries (a drop never waits).
CREATE FUNCTION decoupled._drop_quietly(kind text, name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_lock text := current_setting('lock_timeout');
BEGIN
    IF to_regclass(name) IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '10ms', true);
    BEGIN
        EXECUTE format('DROP %s IF EXISTS %s', kind, name);
    EXCEPTION WHEN lock_not_available OR dependent_objects_still_exist THEN
        NULL;
    END;
    PERFORM set_config('lock_timeout', v_lock, true);
END
$$;

------------------------------------------------------------------------------
-- PostgreSQL's own DDL on the extension's relations: a registered table, a
-- sink's table, the public view of a source or materialized view (each
-- object's `relation`) and a view's written plan.  A statement either goes
-- through the catalog (a DROP drops the object, with the catalog's
-- dependency rules) or is refused: none leaves the catalog and the
-- relations disagreeing.  The extension's own DDL records an object's
-- `relation` only once it created what it needs, so it is never refused
-- here; a dropped object is not live, so its removal is not either.
-- extension/ddl_guard.cpp adds what only a ProcessUtility hook can see.
------------------------------------------------------------------------------

-- Whether the innermost DROP (or DROP OWNED) statement running cascades;
-- NULL while the innermost utility statement is something else.
CREATE FUNCTION decoupled._drop_cascades() RETURNS boolean
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_drop_cascades';
-- Whether the innermost utility statement is a DROP OWNED BY `role`.
CREATE FUNCTION decoupled._dropping_owned_by(role oid) RETURNS boolean
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_dropping_owned_by';

-- Before PostgreSQL's DROP OWNED BY roles (ddl_guard.cpp): what the roles
-- own in the catalog's terms — the views and sinks they created, and the
-- collections whose relations they own — goes through the catalog first,
-- newest first.  A view's written plan, storage of the extension's, would
-- otherwise keep PostgreSQL from dropping the roles' tables (its error
-- named that plan), and a sink they created on another role's view would
-- outlive them and keep DROP ROLE from working.  Without CASCADE, an
-- object of another role built on them is refused, named (2BP01).
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

-- The live object `rel` belongs to: the one whose relation it is, or the
-- materialized view whose written plan it is.  All NULL for anything else.
CREATE FUNCTION decoupled._object_of_relation(rel oid) RETURNS decoupled.catalog_objects
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

-- `roots` with the subsources of the sources among them.  A subsource goes
-- only with its source, as decoupled.drop() says.
CREATE FUNCTION decoupled._with_subsources(roots bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sub record;
BEGIN
    SELECT s.name, p.name AS source INTO v_sub
      FROM decoupled.catalog_objects s
      JOIN decoupled.catalog_objects p ON p.lifetime_id = (s.definition->>'parent')::bigint
     WHERE s.lifetime_id = ANY (roots) AND p.lifetime_id <> ALL (roots)
     ORDER BY s.lifetime_id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop subsource "%"', v_sub.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = format('Drop its source "%s" instead: decoupled.drop(%L), or DROP VIEW '
                                'of its relation.', v_sub.source, v_sub.source);
    END IF;
    RETURN roots || ARRAY(SELECT s.lifetime_id FROM decoupled.catalog_objects s
                           WHERE s.dropped_at IS NULL
                             AND (s.definition->>'parent')::bigint = ANY (roots)
                             AND s.lifetime_id <> ALL (roots)
                           ORDER BY s.lifetime_id);
END
$$;

-- Before DROP TABLE / VIEW ... without CASCADE of `rels` (ddl_guard.cpp):
-- the relation of a live object with catalog dependents is refused with
-- the catalog's own error, which names them (PostgreSQL's names a private
-- written plan, or nothing for a sink).
CREATE FUNCTION decoupled._refuse_relation_drop(rels oid[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_roots bigint[];
    v_what  text;
BEGIN
    SELECT array_agg(o.lifetime_id ORDER BY o.lifetime_id),
           string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id)
      INTO v_roots, v_what
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL AND o.relation = ANY (rels);
    IF v_roots IS NOT NULL THEN
        PERFORM decoupled._refuse_dependents(v_what, decoupled._with_subsources(v_roots));
    END IF;
END
$$;

-- Before ALTER TYPE ... RENAME VALUE of an enum, or ALTER TYPE ... ADD /
-- DROP / ALTER ATTRIBUTE of a composite type (ddl_guard.cpp): history
-- matches rows by their text, so a type a live collection or sink uses
-- (through domains, arrays, composites) keeps its text output.  And a
-- constraint added to such a domain by a role that is not a superuser
-- (ALTER DOMAIN ... ADD CONSTRAINT) would run with the extension's rights;
-- one added NOT VALID, by anyone, could fail on rows history keeps.
CREATE FUNCTION decoupled._refuse_type_change(typ oid, change text) RETURNS void
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

-- Before CREATE OR REPLACE of a function or a view (ddl_guard.cpp): a
-- maintained view's written plan reads what they were when it was created
-- (C1.6); replaced, the view's history would no longer be what its query
-- computes (its kept sums and rows disagree with the new definition, and
-- its steps could stall).  PostgreSQL already refuses to drop them; this
-- refuses to replace them — through ordinary views and function bodies
-- too.  `cls` and `obj` name the object (pg_proc or pg_class).
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

-- A view's, source's or sink's relation goes by PostgreSQL's rules (a
-- schema's owner drops what others made in it, a table's owner what
-- depends on it): its history goes only by the catalog's — its creator,
-- decoupled_admin, a superuser (_caller(): who issued the DROP, recorded
-- by the DDL guard).  A registered table's history is its table's
-- owner's, whoever that is.
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

-- Whatever a statement drops that the catalog knows goes through the
-- catalog in the same transaction: a registered table, a sink's table, the
-- public view of a source or materialized view, or a written plan (a
-- cascade reached it) drops its object; what is built on it goes too if
-- the statement cascades, else the statement is refused.
CREATE FUNCTION decoupled._on_sql_drop() RETURNS event_trigger
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
CREATE EVENT TRIGGER decoupled_sql_drop ON sql_drop EXECUTE FUNCTION decoupled._on_sql_drop();
-- Whatever session_replication_role says: a superuser's `replica` role
-- must not let a drop or a shape change by the catalog.
ALTER EVENT TRIGGER decoupled_sql_drop ENABLE ALWAYS;

-- A trigger created, replaced or renamed on an object's relation.  A
-- registered table's owner keeps adding triggers of their own (they see
-- what capture sees), but its capture triggers stay as registration made
-- them; no trigger may run inside a replica writing a sink or on a public
-- view.
CREATE FUNCTION decoupled._check_trigger(trigger_oid oid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
    o decoupled.catalog_objects;
BEGIN
    SELECT g.tgname, g.tgrelid, g.tgfoid = 'decoupled._capture'::regproc AS capture INTO t
      FROM pg_trigger g WHERE g.oid = trigger_oid;
    o := decoupled._object_of_relation(t.tgrelid);
    IF o.lifetime_id IS NULL THEN
        RETURN;
    END IF;
    IF o.kind = 'table' THEN
        IF (t.capture OR t.tgname LIKE 'decoupled\_capture\_%')
           AND NOT decoupled._capture_switching() THEN
            RAISE EXCEPTION 'cannot create, replace or rename a capture trigger of registered '
                            'table "%"', t.tgrelid::regclass
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Its writes would no longer reach its history.',
                      HINT = 'Unregister it with decoupled.unregister_table() first.';
        END IF;
        RETURN;
    END IF;
    RAISE EXCEPTION 'cannot create triggers on the relation of % "%"', o.kind, o.name
        USING ERRCODE = 'feature_not_supported',
              HINT = format('It belongs to the extension while the %s lives.', o.kind);
END
$$;

-- The ALTER TABLE being executed keeps a registered table's shape, key
-- and capture (extension/ddl_guard.cpp, alter_keeps_shape).
CREATE FUNCTION decoupled._alter_keeps_shape() RETURNS boolean
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_alter_keeps_shape';

-- ALTER, RENAME, SET SCHEMA, OWNER TO, CREATE OR REPLACE VIEW and CREATE
-- RULE on an object's relation.  A registered table's shape is fixed: its
-- history is stored in that shape (a rule on it changes nothing capture
-- sees, unless it makes the table a view; an ALTER TABLE that keeps shape,
-- key and capture goes through).  The relations of sources, views and sinks belong to the
-- extension while they live; GRANT, REVOKE and COMMENT ON stay allowed.
CREATE FUNCTION decoupled._check_relation_ddl(rel oid, command_tag text) RETURNS void
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

CREATE FUNCTION decoupled._on_ddl_end() RETURNS event_trigger
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
ALTER EVENT TRIGGER decoupled_ddl_end ENABLE ALWAYS;

CREATE FUNCTION decoupled._hand_over_sink_table(o decoupled.catalog_objects) RETURNS void
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

-- Removes the storage of dropped collections nobody reads any more.  A
-- collection still in use is skipped until a later round: a drop never
-- waits for readers (brief C2.6).  Idempotent; returns how many it removed.
CREATE FUNCTION decoupled.finalize_dropped() RETURNS integer
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
