-- PostgreSQL dialect of sql/0001_init.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 1.
-- Written only by slurmctld-rs, one transaction per batch of decisions (group commit).

-- Counters that must survive restarts (next_job_id: Slurm job ids are sequential from 1,
-- rejected submissions and --test-only consume one).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('next_job_id', 1);

-- One row per job (an array's pending remainder is the row with the array's id).
-- `record` is the controller's JobRecord as JSON; the other columns are for queries.
CREATE TABLE jobs (
    id            BIGINT PRIMARY KEY,
    array_job_id  BIGINT,
    array_task_id BIGINT,
    state         TEXT    NOT NULL,
    "user"          TEXT    NOT NULL,
    uid           BIGINT NOT NULL,
    name          TEXT    NOT NULL,
    partition     TEXT    NOT NULL,
    submit_time   BIGINT NOT NULL,
    start_time    BIGINT,
    end_time      BIGINT,
    record        TEXT    NOT NULL
);
CREATE INDEX jobs_state ON jobs (state);
CREATE INDEX jobs_end ON jobs (end_time);

-- Batch scripts and environments, written once at submission (array tasks share the
-- array's row).
CREATE TABLE job_scripts (
    job_id      BIGINT PRIMARY KEY,
    script      TEXT NOT NULL,
    environment TEXT NOT NULL
);

-- Job steps (the batch step for now), for sacct.
CREATE TABLE job_steps (
    job_id     BIGINT NOT NULL,
    step       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    exit_code  BIGINT NOT NULL,
    signal     BIGINT NOT NULL,
    start_time BIGINT,
    end_time   BIGINT,
    nodes      TEXT    NOT NULL,
    PRIMARY KEY (job_id, step)
);

-- Live allocations: one row per job per node. Deleted when the job releases its resources.
CREATE TABLE allocations (
    alloc_id   BIGINT PRIMARY KEY,
    job_id     BIGINT NOT NULL,
    node       TEXT    NOT NULL,
    gpu_mask   BIGINT NOT NULL,
    gpu_milli  BIGINT NOT NULL,
    cpu_milli  BIGINT NOT NULL,
    mem_mib    BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX allocations_job ON allocations (job_id);

-- Whole GPUs bound, one row per GPU: the primary key makes the database itself refuse a
-- GPU bound twice (invariant 1); a violation aborts the commit and the controller.
CREATE TABLE alloc_gpus (
    node   TEXT    NOT NULL,
    gpu    BIGINT NOT NULL,
    job_id BIGINT NOT NULL,
    PRIMARY KEY (node, gpu)
);

-- Nodes as last registered (identity is (name, boot_epoch), invariant 8).
CREATE TABLE nodes (
    name       TEXT PRIMARY KEY,
    boot_epoch BIGINT NOT NULL,
    avail      TEXT    NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Accounting for sacct: one row per job, updated at start and end.
CREATE TABLE acct_jobs (
    job_id         BIGINT PRIMARY KEY,
    array_job_id   BIGINT,
    array_task_id  BIGINT,
    name           TEXT    NOT NULL,
    "user"           TEXT    NOT NULL,
    uid            BIGINT NOT NULL,
    account        TEXT    NOT NULL,
    partition      TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    exit_code      BIGINT NOT NULL,
    signal         BIGINT NOT NULL,
    submit_time    BIGINT NOT NULL,
    start_time     BIGINT,
    end_time       BIGINT,
    time_limit_min BIGINT,
    nodes          TEXT    NOT NULL,
    alloc_cpus     BIGINT NOT NULL,
    alloc_gpus     BIGINT NOT NULL,
    alloc_mem_mib  BIGINT NOT NULL,
    restarts       BIGINT NOT NULL
);
CREATE INDEX acct_jobs_user ON acct_jobs ("user");
