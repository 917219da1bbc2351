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

------------------------------------------------------------------------------
-- Last: the catalog is at the schema version of 1.1.
------------------------------------------------------------------------------

UPDATE decoupled.catalog_meta SET schema_version = 2;
