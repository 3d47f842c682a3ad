//! Flotilla's user commands, byte-compatible with Slurm 22.05 where Slurm defines the output.
//!
//! Each command's logic lives in a library module with a testable `run` function taking the
//! arguments, the environment and output sinks; the binaries in `src/bin/` only wire it to the
//! process. Commands must never reimplement Slurm's text formats: those live in
//! `flotilla-core` (e.g. [`flotilla_core::hostlist`]).
//!
//! [`conf`] is the configuration *loader*: it finds slurm.conf (`SLURM_CONF`, else
//! `FLOTILLA_CONF`, else `/etc/slurm/slurm.conf`), reads it, follows `Include`, and hands the
//! texts to the pure parser in `flotilla_core::config`.

pub mod conf;
pub mod dev;
pub mod scontrol;
