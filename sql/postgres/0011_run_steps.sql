-- Flotilla controller state, version 11: the steps of a job's earlier runs. When a run ends in
-- a requeue (PREEMPTED, REQUEUED, a lost node), its steps (`batch`, `extern`, `0`, ...) move
-- from `job_steps` into this table under the run's number (the job's requeue count then), so
-- that the next run's steps, which reuse the names, never overwrite them: `sacct -D` shows
-- each run with its own steps, as Slurm keeps steps per job record (`job_db_inx`).
CREATE TABLE job_run_steps (
    job_id     BIGINT NOT NULL,
    run        BIGINT NOT NULL,
    step       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    exit_code  BIGINT NOT NULL,
    signal     BIGINT NOT NULL,
    start_time BIGINT,
    end_time   BIGINT,
    nodes      TEXT    NOT NULL,
    PRIMARY KEY (job_id, run, step)
);
