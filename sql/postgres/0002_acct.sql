-- PostgreSQL dialect of sql/0002_acct.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 2: what sacct needs beyond version 1's acct_jobs.
-- One acct_jobs row is the job's latest record (Slurm's sacct without --duplicates); it is
-- written at submission, start, end, requeue (state REQUEUED) and cancellation.

-- When the job became eligible (not held, dependencies met, begin time reached); NULL:
-- never. sacct's time window selects on it, as Slurm's time_eligible.
ALTER TABLE acct_jobs ADD COLUMN eligible_time BIGINT;
-- Uid of the user who cancelled the job (`CANCELLED by <uid>`).
ALTER TABLE acct_jobs ADD COLUMN cancelled_by BIGINT;
ALTER TABLE acct_jobs ADD COLUMN gid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN qos TEXT NOT NULL DEFAULT '';
ALTER TABLE acct_jobs ADD COLUMN alloc_nodes BIGINT NOT NULL DEFAULT 0;
-- What was requested (ReqTRES, and AllocCPUS/NNodes of a job that never ran).
ALTER TABLE acct_jobs ADD COLUMN req_nodes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN req_cpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN req_gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN req_mem_mib BIGINT NOT NULL DEFAULT 0;
-- The batch host's share of the allocation (the batch step's AllocCPUS/AllocTRES).
ALTER TABLE acct_jobs ADD COLUMN batch_cpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN batch_gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN batch_mem_mib BIGINT NOT NULL DEFAULT 0;
ALTER TABLE acct_jobs ADD COLUMN work_dir TEXT NOT NULL DEFAULT '';
ALTER TABLE acct_jobs ADD COLUMN comment TEXT NOT NULL DEFAULT '';
-- Pending tasks of an array's remainder (`2-3,5%2`); NULL otherwise.
ALTER TABLE acct_jobs ADD COLUMN array_task_str TEXT;
CREATE INDEX acct_jobs_array ON acct_jobs (array_job_id);
CREATE INDEX acct_jobs_end ON acct_jobs (end_time);
