-- pg_decoupled catalog, schema version 1.
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

CREATE FUNCTION decoupled.supported_schema_version() RETURNS integer
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_supported_schema_version';
COMMENT ON FUNCTION decoupled.supported_schema_version() IS
    'The catalog schema version this build of pg_decoupled opens.';

-- Roles are cluster-wide and outlive the extension; create it only once.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'decoupled_admin') THEN
        CREATE ROLE decoupled_admin NOLOGIN;
    END IF;
END
$$;
COMMENT ON ROLE decoupled_admin IS 'May change the pg_decoupled catalog (declarations, DDL).';

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
    changed_at     timestamptz NOT NULL DEFAULT now()
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
    relation           oid,
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

-- Current health: one replica-owned row per (object, replica).  A report from
-- an incarnation older than the stored one is ignored (brief C6.1).
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
    PRIMARY KEY (lifetime_id, replica_id)
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
    IF replicas IS NULL OR replicas < 0 THEN
        RAISE EXCEPTION 'invalid replica count % for cluster "%"',
                        coalesce(replicas::text, 'NULL'), cluster_name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A cluster has zero or more replicas; with zero its objects are paused.';
    END IF;
END
$$;

CREATE FUNCTION decoupled._check_retention(retain interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF retain IS NULL OR retain < interval '0' THEN
        RAISE EXCEPTION 'retain_history must not be negative, got %', coalesce(retain::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The caller may create what an object puts in `schema` (`what` says what).
CREATE FUNCTION decoupled._check_create_in(schema text, what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF schema IS NULL OR NOT has_schema_privilege(decoupled._caller(), quote_ident(schema),
                                                  'CREATE') THEN
        RAISE EXCEPTION 'permission denied for schema %', coalesce(schema, 'NULL')
            USING ERRCODE = 'insufficient_privilege', DETAIL = what;
    END IF;
END
$$;

-- Locks the cluster an object is placed on, for the catalog transaction.
CREATE FUNCTION decoupled._lock_cluster(cluster_name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM FROM decoupled.catalog_clusters c WHERE c.name = cluster_name FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', coalesce(cluster_name, 'NULL')
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

-- A new object named `name` whose relation will be schema.relname: both
-- names must be free.
CREATE FUNCTION decoupled._check_free(name text, schema text, relname text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM decoupled.catalog_objects o
                WHERE o.name = _check_free.name AND o.dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a collection or sink named "%" already exists', name
            USING ERRCODE = 'duplicate_object';
    END IF;
    IF to_regclass(format('%I.%I', schema, relname)) IS NOT NULL THEN
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
END
$$;
COMMENT ON FUNCTION decoupled.declare_adapter(text) IS
    'Declare a SQL front door (adapter) in the active deployment.';

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
END
$$;
COMMENT ON FUNCTION decoupled.drop_adapter(text) IS
    'Drop an adapter of the active deployment, releasing exactly its holds.';

------------------------------------------------------------------------------
-- Controller observation and waiting
------------------------------------------------------------------------------

-- Everyone may read it (catalog_meta is private).
CREATE FUNCTION decoupled.catalog_version() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT catalog_version FROM decoupled.catalog_meta
$$;
COMMENT ON FUNCTION decoupled.catalog_version() IS
    'The committed catalog version; every catalog transaction bumps it.';

CREATE FUNCTION decoupled.controller_status(
    OUT pid integer, OUT state text, OUT schema_version integer,
    OUT catalog_version bigint, OUT observed_at timestamptz)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_controller_status';

CREATE FUNCTION decoupled.supervision(
    OUT kind text, OUT name text, OUT cluster text, OUT deployment text,
    OUT replica_id bigint, OUT action text, OUT pid integer, OUT failures integer)
    RETURNS SETOF record LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_supervision';

CREATE FUNCTION decoupled.wait_for_controller(
    catalog_version bigint, timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_for_controller';
COMMENT ON FUNCTION decoupled.wait_for_controller(bigint, interval) IS
    'Wait until the controller follows the given catalog version; returns the version it observed.';

------------------------------------------------------------------------------
-- Collections, part 1: storage (brief C2)
--
-- What every collection is made of, and the helpers the other parts share:
-- the storage schema and row-id sequence, the timestamp oracle, as_of() and
-- the history gates (C functions), names and columns of storage, storage
-- creation with its history, change and before views, and the bound
-- publication queue.  31_append.sql writes storage, 32_registered_tables.sql
-- captures tables into it, 33_drops.sql drops and finalizes it.
--
-- Each collection <id> keeps its history in schema decoupled_storage:
--
--   c<id>_cur      the rows present at upper, one physical row per unit of
--                  multiplicity, each with the time it was inserted (mz_ts)
--   c<id>_dead     rows retracted since `since`: valid over
--                  [valid_from, valid_to)
--   c<id>_stage    scratch for the append in progress (unlogged)
--   c<id>_pending  registered tables only: captured, not yet ticked changes
--   c<id>_history  the state AS OF decoupled.as_of(), read with the
--                  extension's rights after _history_gate() checked
--                  readability and the reader's privilege
--
-- The state at t is cur rows with mz_ts <= t plus dead rows valid at t, so
-- an AS OF read is a filtered scan, never a replay.  Compaction to since
-- deletes dead rows with valid_to <= since: nothing readable at t >= since
-- is lost.
------------------------------------------------------------------------------

CREATE SCHEMA decoupled_storage;
COMMENT ON SCHEMA decoupled_storage IS 'Private storage of pg_decoupled collections.';

CREATE SEQUENCE decoupled.rowid_seq AS bigint;

CREATE FUNCTION decoupled._next_timestamp(at_least bigint DEFAULT 0) RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_next_timestamp';
CREATE FUNCTION decoupled.oracle_now() RETURNS bigint
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_oracle_now';
COMMENT ON FUNCTION decoupled.oracle_now() IS
    'The timestamp oracle''s current time (ms since the Unix epoch); never goes backwards.';
CREATE FUNCTION decoupled.as_of() RETURNS bigint
    LANGUAGE C STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'decoupled_as_of';
COMMENT ON FUNCTION decoupled.as_of() IS 'decoupled.as_of as a timestamp, NULL when unset.';
-- Never called.  A plan of a read of a registered table depends on one of
-- these (extension/read_rewrite.cpp): made while decoupled.as_of is unset it
-- reads the table alone and depends on _planned_latest(); made while it is
-- set it keeps the gated union and depends on _planned_as_of().  When as_of
-- turns set or unset, the plans depending on the other one are planned
-- again, as after a change of a function they call.
CREATE FUNCTION decoupled._planned_latest() RETURNS void
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS '';
CREATE FUNCTION decoupled._planned_as_of() RETURNS void
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS '';
-- PARALLEL SAFE: its catalog read is read-only, and a parallel latest read
-- of a registered table must stay as fast as one of a plain table.
CREATE FUNCTION decoupled._history_gate(lifetime_id bigint) RETURNS boolean
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'decoupled_history_gate';
CREATE FUNCTION decoupled._history_gate_before(lifetime_id bigint) RETURNS boolean
    LANGUAGE C STABLE STRICT PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'decoupled_history_gate_before';
CREATE FUNCTION decoupled._execute_unrewritten(sql text) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_execute_unrewritten';
CREATE FUNCTION decoupled._propose_bound(upper bigint, retain_ms bigint, current_bound bigint,
                                         min_requirement bigint, min_hold bigint) RETURNS bigint
    LANGUAGE C IMMUTABLE AS 'MODULE_PATHNAME', 'decoupled_propose_bound';
CREATE FUNCTION decoupled._compacted_since(since bigint, bound bigint, upper bigint)
    RETURNS bigint LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_compacted_since';

------------------------------------------------------------------------------
-- Naming and columns
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._storage(lifetime_id bigint, part text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'decoupled_storage.c' || lifetime_id || '_' || part
$$;

-- The collection's columns, as stored in its definition at creation:
-- `prefix` qualifies each name; with `typed` each carries its type.
CREATE FUNCTION decoupled._cols(lifetime_id bigint, prefix text DEFAULT '',
                                typed boolean DEFAULT false) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(prefix || quote_ident(c->>'name')
                      || CASE WHEN typed THEN ' ' || (c->>'type') ELSE '' END,
                      ', ' ORDER BY ord)
      FROM decoupled.catalog_objects o,
           jsonb_array_elements(o.definition->'columns') WITH ORDINALITY AS x(c, ord)
     WHERE o.lifetime_id = _cols.lifetime_id
$$;

-- The live collection called `name`.
CREATE FUNCTION decoupled._collection(name text) RETURNS decoupled.catalog_objects
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o decoupled.catalog_objects;
BEGIN
    IF _collection.name IS NULL THEN
        RAISE EXCEPTION 'collection name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.name = _collection.name AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'collection "%" does not exist', _collection.name
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN o;
END
$$;

CREATE FUNCTION decoupled._retain_ms(retain interval) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT (floor(extract(epoch FROM retain) * 1000))::bigint
$$;

------------------------------------------------------------------------------
-- Storage
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._create_storage(lifetime_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id    bigint := _create_storage.lifetime_id;
    defs  text := decoupled._cols(id, '', true);
    names text := decoupled._cols(id);
BEGIN
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint PRIMARY KEY, mz_ts bigint NOT NULL, '
                   'mz_hash integer NOT NULL, %s)', decoupled._storage(id, 'cur'), defs);
    EXECUTE format('CREATE INDEX ON %s (mz_hash)', decoupled._storage(id, 'cur'));
    -- Maintained views and sinks find the times at which a collection changed.
    EXECUTE format('CREATE INDEX ON %s (mz_ts)', decoupled._storage(id, 'cur'));
    EXECUTE format('CREATE TABLE %s (mz_rowid bigint PRIMARY KEY, valid_from bigint NOT NULL, '
                   'valid_to bigint NOT NULL, %s, CHECK (valid_from < valid_to))',
                   decoupled._storage(id, 'dead'), defs);
    EXECUTE format('CREATE INDEX ON %s (valid_to)', decoupled._storage(id, 'dead'));
    EXECUTE format('CREATE UNLOGGED TABLE %s (mz_ts bigint NOT NULL, mz_diff bigint NOT NULL, '
                   'mz_key text NOT NULL, mz_hash integer NOT NULL, %s)',
                   decoupled._storage(id, 'stage'), defs);
    -- Both branches are gated by a one-time filter: without as_of they are
    -- skipped before reading a page.
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate(%5$s) AND mz_ts <= decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_from <= decoupled.as_of() AND valid_to > decoupled.as_of()',
        decoupled._storage(id, 'history'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'history'));
    -- Its changes at decoupled.as_of: rows inserted then (+1), retracted then
    -- (-1).  Incremental views read their input through it, gated like the
    -- history (extension/delta_plan.cpp).
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s, 1::bigint AS mz_diff FROM %3$s '
        ' WHERE decoupled._history_gate(%5$s) AND mz_ts = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, 1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to > decoupled.as_of() AND valid_from = decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s, -1 FROM %4$s WHERE decoupled._history_gate(%5$s) '
        '  AND valid_to = decoupled.as_of()',
        decoupled._storage(id, 'delta'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'delta'));
    -- Its state just before decoupled.as_of: an incremental join step reads
    -- the inputs after the changed one there.
    EXECUTE format(
        'CREATE VIEW %1$s AS '
        'SELECT %2$s FROM %3$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND mz_ts < decoupled.as_of() '
        'UNION ALL '
        'SELECT %2$s FROM %4$s WHERE decoupled._history_gate_before(%5$s) '
        '  AND valid_from < decoupled.as_of() AND valid_to >= decoupled.as_of()',
        decoupled._storage(id, 'before'), names, decoupled._storage(id, 'cur'),
        decoupled._storage(id, 'dead'), id);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', decoupled._storage(id, 'before'));
END
$$;

------------------------------------------------------------------------------
-- The bound publication queue.  Writers queue what they changed; a
-- publication drains it with SKIP LOCKED.  Neither side ever waits for the
-- other: a row a publication is draining is skipped (and a new one
-- inserted), and a row this transaction relies on is locked KEY SHARE so
-- that no publication drains it before this change is committed and
-- visible to the publication's snapshot.
------------------------------------------------------------------------------

-- PL/pgSQL, not SQL: a SQL function with a SET clause is planned again in
-- every transaction that calls it, PL/pgSQL keeps its plan for the session.
CREATE FUNCTION decoupled._queue_for_publication(ids bigint[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO decoupled.catalog_bound_queue (lifetime_id)
    SELECT x.id FROM (SELECT DISTINCT unnest(ids) AS id) x
     WHERE x.id IS NOT NULL
       AND NOT EXISTS (SELECT FROM decoupled.catalog_bound_queue q WHERE q.lifetime_id = x.id
                          FOR KEY SHARE SKIP LOCKED);
END
$$;
------------------------------------------------------------------------------
-- Collections, part 2: appends, the one write path (brief C2.1)
--
-- Write authority, the append core (_append_staged: consolidate the staged
-- updates, insert, retract oldest first, advance the upper), checking JSON
-- updates, and compare-and-append (_compare_and_append, for every writer,
-- and its public form decoupled.append()).  Replicas append through
-- replica_append (50_replicas.sql), registered tables through their ticks
-- (32_registered_tables.sql), materialized views through their steps
-- (60_materialized_views.sql).
--
-- The core and compare-and-append are C (extension/append_core.cpp): their
-- statements name each collection's own storage, and kept plans per
-- collection and statement kind spare planning them again on every call.
-- What stays here is static SQL, whose plans PL/pgSQL keeps itself, and
-- the slow paths that only run to explain a refusal.
------------------------------------------------------------------------------

------------------------------------------------------------------------------
-- Write authority (brief C2.1, C10.3): enforced at append, not by process
-- ordering.  Locks are shared so that promotion or retirement waits for
-- in-flight appends and later appends see their outcome.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._assert_write_authority(deployment text, incarnation bigint)
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

------------------------------------------------------------------------------
-- The append core.  The caller holds the collection's frontier row lock,
-- has checked upper = expected_upper < new_upper, and staged the updates in
-- c<id>_stage.  Consolidates them per (time, row), inserts positive
-- multiplicities and retracts negative ones oldest first (the k-th
-- retraction of a row pairs with its k-th oldest copy present before the
-- retraction's time, found through the row hash index), empties the stage,
-- then advances the upper and queues the collection for bound publication.
-- Any violation (a time outside [expected_upper, new_upper): 22023; a
-- retraction with no copy to pair: 22023) aborts the transaction: a failed
-- append changes nothing.
------------------------------------------------------------------------------

-- work_mem: consolidating a large append sorts what it stages once; that
-- sort (and the hash join that finds many retracted rows) should not spill.
CREATE FUNCTION decoupled._append_staged(lifetime_id bigint, expected_upper bigint,
                                         new_upper bigint) RETURNS void
LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_append_staged';

-- What is wrong with one JSON update of an append, or NULL: its shape, an
-- mz_timestamp that is not a bigint >= 0, an mz_diff that is not an integer
-- within +-max_diff, a key of `data` that names no column.  Checked with
-- numeric comparisons, so that no cast can fail with another SQLSTATE.
CREATE FUNCTION decoupled._update_problem(u jsonb, columns text[], max_diff bigint) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN jsonb_typeof(u) IS DISTINCT FROM 'object' THEN 'is not a JSON object'
        WHEN (SELECT k FROM jsonb_object_keys(u) k
               WHERE k NOT IN ('mz_timestamp', 'mz_diff', 'data') LIMIT 1) IS NOT NULL
            THEN format('has unknown key "%s"',
                        (SELECT k FROM jsonb_object_keys(u) k
                          WHERE k NOT IN ('mz_timestamp', 'mz_diff', 'data') LIMIT 1))
        WHEN jsonb_typeof(u->'mz_timestamp') IS DISTINCT FROM 'number'
            THEN 'has no numeric "mz_timestamp"'
        WHEN (u->'mz_timestamp')::numeric <> trunc((u->'mz_timestamp')::numeric)
          OR (u->'mz_timestamp')::numeric NOT BETWEEN 0 AND 9223372036854775807
            THEN format('has mz_timestamp %s, not an integer timestamp', u->'mz_timestamp')
        WHEN jsonb_typeof(u->'mz_diff') IS DISTINCT FROM 'number'
            THEN 'has no numeric "mz_diff"'
        WHEN (u->'mz_diff')::numeric <> trunc((u->'mz_diff')::numeric)
          OR abs((u->'mz_diff')::numeric) > max_diff
            THEN format('has mz_diff %s, not an integer from -%s to %s', u->'mz_diff',
                        max_diff, max_diff)
        WHEN jsonb_typeof(u->'data') IS DISTINCT FROM 'object' THEN 'has no "data" object'
        WHEN (SELECT k FROM jsonb_object_keys(u->'data') k WHERE k <> ALL (columns) LIMIT 1)
             IS NOT NULL
            THEN format('names unknown column "%s" in "data"',
                        (SELECT k FROM jsonb_object_keys(u->'data') k
                          WHERE k <> ALL (columns) LIMIT 1))
    END
$$;

-- The slow path of staging JSON updates (extension/append_core.cpp): when
-- the bulk conversion failed, converts each value of `updates` on its own,
-- with its column's type, and raises 22023 for the first that fails.
CREATE FUNCTION decoupled._diagnose_values(lifetime_id bigint, name text, updates jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r       record;
    v_error text;
BEGIN
    FOR r IN SELECT u.n, d.key, d.value, c->>'type' AS type
               FROM jsonb_array_elements(updates) WITH ORDINALITY u(v, n),
                    jsonb_each(u.v->'data') d,
                    decoupled.catalog_objects o,
                    jsonb_array_elements(o.definition->'columns') c
              WHERE o.lifetime_id = _diagnose_values.lifetime_id AND c->>'name' = d.key
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

-- The one compare-and-append core (C2.1), for every writer: the frontier
-- row lock orders racing writers; unless the upper is still expected_upper
-- nothing is appended and the actual upper is returned.  A collection
-- dropped meanwhile appends nothing and returns upper NULL: each caller
-- reports that in its own terms (42704 to a user, ZD002 to a replica).
--
-- Staging JSON updates [{"mz_timestamp", "mz_diff", "data"}]: a
-- multiplicity is stored as that many rows, so what one caller may write is
-- bounded.  Every bad input is 22023 naming the update, the collection and,
-- for a value, the column:
--  * each update's shape, times and multiplicity are checked first
--    (_update_problem says what is wrong); |mz_diff| is at most 1,000,000
--    per update and the |mz_diff| of one append add up to at most
--    10,000,000;
--  * a key of "data" that names no column is refused; a missing one is NULL;
--  * values are converted by one bulk INSERT (one subtransaction per
--    append, none per row); only if it fails is each value converted on its
--    own (_diagnose_values) to name the culprit.
-- Updates that only insert go straight into c<id>_cur; others are staged
-- and go through the append core.
CREATE FUNCTION decoupled._compare_and_append(lifetime_id bigint, updates jsonb,
                                              expected_upper bigint, new_upper bigint,
                                              OUT appended boolean, OUT upper bigint)
LANGUAGE C SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_compare_and_append';

CREATE FUNCTION decoupled.append(collection text, updates jsonb, expected_upper bigint,
                                 new_upper bigint, deployment text DEFAULT NULL,
                                 incarnation bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
-- Row keys are the rows' text: pin every setting that changes it.
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
DECLARE
    o        decoupled.catalog_objects;
    v_result record;
BEGIN
    o := decoupled._collection(collection);
    IF o.kind = 'sink' THEN
        RAISE EXCEPTION '"%" is a sink, not a collection', o.name USING ERRCODE = 'wrong_object_type';
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
COMMENT ON FUNCTION decoupled.append(text, jsonb, bigint, bigint, text, bigint) IS
    'Compare-and-append: add updates at times in [expected_upper, new_upper) iff the upper is expected_upper.';
------------------------------------------------------------------------------
-- Collections, part 3: registered tables (brief C5.2)
--
-- Captured on write, ticked into their collection: the statement-level
-- capture trigger, register_table / unregister_table, the tick of all of
-- them (tick_tables, C in extension/append_core.cpp: the one path from
-- c<id>_pending into history, whoever fills pending), and a table's health.
-- Dropping goes through 33_drops.sql like any object's.
------------------------------------------------------------------------------

-- Statement-level capture: one INSERT per statement into the pending table;
-- writers never wait for each other here.
CREATE FUNCTION decoupled._capture() RETURNS trigger
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
        EXECUTE format('INSERT INTO %s SELECT -1, t.* FROM ONLY %s t',
                       TG_ARGV[0], TG_RELID::regclass);
    END IF;
    RETURN NULL;
END
$$;

-- A relation's columns as stored in a collection's definition: name and
-- type (with a collation other than the type's).
CREATE FUNCTION decoupled._relation_columns(rel regclass) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT jsonb_agg(jsonb_build_object(
               'name', a.attname, 'typid', a.atttypid,
               'type', format_type(a.atttypid, a.atttypmod)
                       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                               THEN ' COLLATE ' || a.attcollation::regcollation::text
                               ELSE '' END)
               ORDER BY a.attnum)
      FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
     WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped
$$;

CREATE FUNCTION decoupled.register_table(tbl regclass, retain_history interval DEFAULT '1 second')
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._register_table(tbl regclass, retain_history interval)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
DECLARE
    v_columns jsonb;
    r         record;
    v_version bigint;
    v_id      bigint;
    v_ts      bigint;
    v_pending text;
    v_identity text;
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
    -- An update's and a delete's old row, complete in the WAL: what WAL
    -- capture retracts.  Unregistering gives the table its own back.
    SELECT CASE c.relreplident WHEN 'd' THEN 'DEFAULT' WHEN 'n' THEN 'NOTHING'
                WHEN 'f' THEN 'FULL'
                ELSE (SELECT format('USING INDEX %I', i.relname)
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = tbl AND x.indisreplident) END
      INTO v_identity FROM pg_class c WHERE c.oid = tbl;
    IF v_identity IS DISTINCT FROM 'FULL' THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
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
    END IF;
    RETURN v_id;
END
$$;
COMMENT ON FUNCTION decoupled.register_table(regclass, interval) IS
    'Turn a table into a collection: its writes are captured and ticked into history.';

CREATE FUNCTION decoupled.unregister_table(tbl regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_version bigint;
    o         decoupled.catalog_objects;
BEGIN
    v_version := decoupled._begin_catalog_change();
    SELECT * INTO o FROM decoupled.catalog_objects c
     WHERE c.relation = tbl AND c.kind = 'table' AND c.dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table "%" is not registered', tbl USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._refuse_dependents(format('table "%s"', o.name), ARRAY[o.lifetime_id]);
    PERFORM decoupled._drop_object(o, v_version);
END
$$;
COMMENT ON FUNCTION decoupled.unregister_table(regclass) IS
    'Stop capturing a table; its collection is dropped and its storage finalized later.';

-- A registered table's health after a tick (see decoupled.table_health):
-- written on a transition only, which is also a row of status history
-- (with no replica).
CREATE FUNCTION decoupled._table_health(lifetime_id bigint, status text, error text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_before text;
BEGIN
    SELECT h.status INTO v_before FROM decoupled.table_health h
     WHERE h.lifetime_id = _table_health.lifetime_id FOR UPDATE;
    INSERT INTO decoupled.table_health AS h (lifetime_id, status, error, hint)
    VALUES (_table_health.lifetime_id, _table_health.status, _table_health.error,
            CASE WHEN _table_health.status = 'stalled'
                 THEN 'Its captured changes stay pending and every tick retries it; '
                      'the other tables keep ticking.' END)
    ON CONFLICT (lifetime_id) DO UPDATE
       SET status = EXCLUDED.status, error = EXCLUDED.error, hint = EXCLUDED.hint,
           updated_at = now(),
           transition_at = CASE WHEN h.status <> EXCLUDED.status THEN now()
                                ELSE h.transition_at END;
    IF v_before IS DISTINCT FROM _table_health.status THEN
        INSERT INTO decoupled.status_events (lifetime_id, status, error)
        VALUES (_table_health.lifetime_id, _table_health.status, _table_health.error);
    END IF;
END
$$;

-- Moves committed captured changes of every registered table into its
-- collection at one new timestamp, and advances every upper (idle tables
-- too).  Locks every live table's frontier in id order, takes one timestamp
-- and one snapshot for all of them, and moves exactly the pending rows that
-- snapshot sees (so a transaction that wrote several tables lands in one
-- tick for all).  A table with no such row is idle: one statement advances
-- the uppers of all idle and ticked tables.  Each busy table ticks in a
-- subtransaction of its own: one whose tick fails keeps its pending changes
-- and its upper and shows `stalled` with the error (a WARNING the first
-- time); the others tick.  Returns the number of tables ticked.
CREATE FUNCTION decoupled.tick_tables() RETURNS integer
LANGUAGE C SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'decoupled_tick_tables';
COMMENT ON FUNCTION decoupled.tick_tables() IS
    'Move committed captured changes into every registered table''s collection at a new timestamp.';
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
       SET dropped_at = now(), dropped_in_version = catalog_version
     WHERE o.lifetime_id = id;
    -- Time never goes back, even once nothing uses this upper any more.
    UPDATE decoupled.catalog_oracle
       SET high_water = greatest(high_water,
                                 (SELECT f.upper FROM decoupled.catalog_frontiers f
                                   WHERE f.lifetime_id = id));
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

CREATE FUNCTION decoupled._refuse_dependents(what text, ids bigint[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_list text;
BEGIN
    SELECT string_agg(format('%s "%s"', o.kind, o.name), ', ' ORDER BY o.lifetime_id) INTO v_list
      FROM decoupled.catalog_objects o WHERE o.lifetime_id = ANY (decoupled._dependents(ids));
    IF v_list IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop % because other objects depend on it', what
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'Depending on it: ' || v_list || '.',
                  HINT = 'Use decoupled.drop(name, cascade => true) to drop them too.';
    END IF;
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

-- The live object `rel` belongs to: the one whose relation it is, or the
-- materialized view whose written plan it is.  All NULL for anything else.
CREATE FUNCTION decoupled._object_of_relation(rel oid) RETURNS decoupled.catalog_objects
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT o.* FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL
       AND (o.relation = rel
            OR (o.kind = 'materialized view' AND (o.definition->>'plan')::oid = rel))
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
-- (through domains, arrays, composites) keeps its text output.
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
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Used by: ' || v_users || '.  Their history matches rows by their '
                           'text: rows written before the change could no longer be retracted.',
                  HINT = CASE WHEN change = 'rename a value of'
                              THEN 'Add a value with ALTER TYPE ... ADD VALUE instead, or first '
                              ELSE 'Create a new type instead, or first ' END
                         || 'drop what uses the type (decoupled.drop(), '
                            'decoupled.unregister_table()).';
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
    v_roots := decoupled._with_subsources(v_roots);
    -- PostgreSQL cascaded only through relations.  A statement that is no
    -- DROP cascaded if it took a written plan away.
    v_cascade := coalesce(decoupled._drop_cascades(), v_plans);
    IF NOT v_cascade THEN
        PERFORM decoupled._refuse_dependents(v_what, v_roots);
    END IF;
    FOR v_victim IN SELECT * FROM decoupled.catalog_objects o
                     WHERE o.lifetime_id = ANY (v_roots || decoupled._dependents(v_roots))
                     ORDER BY o.lifetime_id DESC
    LOOP
        PERFORM decoupled._drop_object(v_victim, v_version);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER decoupled_sql_drop ON sql_drop EXECUTE FUNCTION decoupled._on_sql_drop();

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

-- ALTER, RENAME, SET SCHEMA, OWNER TO, CREATE OR REPLACE VIEW and CREATE
-- RULE on an object's relation.  A registered table's shape is fixed: its
-- history is stored in that shape (a rule on it changes nothing capture
-- sees).  The relations of sources, views and sinks belong to the
-- extension while they live; GRANT, REVOKE and COMMENT ON stay allowed.
CREATE FUNCTION decoupled._check_relation_ddl(rel oid, command_tag text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o decoupled.catalog_objects := decoupled._object_of_relation(rel);
BEGIN
    IF o.lifetime_id IS NULL OR (o.kind = 'table' AND command_tag = 'CREATE RULE') THEN
        RETURN;
    ELSIF o.kind = 'table' THEN
        RAISE EXCEPTION 'cannot alter registered table "%"', rel::regclass
            USING ERRCODE = 'feature_not_supported',
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
CREATE FUNCTION decoupled._check_inheritance() RETURNS void
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
    r record;
BEGIN
    IF to_regclass('decoupled.catalog_objects') IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT c.classid, c.objid, c.command_tag FROM pg_event_trigger_ddl_commands() c LOOP
        IF r.classid = 'pg_trigger'::regclass THEN
            PERFORM decoupled._check_trigger(r.objid);
        ELSIF r.classid = 'pg_rewrite'::regclass THEN
            PERFORM decoupled._check_relation_ddl(w.ev_class, r.command_tag)
               FROM pg_rewrite w WHERE w.oid = r.objid;
        ELSIF r.classid = 'pg_class'::regclass THEN
            PERFORM decoupled._check_relation_ddl(r.objid, r.command_tag);
        END IF;
    END LOOP;
    PERFORM decoupled._check_inheritance();
END
$$;
CREATE EVENT TRIGGER decoupled_ddl_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
                 'CREATE VIEW', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'CREATE RULE',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION decoupled._on_ddl_end();

CREATE FUNCTION decoupled._hand_over_sink_table(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = o.relation)
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
              FROM unnest(ARRAY['plan', 'delta', 'before', 'history']) part,
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
    PERFORM set_config('lock_timeout', v_lock, true);
    RETURN v_count;
END
$$;
------------------------------------------------------------------------------
-- Collections, part 5: WAL capture of registered tables (brief C14.1)
--
-- Where wal_level = logical and decoupled.capture = 'wal' (the default), the
-- capture worker (bgworker/capture_worker.cpp) reads the logical slot
-- `pg_decoupled` with the extension's own output plugin
-- (extension/capture_plugin.cpp) and writes every committed change of a
-- WAL-captured table into its c<id>_pending, in commit order; tick_tables()
-- moves pending into history as for trigger capture.  Writers pay nothing
-- beyond the WAL they write anyway (REPLICA IDENTITY FULL: an update's and a
-- delete's old row is in it).
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
-- confirms F to the slot.  After a crash between the two, the transactions
-- the slot delivers again commit before F and are skipped.
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

-- The capture worker's shared-memory state (extension/capture_functions.cpp).
CREATE FUNCTION decoupled._capture_state(
    OUT pid integer, OUT captured_through pg_lsn, OUT progress_at timestamptz,
    OUT last_error text, OUT error_at timestamptz)
RETURNS record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_capture_state';

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

-- Takes the table for a switch: ACCESS EXCLUSIVE, since dropping a trigger
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
    -- Again under the table's lock (a drop takes it first, then the row).
    PERFORM FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = id AND o.dropped_at IS NULL AND o.relation = v_rel FOR SHARE;
    IF NOT FOUND OR EXISTS (SELECT FROM decoupled.capture_relations c WHERE c.lifetime_id = id) THEN
        RETURN false;
    END IF;
    PERFORM decoupled._set_capture_switching(true);
    INSERT INTO decoupled.capture_relations (relation, lifetime_id) VALUES (v_rel, id);
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
    PERFORM FROM decoupled.catalog_objects o
     WHERE o.lifetime_id = id AND o.dropped_at IS NULL AND o.relation = v_rel FOR SHARE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM decoupled._set_capture_switching(true);
    PERFORM decoupled._create_capture_triggers(v_rel, decoupled._storage(id, 'pending'));
    DELETE FROM decoupled.capture_relations c WHERE c.lifetime_id = id;
    PERFORM decoupled._invalidate_relation(v_rel);
    PERFORM decoupled._set_capture_switching(false);
    RETURN true;
END
$$;

-- A truncation in the WAL: every row the collection holds at that point of
-- the commit order (its current rows and what is pending) is retracted.
CREATE FUNCTION decoupled._capture_truncate(id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('INSERT INTO %1$s SELECT -1, %2$s FROM %3$s c '
                   'UNION ALL SELECT -p.mz_diff, %4$s FROM %1$s p',
                   decoupled._storage(id, 'pending'), decoupled._cols(id, 'c.'),
                   decoupled._storage(id, 'cur'), decoupled._cols(id, 'p.'));
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
                      AND w.lsn > s.captured_through) THEN 'stalled'
                ELSE 'running' END AS status,
           n.wal_tables, n.trigger_tables, s.pid AS worker_pid,
           sl.slot_name::text, sl.active AS slot_active,
           p.captured_lsn, p.captured_at, s.captured_through, s.progress_at,
           pg_wal_lsn_diff(w.lsn, s.captured_through)::bigint AS lag_bytes,
           pg_wal_lsn_diff(w.lsn, sl.restart_lsn)::bigint AS retained_wal_bytes,
           s.last_error, s.error_at
      FROM s CROSS JOIN n CROSS JOIN w
      LEFT JOIN pg_replication_slots sl ON sl.slot_name = 'pg_decoupled'
      LEFT JOIN decoupled.capture_progress p ON true;
COMMENT ON VIEW decoupled.capture IS
    'WAL capture of registered tables: setting, status, slot, lag and retained WAL.';

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
    -- Every transaction that wrote them committed before this point; every
    -- later one commits after it.
    v_lsn := pg_current_wal_insert_lsn();
    FOR r IN SELECT c.lifetime_id, c.relation FROM decoupled.capture_relations c
              ORDER BY c.lifetime_id LOOP
        EXECUTE format('INSERT INTO %1$s SELECT -1, %2$s FROM %3$s c '
                       'UNION ALL SELECT -p.mz_diff, %4$s FROM %1$s p '
                       'UNION ALL SELECT 1, %5$s FROM ONLY %6$s t',
                       decoupled._storage(r.lifetime_id, 'pending'),
                       decoupled._cols(r.lifetime_id, 'c.'),
                       decoupled._storage(r.lifetime_id, 'cur'),
                       decoupled._cols(r.lifetime_id, 'p.'),
                       decoupled._cols(r.lifetime_id, 't.'), r.relation::regclass);
    END LOOP;
    INSERT INTO decoupled.capture_progress AS p (slot_name, captured_lsn)
    VALUES ('pg_decoupled', v_lsn)
    ON CONFLICT (only_row) DO UPDATE SET captured_lsn = EXCLUDED.captured_lsn, captured_at = now();
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
    IF timeout IS NULL OR timeout < interval '0' THEN
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
    RETURN decoupled._wait_captured(greatest(
        (extract(epoch FROM v_deadline - clock_timestamp()) * 1000)::integer, 0));
END
$$;
COMMENT ON FUNCTION decoupled.wait_for_capture(interval) IS
    'Wait until WAL capture has taken in every write committed before the call.';
------------------------------------------------------------------------------
-- Compaction permission, publication, compaction and holds (brief C3, C4)
------------------------------------------------------------------------------

-- Remember the bound as committed before this transaction, once per
-- transaction, so the commit-time check can reject a regression whatever
-- happened in between.
CREATE FUNCTION decoupled._remember_committed_bound() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.committed_bound := coalesce(NEW.committed_bound, NEW.bound);
        NEW.writer := pg_current_xact_id();
    ELSIF OLD.writer IS DISTINCT FROM pg_current_xact_id() THEN
        NEW.committed_bound := OLD.bound;
        NEW.writer := pg_current_xact_id();
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER remember_committed_bound BEFORE INSERT OR UPDATE ON decoupled.catalog_bounds
    FOR EACH ROW EXECUTE FUNCTION decoupled._remember_committed_bound();

-- Validation on the transaction's final state, at commit (C3.2).
CREATE FUNCTION decoupled._permission_trigger() RETURNS trigger
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_permission_trigger';
CREATE CONSTRAINT TRIGGER bound_permission AFTER INSERT OR UPDATE ON decoupled.catalog_bounds
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();
CREATE CONSTRAINT TRIGGER requirement_permission
    AFTER INSERT OR UPDATE ON decoupled.catalog_requirements
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();
CREATE CONSTRAINT TRIGGER hold_permission AFTER INSERT OR UPDATE ON decoupled.catalog_holds
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION decoupled._permission_trigger();

-- One publication round (C3.5) over `ids`: propose upper - retain_history
-- capped by requirements and holds, and commit the bounds that moved.
-- Returns the number of bounds advanced.
CREATE FUNCTION decoupled._publish_bounds(ids bigint[]) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count integer;
BEGIN
    IF ids IS NULL THEN
        RETURN 0;
    END IF;
    -- One lock order for everyone who locks several bound rows.
    PERFORM FROM decoupled.catalog_bounds b WHERE b.lifetime_id = ANY (ids)
     ORDER BY b.lifetime_id FOR UPDATE;
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

-- Drains the publication queue into an array — of every collection, or of
-- those placed on `cluster` (NULL: registered tables) — so that the
-- planner sees how few changed and probes the catalog by key.  Rows locked
-- by another publication (draining them) or by a writer that relies on them
-- (_queue_for_publication) are skipped, never waited for: they stay for a
-- later round.
CREATE FUNCTION decoupled._drain_bound_queue(every boolean, cluster text) RETURNS bigint[]
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH drained AS (
        DELETE FROM decoupled.catalog_bound_queue q
         WHERE q.ctid = ANY (ARRAY(
                   SELECT p.ctid FROM decoupled.catalog_bound_queue p
                    WHERE every OR EXISTS (SELECT FROM decoupled.catalog_objects o
                                            WHERE o.lifetime_id = p.lifetime_id
                                              AND o.cluster IS NOT DISTINCT FROM
                                                  _drain_bound_queue.cluster)
                      FOR UPDATE SKIP LOCKED))
        RETURNING q.lifetime_id)
    SELECT array_agg(DISTINCT lifetime_id) FROM drained
$$;

-- Work follows the queue of collections that changed since the last round,
-- not the catalog's size.
CREATE FUNCTION decoupled.publish_bounds() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT decoupled._publish_bounds(decoupled._drain_bound_queue(true, NULL))
$$;
COMMENT ON FUNCTION decoupled.publish_bounds() IS
    'One compaction-bound publication round over the collections that changed since the last one.';

-- Physically compact collections to their committed bound (C2.4, C3.6) —
-- every one, or those placed on `cluster` (NULL: registered tables): since
-- moves up to the bound, never past upper, never back, and only history
-- invisible at every time >= since is deleted.  Idempotent; late or
-- concurrent runs are harmless.  Returns how many collections moved.
-- Frontier rows come before bound rows in the global lock order, and the
-- caller may hold bound rows: a frontier row a writer holds is skipped
-- (SKIP LOCKED), never waited for — that collection is compacted by a later
-- round.
CREATE FUNCTION decoupled._apply_compaction(every boolean, cluster text) RETURNS integer
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
        EXECUTE format('DELETE FROM %s WHERE valid_to <= $1', decoupled._storage(r.lifetime_id, 'dead'))
            USING v_since;
        UPDATE decoupled.catalog_frontiers f SET since = v_since, changed_at = now()
         WHERE f.lifetime_id = r.lifetime_id;
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;

CREATE FUNCTION decoupled.apply_compaction() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT decoupled._apply_compaction(true, NULL)
$$;
COMMENT ON FUNCTION decoupled.apply_compaction() IS
    'Compact every collection''s history up to its committed bound.';

-- The controller's round for what no replica maintains: registered tables
-- (bounds and compaction) and the storage of dropped collections.
CREATE FUNCTION decoupled._maintain_tables() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, NULL));
    PERFORM decoupled.finalize_dropped();
    RETURN decoupled._apply_compaction(false, NULL);
END
$$;

------------------------------------------------------------------------------
-- Holds (C4)
--
-- A session's holds live in shared memory (extension/sessions.cpp); its
-- adapter incarnation's durable hold on a collection is one row in
-- catalog_holds at or below all of them, written only by that incarnation's
-- adapterd, in transactions of its own.  A hold under established
-- protection (the committed durable hold already covers it) writes nothing
-- durable; a new or stronger one waits until adapterd has committed
-- protection for it, so it is durable before use whatever the session's
-- transaction does.  Releasing writes nothing either: adapterd raises or
-- removes durable holds at its next publication (lazy, coalesced
-- weakening).
------------------------------------------------------------------------------

-- Who called the entry point (extension/caller.cpp): public functions that
-- act on a caller's behalf are C entry points that record their caller and
-- call the SECURITY DEFINER implementation of the same name with a leading
-- underscore, which nobody may call directly.  Volatile: each call reads
-- the innermost caller frame at that moment.
CREATE FUNCTION decoupled._caller() RETURNS oid
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller';
CREATE FUNCTION decoupled._caller_is_admin() RETURNS boolean
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller_is_admin';
CREATE FUNCTION decoupled._caller_can_select(relation oid) RETURNS boolean
    LANGUAGE C VOLATILE STRICT AS 'MODULE_PATHNAME', 'decoupled_caller_can_select';
CREATE FUNCTION decoupled._caller_schema() RETURNS text
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_caller_schema';

CREATE FUNCTION decoupled._session_attachment(adapter text) RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_session_attachment';
CREATE FUNCTION decoupled._session_attach(adapter text, incarnation bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_session_attach';
CREATE FUNCTION decoupled._hold_register(incarnation bigint, lifetime_id bigint, frontier bigint,
                                         subscription boolean DEFAULT false)
    RETURNS bigint LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_register';
CREATE FUNCTION decoupled._hold_release(hold_id bigint, any_session boolean) RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_release';
CREATE FUNCTION decoupled._backend_start() RETURNS timestamptz
    LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'decoupled_backend_start';
CREATE FUNCTION decoupled._shared_holds()
    RETURNS TABLE (hold_id bigint, incarnation bigint, lifetime_id bigint, frontier bigint,
                   session_pid integer, subscription boolean)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_shared_holds';

CREATE FUNCTION decoupled._publication_in_flight(incarnation bigint) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_publication_in_flight';
CREATE FUNCTION decoupled._hold_confirm(hold_id bigint, incarnation bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_confirm';
CREATE FUNCTION decoupled._request_hold_publication(incarnation bigint) RETURNS boolean
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_request_hold_publication';
CREATE FUNCTION decoupled._hold_advance(hold_id bigint, frontier bigint) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_hold_advance';

-- The session's owner (brief C7.1, C7.4): the incarnation of its adapter
-- (decoupled.adapter) in the active deployment that it attached to at its
-- first protected operation.  A retired one is an error, never a silent
-- move to its successor; an undeclared or stopped adapter is an error too.
CREATE FUNCTION decoupled._session_owner(OUT adapter text, OUT deployment text,
                                         OUT incarnation bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_attached bigint;
BEGIN
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

-- Registers a session hold at `frontier` under the session's owner and
-- makes sure the owner's committed durable hold covers it (C4.2).
CREATE FUNCTION decoupled._protect(lifetime_id bigint, frontier bigint, subscription boolean)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_owner   record;
    v_id      bigint;
    v_durable bigint;
BEGIN
    v_owner := decoupled._session_owner();
    v_id := decoupled._hold_register(v_owner.incarnation, _protect.lifetime_id, _protect.frontier,
                                     _protect.subscription);
    -- Registered first: a publication that starts from now on sees this
    -- hold; one in flight may still raise the durable hold past it.  Only
    -- under read committed does the next statement see the latest commit.
    IF NOT decoupled._publication_in_flight(v_owner.incarnation)
       AND current_setting('transaction_isolation') = 'read committed' THEN
        SELECT h.frontier INTO v_durable FROM decoupled.catalog_holds h
         WHERE h.incarnation = v_owner.incarnation AND h.lifetime_id = _protect.lifetime_id;
    END IF;
    IF v_durable IS NULL OR v_durable > _protect.frontier THEN
        PERFORM decoupled._hold_confirm(v_id, v_owner.incarnation);
    END IF;
    RETURN v_id;
END
$$;

-- What a hold or a subscription (`verb`: "held", "subscribed to") starts
-- from: the collection, checked and read with its frontiers, and the time
-- asked for (NULL: the latest readable time, or since while nothing is).
CREATE FUNCTION decoupled._protection_request(collection text, as_of bigint, verb text,
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
    SELECT f.since, f.upper INTO since, upper FROM decoupled.catalog_frontiers f
     WHERE f.lifetime_id = (o).lifetime_id;
    SELECT b.bound INTO bound FROM decoupled.catalog_bounds b WHERE b.lifetime_id = (o).lifetime_id;
    frontier := coalesce(as_of, greatest(since, upper - 1));
END
$$;

CREATE FUNCTION decoupled.acquire_hold(collection text, as_of bigint DEFAULT NULL)
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._acquire_hold(collection text, as_of bigint)
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
    RETURN decoupled._protect((r.o).lifetime_id, r.frontier, false);
END
$$;
COMMENT ON FUNCTION decoupled.acquire_hold(text, bigint) IS
    'Protect reads of a collection at times >= as_of (NULL: the latest readable time); returns the hold id.';

CREATE FUNCTION decoupled.release_hold(id bigint) RETURNS void
    LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
CREATE FUNCTION decoupled._release_hold(id bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    IF _release_hold.id IS NULL THEN
        RAISE EXCEPTION 'hold NULL does not exist' USING ERRCODE = 'undefined_object';
    END IF;
    -- The durable protection is lifted lazily, at adapterd's next hold
    -- publication (decoupled.publish_holds() runs one now).
    PERFORM decoupled._hold_release(_release_hold.id, decoupled._caller_is_admin());
END
$$;
COMMENT ON FUNCTION decoupled.release_hold(bigint) IS
    'Release a hold; compaction may pass its frontier after the next hold publication.';

-- adapterd's side of a round (bgworker/adapterd.cpp): `lids` are the
-- collections its sessions hold, with the lowest hold of each (`mins`) and
-- the lowest one waiting for durable protection (`pending`, -1: none).
-- Lowers or creates the durable holds the waiting ones need and, with
-- `publish`, raises the others to the lowest session hold and removes
-- those no session holds.  Returns (collection, bound) pairs, flattened,
-- for collections with waiting holds below their compaction bound: those
-- holds are refused.
CREATE FUNCTION decoupled._adapter_apply(incarnation bigint, lids bigint[], mins bigint[],
                                         pending bigint[], publish boolean) RETURNS bigint[]
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i        decoupled.catalog_adapter_incarnations;
    v_failed  bigint[] := '{}';
    v_bound   bigint;
    v_changed bigint[];
    k         integer;
BEGIN
    SELECT * INTO i FROM decoupled.catalog_adapter_incarnations a
     WHERE a.incarnation = _adapter_apply.incarnation;
    -- The bounds of the collections whose durable holds this round may
    -- write, in the one lock order of everyone who locks several bound rows
    -- (ascending id), and FOR UPDATE as the commit-time permission check
    -- takes them (a shared lock would have to be upgraded there, and two
    -- upgraders deadlock): publication cannot pass them before this commits.
    PERFORM FROM decoupled.catalog_bounds b
     WHERE b.lifetime_id IN (SELECT l FROM unnest(lids, pending) AS p(l, w) WHERE w >= 0 OR publish)
     ORDER BY b.lifetime_id FOR UPDATE;
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

-- One hold publication now, by the adapterd of the session's adapter
-- (adapterd does it every decoupled.hold_publication_interval).  Returns
-- false when that adapter has no running adapterd.
CREATE FUNCTION decoupled.publish_holds() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_incarnation bigint;
BEGIN
    SELECT i.incarnation INTO v_incarnation FROM decoupled.catalog_adapter_incarnations i
     WHERE i.adapter = coalesce(nullif(current_setting('decoupled.adapter', true), ''), 'default')
       AND i.deployment = decoupled._active_deployment() AND i.retired_at IS NULL;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN decoupled._request_hold_publication(v_incarnation);
END
$$;
COMMENT ON FUNCTION decoupled.publish_holds() IS
    'Publish the weakening of the current adapter''s holds now (released holds lift their protection).';

------------------------------------------------------------------------------
-- Dry run (C1.5)
------------------------------------------------------------------------------

-- Runs one catalog call in a subtransaction with every deferred admission
-- check made immediate, reports what it created and dropped or the error it
-- hit, and rolls it all back.
CREATE FUNCTION decoupled.dry_run(sql text)
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
                             'create_materialized_view', 'create_sink', 'drop') THEN
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

-- Everything a catalog call can create or drop, as "kind:name" strings.
CREATE FUNCTION decoupled._catalog_inventory() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(e), '{}') FROM (
        SELECT 'cluster:' || name FROM decoupled.catalog_clusters
        UNION ALL SELECT 'replica:' || cluster || '.' || name FROM decoupled.catalog_replicas
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
------------------------------------------------------------------------------
-- Replicas and sources (brief C5, C6)
--
-- A replica process speaks to the server only through the replica_*
-- functions below, each fenced by its incarnation: once a newer incarnation
-- of the same replica registered, every call of the older one fails.
------------------------------------------------------------------------------

-- Starts a change of one replica of an unmanaged cluster: checks the names,
-- begins the catalog change and locks the cluster.
CREATE FUNCTION decoupled._begin_replica_change(cluster_name text, replica_name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_managed boolean;
BEGIN
    PERFORM decoupled._check_name('cluster', cluster_name);
    PERFORM decoupled._check_name('replica', replica_name);
    PERFORM decoupled._begin_catalog_change();
    SELECT c.managed INTO v_managed FROM decoupled.catalog_clusters c
     WHERE c.name = cluster_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster "%" does not exist', cluster_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_managed THEN
        RAISE EXCEPTION 'cluster "%" is managed', cluster_name
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Change its replica count with decoupled.alter_cluster().';
    END IF;
END
$$;

CREATE FUNCTION decoupled.create_replica(cluster text, name text, external boolean DEFAULT false)
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
    INSERT INTO decoupled.catalog_replicas (cluster, name, external)
    VALUES (create_replica.cluster, create_replica.name, coalesce(create_replica.external, false));
END
$$;
COMMENT ON FUNCTION decoupled.create_replica(text, text, boolean) IS
    'Add a replica to an unmanaged cluster; external replicas are run by pg_decoupled_replicad.';

CREATE FUNCTION decoupled.drop_replica(cluster text, name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_before bigint;
BEGIN
    PERFORM decoupled._begin_replica_change(drop_replica.cluster, drop_replica.name);
    SELECT count(*) INTO v_before FROM decoupled.catalog_replicas r
     WHERE r.cluster = drop_replica.cluster;
    DELETE FROM decoupled.catalog_replicas r
     WHERE r.cluster = drop_replica.cluster AND r.name = drop_replica.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica "%" does not exist in cluster "%"',
                        drop_replica.name, drop_replica.cluster
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM decoupled._note_pause(drop_replica.cluster, v_before);
END
$$;
COMMENT ON FUNCTION decoupled.drop_replica(text, text) IS
    'Remove a replica of an unmanaged cluster; its process is stopped by the controller.';

------------------------------------------------------------------------------
-- Sources
------------------------------------------------------------------------------

-- Output collections of each generator: role, columns.
CREATE FUNCTION decoupled._generator_outputs(generator text)
RETURNS TABLE (role text, columns jsonb)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT g.role, g.columns FROM (VALUES
        ('counter', '', '[{"name": "n", "type": "bigint"}]'::jsonb),
        ('auction', 'auctions',
         '[{"name": "id", "type": "bigint"}, {"name": "seller", "type": "bigint"},
           {"name": "item", "type": "text"}, {"name": "end_time", "type": "timestamp with time zone"}]'),
        ('auction', 'bids',
         '[{"name": "id", "type": "bigint"}, {"name": "buyer", "type": "bigint"},
           {"name": "auction_id", "type": "bigint"}, {"name": "amount", "type": "integer"},
           {"name": "bid_time", "type": "timestamp with time zone"}]'),
        -- The auction source itself records progress only.
        ('auction', '', '[{"name": "tick", "type": "bigint"}]')
    ) g(generator, role, columns)
    WHERE g.generator = _generator_outputs.generator
$$;

-- The public relation of a collection: a view in `schema` reading the
-- latest state, or the history at decoupled.as_of.
CREATE FUNCTION decoupled._create_public_view(lifetime_id bigint, schema text, name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('CREATE VIEW %I.%I AS SELECT %s FROM %s WHERE decoupled.as_of() IS NULL '
                   'UNION ALL SELECT * FROM %s',
                   schema, name, decoupled._cols(lifetime_id), decoupled._storage(lifetime_id, 'cur'),
                   decoupled._storage(lifetime_id, 'history'));
    EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', schema, name);
END
$$;

CREATE FUNCTION decoupled._tick_ms(options jsonb) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tick interval;
BEGIN
    BEGIN
        v_tick := coalesce(options->>'tick', '1s')::interval;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'invalid tick "%"', options->>'tick'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give an interval such as ''1s'' or ''10ms''.';
    END;
    IF v_tick < interval '10 milliseconds' OR v_tick > interval '1 day' THEN
        RAISE EXCEPTION 'tick % is out of range', v_tick
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Ticks range from 10ms to 1 day.';
    END IF;
    RETURN decoupled._retain_ms(v_tick);
END
$$;

-- The entry point records its caller (extension/caller.cpp): the source's
-- relations are created in the caller's current schema.
CREATE FUNCTION decoupled.create_source(name text, generator text, cluster text DEFAULT 'default',
                                        options jsonb DEFAULT '{}',
                                        retain_history interval DEFAULT '1 second')
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
COMMENT ON FUNCTION decoupled.create_source(text, text, text, jsonb, interval) IS
    'Create a load-generator source (counter, auction) maintained by the cluster''s replicas.';

CREATE FUNCTION decoupled._create_source(name text, generator text, cluster text, options jsonb,
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
    IF generator IS NULL OR NOT EXISTS (SELECT FROM decoupled._generator_outputs(generator)) THEN
        RAISE EXCEPTION 'unknown load generator "%"', coalesce(generator, 'NULL')
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

-- Drops a collection or sink by name.  Subsources go with their source; a
-- table is unregistered (the table itself stays).  Objects built on it are
-- dropped with `cascade`, else the drop is refused.
CREATE FUNCTION decoupled.drop(name text, cascade boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_version bigint;
    v_roots   bigint[];
    v_victim  decoupled.catalog_objects;
BEGIN
    IF drop.cascade IS NULL THEN
        RAISE EXCEPTION 'cascade must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_version := decoupled._begin_catalog_change();
    o := decoupled._collection(drop.name);
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
    IF NOT drop.cascade THEN
        PERFORM decoupled._refuse_dependents(format('%s "%s"', o.kind, o.name), v_roots);
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
COMMENT ON FUNCTION decoupled.drop(text, boolean) IS
    'Drop a source (with its subsources), materialized view or sink, or unregister a table; with cascade also what is built on it.';

-- Frees the name at once unless a reader holds the view; then
-- finalization removes it (a drop never waits for readers).  The view is
-- found by its OID (the relation), so a renamed schema is followed.
CREATE FUNCTION decoupled._drop_public_view(o decoupled.catalog_objects) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM decoupled._drop_quietly('VIEW', o.relation::regclass::text);
END
$$;

------------------------------------------------------------------------------
-- The replica protocol
------------------------------------------------------------------------------

-- The live incarnation row, or an error that tells a fenced process to stop.
CREATE FUNCTION decoupled._live_incarnation(incarnation bigint)
RETURNS decoupled.catalog_replica_incarnations
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    SELECT * INTO i FROM decoupled.catalog_replica_incarnations r
     WHERE r.incarnation = _live_incarnation.incarnation AND r.retired_at IS NULL FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'replica incarnation % is not current', _live_incarnation.incarnation
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'A newer incarnation replaced it, or its replica was dropped; '
                           'a fenced process can never write again.';
    END IF;
    RETURN i;
END
$$;

-- Registers a new incarnation of a replica in a deployment, retiring every
-- older one of that replica and deployment (and only those).
CREATE FUNCTION decoupled.replica_start(replica_id bigint, deployment text, pid integer,
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
                nextval('decoupled.incarnation_seq'), replica_start.pid, replica_start.host,
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

-- A clean exit: the incarnation retires itself.
CREATE FUNCTION decoupled.replica_stop(incarnation bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE decoupled.catalog_replica_incarnations i
       SET retired_at = now(), status = 'stopped'
     WHERE i.incarnation = replica_stop.incarnation AND i.retired_at IS NULL
$$;

CREATE FUNCTION decoupled.replica_heartbeat(incarnation bigint, status text DEFAULT 'running',
                                            error text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._live_incarnation(replica_heartbeat.incarnation);
    UPDATE decoupled.catalog_replica_incarnations i
       SET heartbeat_at = now(), status = replica_heartbeat.status, error = replica_heartbeat.error
     WHERE i.incarnation = replica_heartbeat.incarnation;
END
$$;

-- What the replica should run, read in one snapshot: every live source
-- output placed on its cluster, with its generator, schedule and upper.
CREATE FUNCTION decoupled.replica_desired_state(incarnation bigint)
RETURNS TABLE (catalog_version bigint, writes_enabled boolean, source_id bigint,
               source_name text, generator text, tick_ms bigint, epoch bigint,
               output_id bigint, output_name text, output_role text, upper bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    i := decoupled._live_incarnation(replica_desired_state.incarnation);
    RETURN QUERY
    SELECT m.catalog_version, d.state = 'active',
           coalesce((o.definition->>'parent')::bigint, o.lifetime_id),
           coalesce(p.name, o.name)::text, o.definition->>'generator',
           (o.definition->>'tick_ms')::bigint, (o.definition->>'epoch')::bigint,
           o.lifetime_id, o.name::text, o.definition->>'role', f.upper::bigint
      FROM decoupled.catalog_meta m
      JOIN decoupled.catalog_deployments d ON d.name = i.deployment
      JOIN decoupled.catalog_replicas r ON r.replica_id = i.replica_id
      JOIN decoupled.catalog_objects o ON o.cluster = r.cluster AND o.dropped_at IS NULL
                                      AND o.kind = 'source'
      JOIN decoupled.catalog_frontiers f ON f.lifetime_id = o.lifetime_id
      LEFT JOIN decoupled.catalog_objects p ON p.lifetime_id = (o.definition->>'parent')::bigint
     ORDER BY 3, 8;
    IF NOT FOUND THEN
        -- Nothing to run: still report the version followed.
        RETURN QUERY SELECT m.catalog_version, d.state = 'active', NULL::bigint, NULL::text,
                            NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text,
                            NULL::text, NULL::bigint
                       FROM decoupled.catalog_meta m
                       JOIN decoupled.catalog_deployments d ON d.name = i.deployment;
    END IF;
END
$$;

-- Compare-and-append for a replica: fenced by its incarnation; losing the
-- race is not an error, it returns the actual upper to continue from.
CREATE FUNCTION decoupled.replica_append(incarnation bigint, lifetime_id bigint, updates jsonb,
                                         expected_upper bigint, new_upper bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
#variable_conflict use_column
DECLARE
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
BEGIN
    i := decoupled._live_incarnation(replica_append.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
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

-- Current health, fenced: a report from an incarnation older than the stored
-- one is ignored, so a late predecessor never restores stale health (C6.1).
-- A change of status is also a transition in the history.
CREATE FUNCTION decoupled.replica_report(incarnation bigint, lifetime_id bigint, status text,
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
     WHERE h.lifetime_id = replica_report.lifetime_id AND h.replica_id = i.replica_id FOR UPDATE;
    INSERT INTO decoupled.replica_health AS h
           (lifetime_id, replica_id, incarnation, status, error, hint, hydrated, transition_at,
            updated_at)
    VALUES (replica_report.lifetime_id, i.replica_id, replica_report.incarnation,
            replica_report.status, replica_report.error, replica_report.hint,
            replica_report.hydrated, now(), now())
    ON CONFLICT (lifetime_id, replica_id) DO UPDATE
       SET incarnation = EXCLUDED.incarnation, status = EXCLUDED.status, error = EXCLUDED.error,
           hint = EXCLUDED.hint, hydrated = EXCLUDED.hydrated, updated_at = now(),
           transition_at = CASE WHEN h.status IS DISTINCT FROM EXCLUDED.status THEN now()
                                ELSE h.transition_at END
     WHERE h.incarnation <= EXCLUDED.incarnation;
    IF FOUND AND v_before IS DISTINCT FROM replica_report.status THEN
        SELECT r.name INTO v_name FROM decoupled.catalog_replicas r WHERE r.replica_id = i.replica_id;
        INSERT INTO decoupled.status_events (lifetime_id, replica, incarnation, status, error)
        VALUES (replica_report.lifetime_id, v_name, replica_report.incarnation,
                replica_report.status, replica_report.error);
    END IF;
END
$$;

-- Compaction by replicas (C3.5, C5.5): publish bounds for what runs on the
-- replica's cluster and apply the committed ones.  Every replica of a
-- cluster may run it; the row locks order them and neither since nor a
-- bound ever moves back.  Returns how many collections were compacted.
CREATE FUNCTION decoupled.replica_compact(incarnation bigint) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i         decoupled.catalog_replica_incarnations;
    v_cluster text;
BEGIN
    i := decoupled._live_incarnation(replica_compact.incarnation);
    SELECT r.cluster INTO v_cluster FROM decoupled.catalog_replicas r
     WHERE r.replica_id = i.replica_id;
    PERFORM decoupled._publish_bounds(decoupled._drain_bound_queue(false, v_cluster));
    RETURN decoupled._apply_compaction(false, v_cluster);
END
$$;

-- History older than the retention goes (C6.3).
CREATE FUNCTION decoupled.prune_status_history(retention interval DEFAULT '7 days')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_count bigint;
BEGIN
    DELETE FROM decoupled.status_events e WHERE e.occurred_at < now() - retention;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

------------------------------------------------------------------------------
-- Waiting for progress
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._notify_upper_at_commit() RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_notify_upper_at_commit';

CREATE FUNCTION decoupled.wait_for_upper(collection text, ts bigint,
                                         timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_for_upper';
COMMENT ON FUNCTION decoupled.wait_for_upper(text, bigint, interval) IS
    'Wait until the collection''s (or sink''s) upper exceeds ts; returns that upper.';
------------------------------------------------------------------------------
-- Adapters: adapterd's incarnations, stopping and starting, retirement
-- (brief C4.3, C7.1, C9.1)
--
-- The controller runs one adapterd per declared, not stopped adapter of a
-- live deployment.  Each start registers a new incarnation and retires the
-- older ones of that adapter and deployment (and only those); adapterd then
-- heartbeats, reclaims its predecessors' rows (their holds, sessions and
-- subscriptions) and publishes the weakening of its sessions' holds.  An
-- incarnation's holds outlive its process: silence never expires a hold.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled._adapter_change(adapter text, OUT deployment text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._check_name('adapter', adapter);
    PERFORM decoupled._begin_catalog_change();
    deployment := decoupled._active_deployment();
    PERFORM FROM decoupled.catalog_adapters a
     WHERE a.name = _adapter_change.adapter AND a.deployment = _adapter_change.deployment FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" does not exist in deployment "%"', adapter, deployment
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

CREATE FUNCTION decoupled.stop_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := decoupled._adapter_change(stop_adapter.name);
BEGIN
    INSERT INTO decoupled.catalog_adapter_stops (adapter, deployment)
    VALUES (stop_adapter.name, v_deployment) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE NOTICE 'adapter "%" is already stopped', stop_adapter.name;
    END IF;
END
$$;
COMMENT ON FUNCTION decoupled.stop_adapter(text) IS
    'Stop an adapter''s process (an outage on purpose); its declaration, incarnation and holds stay.';

CREATE FUNCTION decoupled.start_adapter(name text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_deployment text := decoupled._adapter_change(start_adapter.name);
BEGIN
    DELETE FROM decoupled.catalog_adapter_stops s
     WHERE s.adapter = start_adapter.name AND s.deployment = v_deployment;
    IF NOT FOUND THEN
        RAISE NOTICE 'adapter "%" is not stopped', start_adapter.name;
    END IF;
END
$$;
COMMENT ON FUNCTION decoupled.start_adapter(text) IS
    'Start a stopped adapter''s process again; it runs as a new incarnation.';

-- Releases what an incarnation owned: its durable holds (the collections
-- are queued for bound publication), sessions and their subscriptions.
CREATE FUNCTION decoupled._reclaim_incarnation(incarnation bigint) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH released AS (
        DELETE FROM decoupled.catalog_holds h WHERE h.incarnation = _reclaim_incarnation.incarnation
        RETURNING h.lifetime_id)
    SELECT decoupled._queue_for_publication(array_agg(lifetime_id)) FROM released;
    DELETE FROM decoupled.session_records s WHERE s.incarnation = _reclaim_incarnation.incarnation;
    UPDATE decoupled.catalog_adapter_incarnations i
       SET reclaimed_at = now(), retired_at = coalesce(retired_at, now()), status = 'stopped'
     WHERE i.incarnation = _reclaim_incarnation.incarnation;
$$;

CREATE FUNCTION decoupled.retire_incarnation(adapter text, incarnation bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM decoupled._check_name('adapter', adapter);
    PERFORM FROM decoupled.catalog_adapter_incarnations i
     WHERE i.adapter = retire_incarnation.adapter AND i.incarnation = retire_incarnation.incarnation
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter "%" has no incarnation %', adapter,
                        coalesce(retire_incarnation.incarnation::text, 'NULL')
            USING ERRCODE = 'undefined_object';
    END IF;
    -- Exactly this owner's holds and sessions; a peer's are never touched.
    PERFORM decoupled._reclaim_incarnation(retire_incarnation.incarnation);
END
$$;
COMMENT ON FUNCTION decoupled.retire_incarnation(text, bigint) IS
    'Retire an adapter incarnation now, releasing exactly its holds; its sessions must reconnect.';

-- adapterd's start: a new incarnation, retiring the older ones of this
-- adapter and deployment.
CREATE FUNCTION decoupled._adapter_start(adapter text, deployment text, pid integer)
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
        VALUES (adapter, deployment, nextval('decoupled.incarnation_seq'), pid, 'running', now())
        RETURNING incarnation INTO v_incarnation;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'adapter "%" was started by another process at the same time', adapter
            USING ERRCODE = 'ZD003',  -- lost race: the protocol's own class
                  DETAIL = 'Only one incarnation of an adapter is live in a deployment.';
    END;
    RETURN v_incarnation;
END
$$;

-- The start of every adapterd round: heartbeat (fenced: a retired
-- incarnation is told to stop), reclaim retired predecessors and the rows
-- of ended sessions.  The sessions' holds follow in the same transaction
-- (_adapter_apply).
CREATE FUNCTION decoupled._adapter_round(incarnation bigint)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_adapter_incarnations;
    r bigint;
BEGIN
    SELECT * INTO i FROM decoupled.catalog_adapter_incarnations a
     WHERE a.incarnation = _adapter_round.incarnation AND a.retired_at IS NULL FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'adapter incarnation % is not current', _adapter_round.incarnation
            USING ERRCODE = 'ZD001',  -- fenced: the protocol's own class
                  DETAIL = 'It was retired or replaced; a fenced adapterd stops.';
    END IF;
    UPDATE decoupled.catalog_adapter_incarnations a SET heartbeat_at = now(), status = 'running'
     WHERE a.incarnation = _adapter_round.incarnation;
    FOR r IN SELECT a.incarnation FROM decoupled.catalog_adapter_incarnations a
              WHERE a.adapter = i.adapter AND a.deployment = i.deployment
                AND a.retired_at IS NOT NULL AND a.reclaimed_at IS NULL
    LOOP
        PERFORM decoupled._reclaim_incarnation(r);
    END LOOP;
    DELETE FROM decoupled.session_records s
     WHERE s.incarnation = _adapter_round.incarnation
       AND NOT EXISTS (SELECT FROM pg_stat_activity a
                        WHERE a.pid = s.session_pid AND a.backend_start = s.connected_at);
END
$$;
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
                                     initial boolean)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_sums';
CREATE FUNCTION decoupled._merge_sums(plan regclass, state regclass, dstate regclass,
                                     OUT groups bigint, OUT filter text)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_merge_sums';
CREATE FUNCTION decoupled._stage_kept(plan regclass, owner oid, ts bigint, state regclass,
                                     target regclass, filter text)
    RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_stage_kept';
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
CREATE FUNCTION decoupled._recompute_in_full(touched bigint, view_rows double precision)
    RETURNS boolean LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_recompute_in_full';

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

-- Every type a column list uses, looking through domains, arrays and
-- composite types.  By OID where the list records it (a renamed type keeps
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
                        SELECT a.atttypid FROM pg_attribute a
                         WHERE t.typrelid <> 0 AND a.attrelid = t.typrelid AND a.attnum > 0
                           AND NOT a.attisdropped) n(oid))
    SELECT oid FROM types
$$;

-- Columns of collections and sinks: no name that storage, staging and
-- sinks use for themselves, and no domain whose checks an ordinary role
-- wrote — they would run with the extension's rights whenever history is
-- written.
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
    SELECT t.oid::regtype INTO v_type
      FROM decoupled._column_types(columns) x(oid)
      JOIN pg_type t ON t.oid = x.oid
      JOIN pg_roles r ON r.oid = t.typowner
     WHERE t.typtype = 'd' AND NOT r.rolsuper
       AND EXISTS (SELECT FROM pg_constraint c WHERE c.contypid = t.oid)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot use domain % in % "%"', v_type, what, name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Its constraints were written by a role that is not a superuser and '
                           'would run with the extension''s rights when history is written.',
                  HINT = 'Use its base type, or a domain owned by a superuser.';
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

CREATE FUNCTION decoupled._create_materialized_view(name text, query text, cluster text,
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

    INSERT INTO decoupled.catalog_frontiers (lifetime_id, since, upper) VALUES (v_id, v_as_of, v_as_of);
    INSERT INTO decoupled.catalog_bounds (lifetime_id, bound) VALUES (v_id, v_as_of);
    INSERT INTO decoupled.catalog_requirements (lifetime_id, required_by, frontier)
    SELECT i, v_id, v_as_of FROM unnest(v_inputs) i;
    RETURN v_id;
END
$$;

-- The arrangement of `input` on `keys` for view `view_id`: an index on the
-- input's cur and dead storage over the key expressions, e.g. "(k % 10),
-- (s)" (built-in functions only: storage is written with the extension's
-- rights), created unless another view already has it.  Keys PostgreSQL cannot index (not
-- immutable) get none: the view's steps then read the input without it.
CREATE FUNCTION decoupled._arrange(view_id bigint, input bigint, keys text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET client_min_messages = warning AS $$
DECLARE
    v_expr text := keys;
    v_name text := 'c' || input || '_a' || substr(md5(v_expr), 1, 12);
BEGIN
    BEGIN
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%s)', v_name || '_cur',
                       decoupled._storage(input, 'cur'), v_expr);
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%s)', v_name || '_dead',
                       decoupled._storage(input, 'dead'), v_expr);
    EXCEPTION WHEN invalid_object_definition OR feature_not_supported
                   OR undefined_function OR datatype_mismatch THEN
        RETURN;
    END;
    INSERT INTO decoupled.catalog_arrangements (input, index_name, expression, view_id)
    VALUES (_arrange.input, v_name, v_expr, _arrange.view_id) ON CONFLICT DO NOTHING;
END
$$;

-- What grouped views keep besides their history: an index on the view's
-- key columns (its rows of a group are found by them) and, for 'sums',
-- the state c<id>_state (keys, mz_n, mz_nn_j, mz_s_j) with a unique index on the
-- keys (NULL matching NULL), a partial index on emptied groups, and its
-- scratch c<id>_dstate.  The owner reads the state: its select list is
-- computed from it.
CREATE FUNCTION decoupled._create_kept_state(id bigint, plan regclass, owner oid, sums boolean)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_kept  record := decoupled._mv_kept_state(plan);
    v_state text := decoupled._storage(id, 'state');
BEGIN
    EXECUTE format('CREATE INDEX ON %s (%s)', decoupled._storage(id, 'cur'), v_kept.keys);
    IF NOT sums THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %s (%s)', v_state, v_kept.columns);
    EXECUTE format('CREATE UNIQUE INDEX ON %s (%s) NULLS NOT DISTINCT', v_state, v_kept.keys);
    EXECUTE format('CREATE INDEX ON %s (mz_n) WHERE mz_n = 0', v_state);
    EXECUTE format('CREATE UNLOGGED TABLE %s (LIKE %s)', decoupled._storage(id, 'dstate'), v_state);
    EXECUTE format('GRANT SELECT ON %s TO %s', v_state, owner::regrole);
END
$$;

-- Drops the arrangements only `view_id` used (at its drop); one a reader
-- holds goes with its input's storage instead.
CREATE FUNCTION decoupled._unarrange(view_id bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
BEGIN
    FOR r IN DELETE FROM decoupled.catalog_arrangements a WHERE a.view_id = _unarrange.view_id
             RETURNING a.input, a.index_name
    LOOP
        IF NOT EXISTS (SELECT FROM decoupled.catalog_arrangements a
                        WHERE a.input = r.input AND a.index_name = r.index_name) THEN
            PERFORM decoupled._drop_quietly('INDEX',
                                            'decoupled_storage.' || quote_ident(r.index_name || '_cur'));
            PERFORM decoupled._drop_quietly('INDEX',
                                            'decoupled_storage.' || quote_ident(r.index_name || '_dead'));
        END IF;
    END LOOP;
END
$$;

-- What an output requires of its inputs, given its durable progress: the
-- next computation reads them at times >= upper and must see every change
-- there, so history through upper - 1 stays (and all of it before the
-- first computation at as_of).
CREATE FUNCTION decoupled._required_frontier(as_of bigint, upper bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT greatest(as_of, upper - 1)
$$;

-- Advances the requirements of `id` on its inputs with its progress (C3.4)
-- and queues the inputs whose bounds may move as a result.  The commit-time
-- permission check locks the bound row of every requirement that moved;
-- they are locked here first, in ascending id (the global lock order), so
-- that a step and a publication never take two of them in opposite orders.
CREATE FUNCTION decoupled._advance_requirements(id bigint, frontier bigint) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT FROM decoupled.catalog_bounds b
     WHERE b.lifetime_id IN (SELECT q.lifetime_id FROM decoupled.catalog_requirements q
                              WHERE q.required_by = _advance_requirements.id
                                AND q.frontier < _advance_requirements.frontier)
     ORDER BY b.lifetime_id FOR UPDATE;
    WITH moved AS (
        UPDATE decoupled.catalog_requirements q SET frontier = _advance_requirements.frontier,
                                                    changed_at = now()
         WHERE q.required_by = _advance_requirements.id
           AND q.frontier < _advance_requirements.frontier
        RETURNING q.lifetime_id)
    SELECT decoupled._queue_for_publication(array_agg(lifetime_id)) FROM moved;
$$;

-- Times in [from_ts, to_ts) at which any of `inputs` changed, ascending,
-- at most `max_count`: a row inserted (cur.mz_ts, dead.valid_from) or
-- retracted (dead.valid_to) then.  Distinct times: many rows share one, and
-- a limit on rows would drop later times the caller then steps over.
CREATE FUNCTION decoupled._change_times(inputs bigint[], from_ts bigint, to_ts bigint,
                                        max_count integer) RETURNS bigint[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sql   text;
    v_times bigint[];
BEGIN
    SELECT string_agg(format(
               '(SELECT DISTINCT mz_ts FROM %1$s WHERE mz_ts >= $1 AND mz_ts < $2 '
               '  ORDER BY 1 LIMIT $3) '
               'UNION (SELECT DISTINCT valid_to FROM %2$s WHERE valid_to >= $1 AND valid_to < $2 '
               '       ORDER BY 1 LIMIT $3) '
               'UNION (SELECT DISTINCT valid_from FROM %2$s WHERE valid_to >= $1 '
               '          AND valid_from >= $1 AND valid_from < $2 ORDER BY 1 LIMIT $3)',
               decoupled._storage(i, 'cur'), decoupled._storage(i, 'dead')), ' UNION ')
      INTO v_sql FROM unnest(inputs) i;
    IF v_sql IS NULL THEN
        RETURN '{}';
    END IF;
    EXECUTE format('SELECT coalesce(array_agg(t ORDER BY t), ''{}'') '
                   '  FROM (SELECT t FROM (%s) x(t) ORDER BY t LIMIT $3) y', v_sql)
        INTO v_times USING from_ts, to_ts, max_count;
    RETURN v_times;
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
    i       decoupled.catalog_replica_incarnations;
    v_upper bigint;
BEGIN
    i := decoupled._live_incarnation(_lock_output.incarnation);
    PERFORM decoupled._assert_write_authority(i.deployment, i.incarnation);
    SELECT f.upper INTO v_upper FROM decoupled.catalog_frontiers f
      JOIN decoupled.catalog_objects c USING (lifetime_id)
     WHERE f.lifetime_id = _lock_output.lifetime_id AND c.dropped_at IS NULL
       AND c.kind = _lock_output.kind
       FOR UPDATE OF f;
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
CREATE FUNCTION decoupled._changes_sql(lifetime_id bigint, with_snapshot boolean) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN with_snapshot THEN format(
               'SELECT $3, 1, %1$s FROM %2$s WHERE mz_ts <= $3 '
               'UNION ALL SELECT $3, 1, %1$s FROM %3$s WHERE valid_from <= $3 AND valid_to > $3 '
               'UNION ALL ', c.cols, c.cur, c.dead) ELSE '' END
           || format(
               'SELECT mz_ts, 1, %1$s FROM %2$s WHERE mz_ts >= $1 AND mz_ts < $2 '
               'UNION ALL SELECT valid_from, 1, %1$s FROM %3$s '
               ' WHERE valid_to >= $1 AND valid_from >= $1 AND valid_from < $2 '
               'UNION ALL SELECT valid_to, -1, %1$s FROM %3$s WHERE valid_to >= $1 AND valid_to < $2',
               c.cols, c.cur, c.dead)
      FROM (SELECT decoupled._cols(lifetime_id) AS cols,
                   decoupled._storage(lifetime_id, 'cur') AS cur,
                   decoupled._storage(lifetime_id, 'dead') AS dead) c
$$;

-- One maintenance step of a materialized view by a replica (C5.3): compare
-- (upper = expected_upper) and, for each time t at which an input changed
-- below every input's upper, append the difference between the plan at t
-- and the view's current state, at t.  Times without input changes only
-- move the upper.  Losing the race to a sibling is not an error: the actual
-- upper is returned.  caught_up: the view reached its inputs' frontier.
CREATE FUNCTION decoupled.replica_maintain(incarnation bigint, lifetime_id bigint,
                                           expected_upper bigint,
                                           OUT upper bigint, OUT caught_up boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
AS $$
#variable_conflict use_column
DECLARE
    -- Computations per call: a view far behind catches up in bounded steps.
    c_max_steps constant integer := 16;
    o        decoupled.catalog_objects;
    id       bigint := replica_maintain.lifetime_id;
    v_inputs bigint[];
    v_as_of  bigint;
    v_target bigint;
    v_times  bigint[];
    v_t      bigint;
    v_bad    regclass;
    v_plan   regclass;
    v_owner  oid;
    v_stage  regclass := decoupled._storage(id, 'stage')::regclass;
    v_strategy  text;
    v_cur       regclass := decoupled._storage(id, 'cur')::regclass;
    v_state     regclass := to_regclass(decoupled._storage(id, 'state'));
    v_dstate    regclass := to_regclass(decoupled._storage(id, 'dstate'));
    v_partial   boolean;
    v_groups    bigint;
    v_filter    text;
    v_steps_inc integer := 0;
    v_steps_rec integer := 0;
BEGIN
    upper := decoupled._lock_output(replica_maintain.incarnation, id, 'materialized view');
    caught_up := false;
    IF upper <> expected_upper THEN
        RETURN;
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
        SELECT min(f.upper) INTO v_target FROM decoupled.catalog_frontiers f
         WHERE f.lifetime_id = ANY (v_inputs);
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
        IF v_strategy = 'linear' AND upper > v_as_of THEN
            PERFORM decoupled._stage_delta(v_plan, v_owner, v_t, v_stage);
            v_steps_inc := v_steps_inc + 1;
        ELSIF v_strategy = 'sums' AND upper > v_as_of THEN
            -- The changes' counts and sums added to the kept state; the
            -- touched groups' rows, from the state, replace the view's.
            PERFORM decoupled._stage_sums(v_plan, v_owner, v_t, v_dstate, false);
            SELECT g.groups, g.filter INTO v_groups, v_filter
              FROM decoupled._merge_sums(v_plan, v_state, v_dstate) g;
            IF v_groups > 0 THEN
                PERFORM decoupled._stage_kept(v_plan, v_owner, v_t, v_state, v_stage, v_filter);
                EXECUTE format('INSERT INTO %1$s (mz_ts, mz_diff, mz_key, mz_hash, %2$s) '
                               'SELECT $1, -1, ROW(%2$s)::text, mz_hash, %2$s FROM %3$s WHERE %4$s',
                               v_stage, decoupled._cols(id), v_cur, v_filter)
                    USING v_t;
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
                    (SELECT c.reltuples FROM pg_class c WHERE c.oid = v_cur));
                v_partial := v_groups >= 0;
            END IF;
            IF v_strategy = 'groups' AND upper > v_as_of THEN
                SELECT g.groups, g.filter INTO v_groups, v_filter
                  FROM decoupled._touched_groups(v_plan, v_owner, v_t) g;
                v_partial := v_groups = 0 OR NOT decoupled._recompute_in_full(v_groups,
                    (SELECT c.reltuples FROM pg_class c WHERE c.oid = v_cur));
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
                EXECUTE format('INSERT INTO %1$s (mz_ts, mz_diff, mz_key, mz_hash, %2$s) '
                               'SELECT $1, -1, ROW(%2$s)::text, mz_hash, %2$s FROM %3$s%4$s',
                               v_stage, decoupled._cols(id), v_cur,
                               coalesce(' WHERE ' || v_filter, ''))
                    USING v_t;
            END IF;
        END IF;
        PERFORM decoupled._append_staged(id, upper, v_t + 1);
        upper := v_t + 1;
    END LOOP;
    IF v_steps_inc + v_steps_rec > 0 THEN
        UPDATE decoupled.view_steps s
           SET incremental = s.incremental + v_steps_inc, recompute = s.recompute + v_steps_rec
         WHERE s.lifetime_id = id;
    END IF;
    IF cardinality(v_times) < c_max_steps THEN
        -- No input changed in [upper, v_target): the view is final there too.
        UPDATE decoupled.catalog_frontiers f SET upper = v_target, changed_at = now()
         WHERE f.lifetime_id = id;
        PERFORM decoupled._queue_for_publication(ARRAY[id]);
        PERFORM decoupled._notify_upper_at_commit();
        upper := v_target;
        caught_up := true;
    END IF;
    PERFORM decoupled._advance_requirements(id, decoupled._required_frontier(v_as_of, upper));
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
AS $$
#variable_conflict use_column
DECLARE
    o         decoupled.catalog_objects;
    v_t       bigint;
    v_before  text := current_setting('decoupled.as_of');
    v_differs boolean;
BEGIN
    o := decoupled._collection(_verify.name);
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
    EXECUTE format('CREATE TEMP TABLE decoupled_verify (LIKE %s)',
                   decoupled._storage(o.lifetime_id, 'stage'));
    -- The view's own history at v_t first: it checks that v_t is readable.
    PERFORM set_config('decoupled.as_of', v_t::text, true);
    EXECUTE format('CREATE TEMP TABLE decoupled_verify_view AS SELECT ROW(%s)::text AS k FROM %s',
                   decoupled._cols(o.lifetime_id), decoupled._storage(o.lifetime_id, 'history'));
    PERFORM set_config('decoupled.as_of', v_before, true);
    PERFORM decoupled._stage_plan((o.definition->>'plan')::oid::regclass,
                                  (o.definition->>'owner')::oid, v_t,
                                  'pg_temp.decoupled_verify'::regclass);
    SELECT EXISTS ((SELECT mz_key FROM pg_temp.decoupled_verify
                    EXCEPT ALL SELECT k FROM pg_temp.decoupled_verify_view)
                   UNION ALL
                   (SELECT k FROM pg_temp.decoupled_verify_view
                    EXCEPT ALL SELECT mz_key FROM pg_temp.decoupled_verify))
      INTO v_differs;
    DROP TABLE pg_temp.decoupled_verify, pg_temp.decoupled_verify_view;
    RETURN NOT v_differs;
END
$$;
COMMENT ON FUNCTION decoupled.verify(text, bigint) IS
    'Recompute a materialized view from its inputs at as_of (default: latest readable) and compare.';
------------------------------------------------------------------------------
-- Sinks (brief C5.4)
--
-- A sink writes the changes of one collection into a table of its own,
-- (mz_timestamp, mz_diff, columns...), exactly once: the rows of changes at
-- times in [a, b) are inserted in the same transaction that moves the sink's
-- upper (its durable output progress) from a to b under the frontier row
-- lock, so two replicas racing, or a replica killed at any moment, never
-- write a change twice or skip one.
--
-- The table belongs to the extension while the sink lives (nobody can hang
-- a trigger on it that would run in a replica); its creator may read it and
-- grant that on.  When the sink is dropped, the table is handed to its
-- creator.
------------------------------------------------------------------------------

CREATE FUNCTION decoupled.create_sink(name text, from_collection text, into_table text,
                                      cluster text DEFAULT 'default',
                                      snapshot boolean DEFAULT true)
RETURNS bigint LANGUAGE C VOLATILE AS 'MODULE_PATHNAME', 'decoupled_entry';
COMMENT ON FUNCTION decoupled.create_sink(text, text, text, text, boolean) IS
    'Write a collection''s changes (mz_timestamp, mz_diff, columns...) into a new table, exactly once.';

-- An unqualified into_table is created in the caller's current schema.
CREATE FUNCTION decoupled._create_sink(name text, from_collection text, into_table text,
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

-- One step of a sink by a replica: compare (upper = expected_upper), then
-- write the input's changes at times in [upper, input upper) — preceded,
-- on the first step of a snapshot sink, by the input's state at as_of — and
-- move the upper in the same transaction.
CREATE FUNCTION decoupled.replica_sink(incarnation bigint, lifetime_id bigint,
                                       expected_upper bigint,
                                       OUT upper bigint, OUT caught_up boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off
SET TimeZone = 'UTC' SET DateStyle = 'ISO, YMD' SET IntervalStyle = 'postgres'
SET extra_float_digits = 1 SET bytea_output = 'hex' SET lc_monetary = 'C'
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
    IF upper = v_as_of THEN
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

------------------------------------------------------------------------------
-- What a replica maintains besides sources
------------------------------------------------------------------------------

-- The materialized views and sinks placed on the replica's cluster, inputs
-- before what reads them (a dependent always has the larger lifetime id).
CREATE FUNCTION decoupled.replica_maintained(incarnation bigint)
RETURNS TABLE (lifetime_id bigint, name text, kind text, upper bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    i decoupled.catalog_replica_incarnations;
BEGIN
    i := decoupled._live_incarnation(replica_maintained.incarnation);
    RETURN QUERY
    SELECT o.lifetime_id, o.name::text, o.kind, f.upper::bigint
      FROM decoupled.catalog_replicas r
      JOIN decoupled.catalog_objects o ON o.cluster = r.cluster AND o.dropped_at IS NULL
                                      AND o.kind IN ('materialized view', 'sink')
      JOIN decoupled.catalog_frontiers f ON f.lifetime_id = o.lifetime_id
     WHERE r.replica_id = i.replica_id
     ORDER BY o.lifetime_id;
END
$$;
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
        RAISE EXCEPTION 'a subscription that waits for new changes needs READ COMMITTED'
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'Its transaction''s snapshot would never show them.';
    END IF;
    lifetime_id := (r.o).lifetime_id;
    hold_id := decoupled._protect(lifetime_id, start_at, true);
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
------------------------------------------------------------------------------
-- Public views (brief C12).  Missing observations are NULL, never 0.
------------------------------------------------------------------------------

CREATE VIEW decoupled.catalog AS
    SELECT schema_version, catalog_version, initialized_at, changed_at
      FROM decoupled.catalog_meta;

CREATE VIEW decoupled.controller AS
    SELECT * FROM decoupled.controller_status();

CREATE VIEW decoupled.supervised AS
    SELECT * FROM decoupled.supervision();

CREATE VIEW decoupled.deployments AS
    SELECT name::text, state, state = 'active' AS writes_enabled, created_at, promoted_at,
           retired_at
      FROM decoupled.catalog_deployments;

CREATE VIEW decoupled.clusters AS
    SELECT c.name::text, c.managed, c.replication_factor,
           (SELECT count(*) FROM decoupled.catalog_replicas r WHERE r.cluster = c.name)
               AS replicas,
           c.created_at
      FROM decoupled.catalog_clusters c;

-- Each replica declaration as realized by each live deployment.
CREATE VIEW decoupled.cluster_replicas AS
    SELECT r.cluster::text, r.name::text AS replica, d.name::text AS deployment,
           i.incarnation, i.pid, i.status, r.replica_id, i.host, r.external, i.heartbeat_at
      FROM decoupled.catalog_replicas r
      CROSS JOIN decoupled.catalog_deployments d
      LEFT JOIN decoupled.catalog_replica_incarnations i
             ON i.replica_id = r.replica_id AND i.deployment = d.name
            AND i.retired_at IS NULL
     WHERE d.state <> 'retired';

CREATE VIEW decoupled.replica_statuses AS
    SELECT r.cluster::text AS name, r.name::text AS replica, i.deployment::text,
           i.incarnation, i.status, i.error, i.hint,
           coalesce(i.heartbeat_at, i.started_at) AS updated_at
      FROM decoupled.catalog_replica_incarnations i
      JOIN decoupled.catalog_replicas r USING (replica_id)
     WHERE i.retired_at IS NULL;

-- An adapter stopped on purpose shows `stopped`, with the incarnation that
-- still owns its holds.
CREATE VIEW decoupled.adapters AS
    SELECT a.name::text, a.deployment::text, i.incarnation, i.pid,
           CASE WHEN s.adapter IS NOT NULL THEN 'stopped' ELSE i.status END AS status,
           i.heartbeat_at, s.stopped_at
      FROM decoupled.catalog_adapters a
      LEFT JOIN decoupled.catalog_adapter_incarnations i
             ON i.adapter = a.name AND i.deployment = a.deployment AND i.retired_at IS NULL
      LEFT JOIN decoupled.catalog_adapter_stops s
             ON s.adapter = a.name AND s.deployment = a.deployment;

CREATE VIEW decoupled.objects AS
    SELECT o.name::text, o.kind, o.cluster::text, o.lifetime_id, o.created_at,
           o.retain_history
      FROM decoupled.catalog_objects o
     WHERE o.dropped_at IS NULL;

CREATE VIEW decoupled.frontiers AS
    SELECT o.name::text, f.since::bigint, f.upper::bigint, b.bound::bigint AS compaction_bound,
           (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint - f.upper AS lag_ms
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.catalog_frontiers f USING (lifetime_id)
      LEFT JOIN decoupled.catalog_bounds b USING (lifetime_id)
     WHERE o.dropped_at IS NULL;

CREATE VIEW decoupled.requirements AS
    SELECT c.name::text AS collection, r.name::text AS required_by, q.frontier::bigint
      FROM decoupled.catalog_requirements q
      JOIN decoupled.catalog_objects c ON c.lifetime_id = q.lifetime_id
      JOIN decoupled.catalog_objects r ON r.lifetime_id = q.required_by
     WHERE c.dropped_at IS NULL AND r.dropped_at IS NULL;

-- Durable holds: one per owner incarnation and collection.
CREATE VIEW decoupled.holds AS
    SELECT h.adapter::text, h.deployment::text, h.incarnation, o.name::text AS collection,
           h.frontier::bigint, h.hold_id, h.acquired_at
      FROM decoupled.catalog_holds h
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE o.dropped_at IS NULL;

-- Every session's holds, from shared memory (subscriptions' included).
CREATE VIEW decoupled.session_holds AS
    SELECT s.hold_id, s.session_pid, i.adapter::text, i.deployment::text, s.incarnation,
           o.name::text AS collection, s.frontier, s.subscription
      FROM decoupled._shared_holds() s
      JOIN decoupled.catalog_objects o USING (lifetime_id)
      LEFT JOIN decoupled.catalog_adapter_incarnations i USING (incarnation)
     WHERE o.dropped_at IS NULL;

-- Health of every live object on every replica of its cluster.  An object
-- whose cluster has no replica is `paused` by placement; one nobody has
-- reported on yet is `created`.  A registered table has no replica (the
-- controller ticks it): one row with replica NULL, `running` unless its
-- last tick failed or its WAL capture is stalled (`stalled`, with the
-- error).
CREATE VIEW decoupled.object_statuses AS
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

CREATE VIEW decoupled.source_statuses AS
    SELECT name, replica, status, error, hint, updated_at, transition_at
      FROM decoupled.object_statuses WHERE kind = 'source';

CREATE VIEW decoupled.sink_statuses AS
    SELECT name, replica, status, error, hint, updated_at, transition_at
      FROM decoupled.object_statuses WHERE kind = 'sink';

CREATE VIEW decoupled.hydration AS
    SELECT name, replica, hydrated
      FROM decoupled.object_statuses WHERE replica IS NOT NULL;

CREATE VIEW decoupled.status_history AS
    SELECT o.name::text, e.replica, e.status, e.error, e.occurred_at, e.incarnation
      FROM decoupled.status_events e
      JOIN decoupled.catalog_objects o USING (lifetime_id);

-- Sessions and subscriptions of live incarnations only: a predecessor's row
-- never shows up as its successor's (brief C7.1).
CREATE VIEW decoupled.sessions AS
    SELECT s.adapter::text, s.deployment::text, s.incarnation, s.session_pid, s.role,
           s.connected_at
      FROM decoupled.session_records s
      JOIN decoupled.catalog_adapter_incarnations i USING (adapter, deployment, incarnation)
     WHERE i.retired_at IS NULL;

-- Running subscriptions (C7.2), from shared memory: each holds its
-- collection at its frontier, owned by its session's live incarnation.
CREATE VIEW decoupled.subscriptions AS
    SELECT i.adapter::text, s.incarnation, s.session_pid, o.name::text AS collection,
           s.frontier, i.deployment::text, s.hold_id AS subscription_id
      FROM decoupled._shared_holds() s
      JOIN decoupled.catalog_adapter_incarnations i USING (incarnation)
      JOIN decoupled.catalog_objects o USING (lifetime_id)
     WHERE s.subscription AND i.retired_at IS NULL;


-- How each materialized view is maintained (C13.3): its strategy, the
-- construct that keeps it from being incremental, its steps of each kind,
-- and the arrangements (indexes on its input) its steps probe.
CREATE VIEW decoupled.view_maintenance AS
    SELECT o.name::text,
           CASE WHEN o.definition->>'strategy' IN ('linear', 'sums', 'groups', 'partitions') THEN 'incremental'
                ELSE 'recompute' END AS strategy,
           o.definition->>'reason' AS reason,
           o.definition->>'strategy' AS method,
           s.incremental AS incremental_steps, s.recompute AS recompute_steps,
           (SELECT array_agg(a.index_name ORDER BY a.index_name) FROM decoupled.catalog_arrangements a
             WHERE a.view_id = o.lifetime_id) AS arrangements
      FROM decoupled.catalog_objects o
      LEFT JOIN decoupled.view_steps s USING (lifetime_id)
     WHERE o.kind = 'materialized view' AND o.dropped_at IS NULL;
------------------------------------------------------------------------------
-- Privileges: default deny, then grant what each audience needs.
------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA decoupled FROM PUBLIC;
REVOKE ALL ON SCHEMA decoupled_storage FROM PUBLIC;
-- Readers of collections go through the history views there.
GRANT USAGE ON SCHEMA decoupled_storage TO PUBLIC;

-- Everyone reads the public views.
DO $$
DECLARE
    v regclass;
BEGIN
    FOR v IN SELECT c.oid FROM pg_catalog.pg_class c
              WHERE c.relnamespace = 'decoupled'::regnamespace AND c.relkind = 'v'
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO PUBLIC', v);
    END LOOP;
END
$$;

-- Everyone: observation, waiting, reading at a time, protecting reads.
GRANT EXECUTE ON FUNCTION
    decoupled.supported_schema_version(), decoupled.catalog_version(),
    decoupled.controller_status(), decoupled.supervision(),
    decoupled.wait_for_controller(bigint, interval),
    decoupled.oracle_now(), decoupled.as_of(), decoupled._history_gate(bigint),
    decoupled._history_gate_before(bigint),
    decoupled.acquire_hold(text, bigint), decoupled.release_hold(bigint),
    decoupled.dry_run(text), decoupled._catalog_inventory(),
    decoupled.wait_for_upper(text, bigint, interval), decoupled.verify(text, bigint),
    decoupled._shared_holds(), decoupled.subscribe(text, bigint, bigint),
    decoupled._kept_sum_int8(bigint, numeric), decoupled._kept_sum_numeric(bigint, numeric),
    decoupled._kept_avg(bigint, numeric), decoupled._capture_switching(),
    decoupled.wait_for_capture(interval), decoupled._capture_state()
TO PUBLIC;
-- Implementations of entry points (decoupled._acquire_hold, ...) and the
-- subscription helpers are granted to nobody: their entry points call them
-- (extension/caller.cpp, subscribe.cpp), after recording who called.

-- Catalog changes and the write path: superuser or decoupled_admin.
GRANT EXECUTE ON FUNCTION
    decoupled.create_cluster(text, integer, boolean), decoupled.alter_cluster(text, integer),
    decoupled.drop_cluster(text), decoupled.declare_adapter(text),
    decoupled.drop_adapter(text), decoupled.stop_adapter(text), decoupled.start_adapter(text),
    decoupled.retire_incarnation(text, bigint), decoupled.publish_holds(),
    decoupled.register_table(regclass, interval), decoupled.unregister_table(regclass),
    decoupled.tick_tables(), decoupled.append(text, jsonb, bigint, bigint, text, bigint),
    decoupled.publish_bounds(), decoupled.apply_compaction(), decoupled.finalize_dropped(),
    decoupled.create_source(text, text, text, jsonb, interval),
    decoupled.drop(text, boolean),
    decoupled.create_materialized_view(text, text, text, interval, bigint),
    decoupled.create_sink(text, text, text, text, boolean),
    decoupled.create_replica(text, text, boolean), decoupled.drop_replica(text, text),
    decoupled.prune_status_history(interval)
TO decoupled_admin;

-- The replica protocol: what replica processes call, as a role in
-- decoupled_admin (or a superuser), each call fenced by its incarnation.
GRANT EXECUTE ON FUNCTION
    decoupled.replica_start(bigint, text, integer, text), decoupled.replica_stop(bigint),
    decoupled.replica_heartbeat(bigint, text, text), decoupled.replica_desired_state(bigint),
    decoupled.replica_append(bigint, bigint, jsonb, bigint, bigint),
    decoupled.replica_report(bigint, bigint, text, text, text, boolean),
    decoupled.replica_compact(bigint), decoupled.replica_maintained(bigint),
    decoupled.replica_maintain(bigint, bigint, bigint), decoupled.replica_sink(bigint, bigint, bigint)
TO decoupled_admin;

-- Wake the controller once the extension's creation commits.
SELECT decoupled._wake_controller_at_commit();
