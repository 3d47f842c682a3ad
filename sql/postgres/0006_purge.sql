-- PostgreSQL dialect of sql/0006_purge.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
-- Flotilla controller state, version 6: finished jobs leave the state database after
-- MinJobAge (Slurm purges the job record and deletes its script and environment files);
-- a script row goes when no job row names it (array tasks share the array's row), which this
-- index answers. Accounting (acct_jobs, job_steps, job_runs) stays.
CREATE INDEX jobs_array ON jobs (array_job_id);
