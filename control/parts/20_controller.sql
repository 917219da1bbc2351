------------------------------------------------------------------------------
-- Controller observation and waiting
------------------------------------------------------------------------------

-- Everyone may read it (catalog_meta is private).  PL/pgSQL, not SQL: a
-- replica asks at every pass, and a SQL function with settings is parsed
-- and planned at every call.
CREATE FUNCTION decoupled.catalog_version() RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT m.catalog_version FROM decoupled.catalog_meta m);
END
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

-- The relay (C8): its mode, process, liveness, fan-outs and followers.
CREATE FUNCTION decoupled._relay_state(
    OUT mode text, OUT pid integer, OUT alive boolean, OUT fanouts bigint,
    OUT last_fanout_at timestamptz, OUT followers integer, OUT segment text)
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_relay_state';

CREATE FUNCTION decoupled.wait_for_controller(
    catalog_version bigint, timeout interval DEFAULT '30s') RETURNS bigint
    LANGUAGE C AS 'MODULE_PATHNAME', 'decoupled_wait_for_controller';
COMMENT ON FUNCTION decoupled.wait_for_controller(bigint, interval) IS
    'Wait until the controller follows the given catalog version; returns the version it observed.';

-- Debug wait points (extension/wait_points.hpp), for tests; superuser only.
-- A session that names a point in decoupled.wait_points waits there while
-- arm_wait_point(name) holds it, until release_wait_point(name).
CREATE FUNCTION decoupled.wait_point_key(name text) RETURNS bigint
    LANGUAGE C IMMUTABLE STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_point_key';
CREATE FUNCTION decoupled._wait_point(name text) RETURNS void
    LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'decoupled_wait_point';
CREATE FUNCTION decoupled.arm_wait_point(name text) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_lock(decoupled.wait_point_key(name))
$$;
CREATE FUNCTION decoupled.release_wait_point(name text) RETURNS boolean
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_advisory_unlock(decoupled.wait_point_key(name))
$$;
-- How many sessions wait at the point now.
CREATE FUNCTION decoupled.wait_point_waiters(name text) RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*) FROM pg_locks l
     WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND l.classid::bigint = (decoupled.wait_point_key(name) >> 32) & 4294967295
       AND l.objid::bigint = decoupled.wait_point_key(name) & 4294967295
$$;
