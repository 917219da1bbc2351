------------------------------------------------------------------------------
-- Materialized views (brief C1.6, C3.3, C3.4, C5.3)
--
-- The written plan of view <id> is the private view decoupled_storage.c<id>_plan:
-- the user's SQL analyzed once, in the user's search_path, stored by
-- PostgreSQL as a query tree bound to OIDs (its text is copied into
-- catalog_objects.written_plan).  Replicas execute it with every input read
-- AS OF one time and append the difference to the view's collection; they
-- never parse the user's SQL again.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._mv_check_sql(sql text) RETURNS text
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_mv_check_sql';
CREATE FUNCTION decoupled._mv_relations(plan regclass) RETURNS oid[]
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_mv_relations';

-- A row's text in UTC, as history's writers print it: the key of a row a
-- step stages while computing in its view's TimeZone (written_plan.cpp).
CREATE FUNCTION decoupled._row_text(record) RETURNS text
    LANGUAGE C STABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_row_text';
-- Whether verify() compares a column of this type by value, not by text
-- (extension/written_plan.cpp).
CREATE FUNCTION decoupled._compared_by_value(type oid, collation oid) RETURNS boolean
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_compared_by_value';
CREATE FUNCTION decoupled._stage_plan(plan regclass, owner oid, ts bigint, target regclass,
                                     filter text DEFAULT NULL)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_plan';

-- Incremental maintenance (extension/delta_plan.cpp, core/strategy): the
-- strategy a written plan allows, a linear view's difference at a time,
-- the groups a time's changes touch, and the step-size rule.
CREATE FUNCTION decoupled._mv_strategy(plan regclass, OUT strategy text, OUT reason text,
                                       OUT arrangement_inputs bigint[],
                                       OUT arrangement_keys text[])
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_mv_strategy';
CREATE FUNCTION decoupled._stage_delta(plan regclass, owner oid, ts bigint, target regclass)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_delta';
CREATE FUNCTION decoupled._touched_groups(plan regclass, owner oid, ts bigint,
                                          OUT groups bigint, OUT filter text)
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_touched_groups';
CREATE FUNCTION decoupled._stage_partitions(plan regclass, owner oid, ts bigint, target regclass,
                                            view_rows double precision)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_partitions';
CREATE FUNCTION decoupled._mv_kept_state(plan regclass, OUT columns text, OUT keys text)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_mv_kept_state';
CREATE FUNCTION decoupled._stage_sums(plan regclass, owner oid, ts bigint, target regclass,
                                     initial boolean, filter text DEFAULT NULL)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_sums';
CREATE FUNCTION decoupled._merge_sums(plan regclass, state regclass, dstate regclass,
                                     replace text DEFAULT NULL,
                                     OUT groups bigint, OUT filter text, OUT unknown text)
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_merge_sums';
CREATE FUNCTION decoupled._stage_kept(plan regclass, owner oid, ts bigint, state regclass,
                                     target regclass, filter text)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_kept';
-- A step that replaces the view's rows (of the touched groups, or all of
-- them) with what it staged: the append core's write for such a step
-- (work_mem as _append_staged's, 31_append.sql).
CREATE FUNCTION decoupled._replace_staged(lifetime_id bigint, expected_upper bigint,
                                          new_upper bigint, ts bigint, filter text DEFAULT NULL)
    RETURNS void LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
    AS 'MODULE_PATHNAME', 'decoupled_replace_staged';
-- What a kept count and sum of integers give for sum() and avg() — NULL
-- for a group with no non-null value, as the aggregates do.  Called by the
-- view's owner (its select list over the state), so granted to PUBLIC.  In
-- C: called once per touched group, where a SQL function with a pinned
-- search_path would pay a settings save and restore per call.
CREATE FUNCTION decoupled._kept_sum_int8(n bigint, s numeric) RETURNS bigint
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_kept_sum_int8';
CREATE FUNCTION decoupled._kept_sum_numeric(n bigint, s numeric) RETURNS numeric
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_kept_sum_numeric';
CREATE FUNCTION decoupled._kept_avg(n bigint, s numeric) RETURNS numeric
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_kept_avg';
-- The sum of diff * value over a group's changes, in 128-bit integers
-- (extension/weighted_sum_aggregate.cpp): what a step adds to a kept sum
-- of integers, as sum(diff::numeric * value::numeric) did, without numeric
-- arithmetic per changed row.  The view's owner evaluates it (granted to
-- PUBLIC); its support functions are checked against the extension.
CREATE FUNCTION decoupled._weighted_sum_step(internal, bigint, bigint) RETURNS internal
    LANGUAGE C PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_weighted_sum_step';
CREATE FUNCTION decoupled._weighted_sum_final(internal) RETURNS numeric
    LANGUAGE C PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_weighted_sum_final';
CREATE AGGREGATE decoupled._weighted_sum(bigint, bigint) (
    SFUNC = decoupled._weighted_sum_step, STYPE = internal,
    FINALFUNC = decoupled._weighted_sum_final, SSPACE = 48, PARALLEL = SAFE);
CREATE FUNCTION decoupled._recompute_in_full(touched bigint, view_rows double precision)
    RETURNS boolean LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_recompute_in_full';
-- A relation's live rows as the statistics system counts them, else the
-- planner's estimate (pg_class.reltuples is -1 until the first ANALYZE),
-- for the step-size rules.
CREATE FUNCTION decoupled._estimated_rows(rel regclass) RETURNS double precision
    LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_estimated_rows';

-- Steps of each materialized view by kind (C13.3), written by the step.
CREATE TABLE decoupled.view_steps (
    lifetime_id bigint PRIMARY KEY
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    incremental bigint NOT NULL DEFAULT 0 CHECK (incremental >= 0),
    recompute   bigint NOT NULL DEFAULT 0 CHECK (recompute >= 0)
);

-- Arrangements (C13.4): an index on an input's storage (cur and dead) over
-- the keys a view's steps look up, one row per view using it; shared by
-- views with the same keys, dropped with the last of them.
CREATE TABLE decoupled.catalog_arrangements (
    input      bigint NOT NULL REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    index_name text NOT NULL,
    expression text NOT NULL,
    view_id    bigint NOT NULL REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    PRIMARY KEY (input, index_name, view_id)
);

-- Every type a column list uses, looking through domains, arrays,
-- composite, range and multirange types.  By OID where the list records it (a renamed type keeps
-- it), else by name (the built-in types of sources).
CREATE FUNCTION decoupled._column_types(columns jsonb) RETURNS SETOF oid
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

-- Columns of collections and sinks: no name that storage, staging and
-- sinks use for themselves, and no domain whose checks an ordinary role
-- wrote — they would run with the extension's rights whenever history is
-- written —, nor a range type whose subtype_diff such a role owns (run by
-- ANALYZE of the extension's relations).
CREATE FUNCTION decoupled._check_columns(what text, name text, columns jsonb) RETURNS void
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

-- The collection a relation belongs to: a registered table, or the storage
-- of a collection (what the public view of a source or view reads).  NULL
-- for anything else.
CREATE FUNCTION decoupled._collection_of(relation oid) RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(
        (SELECT o.lifetime_id FROM decoupled.catalog_objects o
          WHERE o.kind = 'table' AND o.relation = _collection_of.relation
            AND o.dropped_at IS NULL),
        (SELECT substring(c.relname FROM '^c([0-9]+)_')::bigint FROM pg_class c
          WHERE c.oid = _collection_of.relation
            AND c.relnamespace = 'decoupled_storage'::regnamespace))
$$;

-- The logical inputs of a written plan: every collection it reaches,
-- through views and in branches the planner may remove (C3.3).  Anything
-- else it reads must be a view or a system-independent relation; reading an
-- ordinary table would not be reproducible at a time.
CREATE FUNCTION decoupled._plan_inputs(view_name text, plan regclass) RETURNS bigint[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_rels   oid[] := decoupled._mv_relations(plan);
    v_bad    regclass;
    v_inputs bigint[];
    v_gone   text;
BEGIN
    SELECT r::regclass INTO v_bad FROM unnest(v_rels) r JOIN pg_class c ON c.oid = r
     WHERE c.relkind <> 'v' AND decoupled._collection_of(r) IS NULL
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'materialized view "%" reads %, which is not a collection', view_name, v_bad
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its history is not kept, so it cannot be read at the times the view '
                           'is computed.',
                  HINT = 'Register the table with decoupled.register_table().';
    END IF;
    SELECT array_agg(DISTINCT decoupled._collection_of(r)) INTO v_inputs
      FROM unnest(v_rels) r WHERE decoupled._collection_of(r) IS NOT NULL;
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ') INTO v_gone
      FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = ANY (v_inputs) AND o.dropped_at IS NOT NULL;
    IF v_gone IS NOT NULL THEN
        RAISE EXCEPTION 'materialized view "%" reads a dropped collection', view_name
            USING ERRCODE = 'undefined_object', DETAIL = 'Dropped: ' || v_gone || '.';
    END IF;
    RETURN coalesce(v_inputs, '{}');
END
$$;

-- The relations a written plan reads itself (not through views), whose
-- SELECT privilege its owner needs, as PostgreSQL checks for a view.
CREATE FUNCTION decoupled._plan_direct_relations(plan regclass) RETURNS oid[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(DISTINCT d.refobjid), '{}')
      FROM pg_rewrite w
      JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                      AND d.refclassid = 'pg_class'::regclass
     WHERE w.ev_class = plan AND d.refobjid <> plan
$$;

-- The entry point records its caller (extension/caller.cpp): the view is
-- owned by the caller, its relation created in the caller's current schema,
-- and its query analyzed in the caller's search_path — and nothing else.
CREATE FUNCTION decoupled.create_materialized_view(name text, query text,
                                                   cluster text DEFAULT 'default',
                                                   retain_history interval DEFAULT '1 second',
                                                   as_of bigint DEFAULT NULL)
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
COMMENT ON FUNCTION decoupled.create_materialized_view(text, text, text, interval, bigint) IS
    'Create a materialized view of a query over collections, maintained by the cluster''s replicas.';

CREATE FUNCTION decoupled._create_plan_view(plan text, query text) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_create_plan_view';

-- The ordinary views a written plan reads through (at any depth) that
-- read one of its registered tables without its history: parsed before
-- the table was registered (_readers_without_history).  NULL if none.
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

CREATE FUNCTION decoupled._create_materialized_view(name text, query text, cluster text,
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
-- The columns of an index on `rel` for equality look-ups by `keys` (its
-- columns' quoted names, in any text that lists them): a btree entry holds
-- at most about 2.7 kB, and one wider value — an incompressible text, a
-- large array — would fail every later write of the relation, the ticks of
-- an arranged input or the steps of a view.  So a btree takes the key's
-- fixed-length columns (`fixed`), and a key without any gets a hash index
-- on its first column whose values all hash (`wide`): a hash index keeps
-- the value's hash, whatever its width (a composite or array of a type
-- without hashing — money — would fail the writes the same way: _hashable);
-- without one, no index.  Equalities are what the look-ups ask;
-- both serve.
CREATE FUNCTION decoupled._hashable(type oid) RETURNS boolean
    LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_hashable';
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

CREATE FUNCTION decoupled._arrange(view_id bigint, input bigint, keys text) RETURNS void
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

-- What grouped views keep besides their history: an index on the view's
-- key columns (its rows of a group are found by them) and, for 'sums',
-- the state c<id>_state (keys, mz_n, mz_nn_j, mz_s_j) with a unique index on the
-- keys (NULL matching NULL) and nothing else — an index on any other column
-- would make every update of a group a non-HOT update (_merge_sums deletes
-- emptied groups by the ctids its statements return) — and its scratch
-- c<id>_dstate.
-- The owner reads the state: its select list is computed from it.
CREATE FUNCTION decoupled._create_kept_state(id bigint, plan regclass, owner oid, sums boolean)
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

-- Drops the arrangements `view_id` (being dropped) was the last user of
-- (_drop_unused_arrangements: without waiting; what it cannot drop now,
-- finalize_dropped drops in a later round).
CREATE FUNCTION decoupled._unarrange(view_id bigint) RETURNS void
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

-- What an output requires of its inputs, given its durable progress: the
-- next computation reads them at times >= upper and must see every change
-- there, so history through upper - 1 stays (and all of it before the
-- first computation at as_of).
CREATE FUNCTION decoupled._required_frontier(as_of bigint, upper bigint) RETURNS bigint
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_required_frontier';

-- Advances the requirements of `id` on its inputs with its progress (C3.4)
-- and queues the inputs whose bounds may move as a result
-- (_advance_requirements_of, below).
CREATE FUNCTION decoupled._advance_requirements(id bigint, frontier bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM decoupled._advance_requirements_of(ARRAY[id], ARRAY[frontier]);
END
$$;

-- Times in [from_ts, to_ts) at which any of `inputs` changed, ascending,
-- at most `max_count`: a row inserted (cur.mz_ts, dead.valid_from) or
-- retracted (dead.valid_to) then.  Distinct times, found by skipping
-- through the time indexes (extension/change_times.cpp): a time at which
-- many rows changed costs one probe, and a limit on rows cannot drop later
-- times the caller then steps over.
CREATE FUNCTION decoupled._change_times(inputs bigint[], from_ts bigint, to_ts bigint,
                                        max_count integer) RETURNS bigint[]
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_change_times';

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

-- The start of every replica step on an output (a view or a sink): fenced
-- by the incarnation, write authority checked, the output's frontier row
-- locked, its upper returned.  An output dropped meanwhile is ZD002: the
-- replica stops maintaining it and reads the catalog again.
CREATE FUNCTION decoupled._lock_output(incarnation bigint, lifetime_id bigint, kind text)
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

-- The SQL of a collection's changes as (mz_ts, mz_diff, columns...): rows
-- inserted (cur.mz_ts, dead.valid_from) and retracted (dead.valid_to) at
-- times in [$1, $2), preceded, `with_snapshot`, by its state at $3 as
-- insertions at $3.  Unconsolidated; used by sinks and subscriptions.
-- Rows of dead are found by ranges on valid_to closed on both sides (the
-- upper bound always true): a dead analysed empty is not scanned whole
-- (_create_read_views).
CREATE FUNCTION decoupled._changes_sql(lifetime_id bigint, with_snapshot boolean) RETURNS text
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

-- Where a replica's step may run a view owner's code: a hard deadline of
-- twice decoupled.step_timeout (the session ends if a cancel was caught
-- and ignored), and session-level advisory locks released at the
-- transaction's end (extension/step_deadline.cpp).
CREATE FUNCTION decoupled._bound_step() RETURNS void
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_bound_step';

-- One maintenance step of a materialized view by a replica (C5.3), run
-- by replica_maintain and replica_maintain_many (below) as the extension:
-- compare (upper = expected_upper) and, for each time t at which an input
-- changed below every input's upper, append the difference between the plan
-- at t and the view's current state, at t.  Times without input changes
-- only move the upper.  Losing the race to a sibling is not an error: the
-- actual upper is returned.  caught_up: the view reached its inputs'
-- frontier.  required: what the view now requires of its inputs (NULL if
-- nothing was stepped); the caller advances the requirements (C3.4).
-- authority_checked: the caller checked the incarnation's write authority
-- in this transaction, outside any subtransaction that could roll its
-- locks back (replica_maintain_many, once for all its views).
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
CREATE FUNCTION decoupled.replica_maintain(incarnation bigint, lifetime_id bigint,
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

-- Advances the requirements of outputs ids[k] on their inputs to
-- frontiers[k] (C3.4) and queues the inputs whose bounds may move as a
-- result.  The commit-time permission check locks the bound row of every
-- requirement that moved; they are all locked here first, in ascending id
-- (the global lock order), so that a step and a publication never take two
-- of them in opposite orders.  A bound row another transaction holds is
-- skipped, never waited for (a transaction creating several views holds
-- its inputs' outside that order: extension/write_locks.hpp), and the
-- requirements on it stay where they are until a later step: a requirement
-- that lags only keeps more history.
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

-- Recomputes a materialized view from its inputs at one time (default: the
-- latest readable one) and compares it with the view's own history there.
CREATE FUNCTION decoupled.verify(name text, as_of bigint DEFAULT NULL) RETURNS boolean
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._verify(name text, as_of bigint) RETURNS boolean
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
COMMENT ON FUNCTION decoupled.verify(text, bigint) IS
    'Recompute a materialized view from its inputs at as_of (default: latest readable) and compare.';
