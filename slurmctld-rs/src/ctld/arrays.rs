//! Job arrays and dependencies: which pending tasks of an array the core sees (the
//! `ArrayTaskThrottle` `%N`), the record a started task becomes, and the dependency states
//! evaluated before each cycle.

use super::{prov_id, Controller};
use crate::deps::{DepStatus, DepTarget};
use crate::job::{JobRecord, JobState, StopWhy};
use flotilla_core::job::JobId;
use flotilla_core::sched::Event as CoreEvent;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Array task `task`'s record of its own, made from a copy of its array's record: job id `id`,
/// core id `core`, no pending remainder and no throttle (a started task's record and a task
/// split off by an update alike).
fn task_record(mut t: JobRecord, id: u64, task: u32, core: u64) -> JobRecord {
    t.id = id;
    t.array_task_id = Some(task);
    t.array_pending = Vec::new();
    t.array_max_running = None;
    t.spec.id = JobId(core);
    t
}

impl Controller {
    pub(super) fn start_array_task(&mut self, aid: u64, task: u32, core: u64) -> u64 {
        if let Some(s) = self.in_core_tasks.get_mut(&aid) {
            s.remove(&task);
        }
        let meta = self.jobs.get_mut(&aid).expect("array record exists");
        meta.array_pending.retain(|&t| t != task);
        let id = if meta.array_pending.is_empty() {
            // The last task reuses the array's id. The record keeps the array's throttle:
            // Slurm's `job_array_post_sched` keeps `array_recs` (its `max_run_tasks`) on the
            // array's record, which `job_array_start_test` reads for the array's other
            // records (a requeued task).
            meta.array_task_id = Some(task);
            meta.spec.id = JobId(core);
            aid
        } else {
            if meta.array_pending.len() == 1 {
                // Slurm's `job_array_split` leaves the array record with one task: it
                // becomes that task's record (see `array_record_to_task`), after this
                // turn's binds (another bind of this cycle may be that very task).
                self.last_task_splits.insert(aid);
            }
            let t = meta.clone();
            self.dirty(aid);
            // The core started the task already: with every job id in use it still gets a
            // record, under the first free id at or above `MaxJobId` (a Slurm tool may not
            // parse it; the error is logged).
            let nid = self.take_id().unwrap_or_else(|| {
                let mut id = self.opts.max_job_id;
                while self.jobs.contains_key(&id) {
                    id += 1;
                }
                tracing::error!(job = id, "every job id is in use: array task record above MaxJobId");
                id
            });
            self.jobs.insert(nid, task_record(t, nid, task, core));
            nid
        };
        self.core_map.insert(core, id);
        id
    }

    /// Splits pending task `task` off array `aid` into a pending record of its own under a
    /// new job id, as Slurm's `job_array_split` (`job_mgr.c`) does when `update_job_str`
    /// updates some but not all of an array's pending tasks: the array keeps its id and its
    /// other pending tasks; the task's record is a copy of the array's (priority, submit
    /// time, request) with `array_task_id` set. It stays under the array's
    /// `ArrayTaskThrottle` (Slurm's `job_array_start_test` counts every running task of the
    /// array, split records included): `refresh_arrays` gives it to the core. Returns the new
    /// id; `None` (nothing changed) when every job id is in use.
    pub(super) fn split_array_task(&mut self, aid: u64, task: u32, now: i64) -> Option<u64> {
        let nid = self.take_id()?;
        if self.in_core_tasks.get_mut(&aid).is_some_and(|s| s.remove(&task)) {
            self.core_event(CoreEvent::Cancel(JobId(prov_id(aid, task))), now);
        }
        let meta = self.jobs.get_mut(&aid).expect("array record exists");
        meta.array_pending.retain(|&t| t != task);
        let last = meta.array_pending.len() == 1;
        let t = task_record(meta.clone(), nid, task, nid);
        if t.deadline.is_some() {
            self.deadlines.insert(nid);
        }
        self.jobs.insert(nid, t);
        self.split_tasks.insert(nid, false);
        self.dirty(aid);
        self.dirty(nid);
        self.sched_dirty = true;
        tracing::info!(job = nid, array = aid, task, "array task split off into a record of its own");
        if last {
            self.array_record_to_task(aid, now);
        }
        Some(nid)
    }

    /// The array record `aid`, left with one pending task by a split (a task started by a
    /// cycle, or split off by an update or a hold), becomes that task's pending record: it
    /// keeps the array's id and shows as `A_T`, no longer `A_[T%N]`. Slurm's `job_array_split`
    /// (`job_mgr.c`): when the pending record's task count falls to one it sets
    /// `array_task_id` to the remaining task and calls `job_array_post_sched`, which frees
    /// the task string and bitmap. A cancel that leaves one task does not (`job_str_signal`
    /// only shrinks the bitmap), so this runs for splits only. The record stays under the
    /// array's `ArrayTaskThrottle` (`job_array_start_test`): it joins `split_tasks`. The
    /// core knows it by the task's provisional id, as it knew the task (which keeps the
    /// reason the last cycle gave it, as Slurm's record keeps its `state_reason`).
    pub(super) fn array_record_to_task(&mut self, aid: u64, now: i64) {
        let Some(rec) = self.jobs.get_mut(&aid) else { return };
        if rec.state != JobState::Pending || rec.array_pending.len() != 1 {
            return;
        }
        let task = rec.array_pending[0];
        let core = prov_id(aid, task);
        rec.array_pending.clear();
        rec.array_task_id = Some(task);
        rec.spec.id = JobId(core);
        let in_core = self.in_core_tasks.remove(&aid).unwrap_or_default();
        for &t in in_core.iter().filter(|&&t| t != task) {
            self.core_event(CoreEvent::Cancel(JobId(prov_id(aid, t))), now);
        }
        self.core_map.insert(core, aid);
        self.split_tasks.insert(aid, in_core.contains(&task));
        self.dirty(aid);
        self.sched_dirty = true;
        tracing::info!(job = aid, task, "array record left with one pending task: it is that task's record");
    }

    /// Carries out the conversions `start_array_task` noted in this turn
    /// ([`Controller::array_record_to_task`]); called by `flush`, after every bind.
    pub(super) fn settle_last_tasks(&mut self, now: i64) {
        for aid in std::mem::take(&mut self.last_task_splits) {
            self.array_record_to_task(aid, now);
        }
    }

    /// Job `id` is pending again after a requeue. An array task's record waits for the
    /// array's `ArrayTaskThrottle` as any of the array's records does (Slurm's
    /// `job_array_start_test` tests every record with a task id against the array's
    /// `max_run_tasks`): it joins `split_tasks` (`in_core`: the core kept it pending, as a
    /// preemption or a node loss does), and `refresh_arrays` gives it to the core when the
    /// throttle has room. Another job is submitted to the core unless it is there already.
    pub(super) fn requeue_to_core(&mut self, id: u64, in_core: bool, now: i64) {
        let rec = &self.jobs[&id];
        if rec.array_task_id.is_some() && !rec.is_array_meta() {
            self.split_tasks.insert(id, in_core);
            self.sched_dirty = true;
        } else if !in_core {
            self.core_event(CoreEvent::Submit(rec.spec.clone()), now);
        }
    }

    /// Arrays whose `ArrayTaskThrottle` is reached: as many of their tasks run (or complete)
    /// as `%N` allows, so their pending records are held out (Slurm's `job_array_start_test`
    /// sets their reason to `JobArrayTaskLimit`).
    pub(super) fn throttled_arrays(&self) -> BTreeSet<u64> {
        let mut running: HashMap<u64, u32> = HashMap::new();
        for r in self.jobs.values() {
            if let Some(a) = r.array_job_id {
                if holds_throttle_slot(r) {
                    *running.entry(a).or_default() += 1;
                }
            }
        }
        running
            .into_iter()
            .filter(|(a, n)| self.jobs.get(a).and_then(|r| r.array_max_running).is_some_and(|m| *n >= m))
            .map(|(a, _)| a)
            .collect()
    }

    /// Whether the core has the pending record `id` (false only for a split task record the
    /// throttle keeps out, see [`Controller::split_array_task`]).
    pub(super) fn in_core(&self, id: u64) -> bool {
        self.split_tasks.get(&id).copied().unwrap_or(true)
    }

    pub(super) fn refresh_arrays(&mut self, now: i64) {
        // A record stops being a meta for good (its pending tasks only shrink) or is purged.
        let jobs = &self.jobs;
        self.array_metas.retain(|id| jobs.get(id).is_some_and(JobRecord::is_array_meta));
        let metas: Vec<u64> = self
            .array_metas
            .iter()
            .filter(|id| self.jobs[id].state == JobState::Pending)
            .copied()
            .collect();
        self.split_tasks.retain(|id, _| jobs.get(id).is_some_and(|r| r.state == JobState::Pending));
        if metas.is_empty() && self.split_tasks.is_empty() {
            return;
        }
        let mut running: HashMap<u64, u32> = HashMap::new();
        for r in self.jobs.values() {
            if let Some(a) = r.array_job_id {
                if holds_throttle_slot(r) {
                    *running.entry(a).or_default() += 1;
                }
            }
        }
        // Split task records by array, in task order: at equal priority Slurm's queue
        // (`sort_job_queue2`) puts them before the array's own pending tasks (whose entry has
        // no task id), so they take the throttle's free slots first.
        let mut split: BTreeMap<u64, Vec<(u32, u64)>> = BTreeMap::new();
        for &id in self.split_tasks.keys() {
            let r = &self.jobs[&id];
            // A record that cannot start yet (held, a dependency or a begin time, as a
            // requeued task's) takes no free slot: Slurm's throttle counts running tasks
            // only. It waits out of the core until it may start.
            if !may_start(r, now) {
                continue;
            }
            if let (Some(a), Some(t)) = (r.array_job_id, r.array_task_id) {
                split.entry(a).or_default().push((t, id));
            }
        }
        let mut want_split: BTreeSet<u64> = BTreeSet::new();
        for (a, tasks) in &mut split {
            tasks.sort_unstable();
            // The array record keeps the throttle after its tasks are split off or started
            // (Slurm's `array_recs` on the array's record).
            let gated = self.jobs.get(a).and_then(|r| r.array_max_running);
            let free = gated.map_or(usize::MAX, |m| m.saturating_sub(running.get(a).copied().unwrap_or(0)) as usize);
            want_split.extend(tasks.iter().take(free).map(|&(_, id)| id));
            if gated.is_some() {
                let taken = tasks.len().min(free) as u32;
                *running.entry(*a).or_default() += taken;
            }
        }
        let ids: Vec<(u64, bool)> = self.split_tasks.iter().map(|(&id, &c)| (id, c)).collect();
        for (id, in_core) in ids {
            let want = want_split.contains(&id);
            if want && !in_core {
                self.core_event(CoreEvent::Submit(self.jobs[&id].spec.clone()), now);
            } else if !want && in_core {
                // Under the record's core id: a started task's record keeps its
                // provisional one when it is requeued.
                self.core_event(CoreEvent::Cancel(self.jobs[&id].spec.id), now);
            }
            self.split_tasks.insert(id, want);
        }
        for aid in metas {
            let rec = &self.jobs[&aid];
            let limit = rec
                .array_max_running
                .map_or(usize::MAX, |m| m.saturating_sub(running.get(&aid).copied().unwrap_or(0)) as usize)
                .min(1024);
            let want: BTreeSet<u32> = rec.array_pending.iter().copied().take(limit).collect();
            let have = self.in_core_tasks.entry(aid).or_default().clone();
            for t in have.difference(&want) {
                self.core_event(CoreEvent::Cancel(JobId(prov_id(aid, *t))), now);
            }
            for t in want.difference(&have) {
                let mut sp = self.jobs[&aid].spec.clone();
                sp.id = JobId(prov_id(aid, *t));
                self.core_event(CoreEvent::Submit(sp), now);
            }
            self.in_core_tasks.insert(aid, want);
        }
    }

    fn dep_target(&self, job: u64, task: Option<u32>) -> DepTarget {
        let Some(rec) = self.jobs.get(&job) else { return DepTarget::Unknown };
        if rec.array_job_id != Some(job) {
            return dep_state(rec);
        }
        // An array: one task, or all of them.
        let members = self.jobs.values().filter(|j| j.array_job_id == Some(job));
        let mut any_pending = false;
        let mut any_running = false;
        let mut all_ok = true;
        let mut found = false;
        for m in members {
            if let Some(t) = task {
                if m.array_pending.contains(&t) {
                    return DepTarget::Pending;
                }
                if m.array_task_id != Some(t) || m.is_array_meta() {
                    continue;
                }
            }
            found = true;
            match dep_state(m) {
                DepTarget::Pending => any_pending = true,
                DepTarget::Running => any_running = true,
                DepTarget::Ended { ok } => all_ok &= ok,
                DepTarget::Unknown => {}
            }
        }
        if !found {
            DepTarget::Unknown
        } else if any_pending {
            DepTarget::Pending
        } else if any_running {
            DepTarget::Running
        } else {
            DepTarget::Ended { ok: all_ok }
        }
    }

    pub(super) fn refresh_deps(&mut self, now: i64) {
        let ids: Vec<u64> = self.deps.keys().copied().collect();
        self.refresh_deps_of(&ids, now);
    }

    /// [`Self::refresh_deps`] for the jobs `ids` only: a submission tests its own at once, as
    /// Slurm's `job_allocate` does through `job_independent` (`test_job_dependency`): a
    /// dependency on a job that is not known (`afterok:999999`) is cleared there, so the
    /// job is eligible from its submission (golden 0282: job 10 in `sacct`).
    pub(super) fn refresh_deps_of(&mut self, ids: &[u64], now: i64) {
        let mut results = Vec::new();
        for id in ids {
            let (Some(dep), Some(rec)) = (self.deps.get(id), self.jobs.get(id)) else { continue };
            // Slurm tests a job's dependencies when it may be scheduled (`job_independent`):
            // not while it is held, so a held job shows its dependency unfulfilled.
            if rec.state != JobState::Pending || rec.spec.held.is_some() {
                continue;
            }
            let blocked = dep.has_singleton()
                && self.jobs.values().any(|o| {
                    o.id != rec.id
                        && o.uid == rec.uid
                        && o.name == rec.name
                        && (matches!(o.state, JobState::Running | JobState::Completing)
                            || (o.state == JobState::Pending && o.id < rec.id))
                });
            results.push((*id, dep.evaluate(&|j, t| self.dep_target(j, t), blocked)));
        }
        let mut kill = Vec::new();
        for (id, st) in results {
            let rec = self.jobs.get_mut(&id).expect("present");
            if st == DepStatus::Never
                && flotilla_proto::job_flags::kills_on_invalid_dep(rec.job_flags, self.opts.kill_invalid_depend)
            {
                kill.push(id);
            }
            let pending = st != DepStatus::Satisfied;
            let reason = (st == DepStatus::Never).then(|| "DependencyNeverSatisfied".to_string());
            let changed = rec.spec.dependency_pending != pending || rec.reason != reason;
            rec.spec.dependency_pending = pending;
            rec.reason = reason;
            if st == DepStatus::Satisfied {
                rec.dependency = None;
                self.deps.remove(&id);
            }
            if changed {
                self.dirty(id);
                self.push_core_update(id, now);
            }
        }
        for id in kill {
            self.kill_dependent(id, now);
        }
    }
}

/// Whether task record `r` counts against its array's `ArrayTaskThrottle`: it runs, and no
/// cancel, time limit or requeue is stopping it. Slurm counts running tasks in the array's
/// `tot_run_tasks` (`job_array_start`) and gives the slot back in `job_completion_logger`
/// (`_job_array_comp`), which `_job_signal`, `_job_timed_out` and `_job_requeue_op` call at
/// the stop, not when the nodes are done: a cancelled task still ending on its node
/// (`COMPLETING`) lets the next task start (golden 0259's run: `scancel 64_[3-4]` freed
/// 64_4's slot and 64_1 took job id 73 before the next `sbatch`).
fn holds_throttle_slot(r: &JobRecord) -> bool {
    matches!(r.state, JobState::Running | JobState::Completing) && r.stopped_for_good().is_none() && !r.requeued_at_stop()
}

/// Whether pending record `r` may start at `now` but for resources and the throttle: not
/// held, no dependency pending, its begin time come.
pub(super) fn may_start(r: &JobRecord, now: i64) -> bool {
    r.spec.held.is_none() && !r.spec.dependency_pending && r.spec.begin_time.is_none_or(|b| b as i64 <= now)
}

/// What a dependency sees of `r`: its state, except that a running job being stopped by a
/// cancel or its time limit has ended unsuccessfully already. Slurm's `_job_signal` (scancel)
/// and `job_timed_out` make it `CANCELLED`/`TIMEOUT` at once, `COMPLETING` only until its
/// nodes are done, and `_test_job_dependency_common` tests `IS_JOB_COMPLETED`, which that
/// is: a job waiting `afterok` on it is `DependencyNeverSatisfied` from the cancel on
/// (golden 0309: 67 after `scancel -u bob` cancelled 56).
fn dep_state(r: &JobRecord) -> DepTarget {
    let stopped_for_good = r.stopping.is_some_and(|s| matches!(s.why, StopWhy::Cancel | StopWhy::Timeout));
    if matches!(r.state, JobState::Running | JobState::Completing) && stopped_for_good {
        DepTarget::Ended { ok: false }
    } else {
        job_state_ok(r.state)
    }
}

fn job_state_ok(s: JobState) -> DepTarget {
    match s {
        JobState::Pending => DepTarget::Pending,
        JobState::Running | JobState::Completing => DepTarget::Running,
        JobState::Completed => DepTarget::Ended { ok: true },
        _ => DepTarget::Ended { ok: false },
    }
}
