-- pg_decoupled catalog, schema version 2 (extension version 1.1; docs/upgrades.md).
--
-- The catalog is the one durable authority for what is maintained (brief C1).
-- Tables are private (no privileges for PUBLIC); users read the public views
-- and change the catalog only through the functions below, each of which is
-- one catalog transaction that bumps decoupled.catalog_meta.catalog_version.

\echo Use "CREATE EXTENSION pg_decoupled" to load this file. \quit

------------------------------------------------------------------------------
-- Install-time checks and C entry points
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._assert_install_database() RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_assert_install_database';
SELECT decoupled._assert_install_database();

CREATE FUNCTION decoupled._assert_schema_version(version integer) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_assert_schema_version';
CREATE FUNCTION decoupled._wake_controller_at_commit() RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wake_controller_at_commit';

-- Stable, not immutable: within CREATE EXTENSION or ALTER EXTENSION UPDATE it
-- is the schema version of the extension version being installed.
CREATE FUNCTION decoupled.supported_schema_version() RETURNS integer
    LANGUAGE C STABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_supported_schema_version';
COMMENT ON FUNCTION decoupled.supported_schema_version() IS
    'The newest catalog schema version this build of pg_decoupled opens (older ones down to 1 open too).';

-- Roles are cluster-wide and outlive the extension; create it only once.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'decoupled_admin') THEN
        CREATE ROLE decoupled_admin NOLOGIN;
    END IF;
END
$$;
COMMENT ON ROLE decoupled_admin IS 'May change the pg_decoupled catalog (declarations, DDL).';
-- The replica protocol writes the history of every source and maintained
-- view, whoever owns it: only superusers and this role's members (the roles
-- replica processes log in as) may call it — not every catalog admin.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'decoupled_replica') THEN
        CREATE ROLE decoupled_replica NOLOGIN;
    END IF;
END
$$;
COMMENT ON ROLE decoupled_replica IS
    'What pg_decoupled replica processes log in as: writes every maintained view''s history.';

GRANT USAGE ON SCHEMA decoupled TO PUBLIC;

------------------------------------------------------------------------------
-- Domains
------------------------------------------------------------------------------

-- Names of declarations and collections: non-empty, at most NAMEDATALEN - 1
-- bytes, no control characters.  The functions check first with a friendly
-- error; the domain makes a bad row impossible regardless.
CREATE DOMAIN decoupled.object_name AS text
    CHECK (VALUE <> '' AND octet_length(VALUE) <= 63 AND VALUE !~ '[[:cntrl:]]');

-- Timestamps: milliseconds since the Unix epoch from the timestamp oracle.
CREATE DOMAIN decoupled.mz_timestamp AS bigint CHECK (VALUE >= 0);

------------------------------------------------------------------------------
-- Catalog tables
------------------------------------------------------------------------------

CREATE TABLE decoupled.catalog_meta (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    schema_version  integer NOT NULL CHECK (schema_version > 0),
    catalog_version bigint NOT NULL CHECK (catalog_version > 0),
    initialized_at  timestamptz NOT NULL DEFAULT now(),
    changed_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE decoupled.catalog_meta IS
    'Schema version of this catalog and the version every catalog transaction bumps.';

-- Configuration the controllers reconcile against (brief C11.1): a writer
-- updates it only where config_version still has the value it read.
CREATE TABLE decoupled.catalog_configuration (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    config_version bigint NOT NULL CHECK (config_version > 0),
    settings       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object'),
    changed_at     timestamptz NOT NULL DEFAULT now(),
    -- Who wrote this version: the process and the deployment it served.
    written_by     text,
    deployment     text
);

CREATE TABLE decoupled.catalog_deployments (
    name        decoupled.object_name PRIMARY KEY,
    state       text NOT NULL CHECK (state IN ('active', 'prewarming', 'retired')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    promoted_at timestamptz,
    retired_at  timestamptz,
    CONSTRAINT retired_has_time CHECK ((state = 'retired') = (retired_at IS NOT NULL)),
    CONSTRAINT promoted_has_time
        CHECK (state <> 'active' OR promoted_at IS NOT NULL OR name = 'default')
);
-- Write authority belongs to exactly one deployment at a time.
CREATE UNIQUE INDEX catalog_deployments_one_active
    ON decoupled.catalog_deployments ((true)) WHERE state = 'active';

-- A cluster is catalog-wide; each live deployment realizes its replicas.
-- Managed clusters keep replication_factor replicas named r1, r2, ...
CREATE TABLE decoupled.catalog_clusters (
    name               decoupled.object_name PRIMARY KEY,
    managed            boolean NOT NULL DEFAULT true,
    replication_factor integer CHECK (replication_factor >= 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT managed_has_replication_factor CHECK (managed = (replication_factor IS NOT NULL))
);

CREATE TABLE decoupled.catalog_replicas (
    replica_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cluster    decoupled.object_name NOT NULL
               REFERENCES decoupled.catalog_clusters (name) ON DELETE CASCADE,
    name       decoupled.object_name NOT NULL,
    -- External replicas run outside the server (tools/pg_decoupled_replicad);
    -- the controller supervises only the others.
    external   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (cluster, name)
);

-- Execution identities.  One sequence for replicas and adapters: a later
-- start always has a larger incarnation, which is what fencing compares.
CREATE SEQUENCE decoupled.incarnation_seq AS bigint;
-- The next incarnation: the sequence's next value, or above every
-- incarnation this server handed out since it started, in any life of the
-- extension (extension/sessions.cpp, _claim_incarnation).  A catalog
-- dropped and created again restarts the sequence, and sessions of the
-- dropped one may still be attached to its incarnations: a number handed
-- out again would pass them off as the new catalog's.
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

CREATE TABLE decoupled.catalog_replica_incarnations (
    replica_id   bigint NOT NULL
                 REFERENCES decoupled.catalog_replicas (replica_id) ON DELETE CASCADE,
    deployment   decoupled.object_name NOT NULL
                 REFERENCES decoupled.catalog_deployments (name),
    incarnation  bigint NOT NULL CHECK (incarnation > 0),
    pid          integer CHECK (pid > 0),
    host         text,
    status       text NOT NULL DEFAULT 'starting'
                 CHECK (status IN ('starting', 'running', 'stalled', 'stopped')),
    error        text,
    hint         text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz,
    retired_at   timestamptz,
    PRIMARY KEY (replica_id, deployment, incarnation),
    UNIQUE (incarnation)
);
-- Only the newest incarnation of a replica in a deployment is live.
CREATE UNIQUE INDEX catalog_replica_incarnations_one_live
    ON decoupled.catalog_replica_incarnations (replica_id, deployment)
    WHERE retired_at IS NULL;

CREATE TABLE decoupled.catalog_adapters (
    name       decoupled.object_name NOT NULL,
    deployment decoupled.object_name NOT NULL
               REFERENCES decoupled.catalog_deployments (name),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, deployment)
);

-- Adapters whose process is stopped on purpose (decoupled.stop_adapter):
-- the declaration, its incarnations and their holds stay as they are.
CREATE TABLE decoupled.catalog_adapter_stops (
    adapter    decoupled.object_name NOT NULL,
    deployment decoupled.object_name NOT NULL,
    stopped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (adapter, deployment),
    FOREIGN KEY (adapter, deployment)
        REFERENCES decoupled.catalog_adapters (name, deployment) ON DELETE CASCADE
);

-- Dropping an adapter removes its incarnations and, through them, exactly
-- the holds, sessions and subscriptions they own (brief C4.3).
CREATE TABLE decoupled.catalog_adapter_incarnations (
    adapter      decoupled.object_name NOT NULL,
    deployment   decoupled.object_name NOT NULL,
    incarnation  bigint NOT NULL CHECK (incarnation > 0),
    pid          integer CHECK (pid > 0),
    status       text NOT NULL DEFAULT 'starting'
                 CHECK (status IN ('starting', 'running', 'stopped')),
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz,
    retired_at   timestamptz,
    reclaimed_at timestamptz,
    PRIMARY KEY (adapter, deployment, incarnation),
    UNIQUE (incarnation),
    FOREIGN KEY (adapter, deployment)
        REFERENCES decoupled.catalog_adapters (name, deployment) ON DELETE CASCADE,
    CHECK (reclaimed_at IS NULL OR retired_at IS NOT NULL)
);
CREATE UNIQUE INDEX catalog_adapter_incarnations_one_live
    ON decoupled.catalog_adapter_incarnations (adapter, deployment)
    WHERE retired_at IS NULL;

-- Collections and sinks.  lifetime_id identifies one life of a name: a drop
-- and re-create under the same name is a new object.  Dropped objects keep
-- their row (dropped_at) until their storage is finalized.
CREATE SEQUENCE decoupled.lifetime_id_seq AS bigint;

CREATE TABLE decoupled.catalog_objects (
    lifetime_id        bigint PRIMARY KEY DEFAULT nextval('decoupled.lifetime_id_seq'),
    name               decoupled.object_name NOT NULL,
    kind               text NOT NULL
                       CHECK (kind IN ('table', 'source', 'materialized view', 'sink')),
    cluster            decoupled.object_name
                       REFERENCES decoupled.catalog_clusters (name) ON DELETE SET NULL,
    relation           regclass,
    definition         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(definition) = 'object'),
    written_plan       text,
    retain_history     interval CHECK (retain_history >= interval '0'),
    created_at         timestamptz NOT NULL DEFAULT now(),
    created_in_version bigint NOT NULL,
    dropped_at         timestamptz,
    dropped_in_version bigint,
    finalized_at       timestamptz,
    -- Everything but a registered table runs on a cluster while it lives.
    CONSTRAINT live_object_has_cluster
        CHECK (kind = 'table' OR cluster IS NOT NULL OR dropped_at IS NOT NULL),
    CONSTRAINT table_has_no_cluster CHECK (kind <> 'table' OR cluster IS NULL),
    CONSTRAINT view_has_written_plan
        CHECK (kind <> 'materialized view' OR written_plan IS NOT NULL),
    CONSTRAINT dropped_has_version CHECK ((dropped_at IS NULL) = (dropped_in_version IS NULL)),
    CONSTRAINT dropped_after_created
        CHECK (dropped_in_version IS NULL OR dropped_in_version >= created_in_version),
    CONSTRAINT finalized_after_dropped CHECK (finalized_at IS NULL OR dropped_at IS NOT NULL)
);
CREATE UNIQUE INDEX catalog_objects_live_name
    ON decoupled.catalog_objects (name) WHERE dropped_at IS NULL;
CREATE INDEX catalog_objects_cluster ON decoupled.catalog_objects (cluster)
    WHERE dropped_at IS NULL;

-- Durable progress (brief C2).  Every update at a time < upper is final;
-- reads at t < since are refused.  A sink has no since.
CREATE TABLE decoupled.catalog_frontiers (
    lifetime_id bigint PRIMARY KEY
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    since       decoupled.mz_timestamp,
    upper       decoupled.mz_timestamp NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT since_not_beyond_upper CHECK (since IS NULL OR since <= upper)
);

-- Committed compaction permission (brief C3): since may advance up to bound.
-- committed_bound and writer remember the bound as it was before the
-- current transaction, so the commit-time check can reject a regression.
CREATE TABLE decoupled.catalog_bounds (
    lifetime_id     bigint PRIMARY KEY
                    REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    bound           decoupled.mz_timestamp NOT NULL,
    committed_bound decoupled.mz_timestamp,
    writer          xid8,
    changed_at      timestamptz NOT NULL DEFAULT now()
);

-- Collections whose bound proposal may have changed since the last
-- publication round: publication work follows what changed (C3.5).  No
-- unique key: a unique index makes an inserter wait for a publication that
-- is deleting the same collection's row, which is how appends and
-- compaction deadlocked.  Inserts skip a collection already queued
-- (_queue_for_publication), so duplicates are rare and harmless.
CREATE TABLE decoupled.catalog_bound_queue (
    lifetime_id bigint NOT NULL
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE
);
CREATE INDEX catalog_bound_queue_lifetime_id ON decoupled.catalog_bound_queue (lifetime_id);

-- The oracle's durable high-water mark beyond collection uppers: a dropped
-- collection folds its upper in here, so time never goes back.
CREATE TABLE decoupled.catalog_oracle (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    high_water decoupled.mz_timestamp NOT NULL
);

-- Maintained requirements: `collection` must stay readable from `frontier`
-- for `required_by` (an MV's logical inputs, a sink's input).
CREATE TABLE decoupled.catalog_requirements (
    lifetime_id bigint NOT NULL
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    required_by bigint NOT NULL
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    frontier    decoupled.mz_timestamp NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lifetime_id, required_by),
    CONSTRAINT not_self_required CHECK (lifetime_id <> required_by)
);
CREATE INDEX catalog_requirements_required_by
    ON decoupled.catalog_requirements (required_by);

-- Durable read holds.  The owner is an adapter incarnation, qualified by
-- adapter and deployment (brief C4.1); a hold protects reads of the
-- collection at times >= frontier.  One row per owner and collection, at or
-- below every hold the owner's sessions keep in shared memory.
CREATE TABLE decoupled.catalog_holds (
    hold_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    adapter     decoupled.object_name NOT NULL,
    deployment  decoupled.object_name NOT NULL,
    incarnation bigint NOT NULL,
    lifetime_id bigint NOT NULL
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    frontier    decoupled.mz_timestamp NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (incarnation, lifetime_id),
    FOREIGN KEY (adapter, deployment, incarnation)
        REFERENCES decoupled.catalog_adapter_incarnations (adapter, deployment, incarnation)
        ON DELETE CASCADE
);
CREATE INDEX catalog_holds_collection ON decoupled.catalog_holds (lifetime_id);

-- Current health: one replica-owned row per (object, replica, deployment).
-- A report from an incarnation older than the stored one is ignored (brief
-- C6.1).
CREATE TABLE decoupled.replica_health (
    lifetime_id   bigint NOT NULL
                  REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    replica_id    bigint NOT NULL
                  REFERENCES decoupled.catalog_replicas (replica_id) ON DELETE CASCADE,
    incarnation   bigint NOT NULL CHECK (incarnation > 0),
    status        text NOT NULL
                  CHECK (status IN ('starting', 'running', 'paused', 'stalled', 'dropped')),
    error         text,
    hint          text,
    hydrated      boolean NOT NULL DEFAULT false,
    -- NULL: the transition time is unknown (reconstructed after a restart).
    transition_at timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- Each deployment's replicas report their own health: a prewarming
    -- replica never overwrites what the active one reports (C10.1).
    deployment    decoupled.object_name NOT NULL
                  REFERENCES decoupled.catalog_deployments (name) ON DELETE CASCADE,
    PRIMARY KEY (lifetime_id, replica_id, deployment)
);

-- Health of registered tables.  No replica ticks them (the controller runs
-- tick_tables()), so one row per table, written by tick_tables() only when
-- a table's tick fails (`stalled`, with the error) or first succeeds again
-- (`running`); no row means `running`.
CREATE TABLE decoupled.table_health (
    lifetime_id   bigint PRIMARY KEY
                  REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    status        text NOT NULL CHECK (status IN ('running', 'stalled')),
    error         text,
    hint          text,
    transition_at timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stalled_has_error CHECK ((status = 'stalled') = (error IS NOT NULL))
);

-- Status transitions, kept for decoupled.status_history_retention.  Replica
-- names are copied so that history outlives the replica declaration.
CREATE TABLE decoupled.status_events (
    event_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lifetime_id bigint NOT NULL
                REFERENCES decoupled.catalog_objects (lifetime_id) ON DELETE CASCADE,
    replica     text,
    incarnation bigint,
    status      text NOT NULL
                CHECK (status IN ('created', 'starting', 'running', 'paused', 'stalled',
                                  'dropped')),
    error       text,
    occurred_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX status_events_occurred_at ON decoupled.status_events (occurred_at);
-- A table's last transition, read at every round of WAL capture's health.
CREATE INDEX status_events_object ON decoupled.status_events (lifetime_id, event_id);

-- Attached sessions, keyed by their owner (brief C7.1).  connected_at is the
-- backend's start time, so a reused pid is a different row.
CREATE TABLE decoupled.session_records (
    adapter      decoupled.object_name NOT NULL,
    deployment   decoupled.object_name NOT NULL,
    incarnation  bigint NOT NULL,
    session_pid  integer NOT NULL CHECK (session_pid > 0),
    connected_at timestamptz NOT NULL,
    role         name NOT NULL,
    PRIMARY KEY (adapter, deployment, incarnation, session_pid, connected_at),
    FOREIGN KEY (adapter, deployment, incarnation)
        REFERENCES decoupled.catalog_adapter_incarnations (adapter, deployment, incarnation)
        ON DELETE CASCADE
);


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

------------------------------------------------------------------------------
-- Fresh-install defaults (brief C1.1).  This script runs once per catalog;
-- nothing else ever inserts a default, so what a user drops stays dropped.
------------------------------------------------------------------------------

INSERT INTO decoupled.catalog_meta (schema_version, catalog_version)
    VALUES (decoupled.supported_schema_version(), 1);
INSERT INTO decoupled.catalog_configuration (config_version) VALUES (1);
INSERT INTO decoupled.catalog_oracle (high_water) VALUES (0);
INSERT INTO decoupled.catalog_deployments (name, state) VALUES ('default', 'active');
INSERT INTO decoupled.catalog_clusters (name, managed, replication_factor)
    VALUES ('default', true, 1);
INSERT INTO decoupled.catalog_replicas (cluster, name) VALUES ('default', 'r1');
INSERT INTO decoupled.catalog_adapters (name, deployment) VALUES ('default', 'default');

------------------------------------------------------------------------------
-- Catalog transaction helpers (private)
------------------------------------------------------------------------------

-- Starts a catalog change: serializes DDL on the catalog_meta row, refuses a
-- catalog at an unsupported schema version, bumps the catalog version and
-- arranges the controller's wake-up at commit.  Returns the new version.
CREATE FUNCTION decoupled._begin_catalog_change() RETURNS bigint
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

CREATE FUNCTION decoupled._check_name(what text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION '% name must not be null', what
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF name = '' OR octet_length(name) > 63 OR name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'invalid % name "%"', what, name
            USING ERRCODE = 'invalid_name',
                  DETAIL = 'Names must be 1 to 63 bytes long and contain no control characters.';
    END IF;
END
$$;

CREATE FUNCTION decoupled._check_replica_count(cluster_name text, replicas integer) RETURNS void
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

CREATE FUNCTION decoupled._check_retention(retain interval) RETURNS void
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

-- The caller may create what an object puts in `schema` (`what` says what).
CREATE FUNCTION decoupled._check_create_in(schema text, what text) RETURNS void
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

-- Locks the cluster an object is placed on, for the catalog transaction.
CREATE FUNCTION decoupled._lock_cluster(cluster_name text) RETURNS void
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

-- A new object named `name` whose relation will be schema.relname: both
-- names must be free.
CREATE FUNCTION decoupled._check_free(name text, schema text, relname text) RETURNS void
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

-- PL/pgSQL so that its plan is kept for the session: every append checks
-- write authority through it.
CREATE FUNCTION decoupled._active_deployment() RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT d.name::text FROM decoupled.catalog_deployments d WHERE d.state = 'active');
END
$$;

-- Pausing is caused by the DDL that removed a cluster's last replica, so
-- that committer, and nobody else, writes the history row (brief C6.3).
CREATE FUNCTION decoupled._note_pause(cluster_name text, replicas_before bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF replicas_before > 0 AND NOT EXISTS (SELECT FROM decoupled.catalog_replicas r
                                            WHERE r.cluster = cluster_name) THEN
        INSERT INTO decoupled.status_events (lifetime_id, status, error)
        SELECT o.lifetime_id, 'paused', 'cluster "' || cluster_name || '" has no replicas'
          FROM decoupled.catalog_objects o
         WHERE o.cluster = cluster_name AND o.dropped_at IS NULL;
    END IF;
END
$$;

-- A managed cluster's replica count: add r<k> for the lowest free k, remove
-- the most recently declared first.
CREATE FUNCTION decoupled._resize_cluster(cluster_name text, replicas integer) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_have integer;
    v_k    integer := 0;
BEGIN
    SELECT count(*) INTO v_have FROM decoupled.catalog_replicas WHERE cluster = cluster_name;
    WHILE v_have < replicas LOOP
        v_k := v_k + 1;
        CONTINUE WHEN EXISTS (SELECT FROM decoupled.catalog_replicas
                               WHERE cluster = cluster_name AND name = 'r' || v_k);
        INSERT INTO decoupled.catalog_replicas (cluster, name) VALUES (cluster_name, 'r' || v_k);
        v_have := v_have + 1;
    END LOOP;
    IF v_have > replicas THEN
        DELETE FROM decoupled.catalog_replicas
         WHERE replica_id IN (SELECT replica_id FROM decoupled.catalog_replicas
                               WHERE cluster = cluster_name
                               ORDER BY replica_id DESC LIMIT v_have - replicas);
    END IF;
END
$$;

------------------------------------------------------------------------------
-- DDL for declarations (privileged: superuser or decoupled_admin)
------------------------------------------------------------------------------

CREATE FUNCTION decoupled.create_cluster(name text, replicas integer DEFAULT 1,
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
COMMENT ON FUNCTION decoupled.create_cluster(text, integer, boolean) IS
    'Declare a cluster with the given number of replicas (r1, r2, ...); managed clusters keep that count.';

CREATE FUNCTION decoupled.alter_cluster(name text, replicas integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := alter_cluster.name;
    v_cluster decoupled.catalog_clusters;
    v_version bigint;
BEGIN
    PERFORM decoupled._check_name('cluster', v_name);
    PERFORM decoupled._check_replica_count(v_name, replicas);
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO v_cluster FROM decoupled.catalog_clusters c WHERE c.name = v_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', v_name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT v_cluster.managed THEN
        RAISE EXCEPTION 'cluster "%" is not managed', v_name
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Add and remove its replicas one by one.';
    END IF;
    UPDATE decoupled.catalog_clusters c SET replication_factor = replicas WHERE c.name = v_name;
    PERFORM decoupled._resize_cluster(v_name, replicas);
    PERFORM decoupled._note_pause(v_name, v_cluster.replication_factor);
END
$$;
COMMENT ON FUNCTION decoupled.alter_cluster(text, integer) IS
    'Set the replica count of a managed cluster; zero pauses its objects.';

CREATE FUNCTION decoupled.drop_cluster(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_name    text := drop_cluster.name;
    v_objects text;
    v_count   bigint;
BEGIN
    PERFORM decoupled._check_name('cluster', v_name);
    PERFORM decoupled._begin_catalog_change();
    PERFORM FROM decoupled.catalog_clusters c WHERE c.name = v_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', v_name USING ERRCODE = 'undefined_object';
    END IF;
    SELECT count(*), string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.name)
      INTO v_count, v_objects
      FROM decoupled.catalog_objects o
     WHERE o.cluster = v_name AND o.dropped_at IS NULL;
    IF v_count > 0 THEN
        RAISE EXCEPTION 'cannot drop cluster "%" because objects run on it', v_name
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Placed on it: ' || v_objects || '.',
                  HINT = 'Drop those objects first.';
    END IF;
    DELETE FROM decoupled.catalog_clusters c WHERE c.name = v_name;
END
$$;
COMMENT ON FUNCTION decoupled.drop_cluster(text) IS
    'Drop a cluster and its replica declarations; refused while objects run on it.';

CREATE FUNCTION decoupled.declare_adapter(name text) RETURNS void
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

CREATE FUNCTION decoupled.drop_adapter(name text) RETURNS void
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

