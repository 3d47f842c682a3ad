//! Slurm time strings: the time limits `sbatch -t` accepts and the way squeue, sinfo and
//! scontrol print durations.
//!
//! NOTE: placeholder module; the parser and formatter are being written.
