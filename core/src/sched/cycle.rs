//! One scheduling cycle, in named stages: refresh (quotas, services, swap pool), order
//! (priorities and eligibility), drop stale reservations, then for each eligible job in rank
//! order the first of complete its held reservation | place | backfill | preempt | reserve
//! that settles it, and last defragment.
//!
//! # The incremental cycle
//!
//! A cycle's cost is the placement searches of its place and backfill stages: each scores
//! every candidate node. Within one cycle a failed search is memoised per request shape
//! (`CycleState::failed`: resources only shrink inside a cycle). The incremental cycle (the
//! default; [`Scheduler::set_full_scan`] turns it off) also keeps failed searches *across*
//! cycles in `FitMemo`: a pending job whose search failed is not searched again while
//! nothing the search reads has changed, and gets the kept failure (and its detail) instead.
//!
//! A search reads: the request shape, partition, pool class (replica, `--preemptible`),
//! the number of reservations ranked above the job and, for backfill, how many of those end
//! late enough to borrow from (all in `FitKey`); and the model — the nodes' free GPUs,
//! shares, CPUs, memory and availability, the held reservations (their GPUs, ranks and
//! estimated fills), the swap pool and the tie-break rank. The memo is stamped with the
//! generation of the model (`Scheduler::fit_stamp`) and emptied when the stamp moves, so it
//! is conservative: any change at all to what a search reads voids every kept failure, even
//! one that only takes resources. The events that move the stamp:
//!
//! - resources taken or given back (`Cluster::take`/`give_back`): a bind, a job end, cancel,
//!   requeue or preemption, a grow or shrink of an elastic job, a replica started or stopped,
//!   a restored job or replica;
//! - node availability set (drain, down, resume, quarantine, registration, restore) and a
//!   node's boot epoch (`Event::NodeRegistered`, `restore_node`);
//! - a reservation added, dropped, re-planned, taken from or completed (`rebuild_held`), or
//!   its estimated fill moved to now when it starts to fill;
//! - a new swap pool (`choose_swap`), a new tie-break rank (`set_tie_rank`);
//! - a partition added; quotas, job limits or accounting replaced (conservatively: the
//!   search does not read them).
//!
//! A placement policy with state of its own (`PlacementPolicy::is_stateful`: `random`
//! advances its generator at every score) is searched every time.
//!
//! The reserve stage's plans are kept the same way (`FitMemo::plans`, same stamp): a plan
//! that found no GPUs (`plan_reservation` gave `None`) is not made again for the same key
//! (partition, shape, pool class, reservations above) while the stamp holds. Whether a plan
//! finds GPUs depends only on the request, the nodes' availability and sizes, the swap pool
//! and the GPUs the reservations above hold (`ready_nodes` offers every other GPU, busy or
//! not); not on the time, the free GPUs or the running jobs' ends, so the stamp covers it.
//!
//! The per-job loop itself is kept cheap, since it still visits every eligible job every
//! cycle: the order stage hands each job's [`Candidate`] (rank, partition, shape, time limit,
//! pool class, whether it holds a reservation) to the stages, which look the job up only to
//! write its pending info; the memo keys hash with a fixed multiply-rotate hasher
//! ([`KeyHasher`]); a plan reads its GPUs' occupant ends from a flat slot per GPU. Not
//! visiting an unchanged job at all (replaying last cycle's outcome from the first rank where
//! anything changed) is not done: the order stage's priorities and eligibility, a job's
//! failed-cycle count and the backfill key (`now` + time limit against each reservation's
//! fill) move every cycle.
//!
//! What is not memoised is evaluated every cycle exactly as by the full scan: priorities
//! (a priority change moves the job's rank, hence the number of reservations above it and its
//! key), eligibility (holds, dependencies, `--begin` time, partition state, required nodes),
//! quota and accounting gates, reclaim, preemption (its budget and deadlines move with
//! time), reservation planning and defragmentation. Within a cycle a kept failure is also
//! written to the cycle's own memo, as the search would have, so later jobs of the shape see
//! the same memo in both modes: decisions, pending reasons and details are identical to the
//! full scan's (`plugins/tests/incremental.rs` compares every cycle on random workloads).

use super::reservations::outranks;
use super::{Decision, PendingInfo, Rank, Reason, Scheduler};
use crate::cluster::{NodeId, PartId, Time};
use crate::config::TopologyKind;
use crate::job::JobId;
use crate::placement;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Most preemption plans tried in one cycle (each costs a scratch copy of the cluster).
const MAX_PREEMPT_ATTEMPTS: usize = 16;

/// Most blocked whole-node jobs one cycle offers to defragmentation.
const MAX_DEFRAG_WAITING: usize = 4;

/// A multiply-rotate hasher (the Fx hash of rustc and Firefox) for the memo keys: small
/// integers the core makes itself, so SipHash's protection against chosen keys buys nothing
/// and costs a few percent of a long queue's cycle. Fixed, so the maps are deterministic too
/// (they are only ever looked up by key).
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// A map keyed by memo keys, hashed with [`KeyHasher`].
type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// Memo key for a request shape that failed in this cycle: within a cycle resources only
/// shrink, so a shape that failed against the same reservations fails again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ShapeKey {
    part: PartId,
    /// Interned [`crate::job::Request`].
    shape: u32,
    /// Number of reservations ranked above the job; `usize::MAX` for a preemption attempt.
    blocked_by: usize,
    /// For a backfill attempt: how many of those it may borrow from.
    backfill: Option<usize>,
}

/// What a kept placement failure is keyed by: the cycle memo's key and the job's pool class
/// (placement lets replicas and `--preemptible` jobs use inference-pool nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct FitKey {
    shape: ShapeKey,
    replica: bool,
    preemptible: bool,
}

/// The incremental cycle's failed placement searches, kept across cycles (module doc). Only
/// looked up by key, never iterated (determinism).
#[derive(Debug, Default)]
pub(super) struct FitMemo {
    /// `Scheduler::fit_stamp` when the entries were recorded.
    stamp: u64,
    /// Failed searches with the detail of the place stage ("" for backfill).
    failed: KeyMap<FitKey, Arc<str>>,
    /// Reservation plans that found no GPUs (`plan_reservation` gave `None`), keyed like a
    /// place search (`ShapeKey::backfill` `None`, `blocked_by` the reservations above).
    plans: KeyMap<FitKey, ()>,
    /// Placement searches run by the place and backfill stages.
    pub(super) searched: u64,
    /// Searches answered from the memo instead.
    pub(super) reused: u64,
    /// Reservation plans made by the reserve stage.
    pub(super) planned: u64,
    /// Plans answered from the memo instead (no GPUs).
    pub(super) plans_reused: u64,
}

/// What the per-job stages of one cycle share.
#[derive(Debug, Default)]
struct CycleState {
    /// Request shapes that failed this cycle, with the detail shown for jobs of that shape.
    failed: KeyMap<ShapeKey, Arc<str>>,
    /// Preemption plans tried so far (at most [`MAX_PREEMPT_ATTEMPTS`]).
    preempt_attempts: usize,
    /// Blocked whole-node jobs, at most [`MAX_DEFRAG_WAITING`], for the defragment stage.
    waiting: Vec<(JobId, Rank)>,
    /// Partitions held back by a blocked job (only when the queue discipline blocks them).
    blocked_parts: BTreeSet<PartId>,
    /// Partitions whose first blocked job this cycle has been seen.
    first_blocked: BTreeSet<PartId>,
    /// Running jobs per (user, account) for `MaxJobs=`, counted at the first job with a
    /// limit and kept up to date as the cycle starts jobs.
    running_per_assoc: Option<HashMap<(String, String), u32>>,
    /// What the running jobs use per association and QOS, for the accounting limits; counted
    /// at the first job that needs it and kept up to date as the cycle starts jobs.
    limits: Option<super::limits::LimitUsage>,
    /// Some elastic job may hold a grown part that can be taken back (cleared once the
    /// reclaim stage finds none, so a cycle without growth pays one scan).
    any_grown: bool,
}

impl CycleState {
    /// The reason of a blocked job of partition `part`: `Resources` for the first one this
    /// cycle, `Priority` for the jobs ranked below it (as Slurm shows them).
    fn blocked_reason(&mut self, part: PartId) -> Reason {
        if self.first_blocked.insert(part) {
            Reason::Resources
        } else {
            Reason::Priority
        }
    }

    /// Counts one preemption attempt when the cycle still has one left; false otherwise.
    fn take_preempt_attempt(&mut self) -> bool {
        if self.preempt_attempts < MAX_PREEMPT_ATTEMPTS {
            self.preempt_attempts += 1;
            true
        } else {
            false
        }
    }
}

/// An eligible job as the order stage ranks it, with what the per-job stages read of it
/// (copied by the order stage, which visits every pending job anyway, so the stages do not
/// look the job up again until they write to it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) id: JobId,
    /// Its rank this cycle (frozen by its reservation, if it holds one).
    pub(super) key: Rank,
    pub(super) part: PartId,
    /// Interned request shape.
    pub(super) shape: u32,
    /// Its time limit (s), what backfill reads.
    pub(super) time_limit: Option<u64>,
    /// A service replica (the pool class of [`FitKey`]).
    pub(super) replica: bool,
    /// `--preemptible` (the pool class of [`FitKey`]).
    pub(super) preemptible: bool,
    /// It held a reservation at the order stage. A job gains one only at its own turn, so
    /// when false the settle stage need not look for one.
    pub(super) held: bool,
}

impl Scheduler {
    /// One scheduling cycle at `now` (s): the stages in order (see the module doc). Returns
    /// the decisions, already applied to the model; the driver must carry them out.
    #[must_use = "the decisions are already applied to the model; the driver must carry them out"]
    pub fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let mut out = Vec::new();
        self.lp_cache = None;
        self.refresh(now, &mut out);
        let order = self.order(now);
        self.drop_stale(&order, &mut out);
        let mut st = CycleState { any_grown: true, ..CycleState::default() };
        for c in order {
            self.schedule_job(c, now, &mut st, &mut out);
        }
        if self.config.queue.may_defragment() {
            self.defragment(&st.waiting, now, &mut out);
        }
        self.grow(now, &mut out);
        out
    }

    /// The refresh stage. Reads the running jobs, the account tree, the services and the
    /// cluster. Writes quota usage and the borrow ledger, the services' replicas (missing
    /// ones become pending jobs; surplus ones get `StopReplica`, or lose their pending entry
    /// and reservation), and the swap pool.
    fn refresh(&mut self, now: Time, out: &mut Vec<Decision>) {
        self.refresh_quota(now);
        self.reconcile_services(now, out);
        self.choose_swap();
    }

    /// The drop-stale stage. Reads the eligible jobs of `order` and the queue discipline.
    /// Writes the reservations: those of jobs no longer eligible (held meanwhile) are
    /// dropped, and all of them when the discipline re-plans every cycle (EASY's shadow).
    fn drop_stale(&mut self, order: &[Candidate], out: &mut Vec<Decision>) {
        let eligible: BTreeSet<JobId> = order.iter().map(|c| c.id).collect();
        let stale: Vec<JobId> = self
            .reservations
            .iter()
            .filter(|r| !eligible.contains(&r.job))
            .map(|r| r.job)
            .collect();
        for j in stale {
            self.drop_reservation(j, out);
        }
        if self.config.queue.replans_every_cycle() {
            let shadows: Vec<JobId> = self.reservations.iter().map(|r| r.job).collect();
            for j in shadows {
                self.drop_reservation(j, out);
            }
        }
    }

    /// The per-job stages for eligible job `id` of rank `key`: a job a blocked partition
    /// holds back waits (`Priority`), one over its quota ceiling waits (`AssocGrpGRES`), one
    /// over an accounting limit waits with Slurm's reason ([`super::limits`]), or without
    /// accounting one whose user runs quota.conf's `MaxJobs=` jobs in its account already
    /// waits (`AssocMaxJobsLimit`); a
    /// job holding a clean reservation goes to [`Scheduler::complete_held_reservation`];
    /// otherwise (a dirty reservation is dropped first) place, backfill, preempt and reserve,
    /// until one settles it.
    ///
    /// Only the job being settled leaves the pending jobs or gains a reservation during the
    /// per-job stages, so `c`, taken at the order stage, still describes it.
    fn schedule_job(&mut self, c: Candidate, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) {
        let id = c.id;
        if self.config.queue.blocks_partition() && st.blocked_parts.contains(&c.part) {
            self.set_info(id, Reason::Priority, None, None, Vec::new());
            return;
        }
        // Quota ceiling: the scope or an ancestor would pass its MaxGPUs.
        if !self.quotas.is_empty() && !c.replica && self.pending.get(&id).is_some_and(|p| self.over_max(&p.spec)) {
            self.set_info(id, Reason::AssocGrpGRES, None, None, Vec::new());
            return;
        }
        // Associations and QOS with their limits (`AccountingStorageEnforce`): they replace
        // quota.conf's `MaxJobs=` when set.
        if self.accounting.checks_jobs() {
            let usage = st.limits.get_or_insert_with(|| self.limit_usage());
            let charge = match self.limits_gate(id, usage) {
                Err(reason) => {
                    self.set_info(id, reason, None, None, Vec::new());
                    return;
                }
                Ok(c) => c,
            };
            self.settle(&c, now, st, out);
            if let (Some(charge), Some(r)) = (charge, self.running.get(&id)) {
                if let Some(u) = st.limits.as_mut() {
                    self.record_start(u, &charge, &r.spec);
                }
            }
            return;
        }
        if self.job_limits.is_empty() {
            self.settle(&c, now, st, out);
            return;
        }
        // Association MaxJobs: the user's running jobs in this account are at the limit.
        if let Some(max) = self.max_running_jobs(id, &self.pending[&id].spec) {
            let spec = &self.pending[&id].spec;
            let key = (spec.user.clone(), spec.account.clone());
            let counts = st.running_per_assoc.get_or_insert_with(|| self.running_per_association());
            if counts.get(&key).copied().unwrap_or(0) >= max {
                self.set_info(id, Reason::AssocMaxJobsLimit, None, None, Vec::new());
                return;
            }
            self.settle(&c, now, st, out);
            if self.running.contains_key(&id) {
                if let Some(counts) = st.running_per_assoc.as_mut() {
                    *counts.entry(key).or_default() += 1;
                }
            }
            return;
        }
        self.settle(&c, now, st, out);
    }

    /// The reservation, place, backfill, preempt and reserve stages for `c`, until one
    /// settles it.
    fn settle(&mut self, c: &Candidate, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) {
        let (id, key) = (c.id, c.key);
        if let Some(ri) = c.held.then(|| self.reservations.iter().position(|r| r.job == id)).flatten() {
            if !self.reservations[ri].dirty {
                self.complete_held_reservation(ri, c, now, st, out);
                return;
            }
            self.drop_reservation(id, out);
        }
        // Reservations are sorted by rank: the ones above this job are a prefix.
        let n_above = self.reservations.partition_point(|r| outranks(&r.rank, &key));
        // Every change to the reservations moves `fit_gen` (`rebuild_held`): the reserve stage
        // reuses the count while it has not moved.
        let resv_gen = self.fit_gen;
        let ControlFlow::Continue(detail) = self.place(c, n_above, now, st, out) else { return };
        if self.backfill(c, n_above, now, st, out)
            || self.reclaim(c, n_above, &detail, now, st, out)
            || self.preempt_for(c, &detail, now, st, out)
        {
            return;
        }
        self.reserve(c, detail, (n_above, resv_gen), now, st, out);
    }

    /// The reclaim stage: take back elastic jobs' grown parts, newest first, when that alone
    /// makes room for the job (the `elastic` module). Memoised per shape like placement;
    /// counts against the cycle's preemption attempts. Writes `Shrink` decisions, a
    /// reservation on the GPUs they free and the job's pending info. Returns true when
    /// decided.
    fn reclaim(&mut self, c: &Candidate, n_above: usize, detail: &Arc<str>, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) -> bool {
        let rkey = ShapeKey { part: c.part, shape: c.shape, blocked_by: n_above, backfill: Some(usize::MAX) };
        if !st.any_grown || st.failed.contains_key(&rkey) {
            return false;
        }
        if !self.running.values().any(|r| r.grown.iter().any(|g| g.shrinking.is_none())) {
            st.any_grown = false;
            return false;
        }
        if !st.take_preempt_attempt() {
            return false;
        }
        if self.reclaim_for(c.id, c.key, now, out) {
            let (est, nodes) = self.reservation_plan(c.id).map_or((None, Vec::new()), |(e, n)| (Some(e), n));
            let reason = st.blocked_reason(c.part);
            self.set_info(c.id, reason, Some(detail.clone()), est, nodes);
            return true;
        }
        st.failed.entry(rkey).or_insert_with(|| Arc::from(""));
        false
    }

    /// The complete-held-reservation stage for the job holding reservation `ri`.
    ///
    /// Reads the reservation, the cluster and the running jobs. Binds the job when its
    /// reserved GPUs are free (or asks backfill occupants to leave), else binds it elsewhere
    /// if resources freed sooner there; else, once per reservation not already made by a
    /// preemption and when the discipline preempts, tries to speed it up by preemption.
    /// Writes the job's pending info (`Resources`/`Priority`, expected start, reserved
    /// nodes) while it still waits.
    fn complete_held_reservation(&mut self, ri: usize, c: &Candidate, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) {
        if self.try_complete_reservation(ri, now, out) {
            return;
        }
        // Resources elsewhere may have freed sooner than the reserved ones.
        if let Ok(parts) = self.try_place(now, &self.pending[&c.id].spec, Some(&c.key), None) {
            let spec = self.pending[&c.id].spec.clone();
            self.drop_reservation(c.id, out);
            self.bind(&spec, parts, Vec::new(), now, out);
            return;
        }
        // A reservation waiting on natural ends may be sped up by preemption.
        if !self.reservations[ri].preempting && self.config.queue.may_preempt() && st.take_preempt_attempt() {
            self.try_preempt(c.id, c.key, now, out);
        }
        let Some((est, nodes)) = self.reservation_plan(c.id) else { return };
        let reason = st.blocked_reason(c.part);
        self.set_info(c.id, reason, None, Some(est), nodes);
    }

    /// The place stage: start the job now on GPUs no reservation ranked above it holds.
    ///
    /// Reads the cluster, the reservations ranked above the job (`n_above` of them) and the
    /// cycle's failure memo. Writes the bind on success (`Break`); on failure the memo, and
    /// returns the no-fit detail with the cluster's largest placeable shape (`Continue`).
    fn place(&mut self, c: &Candidate, n_above: usize, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) -> ControlFlow<(), Arc<str>> {
        let shape = ShapeKey { part: c.part, shape: c.shape, blocked_by: n_above, backfill: None };
        if let Some(detail) = st.failed.get(&shape) {
            return ControlFlow::Continue(detail.clone());
        }
        let fit = self.fit_key(c, shape);
        if let Some(detail) = self.kept_failure(fit) {
            st.failed.insert(shape, detail.clone());
            return ControlFlow::Continue(detail);
        }
        self.fit_memo.searched += 1;
        match self.try_place(now, &self.pending[&c.id].spec, Some(&c.key), None) {
            Ok(parts) => {
                let spec = self.pending[&c.id].spec.clone();
                self.bind(&spec, parts, Vec::new(), now, out);
                ControlFlow::Break(())
            }
            Err(nofit) => {
                let lp = match self.lp_cache {
                    Some(lp) => lp,
                    None => {
                        let lp = self.largest_placeable();
                        self.lp_cache = Some(lp);
                        lp
                    }
                };
                let d: Arc<str> = Arc::from(format!("{}; largest_placeable {}", nofit.detail, lp));
                st.failed.insert(shape, d.clone());
                self.keep_failure(fit, &d);
                ControlFlow::Continue(d)
            }
        }
    }

    /// The backfill stage: start the job on GPUs reserved by jobs ranked above it, when the
    /// discipline backfills and the job's time limit ends before their fill.
    ///
    /// The reservations whose GPUs a job may borrow are those above it that fill after it
    /// ends; for a given prefix they nest by end time, so their count identifies the set (the
    /// memo key). Reads the reservations and the cluster; writes the bind with the
    /// reservations it borrows from (their GPUs, or for CPU-only work their wholly held
    /// node), or the memo. Returns true when bound.
    fn backfill(&mut self, c: &Candidate, n_above: usize, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) -> bool {
        if !self.config.queue.may_backfill() || n_above == 0 {
            return false;
        }
        let Some(limit) = c.time_limit else { return false };
        let end = now + limit;
        let allowed = self.reservations[..n_above].iter().filter(|r| end <= r.est_fill).count();
        let bkey = ShapeKey { part: c.part, shape: c.shape, blocked_by: n_above, backfill: Some(allowed) };
        if allowed == 0 || st.failed.contains_key(&bkey) {
            return false;
        }
        let fit = self.fit_key(c, bkey);
        if let Some(d) = self.kept_failure(fit) {
            st.failed.insert(bkey, d);
            return false;
        }
        self.fit_memo.searched += 1;
        let Ok(parts) = self.try_place(now, &self.pending[&c.id].spec, Some(&c.key), Some(end)) else {
            let d = st.failed.entry(bkey).or_insert_with(|| Arc::from("")).clone();
            self.keep_failure(fit, &d);
            return false;
        };
        let mut users: BTreeSet<JobId> = BTreeSet::new();
        for part in &parts {
            let node_gpus = self.cluster.node(part.node).gpus;
            for (j, g) in &self.held[part.node.0 as usize] {
                let above = self.reservations[..n_above].iter().any(|r| r.job == *j);
                let borrows = !g.intersect(part.gpus).is_empty() || (part.gpus.is_empty() && g.count() == node_gpus);
                if above && borrows {
                    users.insert(*j);
                }
            }
        }
        let spec = self.pending[&c.id].spec.clone();
        self.bind(&spec, parts, users.into_iter().collect(), now, out);
        true
    }

    /// The preempt stage: make room by preemption (service replicas; jobs reclaiming their
    /// guarantee), when the discipline preempts and the cycle has attempts left.
    ///
    /// Reads the running jobs, quotas and the preemption budget; writes `Preempt` decisions
    /// and a reservation on the GPUs the victims free, and the job's pending info with
    /// `detail`. A failed attempt is memoised for the shape (not for replicas, whose
    /// preemption rules depend on their service). Returns true when preemption was decided.
    fn preempt_for(&mut self, c: &Candidate, detail: &Arc<str>, now: Time, st: &mut CycleState, out: &mut Vec<Decision>) -> bool {
        let pkey = ShapeKey { part: c.part, shape: c.shape, blocked_by: usize::MAX, backfill: None };
        if !self.config.queue.may_preempt() || st.failed.contains_key(&pkey) || !st.take_preempt_attempt() {
            return false;
        }
        if self.try_preempt(c.id, c.key, now, out) {
            let (est, nodes) = self.reservation_plan(c.id).map_or((None, Vec::new()), |(e, n)| (Some(e), n));
            let reason = st.blocked_reason(c.part);
            self.set_info(c.id, reason, Some(detail.clone()), est, nodes);
            return true;
        }
        if !c.replica {
            st.failed.entry(pkey).or_insert_with(|| Arc::from(""));
        }
        false
    }

    /// The reserve stage: the job is blocked.
    ///
    /// Counts a failed cycle for it (an input of the priority policy), offers a whole-node
    /// job to defragmentation, blocks its partition when the discipline does, and plans a
    /// reservation for a whole-GPU job when fewer than the discipline's limit are held.
    /// Writes the job's pending info: `Resources`/`Priority`, `detail`, and the planned
    /// reservation's expected start and nodes.
    ///
    /// `above` is the number of reservations ranked above the job and the `fit_gen` when it
    /// was counted.
    fn reserve(&mut self, c: &Candidate, detail: Arc<str>, above: (usize, u64), now: Time, st: &mut CycleState, out: &mut Vec<Decision>) {
        let wants_resv = self.reservations.len() < self.config.queue.reservation_limit(self.config.max_reservations);
        let blocks = self.config.queue.blocks_partition();
        let Some(p) = self.pending.get_mut(&c.id) else { return };
        p.failed_cycles = p.failed_cycles.saturating_add(1);
        let req = &p.spec.request;
        let reservable = !req.is_share() && req.gpus > 0;
        if req.topology == TopologyKind::Node
            && req.gpus > 0
            && !req.is_share()
            && st.waiting.len() < MAX_DEFRAG_WAITING
            && req.gpus <= placement::node_size(&self.cluster, c.part)
        {
            st.waiting.push((c.id, c.key));
        }
        let reason = st.blocked_reason(c.part);
        if blocks {
            st.blocked_parts.insert(c.part);
        }
        if !(wants_resv && reservable) {
            // The common case of a long queue: no reservation to plan, so the info is written
            // through the lookup already made.
            p.info = PendingInfo { reason, detail: Some(detail), expected_start: None, sched_nodes: Vec::new(), slurm_detail: None };
            return;
        }
        let mut est = None;
        let mut nodes = Vec::new();
        let n_above = if self.fit_gen == above.1 { above.0 } else { self.reservations.partition_point(|r| outranks(&r.rank, &c.key)) };
        if let Some(r) = self.plan_for(c, n_above, now) {
            est = Some(r.est_fill);
            nodes = r.gpus.iter().map(|(n, _)| *n).collect();
            self.add_reservation(r, now, out);
        }
        self.set_info(c.id, reason, Some(detail), est, nodes);
    }

    /// The key under which the incremental cycle keeps a failed search of `c` with the cycle
    /// memo key `shape`.
    fn fit_key(&self, c: &Candidate, shape: ShapeKey) -> FitKey {
        FitKey { shape, replica: c.replica, preemptible: c.preemptible }
    }

    /// A failed search kept from an earlier cycle under `fit`, when the incremental cycle is
    /// on and nothing a search reads has changed since (the memo is emptied otherwise).
    fn kept_failure(&mut self, fit: FitKey) -> Option<Arc<str>> {
        if self.full_scan || self.placement.is_stateful() || !self.fit_memo_current() {
            return None;
        }
        let d = self.fit_memo.failed.get(&fit).cloned()?;
        self.fit_memo.reused += 1;
        Some(d)
    }

    /// Keeps a failed search (incremental cycle only), stamped with the model's generation.
    fn keep_failure(&mut self, fit: FitKey, detail: &Arc<str>) {
        if self.full_scan || self.placement.is_stateful() {
            return;
        }
        self.fit_memo_current();
        self.fit_memo.failed.insert(fit, detail.clone());
    }

    /// Empties the kept failures when the stamp of what they read has moved since they were
    /// kept (and stamps the memo anew); true when they are still current.
    fn fit_memo_current(&mut self) -> bool {
        let stamp = self.fit_stamp();
        if self.fit_memo.stamp == stamp {
            return true;
        }
        self.fit_memo.failed.clear();
        self.fit_memo.plans.clear();
        self.fit_memo.stamp = stamp;
        false
    }

    /// A reservation plan for `c` (`plan_reservation`), or `None` when it finds no GPUs. In
    /// the incremental cycle a plan that found none is kept under `c`'s key with the
    /// reservations above it (`n_above`) and not made again while the stamp is unchanged:
    /// whether a plan finds GPUs depends only on the request and pool class, the nodes'
    /// availability and sizes, the swap pool and the GPUs held by the reservations above
    /// (`ready_nodes` offers every other GPU, busy or not, with the time it frees), all of
    /// which move the stamp; not on the time, the free GPUs or the running jobs' ends.
    fn plan_for(&mut self, c: &Candidate, n_above: usize, now: Time) -> Option<super::Reservation> {
        let key = FitKey { shape: ShapeKey { part: c.part, shape: c.shape, blocked_by: n_above, backfill: None }, replica: c.replica, preemptible: c.preemptible };
        let memo = !self.full_scan;
        if memo && self.fit_memo_current() && self.fit_memo.plans.contains_key(&key) {
            self.fit_memo.plans_reused += 1;
            return None;
        }
        self.fit_memo.planned += 1;
        let plan = self.plan_reservation(&self.pending[&c.id].spec, c.key, now);
        if plan.is_none() && memo {
            self.fit_memo_current();
            self.fit_memo.plans.insert(key, ());
        }
        plan
    }

    /// The expected fill (s) and nodes of `job`'s reservation, if it holds one.
    fn reservation_plan(&self, job: JobId) -> Option<(Time, Vec<NodeId>)> {
        let r = self.reservations.iter().find(|r| r.job == job)?;
        Some((r.est_fill, r.gpus.iter().map(|(n, _)| *n).collect()))
    }

    /// Sets a pending job's info after a stage (no Slurm detail: only eligibility sets one).
    fn set_info(&mut self, id: JobId, reason: Reason, detail: Option<Arc<str>>, est: Option<Time>, nodes: Vec<NodeId>) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.info = PendingInfo {
                reason,
                detail,
                expected_start: est,
                sched_nodes: nodes,
                slurm_detail: None,
            };
        }
    }
}
