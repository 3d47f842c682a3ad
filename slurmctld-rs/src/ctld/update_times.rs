//! When the controller's jobs, nodes and partitions last changed as its queries show them
//! (Slurm's `last_job_update`, `last_node_update`, `last_part_update`): slurmrestd answers an
//! `update_time` query with "no change" (22.05: 304 Not Modified) from these
//! ([`flotilla_proto::UpdateTimes`]).
//!
//! The rule every time keeps: it is never earlier than the last change of what it covers (it
//! may be later), so an answer is never called unchanged when it changed.
//!
//! - Records: a commit that writes jobs (new, changed, ended, purged) moves the jobs' time to
//!   the turn's; one that writes node rows, allocations or ended batch steps moves the nodes'
//!   and partitions' (a node's state follows its allocations).
//! - What a scheduling cycle shows of pending jobs (reason, its detail, expected start,
//!   scheduled nodes, priority) is not a record: it is compared lazily. Each jobs query (and
//!   [`Request::QueryUpdateTimes`](flotilla_proto::Request)) takes a fingerprint of it when
//!   a cycle ran since the last one; a different fingerprint moves the jobs' time to the last
//!   cycle's, which is at or after the cycle that made the change. Every jobs answer a client
//!   holds was preceded by such a look, so a change back and forth between two looks is seen
//!   by whichever look observed the middle state, and no look costs anything while no cycle
//!   ran.

use super::Controller;
use crate::store::WriteBatch;
use flotilla_proto::UpdateTimes;
use std::hash::{BuildHasher, Hash, Hasher};

/// The pending jobs' fingerprint's seed (any fixed value: fingerprints are compared within
/// one process only).
const FINGERPRINT_SEED: u64 = 0x666c_6f74_696c_6c61;

/// The times and what the lazy comparison last saw.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    times: UpdateTimes,
    /// Cycles run when pending jobs were last fingerprinted, and the fingerprint.
    seen: Option<(u64, u64)>,
    /// When the last scheduling cycle ran (s).
    last_cycle_at: i64,
}

impl Tracker {
    /// Everything "changed" at the controller's start (`now`, s).
    pub(super) fn new(now: i64) -> Tracker {
        Tracker {
            times: UpdateTimes { jobs: now, nodes: now, partitions: now, reservations: now },
            seen: None,
            last_cycle_at: now,
        }
    }

    /// A partition changed at `now` (`scontrol update PartitionName=`).
    pub(super) fn partitions_changed(&mut self, now: i64) {
        self.times.partitions = self.times.partitions.max(now);
    }

    /// A scheduling cycle ran at `now`.
    pub(super) fn cycled(&mut self, now: i64) {
        self.last_cycle_at = now;
    }

    /// What a commit at `now` writes (called with the batch before it is committed: a
    /// failed commit leaves the changes in memory, where queries see them).
    pub(super) fn committing(&mut self, b: &WriteBatch, now: i64) {
        if !(b.jobs.is_empty() && b.purged.is_empty() && b.scripts.is_empty() && b.steps.is_empty()) {
            self.times.jobs = self.times.jobs.max(now);
        }
        if !(b.nodes.is_empty() && b.allocs.is_empty() && b.steps.is_empty()) {
            self.times.nodes = self.times.nodes.max(now);
            self.times.partitions = self.times.partitions.max(now);
        }
    }
}

impl Controller {
    /// Takes the pending jobs' fingerprint if a cycle ran since the last one, and moves the
    /// jobs' time to the last cycle's when it differs. O(pending jobs) once per cycle at most.
    pub(super) fn look_at_pending(&mut self) {
        let cycles = self.stats.cycles;
        if self.update.seen.is_some_and(|(c, _)| c == cycles) {
            return;
        }
        // One walk over the pending jobs (not a lookup each) with a fast fixed-seed hash:
        // SipHash and a lookup per job were a visible part of each `squeue` at 100,000
        // pending jobs (perf, bench/results/scale-queries.md).
        let mut h = foldhash::quality::FixedState::with_seed(FINGERPRINT_SEED).build_hasher();
        for (id, info, priority) in self.sched.pending_states() {
            (id.0, info.reason.as_str(), info.detail.as_deref(), &info.slurm_detail).hash(&mut h);
            (info.expected_start, &info.sched_nodes, priority).hash(&mut h);
        }
        let fp = h.finish();
        if self.update.seen.is_some_and(|(_, old)| old != fp) {
            self.update.times.jobs = self.update.times.jobs.max(self.update.last_cycle_at);
        }
        self.update.seen = Some((cycles, fp));
    }

    /// The times, after a look at the pending jobs.
    pub(super) fn update_times(&mut self) -> UpdateTimes {
        self.look_at_pending();
        self.update.times
    }
}
