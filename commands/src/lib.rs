//! Flotilla's user commands, byte-compatible with Slurm 22.05 where Slurm defines the output.
//!
//! Each command's logic lives in a library module with a testable `run` function taking the
//! arguments, the environment and output sinks; the binaries in `src/bin/` only wire it to the
//! process. Commands must never reimplement Slurm's text formats: those live in
//! `flotilla-core` (e.g. [`flotilla_core::hostlist`]).

pub mod scontrol;
