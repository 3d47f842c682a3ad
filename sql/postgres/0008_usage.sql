-- PostgreSQL dialect of sql/0008_usage.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Fair-share usage (s18-fair): decayed raw usage per association in billing-seconds, as the
-- scheduler's `flotilla_core::fairshare::Usage` holds it, written at most every
-- PriorityCalcPeriod in a turn's transaction and restored at recovery.
CREATE TABLE assoc_usage (
    id_assoc  BIGINT PRIMARY KEY,   -- the association's database id
    usage_raw DOUBLE PRECISION NOT NULL          -- decayed billing-seconds
);
-- One row: when the usage was last decayed and charged, and the last reset (s since the epoch).
CREATE TABLE usage_meta (
    id          BIGINT PRIMARY KEY CHECK (id = 1),
    last_update BIGINT,
    last_reset  BIGINT
);
