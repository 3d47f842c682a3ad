//! Helpers for Flotilla's end-to-end tests: locating `shared/` and reading the goldens of
//! real Slurm 22.05 recorded in `shared/slurm-reference/goldens`.
