//! Flotilla's admin command `flotilla` (`src/bin/flotilla.rs`) and the library behind it:
//!
//! - [`dev`]: `flotilla dev up|down|status`, a local development cluster (one `slurmctld` and
//!   one `slurmd -N` per node on localhost); the end-to-end tests start their clusters with
//!   the same code (`flotilla_compat_tests::cluster`).
//! - [`emulate`]: `flotilla emulate`, one process holding many emulated node sessions that
//!   speak `proto` as `slurmd` does (`flotilla dev up --emulate-nodes N` starts one).
//! - [`bench`]: `flotilla bench scale`, the controller's figures at 10,000 emulated nodes.
//! - [`trace`]: `flotilla bench trace`, a real trace replayed through the controller and
//!   emulated nodes on a scaled clock, side by side with the simulator.
//! - [`demo`]: `flotilla demo`, the default local cluster running the example workload.
//! - [`man`]: `flotilla man`, the man pages of the user commands from their parsers' tables.
//! - [`pg`]: a throw-away PostgreSQL server in a directory (`flotilla dev up --ha`, and the
//!   controller's tests, which include the file by path).
//! - `flotilla sim` drives `flotilla-sim` directly from the binary.
//!
//! This is the only crate that depends on `flotilla-sim` (and through it `plotters`), on
//! `indicatif`, `clap_mangen` and `roff`; nothing in the workspace but the end-to-end tests
//! depends on it. The rule and its test: ARCHITECTURE.md, "Dependency rule".

pub mod bench;
pub mod demo;
pub mod dev;
pub mod emulate;
pub mod man;
pub mod pg;
pub mod trace;
