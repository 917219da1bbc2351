------------------------------------------------------------------------------
-- Collections, part 5: WAL capture of registered tables (brief C14.1)
--
-- Where wal_level = logical and decoupled.capture = 'wal' (the default), the
-- capture worker (bgworker/capture_worker.cpp) reads the logical slot
-- `pg_decoupled` with the extension's own output plugin
-- (extension/capture_plugin.cpp) and writes every committed change of a
-- WAL-captured table into its c<id>_pending, in commit order; tick_tables()
-- moves pending into history as for trigger capture.  Writers pay nothing
-- beyond the WAL they write anyway.  An update's and a delete's old row is
-- located by the table's primary key (C14.2: REPLICA IDENTITY DEFAULT, the
-- WAL carries the old key and the worker reads the row from cur and pending
-- by it, _capture_key_lookup); a table without one has REPLICA IDENTITY
-- FULL, and the old row is in the WAL.
--
-- A table is registered with capture triggers, then adopted by the worker:
-- in one transaction that excludes the table's writers, its row enters
-- capture_relations and its triggers go.  Changes committed before are in
-- pending through the triggers, changes after through the WAL: the plugin
-- reads capture_relations under the decoding's historic snapshot, so it
-- sees each change exactly as capture stood when it was made.  Release
-- (decoupled.capture = 'trigger', or wal_level lowered) is the reverse.
--
-- Exactly once: the worker decodes up to a WAL position F, writes the
-- changes and F (capture_progress) in one transaction, and only then
-- confirms the slot — up to F, and no further than what ticks moved out
-- of unlogged pending relations (capture_ticked below).  After a crash,
-- the transactions the slot delivers again are skipped where they commit
-- before F, or, for a table whose unlogged pending relation the crash
-- emptied, before its ticked position.
------------------------------------------------------------------------------

-- The tables captured from the WAL, read by the output plugin while it
-- decodes: a user catalog table, so its historic versions are readable.
CREATE TABLE decoupled.capture_relations (
    relation    oid PRIMARY KEY,
    lifetime_id bigint NOT NULL UNIQUE REFERENCES decoupled.catalog_objects (lifetime_id)
) WITH (user_catalog_table = true);

-- How far capture got: every transaction committed before captured_lsn is
-- in pending.  One row, written with the captured changes.
CREATE TABLE decoupled.capture_progress (
    only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    slot_name    name NOT NULL,
    captured_lsn pg_lsn NOT NULL,
    captured_at  timestamptz NOT NULL DEFAULT now()
);

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

-- The capture worker's shared-memory state (extension/capture_functions.cpp).
CREATE FUNCTION decoupled._capture_state(
    OUT pid integer, OUT captured_through pg_lsn, OUT progress_at timestamptz,
    OUT last_error text, OUT error_at timestamptz)
RETURNS record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_capture_state';
-- The worker's last error and the registered table whose changes it came
-- from (NULL: none), read together.
CREATE FUNCTION decoupled._capture_error(OUT last_error text, OUT lifetime_id bigint)
RETURNS record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_capture_error';

-- While set (until it is cleared or the transaction ends), the capture
-- triggers of a registered table may be created and dropped: only adoption
-- and release set it, and only they may.
CREATE FUNCTION decoupled._capture_switching() RETURNS boolean
LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_capture_switching';
CREATE FUNCTION decoupled._set_capture_switching(on_ boolean) RETURNS void
LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_set_capture_switching';

-- Decoding caches whether a table is captured; a switch invalidates it.
CREATE FUNCTION decoupled._invalidate_relation(rel oid) RETURNS void
LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_invalidate_relation';

CREATE FUNCTION decoupled._create_capture_triggers(tbl regclass, pending text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('CREATE TRIGGER decoupled_capture_insert AFTER INSERT ON %s '
                   'REFERENCING NEW TABLE AS decoupled_new FOR EACH STATEMENT '
                   'EXECUTE FUNCTION decoupled._capture(%L)', tbl, pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_update AFTER UPDATE ON %s '
                   'REFERENCING OLD TABLE AS decoupled_old NEW TABLE AS decoupled_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION decoupled._capture(%L)', tbl, pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_delete AFTER DELETE ON %s '
                   'REFERENCING OLD TABLE AS decoupled_old FOR EACH STATEMENT '
                   'EXECUTE FUNCTION decoupled._capture(%L)', tbl, pending);
    EXECUTE format('CREATE TRIGGER decoupled_capture_truncate BEFORE TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION decoupled._capture(%L)', tbl, pending);
END
$$;

CREATE FUNCTION decoupled._drop_capture_triggers(tbl regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS decoupled_capture_insert ON %1$s; '
                   'DROP TRIGGER IF EXISTS decoupled_capture_update ON %1$s; '
                   'DROP TRIGGER IF EXISTS decoupled_capture_delete ON %1$s; '
                   'DROP TRIGGER IF EXISTS decoupled_capture_truncate ON %1$s', tbl);
END
$$;

-- Takes the table (or its pending relation) for a switch: ACCESS
-- EXCLUSIVE, since dropping a trigger (an index, making pending logged)
-- needs it.  It waits 20 ms at most, so that writers and readers queued
-- behind the request are barely delayed; a table that stays busy (a long
-- reader, a writer holding its transaction open) is switched at a later
-- attempt, and is captured by its triggers meanwhile.
CREATE FUNCTION decoupled._lock_for_switch(tbl regclass) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET lock_timeout = '20ms' AS $$
BEGIN
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$$;

-- The live registration of `id` on `rel`, locked FOR SHARE without
-- waiting: false when it is gone or a catalog change holds it (the switch
-- is tried again at the worker's next pass).
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

-- Trigger capture -> WAL capture, for one live registered table.  The slot
-- exists (and is consistent) before this commits.  Returns whether it
-- switched.
CREATE FUNCTION decoupled._capture_adopt(id bigint) RETURNS boolean
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

-- WAL capture -> trigger capture.  The changes committed before stay in
-- the WAL for the worker, which drains them before it drops the slot.
CREATE FUNCTION decoupled._capture_release(id bigint) RETURNS boolean
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

-- A statement that yields every row collection `id` holds — its current
-- rows and what is pending — negated, as rows of its pending table.  A
-- pending retraction by key (mz_diff 0, index_tick.cpp) has retracted its
-- key's current row already: that row is not retracted twice.  Consolidated
-- (one row per distinct row, by its text): what is pending goes to one
-- tick, where only the net counts, and a negation of every pending row one
-- by one doubled pending at every TRUNCATE a pass read (25 in a row made
-- hundreds of millions of rows).  Insert-only: a tick moving pending rows
-- meanwhile still gets their negation at the next tick.
CREATE FUNCTION decoupled._capture_held_negated(id bigint) RETURNS text
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

-- A truncation in the WAL: every row the collection holds at that point of
-- the commit order (its current rows and what is pending) is retracted.
CREATE FUNCTION decoupled._capture_truncate(id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('INSERT INTO %s %s', decoupled._storage(id, 'pending'),
                   decoupled._capture_held_negated(id));
END
$$;

-- What capture does, and whether it keeps up.  `status`: `off` (capture
-- is 'trigger', or wal_level is not logical), `idle` (nothing is captured
-- from the WAL), `running`, `stalled` (WAL-captured tables and no worker, a
-- failing worker, or no progress for 30 s with changes waiting).
CREATE VIEW decoupled.capture AS
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
COMMENT ON VIEW decoupled.capture IS
    'WAL capture of registered tables: setting, status, slot, lag and retained WAL.';

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

-- The slot was lost under WAL-captured tables (dropped by hand, or by a
-- DROP EXTENSION that rolled back): what they wrote since is not in any
-- slot.  With their writers excluded, each table's pending changes get the
-- difference between its contents and its collection (current rows and
-- pending), and capture skips every transaction that committed before —
-- as registration takes a table's contents.  The new slot exists already.
CREATE FUNCTION decoupled._capture_resync() RETURNS pg_lsn
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

CREATE FUNCTION decoupled._wait_captured(timeout_ms integer) RETURNS boolean
LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_captured';

-- Until capture has caught up with this moment: every registered table is
-- captured the way the setting says (adoption or release done) and every
-- transaction committed before the call is in its table's pending changes,
-- so the next tick moves it.  False when `timeout` passed first.
CREATE FUNCTION decoupled.wait_for_capture(timeout interval DEFAULT '10 s') RETURNS boolean
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
COMMENT ON FUNCTION decoupled.wait_for_capture(interval) IS
    'Wait until WAL capture has taken in every write committed before the call.';
