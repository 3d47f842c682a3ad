//! Job arrays and dependencies: which pending tasks of an array the core sees (the
//! `ArrayTaskThrottle` `%N`), the record a started task becomes, and the dependency states
//! evaluated before each cycle.

use super::{prov_id, Controller};
use crate::deps::{DepStatus, DepTarget};
use crate::job::{JobRecord, JobState};
use flotilla_core::job::JobId;
use flotilla_core::sched::Event as CoreEvent;
use std::collections::{BTreeSet, HashMap};

impl Controller {
    pub(super) fn start_array_task(&mut self, aid: u64, task: u32, core: u64) -> u64 {
        if let Some(s) = self.in_core_tasks.get_mut(&aid) {
            s.remove(&task);
        }
        let meta = self.jobs.get_mut(&aid).expect("array record exists");
        meta.array_pending.retain(|&t| t != task);
        let id = if meta.array_pending.is_empty() {
            // The last task reuses the array's id.
            meta.array_task_id = Some(task);
            meta.array_max_running = None;
            meta.spec.id = JobId(core);
            aid
        } else {
            let mut t = meta.clone();
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
            t.id = nid;
            t.array_task_id = Some(task);
            t.array_pending = Vec::new();
            t.array_max_running = None;
            t.spec.id = JobId(core);
            self.jobs.insert(nid, t);
            nid
        };
        self.core_map.insert(core, id);
        id
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
        if metas.is_empty() {
            return;
        }
        let mut running: HashMap<u64, u32> = HashMap::new();
        for r in self.jobs.values() {
            if let Some(a) = r.array_job_id {
                if matches!(r.state, JobState::Running | JobState::Completing) {
                    *running.entry(a).or_default() += 1;
                }
            }
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
            return job_state_ok(rec.state);
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
            match job_state_ok(m.state) {
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
        let mut results = Vec::new();
        for (id, dep) in &self.deps {
            let Some(rec) = self.jobs.get(id) else { continue };
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
        for (id, st) in results {
            let rec = self.jobs.get_mut(&id).expect("present");
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
