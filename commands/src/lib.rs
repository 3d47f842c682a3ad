//! Flotilla's user commands, byte-compatible with Slurm 22.05 where Slurm defines the output.

pub mod conf;
