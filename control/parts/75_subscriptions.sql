------------------------------------------------------------------------------
-- SUBSCRIBE (brief C7.2, C7.3)
--
-- decoupled.subscribe() (extension/subscribe.cpp) streams a collection's
-- changes; these helpers do its catalog and storage work with the
-- extension's rights.  A running subscription is a session hold flagged as
-- such: it appears in decoupled.subscriptions and protects the collection
-- at its frontier, which follows what it has emitted.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled.subscribe(collection text, as_of bigint DEFAULT NULL,
                                    up_to bigint DEFAULT NULL)
RETURNS TABLE (mz_timestamp bigint, mz_diff bigint, data jsonb)
    LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1000
    AS 'MODULE_PATHNAME', 'decoupled_subscribe';
COMMENT ON FUNCTION decoupled.subscribe(text, bigint, bigint) IS
    'Every change of a collection in [as_of, up_to): its state at as_of, then each change; with up_to NULL it keeps streaming (in the select list of a cursor).';

-- Whether every column type is built in (pg_catalog), looking through
-- domains and arrays.
CREATE FUNCTION decoupled._builtin_types(columns jsonb) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT EXISTS (SELECT FROM decoupled._column_types(columns) x(oid)
                         JOIN pg_type t ON t.oid = x.oid
                        WHERE t.typnamespace <> 'pg_catalog'::regnamespace
                          AND t.typtype <> 'd')
$$;

-- Starts a subscription: resolves and checks it, protects as_of.
CREATE FUNCTION decoupled._subscribe_start(collection text, as_of bigint, up_to bigint,
                                           OUT lifetime_id bigint, OUT start_at bigint,
                                           OUT hold_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o       decoupled.catalog_objects;
    v_since bigint;
    v_upper bigint;
    v_bound bigint;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink; only collections can be subscribed to', o.name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF o.relation IS NOT NULL AND NOT decoupled._caller_can_select(o.relation) THEN
        RAISE EXCEPTION 'permission denied for % "%"', o.kind, o.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Rows become JSON with the extension's rights: only through built-in
    -- conversions (a user's cast from their own type would run there).
    IF NOT decoupled._builtin_types(o.definition->'columns') THEN
        RAISE EXCEPTION 'cannot subscribe to % "%": it has columns of user-defined types', o.kind,
                        o.name
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Subscribe to a materialized view that casts them to built-in types.';
    END IF;
    IF as_of < 0 THEN
        RAISE EXCEPTION 'as_of must not be negative, got %', as_of
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT f.since, f.upper INTO v_since, v_upper FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = o.lifetime_id;
    SELECT b.bound INTO v_bound FROM decoupled.catalog_bounds b WHERE b.lifetime_id = o.lifetime_id;
    start_at := coalesce(as_of, greatest(v_since, v_upper - 1));
    IF start_at < greatest(v_since, v_bound) THEN
        RAISE EXCEPTION '% "%" cannot be subscribed to from %: its history there is compacted',
                        o.kind, o.name, start_at
            USING ERRCODE = 'snapshot_too_old',
                  DETAIL = format('Its compaction bound is %s.', greatest(v_since, v_bound));
    END IF;
    IF up_to <= start_at THEN
        RAISE EXCEPTION 'up_to must be beyond as_of'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('as_of is %s, up_to %s.', start_at, up_to);
    END IF;
    IF (up_to IS NULL OR up_to > v_upper)
       AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'a subscription that waits for new changes needs READ COMMITTED'
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'Its transaction''s snapshot would never show them.';
    END IF;
    lifetime_id := o.lifetime_id;
    hold_id := decoupled._protect(o.lifetime_id, start_at, true);
END
$$;

-- The collection's upper, or the error that ends a subscription to a
-- dropped collection (C7.3).
CREATE FUNCTION decoupled._subscribe_upper(lifetime_id bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o       decoupled.catalog_objects;
    v_upper bigint;
BEGIN
    SELECT * INTO o FROM decoupled.catalog_objects c WHERE c.lifetime_id = _subscribe_upper.lifetime_id;
    IF o.dropped_at IS NOT NULL THEN
        RAISE EXCEPTION '% "%" was dropped', o.kind, o.name USING ERRCODE = 'undefined_object';
    END IF;
    SELECT f.upper INTO v_upper FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = _subscribe_upper.lifetime_id;
    RETURN v_upper;
END
$$;

-- The changes at times in [from_ts, to_ts), consolidated per time and row,
-- in time order — preceded, when snapshot_at is given, by the state at that
-- time.  A row is its columns as a JSON object.
CREATE FUNCTION decoupled._subscribe_batch(lifetime_id bigint, from_ts bigint, to_ts bigint,
                                           snapshot_at bigint)
RETURNS TABLE (mz_timestamp bigint, mz_diff bigint, data jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    id     bigint := _subscribe_batch.lifetime_id;
    v_cols text := decoupled._cols(id);
    v_cur  text := decoupled._storage(id, 'cur');
    v_dead text := decoupled._storage(id, 'dead');
    v_sql  text := '';
    v_rel  oid;
BEGIN
    -- Callable by anyone: it checks what _subscribe_start checked.
    SELECT o.relation INTO v_rel FROM decoupled.catalog_objects o WHERE o.lifetime_id = id;
    IF v_rel IS NOT NULL AND NOT decoupled._caller_can_select(v_rel) THEN
        RAISE EXCEPTION 'permission denied for collection %', id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF snapshot_at IS NOT NULL THEN
        v_sql := format('SELECT $3 AS ts, 1 AS diff, %1$s FROM %2$s WHERE mz_ts <= $3 '
                        'UNION ALL SELECT $3, 1, %1$s FROM %3$s '
                        ' WHERE valid_from <= $3 AND valid_to > $3 UNION ALL ',
                        v_cols, v_cur, v_dead);
    END IF;
    v_sql := v_sql || format(
        'SELECT mz_ts, 1, %1$s FROM %2$s WHERE mz_ts >= $1 AND mz_ts < $2 '
        'UNION ALL SELECT valid_from, 1, %1$s FROM %3$s '
        ' WHERE valid_to >= $1 AND valid_from >= $1 AND valid_from < $2 '
        'UNION ALL SELECT valid_to, -1, %1$s FROM %3$s WHERE valid_to >= $1 AND valid_to < $2',
        v_cols, v_cur, v_dead);
    RETURN QUERY EXECUTE format(
        'SELECT mz_ts, sum(mz_diff)::bigint, mz_row FROM ( '
        '  SELECT c.mz_ts, c.mz_diff, to_jsonb(c) - ''mz_ts'' - ''mz_diff'' AS mz_row '
        '    FROM (%s) c(mz_ts, mz_diff, %s)) x '
        ' GROUP BY mz_ts, mz_row HAVING sum(mz_diff) <> 0 ORDER BY mz_ts, mz_row', v_sql, v_cols)
        USING from_ts, to_ts, snapshot_at;
    -- Read first, checked after: since only grows, and history goes in the
    -- transaction that moves it.  A subscription that lost its protection
    -- (its incarnation was retired) fails instead of missing changes.
    IF (SELECT f.since FROM decoupled.catalog_frontiers f WHERE f.lifetime_id = id)
       > coalesce(snapshot_at, from_ts - 1) THEN
        RAISE EXCEPTION 'collection % was compacted past the subscription''s frontier', id
            USING ERRCODE = 'snapshot_too_old',
                  HINT = 'Its hold was released (its adapter incarnation was retired); subscribe again.';
    END IF;
END
$$;
