-- PostgreSQL dialect of sql/0004_services.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 4: inference services, alerts and pages, and one
-- accounting row per run of a job (a preempted or requeued run keeps its own row, as
-- `sacct --duplicates` shows it).

-- One row per service; `record` is the controller's ServiceRecord as JSON.
CREATE TABLE services (
    id     BIGINT PRIMARY KEY,
    name   TEXT    NOT NULL,
    record TEXT    NOT NULL
);

-- Sequences of services and replicas (replica ids are job ids from 2^48 up).
INSERT INTO meta (key, value) VALUES ('next_service_id', 1);
INSERT INTO meta (key, value) VALUES ('next_replica_id', 281474976710656);

-- Alerts and pages the scheduler raised, with the decision as JSON (what AlertProgram got).
CREATE TABLE alerts (
    id       BIGINT PRIMARY KEY,
    time     BIGINT NOT NULL,
    kind     TEXT    NOT NULL,
    job_id   BIGINT,
    service  BIGINT,
    message  TEXT    NOT NULL,
    decision TEXT    NOT NULL
);

-- One row per ended run of a job (run = its requeue count): PREEMPTED, REQUEUED, or the
-- final state of the last run.
CREATE TABLE job_runs (
    job_id     BIGINT NOT NULL,
    run        BIGINT NOT NULL,
    state      TEXT    NOT NULL,
    exit_code  BIGINT NOT NULL,
    signal     BIGINT NOT NULL,
    start_time BIGINT,
    end_time   BIGINT,
    nodes      TEXT    NOT NULL,
    PRIMARY KEY (job_id, run)
);
