-- Flotilla controller state, version 9: what steps used (Slurm's jobacct_gather stats, sacct's
-- TotalCPU, MaxRSS, ...), as each node daemon reported it: one row per (job, step, node),
-- replaced by every newer report (polls while the step runs, `done` = 1 at its end). Times in
-- microseconds, memory in bytes. Accounting: it stays with acct_jobs and job_steps.
CREATE TABLE step_usage (
    job_id       INTEGER NOT NULL,
    step         TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    user_usec    INTEGER NOT NULL,
    system_usec  INTEGER NOT NULL,
    total_usec   INTEGER NOT NULL,
    max_rss      INTEGER NOT NULL,
    max_vmsize   INTEGER NOT NULL,
    ntasks       INTEGER NOT NULL,
    max_rss_task INTEGER NOT NULL,
    min_cpu_usec INTEGER NOT NULL,
    min_cpu_task INTEGER NOT NULL,
    energy_j     INTEGER NOT NULL,
    done         INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (job_id, step, node)
);
