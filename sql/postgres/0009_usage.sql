-- PostgreSQL dialect of sql/0009_usage.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 9: what steps used (Slurm's jobacct_gather stats, sacct's
-- TotalCPU, MaxRSS, ...), as each node daemon reported it: one row per (job, step, node),
-- replaced by every newer report (polls while the step runs, `done` = 1 at its end). Times in
-- microseconds, memory in bytes. Accounting: it stays with acct_jobs and job_steps.
CREATE TABLE step_usage (
    job_id       BIGINT NOT NULL,
    step         TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    user_usec    BIGINT NOT NULL,
    system_usec  BIGINT NOT NULL,
    total_usec   BIGINT NOT NULL,
    max_rss      BIGINT NOT NULL,
    max_vmsize   BIGINT NOT NULL,
    ntasks       BIGINT NOT NULL,
    max_rss_task BIGINT NOT NULL,
    min_cpu_usec BIGINT NOT NULL,
    min_cpu_task BIGINT NOT NULL,
    energy_j     BIGINT NOT NULL,
    done         BIGINT NOT NULL,
    at           BIGINT NOT NULL,
    PRIMARY KEY (job_id, step, node)
);
