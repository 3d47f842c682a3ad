//! Wire types of the fair-share and priority queries: `sshare` (`REQUEST_SHARE_INFO`) and
//! `sprio` (`REQUEST_PRIORITY_FACTORS`). Values are raw (floats, counts); formatting is the
//! command's business.

use serde::{Deserialize, Serialize};

/// What `sshare` asks for. Slurm's `assoc_mgr_get_shares`: a user association is listed
/// when `users` is empty or names its user; any association when `accounts` is empty or
/// names its account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareQuery {
    /// `-A`: accounts (any case).
    pub accounts: Vec<String>,
    /// `-u` (or the caller's own name without `-a`): users (any case); empty: all.
    pub users: Vec<String>,
}

/// One association as `sshare` prints it, in the controller's hierarchical order (each
/// account followed by its user associations, then its sub-accounts, by name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareRow {
    /// Association id (`ID`).
    pub id: u32,
    /// Cluster name.
    pub cluster: String,
    /// The account (for a user association, its account).
    pub account: String,
    /// The parent account's name (for a user association, its account); `None` for root.
    pub parent: Option<String>,
    /// User name; `None` for an account association.
    pub user: Option<String>,
    /// Partition of a user association, if it has one.
    pub partition: Option<String>,
    /// `RawShares`; `None` for root (blank); `u32::MAX` for `parent`.
    pub raw_shares: Option<u32>,
    /// `NormShares`.
    pub norm_shares: f64,
    /// `RawUsage` (billing-seconds, decayed).
    pub raw_usage: f64,
    /// `NormUsage`; `None` for root (blank, as Slurm never computes it).
    pub norm_usage: Option<f64>,
    /// `EffectvUsage`.
    pub effectv_usage: f64,
    /// `FairShare`; `None` for accounts.
    pub fairshare: Option<f64>,
    /// `LevelFS`; `None` for root and `Fairshare=parent` associations (blank).
    pub level_fs: Option<f64>,
}

/// What `sprio` asks for; every list is "any of", empty does not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioQuery {
    /// `-j`: job ids.
    pub jobs: Vec<u64>,
    /// `-u`: user names.
    pub users: Vec<String>,
    /// `-p`: partition names.
    pub partitions: Vec<String>,
}

/// The weighted factors of one job (or the weights, for [`PrioReply::weights`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioFactors {
    /// `AGE`.
    pub age: f64,
    /// `ASSOC`.
    pub assoc: f64,
    /// `FAIRSHARE`.
    pub fairshare: f64,
    /// `JOBSIZE`.
    pub job_size: f64,
    /// `PARTITION`.
    pub partition: f64,
    /// `QOS`.
    pub qos: f64,
    /// `SITE` (Flotilla's own terms: base priority, its aging, tier, failed cycles,
    /// preemptions).
    pub site: f64,
    /// `NICE`.
    pub nice: i64,
}

/// One pending job's priority.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioRow {
    /// Job id.
    pub job_id: u64,
    /// User name.
    pub user: String,
    /// Partition name.
    pub partition: String,
    /// The priority the scheduler ranks with.
    pub priority: u64,
    /// Its weighted factors.
    pub factors: PrioFactors,
}

/// The `sprio` answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioReply {
    /// `PriorityType` (sprio refuses `priority/basic`).
    pub priority_type: String,
    /// The weights (`sprio -w`).
    pub weights: PrioFactors,
    /// Pending jobs, by job id.
    pub jobs: Vec<PrioRow>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Request, Response};

    /// The share and priority messages round-trip and come after every earlier variant.
    #[test]
    fn share_messages_round_trip_and_are_appended() {
        let turns = postcard::to_allocvec(&Request::QueryTurns).unwrap()[0];
        for r in [Request::QueryShares(ShareQuery { accounts: vec!["a".into()], users: vec![] }), Request::QueryPriorities(PrioQuery::default())] {
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert!(bytes[0] > turns, "{r:?} appended");
            assert_eq!(postcard::from_bytes::<Request>(&bytes).unwrap(), r);
        }
        let turns = postcard::to_allocvec(&Response::Turns { turns: 0, cycles: 0, cycle_due: false }).unwrap()[0];
        for r in [
            Response::Shares(vec![ShareRow { id: 1, level_fs: Some(f64::INFINITY), ..ShareRow::default() }]),
            Response::Priorities(PrioReply { priority_type: "priority/multifactor".into(), ..PrioReply::default() }),
        ] {
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert!(bytes[0] > turns, "{r:?} appended");
            assert_eq!(postcard::from_bytes::<Response>(&bytes).unwrap(), r);
        }
    }
}
