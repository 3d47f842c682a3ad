//! Flotilla's node daemon: it binds, it does not decide. It registers with its boot epoch,
//! launches batch scripts as their users inside a cgroup that confines them to their
//! allocation's GPUs and memory, signals them (SIGTERM → deadline → SIGKILL of the whole
//! tree), reports exits, and watches the GPUs. It never schedules and never changes what the
//! controller decided; a broken invariant stops it (fail stop).
//!
//! - [`confine`]: confinement of a job to its GPUs and memory: cgroup v1 and v2 (BPF device
//!   filter), a fake, and detection of what the host offers. Root tests:
//!   `FLOTILLA_TEST_ROOT=1`.
//! - [`health`]: GPU inventory and health events: NVML (loaded at run time) and a fake. GPU
//!   tests: `FLOTILLA_TEST_GPU=1`.
//! - [`jobcg`]: the job's cgroup on every node it is bound to (Slurm's extern step), with a
//!   step cgroup below it for the batch script and for each `srun` step's tasks.
//! - [`notice`]: the `*** JOB N ON node CANCELLED AT ... ***` notice a stopped job's stderr gets.
//! - [`outdir`]: a job waits (bounded) for the directory of its output files.
//! - [`pattern`]: output file name patterns (`%j`, `%A_%a`, ...), pure.
//! - [`env`]: the batch script's environment and `--export`, pure.
//! - [`spool`]: the spool directory: boot epoch, job directories, exit records.
//! - [`step_launch`]: the tasks of `srun` steps: per-task environment, output patterns,
//!   the I/O connection back to `srun`.
//! - [`usage`]: steps' CPU time and memory peaks, from cgroups or the processes.
//! - [`stepd`]: the job supervisor (`slurmd --stepd DIR`), which outlives the daemon.
//!
//! The daemon's owner loop and session with the controller live in the `slurmd` binary.

pub mod confine;
pub mod env;
pub mod health;
pub mod jobcg;
pub mod notice;
pub mod outdir;
pub mod pattern;
pub mod spool;
pub mod step_launch;
pub mod stepd;
pub mod usage;
