-- Flotilla controller state, version 13: how jobs and steps ended, in more detail.
-- Who cancelled a step (`scancel JOB.STEP`), Slurm's `requid` of the step table: `sacct` shows
-- such a step `CANCELLED by <uid>`. NULL: nobody (a step that ended by itself, or was killed
-- with its job).
ALTER TABLE job_steps ADD COLUMN requid INTEGER;
ALTER TABLE job_run_steps ADD COLUMN requid INTEGER;
-- A job's derived exit code (`sacct -o DerivedExitCode`, Slurm's `derived_ec` of the job
-- table): the highest wait status of its srun steps when the job ended (status << 8, or the
-- signal); 0 for none.
ALTER TABLE acct_jobs ADD COLUMN derived_ec INTEGER NOT NULL DEFAULT 0;
