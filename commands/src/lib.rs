//! Flotilla's user commands, byte-compatible with Slurm 22.05 where Slurm defines the output.
//!
//! Each command's logic lives in a library module with a testable `run` function taking the
//! arguments and an [`common::Io`] (output sinks, environment, standard input); the binaries
//! in `src/bin/` only wire it to the process. Commands must never reimplement Slurm's text
//! formats that `flotilla-core` owns (e.g. [`flotilla_core::hostlist`], [`flotilla_core::time`]),
//! and never decide anything the controller decides: they parse, ask, and print.
//!
//! The configuration *loader* is the `flotilla-conf` crate (it finds slurm.conf: `SLURM_CONF`,
//! else `FLOTILLA_CONF`, else `/etc/slurm/slurm.conf`, reads it, follows `Include`, and hands
//! the texts to the pure parser in `flotilla_core::config`); the daemons use it too.
//! [`common`] reaches the controller.

pub mod alloc;
pub mod common;
pub mod getopt;
pub mod job_gres;
pub mod jobfmt;
pub mod json_out;
pub mod sacct;
pub mod sacctmgr;
pub mod sacctmgr_show;
pub mod sbatch;
pub mod salloc;
pub mod sbatch_env;
pub mod scancel;
pub mod scontrol;
pub mod scontrol_config;
pub mod scontrol_ctl;
pub mod sdeploy;
pub mod sdiag;
pub mod seff;
pub mod signals;
pub mod sinfo;
pub mod sprio;
pub mod squeue;
pub mod srun;
pub mod sshare;
pub mod sstat;
pub mod usage_fmt;
