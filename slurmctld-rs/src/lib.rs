//! Flotilla's controller daemon (`slurmctld`): the single writer of the allocation table,
//! driving the pure scheduling `core`.
//!
//! It owns: the RPC server ([`server`]: TCP with signed credentials, a local Unix socket with
//! `SO_PEERCRED`), admission ([`admission`]), the job lifecycle and the scheduling loop around
//! the core ([`ctld`], one owner task with a closed event enum), dependencies ([`deps`]), and
//! the durable state in SQLite ([`store`], schema in `sql/`) with the job accounting `sacct`
//! reads ([`acct`]). It must never decide placement
//! itself (that is the core's), never send an RPC for a decision before the decision is
//! committed, and never trust a uid a client merely claims.

pub mod acct;
pub mod admission;
pub mod assoc;
pub mod authz;
pub mod clock;
pub mod conf;
pub mod ctld;
pub mod daemon;
pub mod deps;
pub mod job;
pub mod limits;
pub mod metrics;
pub mod server;
pub mod service;
pub mod store;
pub mod svcstore;
pub mod users;
