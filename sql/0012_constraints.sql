-- Flotilla controller state, version 12: a job's --constraint in its accounting record
-- (`sacct -o Constraints`, Slurm's `constraints` column of the job table); empty for none.
ALTER TABLE acct_jobs ADD COLUMN constraints TEXT NOT NULL DEFAULT '';
