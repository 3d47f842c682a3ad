//! Flotilla's core: the cluster model, Slurm's text formats, and the scheduling core.
//!
//! This crate is pure. It never reads a clock, a file, a socket or an environment variable,
//! never spawns a thread and never draws a random number except from a seeded RNG handed in.
//! Time is always a parameter (`now`, seconds since the Unix epoch). The controller
//! (`slurmctld-rs`) and the simulator (`sim`) both drive exactly this code.
//!
//! Map:
//! - [`hostlist`]: Slurm hostlist expressions (`gpu[01-04]`), expand and compress.
//! - [`time`]: Slurm time-limit strings (`sbatch -t`) and their display format.
//! - [`config`]: `slurm.conf`, `gres.conf` and `topology.conf` parsed from text into a
//!   typed [`config::ClusterConfig`].

pub mod config;
pub mod hostlist;
pub mod time;
