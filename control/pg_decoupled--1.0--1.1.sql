-- pg_decoupled 1.0 -> 1.1: moves the catalog from schema version 1 to 2.
--
-- What 1.1 changes:
--   * Versioned upgrades: the catalog's schema version moves with the
--     extension version (1.0: schema version 1, 1.1: schema version 2), and
--     the library opens both, so a server running the 1.1 library keeps
--     maintaining a catalog that has not been updated yet.
--   * decoupled.supported_schema_version() is STABLE (within an extension
--     script it is the schema version of the version being installed).
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

------------------------------------------------------------------------------
-- Last: the catalog is at the schema version of 1.1.
------------------------------------------------------------------------------

UPDATE decoupled.catalog_meta SET schema_version = 2;
