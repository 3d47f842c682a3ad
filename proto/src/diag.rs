//! `sdiag`: the controller's statistics as Slurm 22.05's `stats_info_response_msg_t` carries
//! them ([`Diag`]), plus Flotilla's own section ([`FlotillaDiag`]). Asked with
//! [`crate::Request::Diag`], reset with [`crate::Request::DiagReset`] (admins only: root or
//! `SlurmUser`; others get `ESLURM_ACCESS_DENIED`); both are answered with
//! [`crate::Response::Diag`] (after a reset: the counters just reset).
//!
//! Times are microseconds unless a field says otherwise; instants are seconds since the
//! epoch. Counters named `*_sum` are totals over `*_counter` cycles (the command divides, as
//! Slurm's `sdiag.c` `_print_stats` does).

use serde::{Deserialize, Serialize};

/// The statistics `sdiag` prints.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Diag {
    /// When the answer was made (s since epoch; `sdiag output at`).
    pub req_time: i64,
    /// Start of the statistics: the controller's start or the last reset (`Data since`).
    pub req_time_start: i64,
    /// Connection tasks serving a request right now (`Server thread count`).
    pub server_thread_count: u32,
    /// Messages to node daemons queued and not yet sent (`Agent queue size`).
    pub agent_queue_size: u32,
    /// Node daemons with messages in flight (`Agent count`).
    pub agent_count: u32,
    /// Threads sending to node daemons (`Agent thread count`; Flotilla has none: 0).
    pub agent_thread_count: u32,
    /// Accounting commits waiting (`DBD Agent queue size`).
    pub dbd_agent_queue_size: u32,
    /// Jobs accepted since `req_time_start`.
    pub jobs_submitted: u64,
    /// Jobs started since `req_time_start`.
    pub jobs_started: u64,
    /// Jobs completed since `req_time_start`.
    pub jobs_completed: u64,
    /// Jobs cancelled since `req_time_start`.
    pub jobs_canceled: u64,
    /// Jobs failed since `req_time_start`.
    pub jobs_failed: u64,
    /// When `jobs_pending`/`jobs_running` were counted (`Job states ts`).
    pub job_states_ts: i64,
    /// Jobs pending now.
    pub jobs_pending: u64,
    /// Jobs running now.
    pub jobs_running: u64,
    /// Main scheduler: last cycle (µs).
    pub schedule_cycle_last: u64,
    /// Main scheduler: longest cycle (µs).
    pub schedule_cycle_max: u64,
    /// Main scheduler: cycles.
    pub schedule_cycle_counter: u64,
    /// Main scheduler: total time of the cycles (µs).
    pub schedule_cycle_sum: u64,
    /// Main scheduler: pending jobs examined, summed over the cycles.
    pub schedule_cycle_depth: u64,
    /// Main scheduler: pending jobs at the last cycle (`Last queue length`).
    pub schedule_queue_len: u64,
    /// A backfill pass is running right now (never: Flotilla's passes run inside the owner
    /// task, which also answers this request).
    pub bf_active: bool,
    /// Jobs started by backfill since the controller started.
    pub bf_backfilled_jobs: u64,
    /// Jobs started by backfill since `req_time_start`.
    pub bf_last_backfilled_jobs: u64,
    /// Heterogeneous job components backfilled (Flotilla has no heterogeneous jobs: 0).
    pub bf_backfilled_het_jobs: u64,
    /// Backfill cycles.
    pub bf_cycle_counter: u64,
    /// When the last backfill cycle ran (s since epoch; 0: none).
    pub bf_when_last_cycle: i64,
    /// Last backfill cycle (µs).
    pub bf_cycle_last: u64,
    /// Longest backfill cycle (µs).
    pub bf_cycle_max: u64,
    /// Total time of the backfill cycles (µs).
    pub bf_cycle_sum: u64,
    /// Pending jobs the last backfill cycle examined.
    pub bf_last_depth: u64,
    /// Of those, the ones it tried to place.
    pub bf_last_depth_try: u64,
    /// `bf_last_depth` summed over the cycles.
    pub bf_depth_sum: u64,
    /// `bf_last_depth_try` summed over the cycles.
    pub bf_depth_try_sum: u64,
    /// Pending jobs at the last backfill cycle.
    pub bf_queue_len: u64,
    /// `bf_queue_len` summed over the cycles.
    pub bf_queue_len_sum: u64,
    /// Reservations planned at the last backfill cycle (Slurm: its time table's size).
    pub bf_table_size: u64,
    /// `bf_table_size` summed over the cycles.
    pub bf_table_size_sum: u64,
    /// Time of 1000 clock reads (µs).
    pub gettimeofday_latency: u32,
    /// RPCs by message type, in the controller's order (the command sorts).
    pub rpc_types: Vec<RpcTypeStat>,
    /// RPCs by user, in the controller's order.
    pub rpc_users: Vec<RpcUserStat>,
    /// Flotilla's own statistics.
    pub flotilla: FlotillaDiag,
}

/// One message type's RPC statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RpcTypeStat {
    /// Slurm's name of the message type (`REQUEST_JOB_INFO`).
    pub name: String,
    /// Its number ([`rpc_type_id`]).
    pub id: u16,
    /// Requests since `req_time_start`.
    pub count: u64,
    /// Their total handling time (µs).
    pub total_time: u64,
}

/// One user's RPC statistics.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RpcUserStat {
    /// The authenticated uid.
    pub uid: u32,
    /// Requests since `req_time_start`.
    pub count: u64,
    /// Their total handling time (µs).
    pub total_time: u64,
}

/// Flotilla's section of `sdiag` (after Slurm's).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FlotillaDiag {
    /// Per partition: the largest GPU request that could start now inside one node, one pod
    /// and anywhere.
    pub largest_placeable: Vec<(String, crate::LargestPlaceableWire)>,
    /// Reservations the scheduler holds now (pending jobs with GPUs set aside).
    pub held_reservations: u64,
    /// Preemptions decided since `req_time_start`, by reason, sorted by reason.
    pub preemptions: Vec<(String, u64)>,
    /// Pages raised since `req_time_start`.
    pub pages: u64,
    /// Alerts (other than pages) raised since `req_time_start`.
    pub alerts: u64,
}

/// Slurm 22.05's number of a message type (`slurm_protocol_defs.h` `slurm_msg_type_t`), by
/// its name; Flotilla's own requests, which Slurm does not have, get numbers from 60001 up in
/// the order of this table. `None` for a name it does not know.
pub fn rpc_type_id(name: &str) -> Option<u16> {
    RPC_TYPES.iter().find(|(n, _)| *n == name).map(|(_, id)| *id)
}

/// Names and numbers of the message types Flotilla's controller handles.
const RPC_TYPES: &[(&str, u16)] = &[
    ("MESSAGE_NODE_REGISTRATION_STATUS", 1002),
    ("REQUEST_PING", 1008),
    ("REQUEST_JOB_INFO", 2003),
    ("REQUEST_JOB_STEP_INFO", 2005),
    ("REQUEST_NODE_INFO", 2007),
    ("REQUEST_PARTITION_INFO", 2009),
    ("REQUEST_STATS_INFO", 2035),
    ("REQUEST_UPDATE_JOB", 3001),
    ("REQUEST_UPDATE_NODE", 3002),
    ("REQUEST_UPDATE_PARTITION", 3005),
    ("REQUEST_SUBMIT_BATCH_JOB", 4003),
    ("REQUEST_JOB_STEP_CREATE", 5001),
    ("REQUEST_STEP_COMPLETE", 5016),
    ("REQUEST_COMPLETE_JOB_ALLOCATION", 5017),
    ("REQUEST_JOB_REQUEUE", 5023),
    ("REQUEST_KILL_JOB", 5032),
    ("REQUEST_AUTH_TOKEN", 5039),
    // slurmdbd's DBD_GET_JOBS_COND (slurmdbd_defs.h): sacct's query
    ("DBD_GET_JOBS_COND", 1444),
    // Flotilla's own
    ("REQUEST_HOLD_RELEASE", 60001),
    ("REQUEST_CREDENTIAL", 60002),
    ("REQUEST_SERVICE_CREATE", 60003),
    ("REQUEST_SERVICE_SCALE", 60004),
    ("REQUEST_SERVICE_DELETE", 60005),
    ("REQUEST_SERVICE_INFO", 60006),
    ("REQUEST_ALERT_INFO", 60007),
    ("REQUEST_TURNS", 60008),
    ("REQUEST_UPDATE_TIMES", 60009),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_numbers_of_the_types_sdiag_shows() {
        // The golden 0109_sdiag_idle: REQUEST_PARTITION_INFO (2009), REQUEST_JOB_INFO (2003),
        // REQUEST_NODE_INFO (2007), MESSAGE_NODE_REGISTRATION_STATUS (1002).
        assert_eq!(rpc_type_id("REQUEST_PARTITION_INFO"), Some(2009));
        assert_eq!(rpc_type_id("REQUEST_JOB_INFO"), Some(2003));
        assert_eq!(rpc_type_id("REQUEST_NODE_INFO"), Some(2007));
        assert_eq!(rpc_type_id("MESSAGE_NODE_REGISTRATION_STATUS"), Some(1002));
        assert_eq!(rpc_type_id("NO_SUCH"), None);
    }

    #[test]
    fn every_kind_of_request_has_a_number() {
        use crate::Request;
        let reqs = [
            Request::QueryPartitions,
            Request::Stats,
            Request::IssueCredential,
            Request::Ping,
            Request::ServiceScale { id: 1, replicas: 1 },
            Request::ServiceDelete { id: 1 },
            Request::QueryServices { ids: Vec::new() },
            Request::QueryAlerts,
            Request::QueryTurns,
            Request::QueryUpdateTimes,
            Request::Diag,
            Request::DiagReset,
        ];
        for r in reqs {
            assert!(rpc_type_id(r.kind()).is_some(), "{} has no number", r.kind());
        }
        for kind in ["REQUEST_SUBMIT_BATCH_JOB", "REQUEST_KILL_JOB", "REQUEST_HOLD_RELEASE", "REQUEST_JOB_REQUEUE",
            "REQUEST_UPDATE_JOB", "REQUEST_NODE_INFO", "REQUEST_UPDATE_NODE", "REQUEST_JOB_STEP_CREATE",
            "REQUEST_STEP_COMPLETE", "REQUEST_JOB_STEP_INFO", "REQUEST_COMPLETE_JOB_ALLOCATION",
            "REQUEST_SERVICE_CREATE", "DBD_GET_JOBS_COND"] {
            assert!(rpc_type_id(kind).is_some(), "{kind} has no number");
        }
    }

    #[test]
    fn numbers_are_unique() {
        let mut ids: Vec<u16> = RPC_TYPES.iter().map(|(_, id)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), RPC_TYPES.len());
    }
}
