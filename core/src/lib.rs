//! Flotilla's core: the cluster model, Slurm's text formats, and the scheduling core.
//!
//! This crate is pure. It never reads a clock, a file, a socket or an environment variable,
//! never spawns a thread and never draws a random number except from a seeded RNG handed in.
//! Time is always a parameter (`now`, seconds since the Unix epoch or a trace origin). The
//! controller (`slurmctld-rs`) and the simulator (`sim`) both drive exactly this code.
//!
//! Map:
//! - [`hostlist`]: Slurm hostlist expressions (`gpu[01-04]`), expand and compress.
//! - [`time`]: Slurm time-limit strings (`sbatch -t`) and their display format; calendar
//!   dates in UTC ([`time::calendar`]: `fmt_time`, `sbatch --begin`, `sacct -S`).
//! - [`config`]: `slurm.conf`, `gres.conf` and `topology.conf` parsed from text into a
//!   typed [`config::ClusterConfig`].
//! - [`cluster`]: nodes with a free [`cluster::GpuMask`], per-GPU shares, CPUs and memory;
//!   pods; partitions.
//! - [`cores`]: which cores of a node a job's CPUs are (`CPU_IDs=`), as Slurm's
//!   `select/cons_tres` picks them.
//! - [`features`]: job constraints on node features (`--constraint`), parsed and matched as
//!   Slurm does.
//! - [`job`]: what a job asks for ([`job::Request`], [`job::JobSpec`]).
//! - [`gres`]: how `--gpus`, `--gres`, `--gpus-per-socket` and `--gpus-per-task` fit a
//!   job's node, task and socket counts (Slurm's `_test_gres_cnt`).
//! - [`placement`]: placement over topology sets behind the [`placement::PlacementPolicy`]
//!   extension point, and [`placement::largest_placeable`].
//! - [`assoc`]: the accounting model (associations, QOS, their limits, what is enforced).
//! - [`fairshare`]: usage decayed per half-life, billing weights, the Fair Tree ranking.
//! - [`quota`]: the account tree with guaranteed and maximum GPUs (borrowing, LIFO reclaim).
//! - [`health`]: GPU health events and the [`health::HealthPolicy`] extension point (which
//!   events quarantine a node).
//! - [`sched`]: the scheduling core ([`sched::Scheduler`]): events and `now` in, decisions out.

pub mod assoc;
pub mod cluster;
pub mod cnum;
pub mod config;
pub mod cores;
pub mod fairshare;
pub mod features;
pub mod gres;
pub mod health;
pub mod hostlist;
pub mod job;
pub mod placement;
pub mod quota;
pub mod sched;
pub mod time;
