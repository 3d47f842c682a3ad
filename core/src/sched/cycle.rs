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
//! The per-job loop itself is kept cheap: the order stage hands each job's [`Candidate`]
//! (rank, partition, shape, time limit, pool class, whether it holds a reservation) to the
//! stages, which look the job up only to write its pending info; the memo keys hash with a
//! fixed multiply-rotate hasher ([`KeyHasher`]); a plan reads its GPUs' occupant ends from a
//! flat slot per GPU.
//!
//! # Skipping unchanged jobs
//!
//! A job's visit depends on its candidate, the model (stamped as above), the stage state
//! the jobs ranked above it leave ([`CycleState`]: the failure memo, the Resources/Priority
//! marks and blocked partitions, the defragmentation list, the preemption attempts) and,
//! through its backfill key, the time. When every one of those is as it was at its last
//! visit, the visit would do exactly what it did then. Each cycle therefore keeps
//! ([`Replay`]):
//!
//! - its order, stamped with `(queue_gen, fit_gen)`. The next cycle reuses it instead of
//!   running the order stage (no job's priority or eligibility is read) when neither moved,
//!   time did not run backwards and no `--begin` time was reached (the order stage notes
//!   the earliest one ahead). `queue_gen` moves when a pending job enters, leaves or is
//!   updated (submit, update — priority, hold, release, dependency —, cancel, requeue, bind,
//!   a replica added or removed: [`Scheduler::queue_changed`]); `fit_gen` when a
//!   reservation or a node's availability changes. Otherwise the order stage runs;
//! - its *tail*: the run of consecutive jobs at the end of the order whose visits were
//!   quiet (no decision, the model's stamp unchanged, no preemption attempt, no held
//!   reservation: such a visit wrote only the job's pending info, its failed-cycle count and
//!   the stage state), with the stage state at its start and end, the stamp, and its
//!   *horizon*: the earliest time at which one of its jobs' backfill keys changes (a
//!   reservation above it it may borrow from stops filling after its time limit ends:
//!   `est_fill - limit + 1`).
//!
//! The next cycle visits the jobs ranked above the tail as usual. At the tail's first
//! position it passes the whole tail without visiting a job when the model's stamp is the
//! one recorded (nothing was taken, freed, drained, reserved... since), the stage state is
//! equal to the recorded entry state, time has not run backwards and is before the horizon;
//! the stage state then becomes the recorded exit state. Otherwise it visits the tail's jobs
//! as usual. A new order keeps the tail when none of its jobs changed (a tail job updated or
//! leaving marks it dirty) and its jobs stand together, in the same order, in the new one:
//! jobs that arrive or leave above it only move it, and jobs that arrive below it are visited
//! after it and may extend it.
//!
//! A skipped job's pending info and priority are what its last visit wrote (the priority
//! policy is static); its failed-cycle count is kept lazily: the tail keeps, per segment of
//! jobs visited in one cycle, the count of skipped tails (`Replay::skips`) at that visit and
//! which of them counted a failed cycle; the difference is added when the tail is next
//! visited or dropped ([`Scheduler::failed_cycles`] reads it with the difference), so a
//! skip costs O(1) for the whole tail and nothing is written to a job that is not visited.
//!
//! Skipping is on only where every input above is covered by those stamps: the incremental
//! cycle, a static priority policy ([`super::PriorityPolicy::is_static`]: `priority/basic`;
//! under `priority/multifactor` age and failed cycles move every job's priority with time,
//! so every cycle re-ranks), a stateless placement policy, and no quota tree, `MaxJobs=`
//! limits or enforced accounting limits (their gates read usage that moves outside the
//! stamp). Elsewhere the cycle keeps nothing for the next one: no order, no tail, no
//! record per visit (the per-job stages run alone, and a queue change looks no job up for
//! a tail). [`Scheduler::visit_counts`] counts visited and skipped jobs.
//!
//! Outside a skipped tail and a reused order, what is not memoised is evaluated every cycle
//! exactly as by the full scan: priorities (a priority change moves the job's rank, hence
//! the number of reservations above it and its key), eligibility (holds, dependencies,
//! `--begin` time, partition state, required nodes), quota and accounting gates, reclaim,
//! preemption (its budget and deadlines move with time), reservation planning and
//! defragmentation. A visit that tries a preemption or a reclaim, completes or holds a
//! reservation, or decides anything ends the quiet run, so a tail never holds one. Within a
//! cycle a kept failure is also
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
    /// Entries are only added within a cycle (through [`CycleState::fail`]).
    failed: KeyMap<ShapeKey, Arc<str>>,
    /// The keys of `failed` in the order they were added, so that a [`Mark`] is a length.
    failed_log: Vec<ShapeKey>,
    /// The earliest time (s) at which the backfill key of the job being visited would change
    /// (`Time::MAX`: never): set by the backfill stage for the tail record.
    horizon: Time,
    /// The job being visited counted a failed cycle (the reserve stage).
    bumped: bool,
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

    /// Records that the shape `key` failed with `detail`, unless it already has; returns
    /// the detail kept for it.
    fn fail(&mut self, key: ShapeKey, detail: impl FnOnce() -> Arc<str>) -> Arc<str> {
        match self.failed.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
            std::collections::hash_map::Entry::Vacant(e) => {
                self.failed_log.push(key);
                e.insert(detail()).clone()
            }
        }
    }

    /// Where the state stands now, cheaply (the failure memo as its length: it only grows).
    fn mark(&self) -> Mark {
        Mark {
            failed: self.failed_log.len(),
            preempt_attempts: self.preempt_attempts,
            waiting: self.waiting.clone(),
            blocked_parts: self.blocked_parts.clone(),
            first_blocked: self.first_blocked.clone(),
            any_grown: self.any_grown,
        }
    }

    /// The failure memo's entries added in `from..to` of the log, with their details.
    fn failed_between(&self, from: usize, to: usize) -> Vec<(ShapeKey, Arc<str>)> {
        self.failed_log[from..to].iter().map(|k| (*k, self.failed[k].clone())).collect()
    }

    /// True when the state is the one `t` was entered with.
    fn is_at(&self, t: &Tail) -> bool {
        let m = &t.entry;
        self.preempt_attempts == m.preempt_attempts
            && self.any_grown == m.any_grown
            && self.waiting == m.waiting
            && self.blocked_parts == m.blocked_parts
            && self.first_blocked == m.first_blocked
            && self.failed.len() == t.entry_failed.len()
            && t.entry_failed.iter().all(|(k, d)| self.failed.get(k) == Some(d))
    }

    /// Moves the state to the end of tail `t`, as visiting its jobs would (`is_at(t)` holds).
    fn pass(&mut self, t: &Tail) {
        for (k, d) in &t.added_failed {
            self.failed.insert(*k, d.clone());
            self.failed_log.push(*k);
        }
        self.preempt_attempts = t.exit.preempt_attempts;
        self.any_grown = t.exit.any_grown;
        self.waiting.clone_from(&t.exit.waiting);
        self.blocked_parts.clone_from(&t.exit.blocked_parts);
        self.first_blocked.clone_from(&t.exit.first_blocked);
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

/// The per-job stages' shared state at one point of a cycle ([`CycleState::mark`]).
#[derive(Debug, Clone, Default)]
struct Mark {
    /// Length of the failure memo's log.
    failed: usize,
    preempt_attempts: usize,
    waiting: Vec<(JobId, Rank)>,
    blocked_parts: BTreeSet<PartId>,
    first_blocked: BTreeSet<PartId>,
    any_grown: bool,
}

/// A run of consecutive jobs of the order whose visits changed nothing but their own
/// pending info, failed-cycle count and the cycle's [`CycleState`], recorded so that the
/// next cycle may pass it without visiting them (module doc, "Skipping unchanged jobs").
#[derive(Debug)]
pub(super) struct Tail {
    /// Its positions in the order: `start..end`.
    start: usize,
    end: usize,
    /// When it was recorded (s): time must not run backwards.
    at: Time,
    /// `Scheduler::fit_stamp` at `start`: the model its jobs were tried against.
    stamp: u64,
    /// The earliest time (s) at which a backfill key of its jobs would change.
    horizon: Time,
    /// Its jobs by the cycle that last visited them, in order.
    segs: Vec<Seg>,
    /// The stage state at `start` ...
    entry: Mark,
    /// ... with the failure memo then ...
    entry_failed: Vec<(ShapeKey, Arc<str>)>,
    /// ... and at `end`, with the memo entries the run added.
    exit: Mark,
    added_failed: Vec<(ShapeKey, Arc<str>)>,
}

/// Consecutive jobs of a tail visited in the same cycle.
#[derive(Debug)]
pub(super) struct Seg {
    /// `Replay::skips` after that cycle (`None` until the cycle records its tail).
    base: Option<u64>,
    /// Per job, in order: its visit counted a failed cycle.
    bumped: Vec<bool>,
}

/// What a cycle keeps for the next one to replay (module doc, "Skipping unchanged jobs").
#[derive(Debug)]
pub(super) struct Replay {
    /// The last cycle's order (its candidates, best first).
    order: Vec<Candidate>,
    /// `(queue_gen, fit_gen)` when that order was made; `None` when there is none.
    order_stamp: Option<(u64, u64)>,
    /// When it was made (s).
    made: Time,
    /// The earliest `--begin` time after `made` among the pending jobs (`Time::MAX`: none).
    next_begin: Time,
    /// The tail of `order` the next cycle may skip.
    tail: Option<Tail>,
    /// A job of the tail was updated, or left the queue, since the tail was recorded.
    pub(super) tail_dirty: bool,
    /// Tails skipped since the scheduler was built: the clock of the lazy failed-cycle
    /// counts (`Seg::base`).
    skips: u64,
    /// Pending jobs the per-job stages visited.
    pub(super) visited: u64,
    /// Pending jobs passed in a skipped tail instead.
    pub(super) skipped: u64,
}

impl Replay {
    /// Whether a tail is kept (never where skipping cannot apply).
    pub(super) fn has_tail(&self) -> bool {
        self.tail.is_some()
    }
}

impl Default for Replay {
    fn default() -> Replay {
        Replay { order: Vec::new(), order_stamp: None, made: 0, next_begin: Time::MAX, tail: None, tail_dirty: false, skips: 0, visited: 0, skipped: 0 }
    }
}

/// The run of quiet visits the cycle is in, for the next cycle's tail.
#[derive(Debug)]
struct Run {
    start: usize,
    stamp: u64,
    entry: Mark,
    horizon: Time,
    /// Its jobs: a passed tail's segments, and one for the jobs this cycle visited.
    segs: Vec<Seg>,
}

impl Run {
    fn at(start: usize, st: &CycleState, stamp: u64) -> Run {
        Run { start, stamp, entry: st.mark(), horizon: Time::MAX, segs: Vec::new() }
    }

    /// A job visited this cycle joins the run.
    fn visited(&mut self, bumped: bool) {
        match self.segs.last_mut() {
            Some(s) if s.base.is_none() => s.bumped.push(bumped),
            _ => self.segs.push(Seg { base: None, bumped: vec![bumped] }),
        }
    }
}

/// The order stage's sort key of a candidate.
fn rank_key(c: &Candidate) -> (std::cmp::Reverse<u64>, Time, JobId) {
    (std::cmp::Reverse(c.key.0), c.key.1, c.key.2)
}

/// An eligible job as the order stage ranks it, with what the per-job stages read of it
/// (copied by the order stage, which visits every pending job anyway, so the stages do not
/// look the job up again until they write to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        let replay = self.may_replay();
        if !replay {
            self.forget_replay();
        }
        let r = &self.replay;
        let reuse = replay && r.order_stamp == Some((self.queue_gen, self.fit_gen)) && now >= r.made && now < r.next_begin;
        let order = if reuse {
            // Nothing the order stage reads has moved: last cycle's order stands, and the
            // reservations it left are all eligible (drop_stale dropped none then, or the
            // stamp would have moved).
            self.update_usage(now);
            std::mem::take(&mut self.replay.order)
        } else {
            let stamp = (self.queue_gen, self.fit_gen);
            let order = self.order(now);
            self.drop_stale(&order, &mut out);
            if replay {
                self.relocate_tail(&order);
                self.replay.order_stamp = Some(stamp);
                self.replay.made = now;
            }
            order
        };
        let mut st = CycleState { any_grown: true, horizon: Time::MAX, ..CycleState::default() };
        if !replay {
            // Nothing to keep for a next cycle: the per-job stages alone, with none of the
            // bookkeeping below (the order stage's `--begin` note is one comparison per job).
            for &c in &order {
                self.schedule_job(c, now, &mut st, &mut out);
            }
            self.replay.visited += order.len() as u64;
            return self.finish_cycle(&st, now, out);
        }
        let mut tail = self.replay.tail.take();
        let mut passed: Option<(usize, usize)> = None;
        let mut run = Run::at(0, &st, self.fit_stamp());
        let mut i = 0;
        while i < order.len() {
            if let Some(t) = tail.take_if(|t| t.start == i) {
                if now >= t.at && now < t.horizon && self.fit_stamp() == t.stamp && st.is_at(&t) {
                    st.pass(&t);
                    self.replay.skips += 1;
                    self.replay.skipped += (t.end - t.start) as u64;
                    run.horizon = run.horizon.min(t.horizon);
                    i = t.end;
                    run.segs.extend(t.segs);
                    passed = Some((t.start, t.end));
                    continue;
                }
                self.settle_lazy(&order[t.start..t.end], &t.segs);
            }
            let c = order[i];
            let before = (out.len(), self.fit_stamp(), st.preempt_attempts);
            st.horizon = Time::MAX;
            st.bumped = false;
            self.schedule_job(c, now, &mut st, &mut out);
            self.replay.visited += 1;
            if !c.held && before == (out.len(), self.fit_stamp(), st.preempt_attempts) {
                run.horizon = run.horizon.min(st.horizon);
                run.visited(st.bumped);
            } else {
                let old = std::mem::replace(&mut run, Run::at(i + 1, &st, self.fit_stamp()));
                if let Some((a, b)) = passed.filter(|(a, _)| old.start <= *a) {
                    // A passed tail left the run: its lazy counts are due now.
                    let block: Vec<Seg> = old.segs.into_iter().filter(|s| s.base.is_some()).collect();
                    self.settle_lazy(&order[a..b], &block);
                    passed = None;
                }
            }
            i += 1;
        }
        if let Some(t) = tail {
            // Not reached (cannot happen: a kept tail lies inside the order).
            self.settle_lazy(&order[t.start..t.end.min(order.len())], &t.segs);
        }
        self.record_tail(run, &order, &st, now);
        self.replay.order = order;
        self.finish_cycle(&st, now, out)
    }

    /// The stages after the per-job ones: defragment, then grow elastic jobs.
    fn finish_cycle(&mut self, st: &CycleState, now: Time, mut out: Vec<Decision>) -> Vec<Decision> {
        if self.config.queue.may_defragment() {
            self.defragment(&st.waiting, now, &mut out);
        }
        self.grow(now, &mut out);
        out
    }

    /// Whether this scheduler may keep its order and skip unchanged jobs: the incremental
    /// cycle with a static priority policy, a stateless placement policy, and none of the
    /// gates whose outcome moves with time or with usage outside the model's stamp (quotas,
    /// `MaxJobs=` limits, enforced accounting limits).
    fn may_replay(&self) -> bool {
        !self.full_scan
            && self.priority.is_static()
            && !self.placement.is_stateful()
            && self.quotas.is_empty()
            && self.job_limits.is_empty()
            && !self.accounting.checks_jobs()
    }

    /// The order stage found `at` (s) the earliest `--begin` still ahead.
    pub(super) fn replay_next_begin(&mut self, at: Time) {
        self.replay.next_begin = at;
    }

    /// Drops the kept order and tail, first adding the skipped cycles to the tail's
    /// failed-cycle counts.
    pub(super) fn forget_replay(&mut self) {
        self.forget_tail();
        self.replay.order = Vec::new();
        self.replay.order_stamp = None;
    }

    /// Drops the kept tail (its lazy failed-cycle counts settled first).
    fn forget_tail(&mut self) {
        if let Some(t) = self.replay.tail.take() {
            let order = std::mem::take(&mut self.replay.order);
            self.settle_lazy(&order[t.start..t.end], &t.segs);
            self.replay.order = order;
        }
        self.replay.tail_dirty = false;
    }

    /// A new order was made: the kept tail stays only if no job of it changed and its jobs
    /// stand together, in the same order, in the new one (jobs that came or went above it
    /// only move it).
    fn relocate_tail(&mut self, order: &[Candidate]) {
        let Some(t) = self.replay.tail.as_ref() else { return };
        let old = &self.replay.order[t.start..t.end];
        let at = order.partition_point(|c| rank_key(c) < rank_key(&old[0]));
        if !self.replay.tail_dirty && order.get(at..at + old.len()) == Some(old) {
            let t = self.replay.tail.as_mut().expect("checked");
            t.end = at + (t.end - t.start);
            t.start = at;
        } else {
            self.forget_tail();
        }
    }

    /// Adds the tails skipped since each of `jobs` (a tail, made of `segs`) was last visited
    /// to its failed-cycle count. Free when none was skipped since.
    fn settle_lazy(&mut self, jobs: &[Candidate], segs: &[Seg]) {
        let skips = self.replay.skips;
        let mut at = 0;
        for seg in segs {
            let n = seg.bumped.len();
            let lazy = seg.base.map_or(0, |b| u32::try_from(skips - b).unwrap_or(u32::MAX));
            if lazy > 0 {
                for (c, _) in jobs[at..at + n].iter().zip(&seg.bumped).filter(|(_, b)| **b) {
                    if let Some(p) = self.pending.get_mut(&c.id) {
                        p.failed_cycles = p.failed_cycles.saturating_add(lazy);
                    }
                }
            }
            at += n;
        }
    }

    /// Where pending job `id` (`p`) stands in the kept tail: its segment and whether its
    /// last visit counted a failed cycle; `None` when it is not in the tail. A tail job
    /// holds no reservation, so its rank is its own `(priority, submit, id)`: a binary search
    /// of the kept order.
    pub(super) fn tail_position(&self, id: JobId, p: &super::PendingJob) -> Option<(&Seg, bool)> {
        let t = self.replay.tail.as_ref()?;
        let key = (std::cmp::Reverse(p.priority), p.spec.submit_time, id);
        let at = self.replay.order.partition_point(|c| rank_key(c) < key);
        if at < t.start || at >= t.end || self.replay.order[at].id != id {
            return None;
        }
        let mut off = at - t.start;
        for seg in &t.segs {
            if off < seg.bumped.len() {
                return Some((seg, seg.bumped[off]));
            }
            off -= seg.bumped.len();
        }
        None
    }

    /// A pending job's failed cycles, with the skipped tails not yet added.
    pub(super) fn failed_cycles_of(&self, id: JobId, p: &super::PendingJob) -> u32 {
        let lazy = match self.tail_position(id, p) {
            Some((seg, true)) => seg.base.map_or(0, |b| u32::try_from(self.replay.skips - b).unwrap_or(u32::MAX)),
            _ => 0,
        };
        p.failed_cycles.saturating_add(lazy)
    }

    /// Keeps the run of quiet visits that ends the order as the next cycle's tail (a tail
    /// passed this cycle is part of it when still in the run; it was settled otherwise).
    fn record_tail(&mut self, mut run: Run, order: &[Candidate], st: &CycleState, now: Time) {
        self.replay.tail_dirty = false;
        if run.start >= order.len() {
            return;
        }
        let skips = self.replay.skips;
        for seg in &mut run.segs {
            seg.base.get_or_insert(skips);
        }
        let from = run.entry.failed;
        self.replay.tail = Some(Tail {
            start: run.start,
            end: order.len(),
            at: now,
            stamp: run.stamp,
            horizon: run.horizon,
            segs: run.segs,
            entry_failed: st.failed_between(0, from),
            added_failed: st.failed_between(from, st.failed_log.len()),
            entry: run.entry,
            exit: st.mark(),
        });
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
        st.fail(rkey, || Arc::from(""));
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
            st.fail(shape, || detail.clone());
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
                st.fail(shape, || d.clone());
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
        let mut allowed = 0;
        for r in &self.reservations[..n_above] {
            if end <= r.est_fill {
                allowed += 1;
                // From est_fill - limit + 1 on, the job no longer ends before this fill.
                st.horizon = st.horizon.min(r.est_fill - limit + 1);
            }
        }
        let bkey = ShapeKey { part: c.part, shape: c.shape, blocked_by: n_above, backfill: Some(allowed) };
        if allowed == 0 || st.failed.contains_key(&bkey) {
            return false;
        }
        let fit = self.fit_key(c, bkey);
        if let Some(d) = self.kept_failure(fit) {
            st.fail(bkey, || d);
            return false;
        }
        self.fit_memo.searched += 1;
        let Ok(parts) = self.try_place(now, &self.pending[&c.id].spec, Some(&c.key), Some(end)) else {
            let d = st.fail(bkey, || Arc::from(""));
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
            st.fail(pkey, || Arc::from(""));
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
        st.bumped = true;
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
            p.set_info(PendingInfo { reason, detail: Some(detail), expected_start: None, sched_nodes: Vec::new(), slurm_detail: None });
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
            p.set_info(PendingInfo {
                reason,
                detail,
                expected_start: est,
                sched_nodes: nodes,
                slurm_detail: None,
            });
        }
    }
}
