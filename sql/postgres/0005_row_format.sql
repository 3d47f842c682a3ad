-- PostgreSQL dialect of sql/0005_row_format.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 5: the JSON columns (jobs.record, services.record,
-- nodes.avail) are written by the store's own row types (slurmctld-rs/src/store/rows.rs), not by
-- the serde derives of the controller's and the core's types, and each row says which format it
-- holds:
--   0  the serde JSON of JobRecord (with the core's JobSpec and Allocation), ServiceRecord and
--      NodeAvail, as every store up to version 4 wrote it (and as DEFAULT, what a version-4
--      controller still writes into a version-5 database);
--   1  the row types' JSON: the same text for every record format 0 could hold; a format 0
--      record that lacked a field read with a default gains it.
-- The migration's Rust step (slurmctld-rs/src/store/migrate.rs) then reads every format 0 row
-- and writes it back in format 1, in this migration's transaction. A row it cannot read stays
-- format 0 (logged), and loads, or fails to load, as it did before.
ALTER TABLE jobs ADD COLUMN format BIGINT NOT NULL DEFAULT 0;
ALTER TABLE services ADD COLUMN format BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN format BIGINT NOT NULL DEFAULT 0;
