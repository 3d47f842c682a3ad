//! Flotilla's wire protocol: length-prefixed postcard frames with a version handshake, the
//! message types spoken between commands, the controller and node daemons, Slurm's error
//! codes, and the signed credentials that identify users and daemons.
//!
//! Wire types here are not `core`'s domain types; conversions are explicit (they live in the
//! controller) so that a node daemon one release behind keeps working. postcard is not
//! self-describing, so every message enum is **append-only**: a changed message gets a new
//! variant, never a changed field list, and the handshake refuses peers outside the supported
//! version range.
//!
//! This crate does no I/O beyond the blocking helpers [`read_frame`]/[`write_frame`] and reading
//! the key file; it never spawns tasks and never decides anything about jobs.
//!
//! Map:
//! - [`frame`]: `u32` big-endian length prefix + postcard body, maximum size, the pure
//!   [`decode_frame`], and the handshake ([`negotiate`]).
//! - [`msg`]: requests, responses and node-daemon messages.
//! - [`acct`]: the accounting query (`sacct`) and its records.
//! - [`acctmgr`]: `sacctmgr`'s rows and changes.
//! - [`errno`]: Slurm's error codes and their texts (`slurm_strerror`).
//! - [`client`]: a blocking client for commands and tests.
//! - [`step`]: job steps: creation, launch on the node daemons, the I/O connection back to
//!   `srun`, completion.
//! - [`usage`]: resource usage of steps (CPU time, memory peaks) from the node daemons.
//! - [`auth`]: HMAC-SHA256 credentials over uid, gid, host, issue time, expiry and a nonce;
//!   the cluster key file; the replay cache.

pub mod acct;
pub mod acctmgr;
pub mod auth;
pub mod client;
pub mod diag;
pub mod errno;
pub mod frame;
pub mod jobview;
pub mod jwt;
pub mod msg;
pub mod share;
pub mod step;
pub mod usage;

pub use acct::{AcctJob, AcctJobRef, AcctQuery, AcctStep};
pub use auth::{AuthError, ClusterKey, Credential, ReplayCache, Verifier};
pub use errno::SlurmError;
pub use usage::{StepStats, StepUsage, Usage};
pub use frame::{
    decode_frame, decode_frame_max, encode_frame, encode_response_frame, negotiate, peek_token_auth, read_frame, write_frame,
    Frame, Hello, TokenAuth, ProtoError, DEFAULT_MAX_FRAME, MAX_ANSWER_FRAME, PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN,
};
pub use jobview::{FieldSet, GresView, JobField, JobView, QueueQuery, QueueReader, QueueRows, Str};
pub use msg::*;
