------------------------------------------------------------------------------
-- SUBSCRIBE (brief C7.2, C7.3)
--
-- decoupled.subscribe() (extension/subscribe.cpp) streams a collection's
-- changes; these helpers do its catalog and storage work with the
-- extension's rights.  Only subscribe() calls them (nobody is granted
-- EXECUTE), with its caller recorded in a caller frame (caller.cpp).  A running subscription is a session hold flagged as
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
