//! Flotilla's discrete-event simulator: replays real GPU-cluster traces through the same
//! `core` as the controller, with a virtual clock.
//!
//! Map:
//! - [`traces`]: typed loaders for every dataset in `../shared/traces` (Alibaba openb, Microsoft
//!   ITP and Philly, Alibaba DLRM inference, node lists, a switch topology).
//! - [`fgd`]: experiment `fgd`, the FGD (ATC'23) fragmentation protocol on openb.
//! - [`gang`]: experiment `gang`, ITP and Philly replayed by time through the scheduler.
//! - [`fleet`]: experiment `shared-fleet`, DLRM services over ITP training, static split vs shared.
//! - [`report`]: JSON, CSV and PNG outputs. [`progress`]: progress hooks and a thread pool.
//! - [`SimError`]: the crate's one error type.
//!
//! This crate never reads a wall clock to make a decision, and reads files only through the
//! loaders, from a directory that is always passed in.

pub mod error;
pub mod fgd;
pub mod fleet;
pub mod gang;
pub mod progress;
pub mod report;
pub mod traces;

pub use error::SimError;
