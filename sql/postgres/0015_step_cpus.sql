-- Flotilla controller state, version 15: what each srun step was given (its TRES `cpu=` and
-- `mem=`, `sacct -o AllocCPUS,AllocTRES`). Slurm 22.05 gives a step all of its job's CPUs on
-- its nodes unless `--exact` (or `-c`), when it has its tasks' CPUs; its memory is the job's
-- per CPU times those, or the job's per node times its nodes. NULL: not recorded (the batch
-- step, rows written before this version): sacct counts the job's share per node.
ALTER TABLE job_steps ADD COLUMN alloc_cpus BIGINT;
ALTER TABLE job_steps ADD COLUMN alloc_mem_mib BIGINT;
ALTER TABLE job_run_steps ADD COLUMN alloc_cpus BIGINT;
ALTER TABLE job_run_steps ADD COLUMN alloc_mem_mib BIGINT;
