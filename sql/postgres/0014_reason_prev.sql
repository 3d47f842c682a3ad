-- Flotilla controller state, version 14: the pending reason a job's accounting record keeps.
-- `sacct -o Reason` (Slurm's `state_reason_prev` of the job table): the last pending reason
-- other than None, Priority and Resources the scheduler gave the job before its run started,
-- by name (`Dependency`, `JobHeldUser`, ...); '' for none.
ALTER TABLE acct_jobs ADD COLUMN state_reason_prev TEXT NOT NULL DEFAULT '';
-- The same for each earlier run of a requeued job (`sacct -D`), as it was when that run
-- started.
ALTER TABLE job_runs ADD COLUMN state_reason_prev TEXT NOT NULL DEFAULT '';
