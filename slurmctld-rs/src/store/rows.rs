//! The JSON the store writes into its text columns, in types of its own: `jobs.record`
//! ([`JobRow`]), `services.record` ([`ServiceRow`]) and `nodes.avail` ([`NodeAvailRow`]).
//!
//! Why: the controller's [`JobRecord`] embeds the core's `JobSpec` and `Allocation` and the
//! wire's `ArrayTasks`, `SignalSpec` and `ServiceCreate`. Serialized with their own serde
//! derives, a field renamed in `flotilla-core` or `flotilla-proto` would silently change the
//! on-disk format of every existing database. Here every stored struct and enum is a row type
//! whose serde names are pinned (`#[serde(rename = ...)]` on every field and variant), and the
//! conversions to and from the controller's and the core's types are written field by field
//! with exhaustive destructuring: a field added, removed or renamed in a source type fails to
//! compile here instead of changing the format. The golden
//! `slurmctld-rs/tests/golden/job_row.json` shows any change of the format itself.
//!
//! Formats (the `format` column of `jobs`, `services` and `nodes`, migration
//! `sql/0005_row_format.sql`):
//! - `0`: the serde JSON of the controller's and the core's types as the store wrote it up to
//!   schema version 4 (commit ff4a73e). The row types read it: their serde names are format
//!   0's names, and the fields that format 0 records may lack (added later with
//!   `serde(default)`) have the same defaults.
//! - `1` ([`FORMAT`]): the row types' JSON. For every record format 0 could hold it is the
//!   same text, field for field and in the same order; a format 0 record that lacked a
//!   defaulted field gains it when rewritten.
//!
//! Core ids (`JobId`, `PartId`, `NodeId`, `AllocId`, `ServiceId`) and `GpuMask` are stored as
//! their plain numbers, as their newtype derives wrote them.

use crate::job::JobRecord;
use crate::service::ServiceRecord;
use flotilla_core::cluster::NodeAvail;
use serde::Serialize;

mod alert;
mod job;
mod sched;
mod service;

pub use alert::{AlertDecisionRow, PageRow, PageVictimRow};
pub use job::{AcctInfoRow, ArrayTasksRow, JobRow, JobStateRow, SignalSpecRow, StopWhyRow, StoppingRow};
pub use sched::{AllocationRow, HoldRow, JobSpecRow, NodeAllocRow, NodeAvailRow, OwnerRow, ReasonSetRow, RequestRow, TopologyRow};
pub use service::{ServiceCreateRow, ServiceRow};

/// The record format the store writes (see the module doc for the history).
pub const FORMAT: u32 = 1;

/// The oldest record format the store reads: the serde JSON of the types themselves.
pub const FORMAT_LEGACY: u32 = 0;

/// A row type as its column text (compact JSON). Row types hold only strings, numbers,
/// booleans, lists and string-keyed structs, which always serialize.
fn to_json<T: Serialize>(row: &T) -> String {
    serde_json::to_string(row).expect("a store row serializes")
}

/// The `jobs.record` text of `r` (format [`FORMAT`]).
pub fn job_to_json(r: &JobRecord) -> String {
    to_json(&JobRow::from(r))
}

/// Reads a `jobs.record` (formats 0 and 1: both are read by [`JobRow`]). Errors: the JSON's.
pub fn job_from_json(text: &str) -> Result<JobRecord, serde_json::Error> {
    serde_json::from_str::<JobRow>(text).map(JobRecord::from)
}

/// The `services.record` text of `s` (format [`FORMAT`]).
pub fn service_to_json(s: &ServiceRecord) -> String {
    to_json(&ServiceRow::from(s))
}

/// Reads a `services.record` (formats 0 and 1). Errors: the JSON's.
pub fn service_from_json(text: &str) -> Result<ServiceRecord, serde_json::Error> {
    serde_json::from_str::<ServiceRow>(text).map(ServiceRecord::from)
}

/// The `nodes.avail` text of `a` (format [`FORMAT`]).
pub fn avail_to_json(a: &NodeAvail) -> String {
    to_json(&NodeAvailRow::from(a))
}

/// Reads a `nodes.avail` (formats 0 and 1). Errors: the JSON's.
pub fn avail_from_json(text: &str) -> Result<NodeAvail, serde_json::Error> {
    serde_json::from_str::<NodeAvailRow>(text).map(NodeAvail::from)
}

/// The `nodes.avail` text of `a` with when and by whom its reason was set (`(time, uid)`).
pub fn avail_to_json_with(a: &NodeAvail, set: Option<(i64, u32)>) -> String {
    to_json(&NodeAvailRow::with_set(a, set.map(|(time, uid)| ReasonSetRow { time, uid })))
}

/// When and by whom the reason of a `nodes.avail` was set (`(time, uid)`), where it says.
pub fn reason_set_from_json(text: &str) -> Option<(i64, u32)> {
    serde_json::from_str::<NodeAvailRow>(text).ok()?.reason_set().map(|s| (s.time, s.uid))
}
