//! Job requests from commands: submission (and `--test-only`), `scancel` (signals and
//! cancellation), hold and release, requeue, and `scontrol update job` with Slurm's
//! permission rules.

use super::queries::{matches_filter, matches_filter_but_state};
use super::{prov_id, requeue_begin, reset_for_requeue, Controller, Ident, Target, REQUEUE_HOLD_REASON, SIGTERM};
use crate::admission::{self, Reject};
use crate::authz;
use crate::deps::{self, Dependency};
use crate::job::{JobRecord, JobState, StopWhy, Stopping};
use flotilla_core::hostlist::compress_sorted;
use flotilla_core::job::{HoldKind, JobId};
use flotilla_core::sched::{Event as CoreEvent, Scheduler};
use flotilla_proto::errno::*;
use flotilla_proto::{
    CancelJob, CtlToNode, FieldSet, HoldOp, HoldRelease, JobChange, JobFilter, JobRef, JobResult, RequeueJob, Response,
    SlurmError, SubmitJob, Submitted, TestOnly, TimeLimitWire, UpdateJob,
};
use std::collections::BTreeSet;
use tracing::{debug, info, info_span, warn};


/// Every job id from `FirstJobId` to `MaxJobId` is in use: Slurm's `_set_job_id` fails with
/// `EAGAIN` ("Resource temporarily unavailable") after logging "We have exhausted our supply
/// of valid job id values".
fn no_job_id() -> SlurmError {
    tracing::error!("We have exhausted our supply of valid job id values (FirstJobId..MaxJobId)");
    SlurmError::new(flotilla_proto::errno::EAGAIN)
}
impl Controller {
    pub(super) fn submit(&mut self, ident: Ident, s: SubmitJob, now: i64) -> Response {
        self.submit_with(ident, s, None, now)
    }

    /// `sbatch --elastic`: [`Controller::submit`] with the elastic range
    /// ([`admission::elastic_of`] checks it).
    pub(super) fn submit_elastic(&mut self, ident: Ident, s: flotilla_proto::SubmitElastic, now: i64) -> Response {
        self.submit_with(ident, s.job, Some(&s.elastic), now)
    }

    fn submit_with(&mut self, ident: Ident, mut s: SubmitJob, elastic: Option<&flotilla_proto::ElasticRequest>, now: i64) -> Response {
        if let Some(d) = self.account_fallback(&s.user, s.account.as_deref().unwrap_or("")) {
            s.account = Some(d);
        }
        if let Err(e) = self.authorize_submission(ident, &s) {
            warn!(uid = ident.uid, claimed_uid = s.uid, claimed_gid = s.gid, code = e.code, "submission refused: {}", e.text);
            return Response::Error(e);
        }
        // MaxJobCount counts every job in memory, finished ones until MinJobAge purges them.
        if self.jobs.len() as u64 >= self.opts.max_job_count {
            return Response::Error(SlurmError::new(ESLURM_MAX_JOB_COUNT));
        }
        let admitted = admission::admit(&s, self.sched.cluster(), &self.opts.admission, now).and_then(|mut a| {
            if let Some(e) = elastic {
                admission::elastic_of(&s, e, self.sched.cluster(), &mut a.record).map_err(Reject::BeforeId)?;
            }
            Ok(a)
        });
        match admitted {
            Err(Reject::BeforeId(e)) => Response::Error(e),
            Err(Reject::AfterId { error, failed }) => {
                let Some(id) = self.take_id() else { return Response::Error(no_job_id()) };
                // `--test-only` (Slurm's will-run): the id is spent, the record purged (the
                // reference keeps no FAILED job for it, as it does for a submission).
                // Its node-list message ("CPU count per node can not be satisfied") is the
                // submission's only: will-run answers with the code alone (goldens-extra 0164).
                let failed = failed.filter(|_| !s.test_only);
                let error = if s.test_only { SlurmError::new(error.code) } else { error };
                if let Some(mut f) = failed {
                    f.id = id;
                    f.spec.id = JobId(id);
                    // Refused by `_select_nodes_parts`, after `job_allocate` numbered it
                    // (`set_job_prio`; a held job's priority is 0 and takes no number).
                    if f.spec.held.is_none() && f.spec.base_priority == 0 {
                        f.priority = self.next_prio(f.spec.nice);
                    }
                    crate::acct::failed_at_submit(&mut f, now);
                    self.jobs.insert(id, *f);
                    self.dirty(id);
                    self.batch.acct.insert(id);
                    self.stats.failed += 1;
                }
                info!(job = id, code = error.code, "submission refused after id: {}", error.text);
                Response::Error(error)
            }
            Ok(mut a) => {
                let tasks = a.array.as_ref().map_or(1, |(t, _)| t.len() as u32);
                let checked = if !self.sched.accounting().checks_jobs() {
                    crate::limits::check_submit(self.opts.job_limits.as_deref(), &mut self.submit_charges, &self.jobs, &a.record, tasks)
                } else {
                    let qos_given = s.qos.as_deref().is_some_and(|q| !q.is_empty());
                    crate::limits::check_accounting(self.sched.accounting(), &mut self.submit_charges, &self.jobs, &mut a.record, qos_given, tasks)
                };
                if let Err(e) = checked {
                    return Response::Error(e);
                }
                let Some(id) = self.take_id() else { return Response::Error(no_job_id()) };
                let mut rec = a.record;
                rec.id = id;
                rec.spec.id = JobId(id);
                if s.test_only {
                    // `job_allocate` numbers the record before `will_run` answers and purges it.
                    if rec.spec.held.is_none() && rec.spec.base_priority == 0 {
                        self.next_prio(rec.spec.nice);
                    }
                    return self.test_only(id, &rec, now);
                }
                let env = serde_json::to_string(&s.environment).unwrap_or_else(|_| "[]".into());
                self.batch.scripts.push((id, s.script, env));
                if let Some((tasks, throttle)) = a.array {
                    rec.array_job_id = Some(id);
                    rec.array_pending = tasks;
                    rec.array_max_running = throttle;
                    self.array_metas.insert(id);
                } else {
                    self.core_event(CoreEvent::Submit(rec.spec.clone()), now);
                }
                // A held job (not an array, no dependency) cannot change what a cycle decides:
                // no event-triggered cycle for it (its hold shows at once; the periodic cycle
                // refreshes its priority). `sbatch --hold` floods stay cheap (issue #6).
                let inert = rec.spec.held.is_some() && !rec.is_array_meta() && a.dependency.is_none();
                if let Some(mut d) = a.dependency {
                    // Slurm's form of it (`_depend_list2str`): a bare id of an array is `N_*`.
                    d.resolve_arrays(|j| self.jobs.get(&j).is_some_and(|r| r.array_job_id == Some(j)));
                    rec.dependency = Some(d.to_slurm_string());
                    self.deps.insert(id, d);
                }
                debug!(job = id, user = %rec.user, "job submitted");
                if rec.deadline.is_some() {
                    self.deadlines.insert(id);
                }
                self.jobs.insert(id, rec);
                self.refresh_deps_of(&[id], now);
                self.dirty(id);
                if let Some(reason) = self.submit_reason(id, now) {
                    self.reason_until_cycle.insert(id, reason);
                }
                self.batch.acct.insert(id);
                self.sched_dirty |= !inert;
                self.cycle_unpaced |= !inert && self.jobs[&id].interactive;
                self.stats.submitted += 1;
                Response::Submitted(Submitted { job_id: id })
            }
        }
    }

    /// Who may submit `s` (before a job id, as Slurm refuses these): the uid and gid must be
    /// the caller's ([`authz::valid_id`]), the account one the user is associated with, and
    /// the partition one its access keys let the job into ([`authz::Access`]).
    fn authorize_submission(&self, ident: Ident, s: &SubmitJob) -> Result<(), SlurmError> {
        authz::valid_id(ident, s.uid, s.gid)?;
        let cluster = self.sched.cluster();
        let part = match &s.partition {
            Some(p) => cluster.partition_id(p),
            None => cluster.default_partition(),
        };
        let account = match s.account.as_deref() {
            Some(a) if !a.is_empty() => a.to_string(),
            _ => self.opts.admission.default_accounts.get(&s.user).cloned().unwrap_or_default(),
        };
        let qos = s.qos.as_deref().unwrap_or("normal");
        // An unknown partition is admission's error (`invalid partition specified`).
        if let Some(p) = part {
            let name = &cluster.partitions[p.0 as usize].name;
            self.opts.access.check_partition(ident, (s.uid, s.gid), name, &account, qos)?;
        }
        // With AccountingStorageEnforce set, the accounting model's associations decide
        // (after admission, which resolves the partition: [`crate::limits::check_accounting`]);
        // without it, the accounts users were associated with (`authz::Associations`, from the
        // same database) as before: an account nobody is associated with is refused once
        // some association exists.
        if self.sched.accounting().checks_jobs() {
            return Ok(());
        }
        self.opts.access.check_account(&s.user, &account)
    }

    /// Sets the associations, QOS and limits (`sacctmgr`'s accounting model) the core
    /// enforces and submissions are checked against; `AccountingStorageEnforce` of
    /// slurm.conf is added to the model's own. The next cycle applies it.
    pub fn set_accounting(&mut self, mut accounting: flotilla_core::assoc::Accounting) {
        let (e, c) = (&mut accounting.enforce, self.opts.access.enforce);
        e.associations |= c.associations;
        e.limits |= c.limits;
        e.qos |= c.qos;
        e.safe |= c.safe;
        self.sched.set_accounting(accounting);
        self.sched_dirty = true;
    }

    /// The access checks of an update that changed the partition, account or QOS
    /// (`access_changed`): as at submission ([`authz::Access::check_partition`],
    /// [`authz::Access::check_account`]) for the job's own uid and gid.
    fn authorize_update(&self, ident: Ident, rec: &JobRecord, changes: &[JobChange], access_changed: bool) -> Result<(), SlurmError> {
        if !access_changed {
            return Ok(());
        }
        let access = &self.opts.access;
        access.check_partition(ident, (rec.uid, rec.gid), &rec.partition, &rec.account, &rec.qos)?;
        let acct = self.sched.accounting();
        if acct.checks_jobs() {
            return crate::limits::check_access_update(acct, rec);
        }
        if changes.iter().any(|c| matches!(c, JobChange::Account(_))) {
            access.check_account(&rec.user, &rec.account)?;
        }
        Ok(())
    }

    /// `sbatch --test-only`: when and where the job would start, from the core's will-run
    /// query ([`flotilla_core::sched::Scheduler::will_run`]); nothing is submitted.
    fn test_only(&self, id: u64, rec: &JobRecord, now: i64) -> Response {
        // A request no node of its partition can ever hold (`--gres=gpu:9`), which a
        // submission accepts to end `BadConstraints` at the cycle, is refused at once; so is
        // one for more nodes than the partition has, which a submission accepts to pend
        // `PartitionNodeLimit` (goldens-extra 0164, 0165).
        let cluster = self.sched.cluster();
        let part_nodes = cluster.partitions[rec.spec.partition.0 as usize].nodes.len();
        if admission::never_runs(rec, cluster, &self.opts.admission)
            || rec.spec.request.nodes.is_some_and(|n| n as usize > part_nodes)
        {
            return Response::Error(SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
        }
        let w = self.sched.will_run(&rec.spec, now.max(0) as u64);
        let (start, parts) = (w.start as i64, w.parts);
        let names: Vec<String> = parts.iter().map(|p| self.sched.cluster().node(p.node).name.clone()).collect();
        let cpus = if parts.is_empty() {
            rec.requested_node_cpus()
        } else {
            parts.iter().map(|p| (p.cpu_milli / 1000) as u32).sum()
        };
        Response::TestOnly(TestOnly {
            job_id: id,
            start_time: start,
            cpus,
            nodes: compress_sorted(&names),
            partition: rec.partition.clone(),
        })
    }

    /// Jobs a reference names: record ids, and pending tasks of array records.
    pub(super) fn resolve(&self, r: &JobRef) -> Vec<Target> {
        let mut out = Vec::new();
        let Some(rec) = self.jobs.get(&r.job_id) else {
            // A started task named by its array id and index only.
            if let Some(ts) = &r.tasks {
                for rec in self.jobs.values() {
                    if rec.array_job_id == Some(r.job_id) && rec.array_task_id.is_some_and(|t| ts.contains(&t)) {
                        out.push(Target::Job(rec.id));
                    }
                }
            }
            return out;
        };
        let is_array = rec.array_job_id == Some(r.job_id);
        match (&r.tasks, is_array) {
            (None, false) => out.push(Target::Job(rec.id)),
            (None, true) => {
                for j in self.jobs.values() {
                    if j.array_job_id == Some(r.job_id) {
                        out.push(Target::Job(j.id));
                    }
                }
            }
            (Some(_), false) => {}
            (Some(ts), true) => {
                let mut pend = Vec::new();
                for &t in ts {
                    if let Some(j) = self
                        .jobs
                        .values()
                        .find(|j| j.array_job_id == Some(r.job_id) && j.array_task_id == Some(t) && j.array_pending.is_empty())
                    {
                        out.push(Target::Job(j.id));
                    } else if rec.array_pending.contains(&t) && rec.state == JobState::Pending {
                        pend.push(t);
                    }
                }
                if !pend.is_empty() {
                    out.push(Target::Tasks(r.job_id, pend));
                }
            }
        }
        out
    }

    fn owner_ok(&self, ident: Ident, id: u64) -> bool {
        ident.admin || self.jobs.get(&id).is_some_and(|r| r.uid == ident.uid)
    }

    fn targets(&self, jobs: &[JobRef], filter: &JobFilter) -> Vec<(JobRef, Vec<Target>)> {
        if jobs.is_empty() {
            return self
                .jobs
                .values()
                .filter(|r| !r.state.is_finished() && matches_filter(r, filter, &self.sched))
                .map(|r| (JobRef::id(r.id), vec![Target::Job(r.id)]))
                .collect();
        }
        jobs.iter()
            .map(|r| {
                let t = self
                    .resolve(r)
                    .into_iter()
                    .filter(|t| self.jobs.get(&t.id()).is_some_and(|rec| matches_filter(rec, filter, &self.sched)))
                    .collect();
                (r.clone(), t)
            })
            .collect()
    }

    /// The jobs `scancel` names: as [`Self::targets`], but its state filter compares
    /// [`JobRecord::scancel_state`] (scancel.c `_filter_job_records`), not the state `squeue`
    /// shows, and without job ids only jobs that have not ended count.
    fn cancel_targets(&self, jobs: &[JobRef], filter: &JobFilter) -> Vec<(JobRef, Vec<Target>)> {
        let matches = |rec: &JobRecord| self.cancel_filter_admits(rec, filter);
        if jobs.is_empty() {
            return self
                .jobs
                .values()
                .filter(|r| r.scancel_state().is_some() && matches(r))
                .map(|r| (JobRef::id(r.id), vec![Target::Job(r.id)]))
                .collect();
        }
        jobs.iter()
            .map(|r| {
                let t = self.resolve(r).into_iter().filter(|t| self.jobs.get(&t.id()).is_some_and(matches)).collect();
                (r.clone(), t)
            })
            .collect()
    }

    /// Whether scancel's `filter` admits `rec` (scancel.c `_filter_job_records`): as
    /// [`matches_filter`], but `-t` compares [`JobRecord::scancel_state`], not the state
    /// `squeue` shows.
    pub(super) fn cancel_filter_admits(&self, rec: &JobRecord, filter: &JobFilter) -> bool {
        matches_filter_but_state(rec, filter)
            && (filter.states.is_empty() || rec.scancel_state().is_some_and(|s| filter.states.contains(&s.to_wire())))
    }

    pub(super) fn cancel(&mut self, ident: Ident, c: CancelJob, now: i64) -> Response {
        let mut results = Vec::new();
        // scancel with a filter and job ids checks the jobs it names first (Slurm's scancel.c
        // `_verify_job_ids`, before `_filter_job_records`): a job not known or already ended,
        // one stopped for good included (`IS_JOB_FINISHED` of `CANCELLED|COMPLETING`), is
        // `Invalid job id specified`; a job known but not matching the filter is left alone
        // without an error (goldens-extra 0317).
        let verify = !c.jobs.is_empty() && c.filter != JobFilter::default();
        let live = |rec: &JobRecord| rec.scancel_state().is_some();
        let all = self.cancel_targets(&c.jobs, &c.filter);
        // The pending jobs' dependencies are tested before any is cancelled, as Slurm's pass
        // after the end of a job they depend on would have by now (golden 0309: `depmulti
        // CANCELLED DependencyNeverSatisfied` when the job it needs was cancelled by an
        // earlier request), while a job this request cancels does not change the reason of
        // another it cancels (`dep CANCELLED Dependency` when both go in one request). The
        // test may cancel a job itself (`kill_invalid_depend`): it is then already ended.
        let pending: Vec<u64> = all
            .iter()
            .flat_map(|(_, ts)| ts.iter())
            .filter_map(|t| match t {
                Target::Job(id) if self.jobs.get(id).is_some_and(|r| r.state == JobState::Pending) => Some(*id),
                _ => None,
            })
            .collect();
        self.refresh_deps_of(&pending, now);
        for (jref, targets) in all {
            let mut error = None;
            if targets.is_empty()
                && !(verify && self.resolve(&jref).iter().any(|t| self.jobs.get(&t.id()).is_some_and(live)))
            {
                error = Some(SlurmError::new(ESLURM_INVALID_JOB_ID));
            }
            for t in targets {
                if verify && !live(&self.jobs[&t.id()]) {
                    error.get_or_insert(SlurmError::new(ESLURM_INVALID_JOB_ID));
                    continue;
                }
                if !self.owner_ok(ident, t.id()) {
                    warn!(job = t.id(), uid = ident.uid, "cancel of another user's job refused");
                    error.get_or_insert(SlurmError::new(ESLURM_ACCESS_DENIED));
                    continue;
                }
                let r = match c.signal {
                    Some(sig) => self.signal_target(&t, sig, c.batch_only, c.full),
                    None => {
                        self.cancel_target(&t, Some(ident.uid), now);
                        Ok(())
                    }
                };
                if let Err(e) = r {
                    error.get_or_insert(e);
                }
            }
            results.push(JobResult { job: jref, error });
        }
        Response::JobResults(results)
    }

    /// `scancel --signal`: `-b` the batch shell only, `-f` the shell and every step, neither
    /// the steps only (Slurm 22.05, checked live: the batch shell of a job signalled with
    /// `scancel --signal=USR1` keeps running).
    fn signal_target(&mut self, t: &Target, sig: i32, batch_only: bool, full: bool) -> Result<(), SlurmError> {
        let Target::Job(id) = t else {
            return Err(SlurmError::new(ESLURM_JOB_PENDING));
        };
        let rec = &self.jobs[id];
        match rec.state {
            JobState::Pending => Err(SlurmError::new(ESLURM_JOB_PENDING)),
            JobState::Running => {
                let nodes: Vec<String> = if batch_only {
                    rec.nodes.iter().take(1).cloned().collect()
                } else {
                    rec.nodes.clone()
                };
                for n in nodes {
                    let m = if batch_only || full {
                        CtlToNode::Signal { job_id: *id, signal: sig, batch_only }
                    } else {
                        CtlToNode::SignalSteps { job_id: *id, signal: sig }
                    };
                    self.send(&n, m);
                }
                Ok(())
            }
            _ => Err(SlurmError::new(ESLURM_ALREADY_DONE)),
        }
    }

    /// Cancels pending job `id` whose dependency can never be met (Slurm 22.05 `job_mgr.c`
    /// `handle_invalid_dependency` and `_kill_dependent`, under `--kill-on-invalid-dep=yes`
    /// or `DependencyParameters=kill_invalid_depend`): `CANCELLED`, reason
    /// `DependencyNeverSatisfied` (the reason it waited for, which a cancelled pending job
    /// keeps), no user named as the canceller.
    pub(super) fn kill_dependent(&mut self, id: u64, now: i64) {
        info!(job = id, "dependency can never be satisfied: cancelling the job");
        self.cancel_target(&Target::Job(id), None, now);
    }

    /// Ends pending job `id` (an array's pending tasks with it) in `state` at `now`: out of
    /// the core, its dependency dropped, its end written to accounting.
    pub(super) fn end_pending(&mut self, id: u64, state: JobState, now: i64) {
        let rec = &self.jobs[&id];
        if rec.is_array_meta() {
            for task in self.in_core_tasks.remove(&id).unwrap_or_default() {
                self.core_event(CoreEvent::Cancel(JobId(prov_id(id, task))), now);
            }
        } else {
            let core = rec.spec.id;
            if self.in_core(id) {
                self.core_event(CoreEvent::Cancel(core), now);
            }
        }
        let rec = self.jobs.get_mut(&id).expect("job exists");
        rec.state = state;
        rec.end_time = Some(now);
        self.deps.remove(&id);
        self.batch.acct.insert(id);
        self.dirty(id);
        self.sched_dirty = true;
    }

    /// Pending jobs whose `--deadline` can no longer be met at `now` end `DEADLINE`, reason
    /// `DeadLine`, exit code `0:1` (Slurm 22.05 `deadline_ok`, which its scheduling passes
    /// run on each pending job with a deadline before trying it;
    /// [`crate::admission::deadline_missed`]). Only the jobs in `self.deadlines` are looked
    /// at; a finished job leaves the set (a running one stays: a requeue makes it pending).
    pub(super) fn end_missed_deadlines(&mut self, now: i64) {
        let mut missed = Vec::new();
        self.deadlines.retain(|id| {
            let Some(r) = self.jobs.get(id).filter(|r| !r.state.is_finished()) else { return false };
            // Slurm's passes try only independent jobs (`job_independent`): not a held one,
            // one before its begin time or one waiting on a dependency (goldens-extra 0325).
            let waits = r.spec.held.is_some() || r.spec.dependency_pending || r.spec.begin_time.is_some_and(|b| b as i64 > now);
            if r.state != JobState::Pending || waits {
                return true;
            }
            let d = r.deadline.expect("only jobs with a deadline are in the set");
            if crate::admission::deadline_missed(d, r.time_min, r.time_limit_min, now, self.opts.minute_s) {
                missed.push(*id);
                return false;
            }
            true
        });
        for id in missed {
            info!(job = id, "pending job can no longer end by its deadline: DEADLINE");
            let rec = self.jobs.get_mut(&id).expect("job exists");
            rec.reason = Some("DeadLine".into());
            rec.exit_code = 0;
            rec.exit_signal = 1;
            if rec.is_array_meta() {
                rec.array_pending.clear();
            }
            self.end_pending(id, JobState::Deadline, now);
        }
    }

    /// Cancels `t`; `by` is the uid that asked (none for the controller's own cancel).
    fn cancel_target(&mut self, t: &Target, by: Option<u32>, now: i64) {
        // Who cancelled a job is who stopped it first: a job a cancel or its time limit is
        // already stopping is `CANCELLED|COMPLETING`/`TIMEOUT|COMPLETING` in Slurm, which
        // `_job_signal` answers `ESLURM_ALREADY_DONE` without recording the requester again.
        if let (Some(by), Some(rec)) =
            (by, self.jobs.get_mut(&t.id()).filter(|r| !r.state.is_finished() && r.stopped_for_good().is_none()))
        {
            rec.acct.cancelled_by = Some(by);
        }
        match t {
            Target::Tasks(aid, tasks) => {
                let set: BTreeSet<u32> = tasks.iter().copied().collect();
                for &task in tasks {
                    if self.in_core_tasks.get_mut(aid).is_some_and(|s| s.remove(&task)) {
                        self.core_event(CoreEvent::Cancel(JobId(prov_id(*aid, task))), now);
                    }
                }
                let rec = self.jobs.get_mut(aid).expect("resolved");
                rec.array_pending.retain(|t| !set.contains(t));
                if rec.array_pending.is_empty() {
                    rec.state = JobState::Cancelled;
                    rec.end_time = Some(now);
                    self.batch.acct.insert(*aid);
                    self.stats.cancelled += 1;
                }
                self.dirty(*aid);
                self.sched_dirty = true;
            }
            Target::Job(id) => {
                let id = *id;
                let state = self.jobs[&id].state;
                match state {
                    JobState::Pending => {
                        // A cancelled pending job keeps the reason it was waiting for, as in
                        // Slurm (`squeue -t all`: `62 later CANCELLED BeginTime`); `cancel`
                        // has tested its dependency first.
                        let last = self.job_view(&self.jobs[&id], FieldSet::of(&[flotilla_proto::JobField::Reason]), now).reason.into_string();
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        if last != "None" {
                            rec.reason = Some(last);
                        }
                        self.end_pending(id, JobState::Cancelled, now);
                        self.stats.cancelled += 1;
                        info!(job = id, "pending job cancelled");
                    }
                    JobState::Running if self.jobs[&id].stopping.is_none() => {
                        self.start_stop(id, StopWhy::Cancel, now);
                    }
                    // Cancelled while it is being stopped to be requeued (`scontrol requeue`):
                    // it ends cancelled, not pending again: a cancel is never lost. (Slurm
                    // 22.05's end state for this race is not checked against the reference
                    // yet.) The signals already sent stand; only how the stop ends changes.
                    JobState::Running | JobState::Completing
                        if self.jobs[&id].stopping.is_some_and(|s| matches!(s.why, StopWhy::Requeue { .. })) =>
                    {
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        if let Some(s) = rec.stopping.as_mut() {
                            s.why = StopWhy::Cancel;
                        }
                        if rec.end_state == Some(JobState::Pending) {
                            rec.end_state = Some(JobState::Cancelled);
                        }
                        // Ended at this cancel, as a cancel of a running job (`start_stop`).
                        if rec.state == JobState::Running {
                            rec.end_time = Some(now);
                        }
                        self.batch.acct.insert(id);
                        self.dirty(id);
                        info!(job = id, "job being stopped for a requeue cancelled: it ends cancelled");
                    }
                    _ => {}
                }
            }
        }
    }

    pub(super) fn start_stop(&mut self, id: u64, why: StopWhy, now: i64) {
        let rec = self.jobs.get_mut(&id).expect("job exists");
        rec.stopping = Some(Stopping {
            why,
            term_at: now,
            kill_sent: false,
            kill_at: None,
        });
        let _span = info_span!("job", job = id).entered();
        info!(?why, "stopping running job: SIGTERM, SIGKILL after KillWait");
        if matches!(why, StopWhy::Cancel | StopWhy::Timeout) {
            rec.end_time = Some(now);
            if why == StopWhy::Timeout {
                // `_job_timed_out` gives the reason at the stop (goldens-extra 0316).
                rec.reason = Some("TimeLimit".into());
            }
            self.batch.acct.insert(id);
        }
        let rec = &self.jobs[&id];
        let nodes = rec.nodes.clone();
        self.dirty(id);
        // A cancel or a time limit ends the job for its dependents now (`dep_state`): their
        // dependencies are tested again at the next cycle.
        if matches!(why, StopWhy::Cancel | StopWhy::Timeout) && !self.deps.is_empty() {
            self.sched_dirty = true;
        }
        let cause = crate::job::stop_cause(why);
        for n in nodes {
            self.send(&n, CtlToNode::StopNotice { job_id: id, at: now, cause });
            self.send(&n, CtlToNode::Signal {
                job_id: id,
                signal: SIGTERM,
                batch_only: false,
            });
        }
    }

    /// A run ends in a requeue: its accounting record becomes `run_state` (`REQUEUED` or
    /// `PREEMPTED`; see [`crate::acct`]), and its steps (the batch step ended now, `srun` steps
    /// ended in this turn and those already written) are kept under the run's number, apart
    /// from the next run's ([`crate::store::runs::archive_run`]).
    pub(super) fn acct_requeued(&mut self, id: u64, now: i64, step_state: Option<&str>, run_state: &str) {
        let rec = &self.jobs[&id];
        let run = rec.restarts;
        let (row, step) = crate::acct::requeued_rows(rec, now, step_state, run_state);
        self.batch.acct_rows.push(row);
        self.batch.steps.remove(&id);
        let (mut rows, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.batch.step_rows).into_iter().partition(|s| s.job_id == id);
        self.batch.step_rows = others;
        rows.extend(step);
        self.batch.run_steps.push(crate::store::runs::RunSteps { job_id: id, run, rows });
    }

    pub(super) fn push_core_update(&mut self, id: u64, now: i64) {
        let rec = &self.jobs[&id];
        if rec.state != JobState::Pending {
            return;
        }
        if rec.is_array_meta() {
            let tasks: Vec<u32> = self.in_core_tasks.get(&id).map(|s| s.iter().copied().collect()).unwrap_or_default();
            for t in tasks {
                let mut sp = self.jobs[&id].spec.clone();
                sp.id = JobId(prov_id(id, t));
                self.core_event(CoreEvent::Update(sp), now);
            }
        } else if self.in_core(id) {
            let sp = rec.spec.clone();
            self.core_event(CoreEvent::Update(sp), now);
        }
        self.sched_dirty = true;
    }

    /// `targets` split into those `ident` may change and the refusals of the others
    /// (`Invalid user id`, each record with the tasks it answers for: Slurm's `_update_job`
    /// checks the owner record by record, `A_1-3: Invalid user id` for another user's array).
    fn owned_targets(&self, ident: Ident, targets: Vec<Target>) -> (Vec<Target>, Vec<Outcome>) {
        let (allowed, others): (Vec<Target>, Vec<Target>) = targets.into_iter().partition(|t| self.owner_ok(ident, t.id()));
        let refused = others
            .into_iter()
            .map(|t| {
                warn!(job = t.id(), uid = ident.uid, "change of another user's job refused");
                // Named pending tasks answer for themselves (Slurm splits them off first).
                let names = match t {
                    Target::Tasks(_, ts) => ts,
                    Target::Job(id) => answers_for(&self.jobs[&id]),
                };
                (names, Some(ESLURM_USER_ID_MISSING))
            })
            .collect();
        (allowed, refused)
    }

    /// Whether `r` names an array (its tasks, or the id of an array's first record), which
    /// Slurm answers in the array-errors form ([`array_results`]); a task named by its own job
    /// id is a plain job (`update_job_str`, `job_requeue2`).
    fn names_array(&self, r: &JobRef) -> bool {
        r.tasks.is_some() || self.jobs.get(&r.job_id).is_some_and(|rec| rec.array_job_id == Some(r.job_id))
    }

    /// The records an update of `targets` changes. Slurm's `update_job_str` (`job_mgr.c`):
    /// an update of some but not all of an array's pending tasks splits each named task off
    /// into a record of its own first (`job_array_split`, a new job id); one naming every
    /// pending task updates the array's record. `scontrol hold` and `release` are updates
    /// (of the priority, `scontrol_hold`), so they split the same way. Err: no job id free.
    fn split_targets(&mut self, targets: &[Target], now: i64) -> Result<BTreeSet<u64>, SlurmError> {
        let mut ids: BTreeSet<u64> = BTreeSet::new();
        for t in targets {
            match t {
                Target::Tasks(aid, tasks) if !self.jobs[aid].array_pending.iter().all(|p| tasks.contains(p)) => {
                    for &task in tasks {
                        ids.insert(self.split_array_task(*aid, task, now).ok_or_else(no_job_id)?);
                    }
                }
                t => {
                    ids.insert(t.id());
                }
            }
        }
        Ok(ids)
    }

    /// `scontrol hold`, `uhold` and `release` (Slurm's `scontrol_hold`: an update of the
    /// priority, `_update_job`). A plain job, or an array task named by its own job id, is
    /// answered with one result; an array named by its id or its tasks record by record in the
    /// array-errors form ([`array_results`]; e.g. `A_1: Job has already finished` and
    /// `A_2-4: No error` for an array whose first task ended, goldens-extra 0645).
    pub(super) fn hold_release(&mut self, ident: Ident, h: HoldRelease, now: i64) -> Response {
        let mut results = Vec::new();
        for (jref, targets) in self.targets(&h.jobs, &JobFilter::default()) {
            let names_array = self.names_array(&jref);
            let (allowed, mut outcomes) = self.owned_targets(ident, targets);
            let ids = match self.split_targets(&allowed, now) {
                Ok(ids) => ids,
                Err(e) => {
                    results.push(JobResult { job: jref, error: Some(e) });
                    continue;
                }
            };
            for id in ids {
                let names = answers_for(&self.jobs[&id]);
                outcomes.push((names, self.hold_one(ident, id, h.op, now).err().map(|e| e.code)));
            }
            results.extend(job_answer(jref, names_array, outcomes));
        }
        Response::JobResults(results)
    }

    /// Holds or releases one record ([`Controller::hold_release`]).
    fn hold_one(&mut self, ident: Ident, id: u64, op: HoldOp, now: i64) -> Result<(), SlurmError> {
        let rec = self.jobs.get_mut(&id).expect("resolved");
        // `_update_job`: a priority of a job not ended; a running job held shows `JobHeldUser`
        // while it runs and keeps running (goldens-extra 0644).
        if rec.state.is_finished() || rec.state == JobState::Completing {
            return Err(SlurmError::new(ESLURM_JOB_FINISHED));
        }
        let running = rec.state == JobState::Running;
        if matches!(rec.reason.as_deref(), Some(REQUEUE_HOLD_REASON | "BadConstraints")) {
            // A new hold shows as such; a release shows what the job waits for next
            // (a job that can never run is tested again below).
            rec.reason = None;
        }
        match op {
            // A user's hold or uhold of a job an admin holds leaves the admin hold as
            // it is (Slurm 22.05 `_update_job`: a priority already 0 is "set to its
            // current value"; only an operator turns one hold into the other), so
            // `uhold` then `release` cannot lift it (goldens 0219, 0226).
            HoldOp::Hold | HoldOp::UserHold if rec.spec.held == Some(HoldKind::Admin) && !ident.admin => {
                info!(job = id, uid = ident.uid, "hold of an admin-held job by its user: stays admin-held");
                return self.partition_limits_check(id);
            }
            // Slurm's `_hold_job_rec`: priority 0; `_release_job_rec`: a new one.
            HoldOp::Hold => {
                rec.spec.held = Some(if ident.admin { HoldKind::Admin } else { HoldKind::User });
                rec.priority = 0;
            }
            HoldOp::UserHold => {
                rec.spec.held = Some(HoldKind::User);
                rec.priority = 0;
            }
            HoldOp::Release => {
                if rec.spec.held == Some(HoldKind::Admin) && !ident.admin {
                    return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                }
                if rec.spec.held.take().is_some() || rec.priority == 0 {
                    rec.priority = crate::job::PRIO_UNSET;
                }
                // A job that can never run in its partition (submitted held, it was
                // not tested against the nodes) gets what Slurm's next pass gives it:
                // reason `BadConstraints`, priority 0, and stays out of scheduling
                // (held by its user until released again).
                if !running && rec.reason.is_none() && admission::never_runs(rec, self.sched.cluster(), &self.opts.admission) {
                    info!(job = id, "released job can never run in its partition: BadConstraints");
                    rec.spec.held = Some(HoldKind::User);
                    rec.priority = 0;
                    rec.reason = Some("BadConstraints".into());
                }
                // `_release_job_rec` clears the special-exit flag: pending again.
                rec.special_exit = false;
                // ... and sets `WAIT_NO_REASON` until the next pass.
                if rec.reason.is_none() && !running {
                    self.reason_until_cycle.insert(id, "None");
                }
                // `set_job_prio`: a running job is numbered at once (a pending one by the next
                // cycle, [`Controller::set_job_prio`]).
                if running && rec.priority == crate::job::PRIO_UNSET {
                    self.number_job(id);
                }
            }
        }
        self.dirty(id);
        self.push_core_update(id, now);
        self.partition_limits_check(id)
    }

    /// The end of Slurm 22.05's `_update_job` (job_mgr.c), which every hold, release and
    /// `scontrol update` of a job goes through once its changes are made: `job_limits_check`
    /// tests the job against its partition, and a job in an `INACTIVE` partition is answered
    /// `ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE` ("Requested partition configuration not
    /// available now"), the changes kept (a release releases; scontrol prints the error for
    /// the job), and a pending job not held shows `PartitionInactive` at once (a release's
    /// `WAIT_NO_REASON` replaced). The partition's `MaxTime` and node count are tested first
    /// and their failures are no error, so a job over either gets none; a `DOWN` or `DRAIN`
    /// partition is none.
    fn partition_limits_check(&mut self, id: u64) -> Result<(), SlurmError> {
        let rec = &self.jobs[&id];
        let part = &self.sched.cluster().partitions[rec.spec.partition.0 as usize];
        if part.state != flotilla_core::cluster::PartitionState::Inactive || over_partition_limits(rec, part) {
            return Ok(());
        }
        if rec.state == JobState::Pending && rec.spec.held.is_none() && rec.reason.is_none() {
            self.reason_until_cycle.insert(id, "PartitionInactive");
        }
        Err(SlurmError::new(ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE))
    }

    /// `scontrol requeue` / `requeuehold` (Slurm's `job_requeue2`, slurmctld job_mgr.c). A
    /// plain job, or an array task named by its own job id, is answered with one result
    /// (scontrol: `<error> for job <id>`). A request naming an array (its id, or its tasks
    /// `A_T`) is answered per task record, in Slurm's array-errors form (`_resp_array_add`,
    /// `_resp_array_xlate`): one result per outcome, naming the array's tasks that had it
    /// (a pending array record answers for all its pending tasks, a task that does not exist
    /// is `Invalid job id specified`, a success is a result without an error); scontrol prints
    /// each as `A_<tasks>: <error>` unless the answer is one success (goldens-extra 0621,
    /// 0623-0627). `special` (`State=SpecialExit`, [`Request::RequeueSpecialExit`]): each
    /// job requeued is marked [`JobRecord::special_exit`] at once, as `_job_requeue_op` sets
    /// `JOB_SPECIAL_EXIT` on the job's state (shown once the run has ended: `COMPLETING`
    /// comes first), and held (priority 0, held by its user) until released.
    pub(super) fn requeue_rpc(&mut self, ident: Ident, r: RequeueJob, special: bool, now: i64) -> Response {
        let mut results = Vec::new();
        for (jref, targets) in self.targets(&r.jobs, &JobFilter::default()) {
            let names_array = self.names_array(&jref);
            let mut outcomes = Vec::new();
            for t in targets {
                let id = t.id();
                let names = answers_for(&self.jobs[&id]);
                outcomes.push((names, self.requeue_one(ident, id, r.hold, special, now).err().map(|e| e.code)));
            }
            results.extend(job_answer(jref, names_array, outcomes));
        }
        Response::JobResults(results)
    }

    /// Requeues one record (Slurm's `_job_requeue_op`, job_mgr.c), checked in its order:
    /// refused for another user's job, a service replica, a job submitted with `--no-requeue`
    /// (`Requested operation is presently disabled`), an allocation that is not a batch job
    /// (`Only batch jobs are accepted or processed`, `ESLURM_BATCH_ONLY`), and a pending job,
    /// held or not, or a run already being requeued (`Job is pending execution`; goldens-extra
    /// 0631, 0633). A running job is stopped and pending again once its nodes are done; its
    /// run is accounted `REQUEUED`, ended at the requeue, at once
    /// ([`JobRecord::requeued_at_stop`]). A job being stopped for good (cancelled, timed out)
    /// or ending on its other nodes is requeued the same way, its end kept (0632). A finished
    /// one is pending at once, its record rewritten `REQUEUED`, ended at the requeue
    /// (`job_completion_logger` then `batch_requeue_fini`; 0629, 0630).
    fn requeue_one(&mut self, ident: Ident, id: u64, hold: bool, special: bool, now: i64) -> Result<(), SlurmError> {
        if !self.owner_ok(ident, id) {
            return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        if self.jobs[&id].service.is_some() {
            // A replica belongs to its service: `sdeploy` scales it, `scancel` replaces it.
            return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
        }
        if !self.jobs[&id].requeue {
            return Err(SlurmError::new(ESLURM_DISABLED));
        }
        if self.jobs[&id].interactive {
            return Err(SlurmError::new(ESLURM_BATCH_ONLY));
        }
        let rec = &self.jobs[&id];
        let why = rec.stopping.map(|s| s.why);
        // `State=SpecialExit` holds the job too (priority 0, held by its user): scontrol asks
        // for it with `requeuehold`'s flag.
        let hold = hold || special;
        match rec.state {
            // Slurm's `job_requeue2`: a pending task is found in its array record
            // (`find_job_array_rec`), which `_job_requeue_op` refuses as pending; nothing is
            // split (goldens-extra 621). A plain pending or held job likewise.
            JobState::Pending => return Err(SlurmError::new(ESLURM_JOB_PENDING)),
            // A run already being requeued or preempted is pending (with the completing flag)
            // in Slurm.
            JobState::Running | JobState::Completing if matches!(why, Some(StopWhy::Requeue { .. } | StopWhy::Preempt)) => {
                return Err(SlurmError::new(ESLURM_JOB_PENDING))
            }
            JobState::Running | JobState::Completing => {
                let stopping = why.is_some() || rec.state == JobState::Completing;
                let holdoff = self.opts.requeue_holdoff_s;
                let rec = self.jobs.get_mut(&id).expect("resolved");
                rec.spec.begin_time = Some(requeue_begin(now, holdoff));
                rec.acct.cancelled_by = None;
                if stopping {
                    // Being stopped for good, or ending on its other nodes: it ended already
                    // (`end_time` kept for a completing job); the stop becomes a requeue.
                    let at = rec.end_time.unwrap_or(now);
                    rec.end_time = Some(at);
                    rec.reason = None;
                    let s = rec.stopping.get_or_insert(Stopping { why: StopWhy::Requeue { hold }, term_at: now, kill_sent: true, kill_at: None });
                    s.why = StopWhy::Requeue { hold };
                    if rec.state == JobState::Completing {
                        rec.end_state = Some(JobState::Pending);
                    }
                    self.batch.acct.insert(id);
                    self.dirty(id);
                } else {
                    // `_job_requeue_op` ends the run now (`end_time = now`): `EndTime=` shows the
                    // requeue while the nodes end it, and accounting has the run `REQUEUED`.
                    rec.end_time = Some(now);
                    self.batch.acct.insert(id);
                    self.start_stop(id, StopWhy::Requeue { hold }, now);
                }
            }
            _ if rec.is_array_meta() => return Err(SlurmError::new(ESLURM_JOB_FINISHED)),
            _ => {
                // `_job_requeue_op` on a finished job: its record is ended now and written
                // `REQUEUED` (`job_completion_logger`), then the next record starts
                // (`batch_requeue_fini`); its steps stay with that run.
                self.jobs.get_mut(&id).expect("resolved").end_time = Some(now);
                self.record_run(id, "REQUEUED");
                let rec = &self.jobs[&id];
                let (row, _) = crate::acct::requeued_rows(rec, now, None, "REQUEUED");
                let run = crate::store::runs::RunSteps { job_id: id, run: rec.restarts, rows: Vec::new() };
                self.batch.acct_rows.push(row);
                self.batch.steps.remove(&id);
                self.batch.run_steps.push(run);
                let holdoff = self.opts.requeue_holdoff_s;
                let rec = self.jobs.get_mut(&id).expect("resolved");
                reset_for_requeue(rec, hold);
                rec.spec.begin_time = Some(requeue_begin(now, holdoff));
                self.requeue_to_core(id, false, now);
                self.batch.acct.insert(id);
                self.dirty(id);
                self.stats.requeued += 1;
                self.sched_dirty = true;
            }
        }
        if special {
            // `_job_requeue_op` sets `JOB_SPECIAL_EXIT` at the requeue; `_release_job_rec`
            // clears it.
            self.jobs.get_mut(&id).expect("resolved").special_exit = true;
        }
        Ok(())
    }

    /// `scontrol update job` (Slurm's `update_job_str`, job_mgr.c). A plain job, or an array
    /// task named by its own job id, is answered with one result (scontrol: `<error> for job
    /// <id>`). An array named by its id or its tasks (`A_T`) is updated record by record, each
    /// on its own (one refused leaves the others updated), and answered in the array-errors
    /// form ([`array_results`]): e.g. `A_1: Job has already finished` and `A_2-4: No error`
    /// for an array whose first task ended (goldens-extra 0642).
    pub(super) fn update(&mut self, ident: Ident, u: UpdateJob, now: i64) -> Response {
        let names_array = self.names_array(&u.job);
        let targets = self.resolve(&u.job);
        if targets.is_empty() && !names_array {
            return Response::Error(SlurmError::new(ESLURM_INVALID_JOB_ID));
        }
        let (allowed, refused) = self.owned_targets(ident, targets);
        if !names_array && !refused.is_empty() {
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        // The split stays if the update then fails, as in Slurm.
        let ids = match self.split_targets(&allowed, now) {
            Ok(ids) => ids,
            Err(e) => return Response::Error(e),
        };
        if !names_array {
            let outcome = ids.into_iter().try_for_each(|id| self.update_one(ident, id, &u.changes, now));
            return match outcome {
                Ok(()) => Response::JobResults(vec![JobResult { job: u.job, error: None }]),
                Err(e) => Response::Error(e),
            };
        }
        let mut outcomes = refused;
        for id in ids {
            let names = answers_for(&self.jobs[&id]);
            outcomes.push((names, self.update_one(ident, id, &u.changes, now).err().map(|e| e.code)));
        }
        Response::JobResults(array_results(&u.job, outcomes))
    }

    /// The account a job of `user` naming `named` is charged to instead, when associations
    /// are not enforced and `user` has none with `named`: the user's default account (Slurm
    /// 22.05 `job_create` and `_update_job`'s `_retrieve_new_assoc`; goldens-extra 1104, 1113).
    /// `None`: `named` stands (or the access checks refuse it).
    fn account_fallback(&self, user: &str, named: &str) -> Option<String> {
        if self.sched.accounting().checks_jobs() {
            return None;
        }
        let default = self.opts.admission.default_accounts.get(user).map(String::as_str);
        let d = self.opts.access.unassociated_account_fallback(user, named, default)?;
        info!(user, account = named, default = %d, "account has no association for the user: using the default account");
        Some(d)
    }

    /// Updates one record: the changes checked on a copy ([`apply_changes`],
    /// [`Controller::authorize_update`]), then kept, all or none.
    fn update_one(&mut self, ident: Ident, id: u64, changes: &[JobChange], now: i64) -> Result<(), SlurmError> {
        let mut rec = self.jobs[&id].clone();
        let mut new_dep: Option<Option<Dependency>> = None;
        // An account the job's user has no association with, when associations are not
        // enforced, is the user's default account, as at submission (Slurm 22.05
        // `_update_job` takes the association `_retrieve_new_assoc` finds, which falls back
        // to the default one; goldens-extra 1113).
        let fallback: Vec<JobChange>;
        let named = changes.iter().find_map(|c| if let JobChange::Account(a) = c { Some(a.as_str()) } else { None });
        let changes = match named.and_then(|a| self.account_fallback(&rec.user, a)) {
            Some(d) => {
                fallback = changes
                    .iter()
                    .map(|c| if matches!(c, JobChange::Account(_)) { JobChange::Account(d.clone()) } else { c.clone() })
                    .collect();
                &fallback
            }
            None => changes,
        };
        let access_changed = apply_changes(&mut rec, changes, ident, &self.sched, &mut new_dep, now)?;
        self.authorize_update(ident, &rec, changes, access_changed)?;
        let resize = (rec.state == JobState::Running)
            .then(|| changes.iter().find_map(|c| if let JobChange::NumNodes(n) = c { Some(*n) } else { None }))
            .flatten();
        let core = rec.spec.id;
        if rec.deadline.is_some() {
            self.deadlines.insert(id);
        }
        self.jobs.insert(id, rec);
        if let Some(size) = resize {
            info!(job = id, size, "scontrol update NumNodes= on a running job");
            self.core_event(CoreEvent::Resize { job: core, size }, now);
        }
        match new_dep {
            Some(Some(d)) => {
                self.deps.insert(id, d);
            }
            Some(None) => {
                self.deps.remove(&id);
            }
            None => {}
        }
        if self.reason_cleared_by_update(id) {
            self.reason_until_cycle.insert(id, "None");
        }
        self.dirty(id);
        self.push_core_update(id, now);
        // A new throttle decides which of the array's tasks the next cycle sees
        // (`refresh_arrays`), whatever the state of the record that keeps it.
        if changes.iter().any(|c| matches!(c, JobChange::ArrayThrottle(_))) {
            self.sched_dirty = true;
        }
        self.partition_limits_check(id)
    }

    /// The reason Slurm 22.05's submission test gives a batch job (`job_allocate` with
    /// `allocate=0`, which never starts it): for a job that may be considered now (not
    /// held, no dependency left after `job_independent`, its begin time come; the others
    /// show those reasons at once), `PartitionConfig` when it exceeds its partition's
    /// `MaxTime` or nodes (`_select_nodes_parts` maps the limit's refusal to
    /// `WAIT_PART_CONFIG`), else `Priority` when `_top_priority` finds a pending job (of any
    /// partition: Flotilla has no reservations) that may be considered with a higher
    /// priority; `None` (no entry) for the others. Shown until the next cycle evaluates the job (golden 0259: jobs 1, 5, 8
    /// `PartitionConfig`, 2 and 10 `Priority`, cancelled before Slurm's first pass).
    fn submit_reason(&mut self, id: u64, now: i64) -> Option<&'static str> {
        let rec = &self.jobs[&id];
        if rec.state != JobState::Pending || rec.is_array_meta() || rec.reason.is_some() || !super::arrays::may_start(rec, now) {
            return None;
        }
        if over_partition_limits(rec, &self.sched.cluster().partitions[rec.spec.partition.0 as usize]) {
            return Some("PartitionConfig");
        }
        // Candidates: the pending records ranked above the job (`prio_index`, highest
        // first), each checked against its record as it is now. Slurm compares every
        // partition: with no reservation on either job (Flotilla has none), `_top_priority`'s
        // "same reservation" branch decides on priority alone before its partition test.
        let index = self.prio_index.get_or_insert_with(|| {
            self.jobs.values().filter(|r| r.state == JobState::Pending && !r.is_array_meta()).map(super::prio_key).collect()
        });
        let above = (std::cmp::Reverse(u32::MAX), 0)..(std::cmp::Reverse(rec.priority), 0);
        let mut stale = Vec::new();
        let mut higher = false;
        for &key in index.range(above) {
            let Some(o) = self.jobs.get(&key.1).filter(|o| o.state == JobState::Pending && super::prio_key(o) == key) else {
                stale.push(key);
                continue;
            };
            // Only jobs the core holds pending count, in a runnable state (not waiting on
            // their partition, an accounting limit, ...: `Reason::runnable_state`) and
            // independent (no dependency or begin time left). The job itself is not in the
            // range (its own priority is not above itself).
            let runnable = self.sched.pending_info(JobId(o.id)).is_some_and(|i| i.reason.runnable_state());
            if runnable && o.priority != crate::job::PRIO_UNSET && o.reason.is_none() && super::arrays::may_start(o, now) {
                higher = true;
                break;
            }
        }
        for key in stale {
            index.remove(&key);
        }
        higher.then_some("Priority")
    }

    /// Whether a successful update leaves pending job `id` with no reason until the next
    /// cycle: Slurm's `_update_job` ends with `job_limits_check`, and sets `WAIT_NO_REASON`
    /// when it passes, unless the job is held (or carries a reason of its own here: a
    /// requeue's hold, `DependencyNeverSatisfied`); when the job exceeds its partition's
    /// `MaxTime` or the partition is down the update succeeds and the reason stays as it was;
    /// an inactive one keeps the update and answers an error
    /// ([`Controller::partition_limits_check`]), the reason as it was.
    fn reason_cleared_by_update(&self, id: u64) -> bool {
        let rec = &self.jobs[&id];
        if rec.state != JobState::Pending || rec.spec.held.is_some() || rec.reason.is_some() {
            return false;
        }
        let part = &self.sched.cluster().partitions[rec.spec.partition.0 as usize];
        part.state.schedules() && !part.over_max_time(rec.spec.time_limit_s)
    }
}

/// Whether job `rec` is over its partition's `MaxTime` or node count: what Slurm's
/// `_part_access_check` finds first in `job_limits_check` (`WAIT_PART_TIME_LIMIT`,
/// `WAIT_PART_NODE_LIMIT`), and what its submission test maps to `PartitionConfig`.
fn over_partition_limits(rec: &JobRecord, part: &flotilla_core::cluster::Partition) -> bool {
    part.over_max_time(rec.spec.time_limit_s) || rec.spec.request.nodes.is_some_and(|n| n as usize > part.nodes.len())
}

/// The tasks record `rec` answers for in an array-errors answer: a pending array record all
/// its pending tasks (Slurm's `_resp_array_add` with the record's task bitmap), any other
/// record its own task.
fn answers_for(rec: &JobRecord) -> Vec<u32> {
    if rec.is_array_meta() {
        rec.array_pending.clone()
    } else {
        rec.array_task_id.into_iter().collect()
    }
}

/// One record's outcome in an answer: the tasks it answers for ([`answers_for`]) and its
/// error code (`None`: done).
type Outcome = (Vec<u32>, Option<i32>);

/// The answer for one job reference of a request on jobs: an array's in the array-errors
/// form ([`array_results`]); a plain job's one result, its first refusal (`Invalid job id
/// specified` when it named no record).
fn job_answer(jref: JobRef, names_array: bool, outcomes: Vec<Outcome>) -> Vec<JobResult> {
    if names_array {
        return array_results(&jref, outcomes);
    }
    let code = if outcomes.is_empty() { Some(ESLURM_INVALID_JOB_ID) } else { outcomes.into_iter().find_map(|(_, c)| c) };
    vec![JobResult { job: jref, error: code.map(SlurmError::new) }]
}

/// Slurm's answer to an operation on an array named by its id or its tasks (`A_T`;
/// `_resp_array_add`, `_resp_array_add_id`, `_resp_array_xlate` in job_mgr.c): `outcomes`,
/// each record's tasks ([`answers_for`]) with its error code (`None`: done), grouped by code,
/// each group naming its tasks, ordered by their first task; a task `jref` names that no
/// record holds is `Invalid job id specified`. scontrol prints every group as
/// `A_<tasks>: <error>` unless the answer is one success.
fn array_results(jref: &JobRef, outcomes: Vec<Outcome>) -> Vec<JobResult> {
    let mut groups: Vec<(Option<i32>, BTreeSet<u32>)> = Vec::new();
    let mut add = |code: Option<i32>, tasks: &[u32]| match groups.iter_mut().find(|(c, _)| *c == code) {
        Some((_, set)) => set.extend(tasks.iter().copied()),
        None => groups.push((code, tasks.iter().copied().collect())),
    };
    let mut covered = BTreeSet::new();
    for (names, code) in outcomes {
        covered.extend(names.iter().copied());
        add(code, &names);
    }
    for &t in jref.tasks.iter().flatten() {
        if !covered.contains(&t) {
            add(Some(ESLURM_INVALID_JOB_ID), &[t]);
        }
    }
    if groups.is_empty() {
        groups.push((Some(ESLURM_INVALID_JOB_ID), BTreeSet::new()));
    }
    groups.sort_by_key(|(_, set)| set.first().copied());
    groups
        .into_iter()
        .map(|(code, set)| JobResult {
            job: JobRef { job_id: jref.job_id, tasks: Some(set.into_iter().collect()) },
            error: code.map(SlurmError::new),
        })
        .collect()
}

/// Applies `scontrol update` changes to a copy of a record, with Slurm's permission rules: a
/// user may change only pending jobs (a running job's time limit may only go down), may not
/// raise a time limit above the partition's `MaxTime`, and may not set `Priority` or a
/// negative `Nice`; a running job's account or QOS may not change (`Job is no longer pending
/// execution`). Returns whether the partition, account or QOS changed (their access is
/// checked by the caller, [`Controller::authorize_update`]).
fn apply_changes(
    rec: &mut JobRecord,
    changes: &[JobChange],
    ident: Ident,
    sched: &Scheduler,
    new_dep: &mut Option<Option<Dependency>>,
    now: i64,
) -> Result<bool, SlurmError> {
    let mut access_changed = false;
    let pending = rec.state == JobState::Pending;
    let need_pending = |p: bool| if p { Ok(()) } else { Err(SlurmError::new(ESLURM_JOB_NOT_PENDING)) };
    // Slurm's `validate_operator`/`validate_super_user` for the keys that are an operator's.
    let need_operator = || if ident.admin { Ok(()) } else { Err(SlurmError::new(ESLURM_ACCESS_DENIED)) };
    // Slurm 22.05 `_update_job`: `ArrayTaskThrottle=` sets the `max_run_tasks` of the record
    // that keeps the array's (its first), before the ended-job test: that record, ended, takes
    // it and nothing else, with success (goldens-extra 0643); other records ignore it.
    let throttle = changes.iter().rev().find_map(|c| if let JobChange::ArrayThrottle(t) = c { Some(*t) } else { None });
    if let Some(t) = throttle.filter(|_| rec.array_job_id == Some(rec.id)) {
        rec.array_max_running = (t > 0).then_some(t);
        if rec.state.is_finished() {
            return Ok(false);
        }
    }
    if rec.state.is_finished() {
        return Err(SlurmError::new(ESLURM_JOB_FINISHED));
    }
    // A new time limit is checked against the minimum this update sets, else the job's.
    let new_time_min = changes.iter().rev().find_map(|c| match c {
        JobChange::TimeMin(t) => Some(*t),
        _ => None,
    });
    for ch in changes {
        match ch {
            JobChange::TimeLimit(t) => {
                let time_min = new_time_min.map(admission::time_min_minutes).or(rec.time_min);
                change_time_limit(rec, *t, time_min, ident, sched)?
            }
            // Slurm 22.05 `_update_job`: of a pending job only (otherwise nothing changes);
            // above the time limit `ESLURM_INVALID_TIME_MIN_LIMIT`; 0 clears it.
            JobChange::TimeMin(t) if pending => {
                let m = admission::time_min_minutes(*t);
                if rec.time_limit_min.is_some_and(|l| m > l) {
                    return Err(SlurmError::new(ESLURM_INVALID_TIME_MIN_LIMIT));
                }
                rec.time_min = (m != 0 && m != u32::MAX).then_some(m);
            }
            JobChange::TimeMin(_) => {}
            // `_update_job`: of a job not running (otherwise nothing changes); one already
            // past is `ESLURM_INVALID_TIME_VALUE`, and only an operator sets one.
            JobChange::Deadline(d) if rec.state != JobState::Running => {
                if *d < now {
                    return Err(SlurmError::new(ESLURM_INVALID_TIME_VALUE));
                }
                need_operator()?;
                rec.deadline = Some(*d);
            }
            JobChange::Deadline(_) => {}
            JobChange::EndTime(end) => set_end_time(rec, *end, ident, now)?,
            // `_update_job`: of a pending job (a running job's own directory is no change);
            // kept as written, also a relative one, the launch's to open as the user.
            JobChange::WorkDir(d) if rec.work_dir == *d => {}
            JobChange::WorkDir(d) => {
                need_pending(pending)?;
                rec.work_dir = d.clone();
            }
            // `_update_job`: the pattern as it already is changes nothing; else of a pending job
            // only, kept as written (the launch opens it as the user; goldens-extra 0926).
            JobChange::StdOut(o) if rec.stdout.as_deref() == Some(o.as_str()) => {}
            JobChange::StdOut(o) => {
                need_pending(pending)?;
                rec.stdout = Some(o.clone());
            }
            JobChange::MinTmpDiskNode(n) => {
                need_pending(pending)?;
                rec.node_shape.tmp_disk_mib = u64::from(*n);
            }
            // Slurm 22.05 `_update_job`: the constraint as it already is (the text compared as
            // given, before `,` becomes `&`) changes nothing; else of a pending job only;
            // empty clears it (`(null)`); else checked as at submission ([`admission::constraint`];
            // Slurm answers every refusal `ESLURM_INVALID_FEATURE`).
            // Slurm 22.05 `_update_job`: of a pending job only (checked first: the same value on
            // a running job is refused too); the same memory as the job's no change;
            // `MinMemoryCPU=0` is `MinMemoryNode=0` (all of a node's memory). Not checked
            // against the nodes here: a job asking more than any node has pends
            // `BadConstraints` once considered (goldens-extra 0923).
            JobChange::MinMemoryNode(m) | JobChange::MinMemoryCpu(m) => {
                need_pending(pending)?;
                let per_cpu = matches!(ch, JobChange::MinMemoryCpu(_)) && *m > 0;
                set_min_memory(rec, *m, per_cpu, sched);
            }
            // `_update_job`: 0 changes nothing (on any job); else of a pending job only, its
            // CPUs a node at least that many (in whole `-c` units, as [`admission`] sizes a
            // `--mincpus` job; Slurm's `NumCPUs=` is then N a node).
            JobChange::MinCpusNode(0) => {}
            JobChange::MinCpusNode(n) => {
                need_pending(pending)?;
                rec.node_shape.min_cpus = u32::from(*n);
                rec.min_cpus_set = Some(u32::from(*n).saturating_mul(rec.num_nodes.max(1)));
                resize_cpus(rec);
            }
            // Slurm 22.05 `_update_job`: `min_cpus` of a pending job only (checked first), at
            // least 1 (`ESLURM_INVALID_CPU_COUNT`); shown as `NumCPUs=` and `%C`, and its nodes
            // hold at least that many CPUs between them (goldens-extra 0933).
            JobChange::NumCpus(n) => {
                need_pending(pending)?;
                if *n == 0 {
                    return Err(SlurmError::new(ESLURM_INVALID_CPU_COUNT));
                }
                rec.min_cpus_set = Some(*n);
                resize_cpus(rec);
            }
            // `_update_job`: `num_tasks` of a pending job only, at least 1
            // (`ESLURM_BAD_TASK_COUNT`); its CPUs stay as they are (the tasks share them:
            // `SLURM_NTASKS=4` on one CPU, goldens-extra 0934).
            JobChange::NumTasks(n) => {
                need_pending(pending)?;
                if *n == 0 {
                    return Err(SlurmError::new(ESLURM_BAD_TASK_COUNT));
                }
                rec.ntasks = *n;
                rec.ntasks_given = true;
            }
            // `_update_job`: `cores_per_socket` of a pending job only (0 included).
            JobChange::CoresPerSocket(c) => {
                need_pending(pending)?;
                rec.node_shape.cores_per_socket = u32::from(*c);
            }
            // `_update_job`: an operator's (`validate_super_user`; checked before anything
            // else there, and here all or nothing), on a job in any state but ended.
            JobChange::AdminComment(c) => {
                need_operator()?;
                rec.admin_comment = Some(c.clone());
            }
            // `_update_job`: an operator's; its effect is the priority plugin's.
            JobChange::SiteFactor(f) => {
                need_operator()?;
                rec.spec.site_factor = *f;
            }
            // Slurm 22.05 `_update_job` (goldens-extra 0937): of a pending job only (checked
            // first); `ntasks_per_node` an operator's (`ESLURM_ACCESS_DENIED` for a user).
            JobChange::TasksPerNode(n) => {
                need_pending(pending)?;
                need_operator()?;
                rec.node_shape.ntasks_per_node = u32::from(*n);
                resize_cpus(rec);
            }
            JobChange::SocketsPerNode(n) => {
                need_pending(pending)?;
                rec.sockets_per_node = u32::from(*n);
            }
            JobChange::ThreadsPerCore(n) => {
                need_pending(pending)?;
                rec.node_shape.threads_per_core = u32::from(*n);
            }
            // The CPUs shown (`min_cpus`) stay as they were; the tasks' CPUs follow the new
            // count when the job is placed.
            JobChange::CpusPerTask(n) => {
                need_pending(pending)?;
                if u32::from(*n) != rec.cpus_per_task {
                    rec.min_cpus_set = Some(rec.requested_cpus());
                    rec.cpus_per_task = u32::from(*n);
                    resize_cpus(rec);
                }
            }
            // An operator's: non-zero lets the job share its nodes, 0 takes that back.
            JobChange::Shared(n) => {
                use flotilla_proto::Oversubscribe as O;
                need_pending(pending)?;
                need_operator()?;
                match (*n, rec.node_shape.oversubscribe) {
                    (0, O::Yes) => rec.node_shape.oversubscribe = O::Unset,
                    (0, _) => {}
                    (_, _) => rec.node_shape.oversubscribe = O::Yes,
                }
            }
            // A user may only lower it, an operator set it. Flotilla places no job on
            // contiguous nodes (every job's is 0): a user is refused, an operator's 0 is no
            // change and any other value not supported.
            JobChange::Contiguous(n) => {
                need_pending(pending)?;
                need_operator()?;
                if *n != 0 {
                    return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
                }
            }
            // `_update_job`: on any job, unchecked; shown as `DelayBoot=`.
            JobChange::DelayBoot(secs) => rec.delay_boot_s = Some(*secs),
            // An operator's (checked first), of a pending job. Flotilla does not reboot nodes
            // for a job: `Reboot=0` is no change, any other value not supported.
            JobChange::Reboot(n) => {
                need_operator()?;
                need_pending(pending)?;
                if *n != 0 {
                    return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
                }
            }
            // `update_job_wckey`: of a pending job. Flotilla keeps no WCKeys (sbatch's
            // `--wckey` is accepted and dropped too; `AccountingStorageEnforce=wckeys` is
            // refused at start), so the key is accepted and not kept, as Slurm without
            // `TrackWCKey` shows nothing of it.
            JobChange::WcKey(_) => need_pending(pending)?,
            // `license_validate`: Flotilla has no licenses, so asking for any is invalid;
            // none (empty) is the job's already.
            JobChange::Licenses(l) if l.is_empty() => {}
            JobChange::Licenses(_) => return Err(SlurmError::new(ESLURM_INVALID_LICENSES)),
            // Specialized cores are an operator's with `AllowSpecResourcesUsage`, which
            // Flotilla does not offer: refused for everyone, of a pending job.
            JobChange::CoreSpec(_) => {
                need_pending(pending)?;
                return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
            }
            // Flotilla has no advance reservations: none (empty) is the job's already, any
            // name is invalid.
            JobChange::Reservation(r) if r.is_empty() => {}
            JobChange::Reservation(_) => return Err(SlurmError::new(ESLURM_RESERVATION_INVALID)),
            // `_update_job`: a burst buffer can only be cleared from an ended job, which
            // this function never gets to.
            JobChange::BurstBuffer(_) => return Err(SlurmError::new(ESLURM_NOT_SUPPORTED)),
            JobChange::Features(f) if rec.features.as_deref() == Some(f.as_str()) => {}
            JobChange::Features(f) => {
                need_pending(pending)?;
                if f.is_empty() {
                    rec.features = None;
                    rec.spec.request.features = None;
                } else {
                    rec.spec.request.features = admission::constraint(f, sched.cluster())?.map(Box::new);
                    rec.features = Some(flotilla_core::features::normalize(f));
                }
            }
            // Slurm 22.05 `_update_job`: of a pending job, the nodes it must use (all of them,
            // its request's node count raised to theirs; `NumNodes=` shows the old count until
            // it starts, as in Slurm) or may not use; an unknown name is
            // `ESLURM_INVALID_NODE_NAME`, a job not pending `ESLURM_JOB_NOT_PENDING`, the
            // excluded list as it is already changes nothing. Kept as written.
            JobChange::ExcNodeList(v) if rec.excluded_nodes.join(",") == *v => {}
            JobChange::ExcNodeList(v) => {
                need_pending(pending)?;
                rec.spec.request.excluded_nodes = node_ids(v, sched)?;
                rec.excluded_nodes = (!v.is_empty()).then(|| v.clone()).into_iter().collect();
            }
            // Of a running job it asks to shrink it to those of its nodes: Flotilla keeps a
            // job's nodes, so only all of them (no change) is accepted; a name it does not run
            // on is `ESLURM_INVALID_NODE_NAME`, as is an empty list.
            JobChange::ReqNodeList(v) if rec.state == JobState::Running => {
                let ids = node_ids(v, sched)?;
                let names: BTreeSet<&str> = ids.iter().map(|&i| sched.cluster().node(i).name.as_str()).collect();
                if names.is_empty() || !names.iter().all(|n| rec.nodes.iter().any(|m| m == n)) {
                    return Err(SlurmError::new(ESLURM_INVALID_NODE_NAME));
                }
                if names.len() != rec.nodes.len() {
                    return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
                }
            }
            JobChange::ReqNodeList(v) => {
                need_pending(pending)?;
                let ids = node_ids(v, sched)?;
                let r = &mut rec.spec.request;
                if (r.nodes.unwrap_or(1) as usize) < ids.len() {
                    r.nodes = Some(ids.len() as u32);
                }
                r.required_nodes = ids;
                rec.required_nodes = (!v.is_empty()).then(|| v.clone()).into_iter().collect();
            }
            JobChange::Name(n) => rec.name = n.clone(),
            JobChange::Partition(p) => {
                need_pending(pending)?;
                let id = sched
                    .cluster()
                    .partition_id(p)
                    .ok_or_else(|| SlurmError::new(ESLURM_INVALID_PARTITION_NAME))?;
                rec.partition = p.clone();
                rec.spec.partition = id;
                access_changed = true;
            }
            JobChange::Priority(p) => {
                // Slurm 22.05 `_update_job`: a held job's priority is set by a release only.
                if rec.spec.held.is_some() && *p != 0 {
                    return Err(SlurmError::new(ESLURM_JOB_HELD));
                }
                need_operator()?;
                rec.spec.base_priority = *p;
                // An operator's priority is the job's (Slurm's `direct_set_prio`).
                rec.priority = *p;
            }
            JobChange::Nice(n) => {
                if *n < 0 && !ident.admin {
                    return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                }
                // Slurm's `_update_job`: the priority moves by the change of nice.
                if rec.priority > 0 && rec.priority < crate::job::PRIO_UNSET {
                    let p = i64::from(rec.priority) - (i64::from(*n) - i64::from(rec.spec.nice));
                    rec.priority = p.clamp(1, i64::from(crate::job::PRIO_UNSET - 1)) as u32;
                }
                rec.spec.nice = *n;
            }
            JobChange::Gres(g) => {
                need_pending(pending)?;
                change_gres(rec, g)?;
            }
            JobChange::NumNodes(n) if rec.state == JobState::Running => running_num_nodes(rec, *n)?,
            JobChange::NumNodes(n) => {
                // Slurm 22.05 `_update_job`: a running job may only shrink (not supported
                // here either), growing it is "not supported on this system".
                if rec.state == JobState::Running && *n > rec.num_nodes {
                    return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
                }
                need_pending(pending)?;
                set_pending_nodes(rec, *n, None)?;
            }
            JobChange::NodeRange { min, max } => {
                need_pending(pending)?;
                set_pending_nodes(rec, *min, Some(*max))?;
            }
            JobChange::Dependency(d) => {
                need_pending(pending)?;
                match deps::parse(d).map_err(admission::dep_error)? {
                    None => {
                        rec.dependency = None;
                        rec.spec.dependency_pending = false;
                        rec.reason = None;
                        *new_dep = Some(None);
                    }
                    // Slurm's `_depends_on_same_job`: a job may not depend on itself.
                    Some(parsed) if parsed.names(rec.id) => return Err(SlurmError::new(ESLURM_DEPENDENCY)),
                    Some(parsed) => {
                        rec.dependency = Some(parsed.to_slurm_string());
                        rec.spec.dependency_pending = true;
                        *new_dep = Some(Some(parsed));
                    }
                }
            }
            JobChange::Begin(b) => {
                need_pending(pending)?;
                rec.spec.begin_time = b.map(|t| t.max(0) as u64);
            }
            JobChange::Account(a) => {
                // Slurm 22.05 `_update_job`: the account (and so the association) of a job
                // that is no longer pending stays.
                need_pending(pending)?;
                rec.account = a.clone();
                rec.spec.account = a.clone();
                access_changed = true;
            }
            JobChange::Qos(q) => {
                // Slurm: a QOS other than the job's own needs a pending job.
                if *q != rec.qos {
                    need_pending(pending)?;
                }
                rec.qos = q.clone();
                rec.spec.qos = q.clone();
                access_changed = true;
            }
            JobChange::Comment(c) => rec.comment = Some(c.clone()),
            // Slurm 22.05 `_update_job`: on pending and running jobs alike; the mail user of a
            // job that had none, or an empty one, is the job's user (`_get_mail_user`).
            JobChange::MailType(t) => {
                rec.mail_type = *t;
                if rec.mail_user.is_none() {
                    rec.mail_user = Some(rec.user.clone());
                }
            }
            JobChange::MailUser(u) => rec.mail_user = Some(if u.is_empty() { rec.user.clone() } else { u.clone() }),
            JobChange::Requeue(n) => rec.requeue = *n != 0,
            JobChange::ArrayThrottle(_) => {}
            JobChange::Topology(t) => {
                need_pending(pending)?;
                let k = flotilla_core::config::TopologyKind::parse(t)
                    .ok_or_else(|| SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE))?;
                rec.spec.request.topology = k;
                rec.topology = k.as_str().to_string();
            }
        }
    }
    // The shape after the changes passes admission's checks, as at submission.
    if pending && changes.iter().any(|c| matches!(c, JobChange::Gres(_) | JobChange::NumNodes(_) | JobChange::NodeRange { .. } | JobChange::Partition(_))) {
        admission::check_shape(&rec.spec.request, sched.cluster(), rec.spec.partition)?;
    }
    Ok(access_changed)
}

/// A pending job's memory set by `scontrol update`: `mib` a CPU (`per_cpu`) or a node (0:
/// all of the memory of the partition's largest node, as `--mem=0` at submission); the same
/// value as the job's changes nothing.
fn set_min_memory(rec: &mut JobRecord, mib: u64, per_cpu: bool, sched: &Scheduler) {
    let same = if per_cpu {
        rec.mem_per_cpu_mib == Some(mib)
    } else {
        rec.mem_per_cpu_mib.is_none() && rec.mem_whole_node == (mib == 0) && (mib == 0 || rec.mem_per_node_mib == mib)
    };
    if same {
        return;
    }
    let cpus = rec.spec.request.cpu_milli_per_node / 1000;
    let r = &mut rec.spec.request;
    r.mem_mib_per_node = match (per_cpu, mib) {
        (true, m) => m.saturating_mul(cpus),
        (false, 0) => sched.cluster().capacity(rec.spec.partition, &r.gpu_types).max_mem_mib,
        (false, m) => m,
    };
    rec.mem_per_cpu_mib = per_cpu.then_some(mib);
    rec.mem_whole_node = !per_cpu && mib == 0;
    rec.mem_per_node_mib = r.mem_mib_per_node;
}

/// A pending job's CPUs a node after its `MinCPUsNode=` or `NumCPUs=` changed, as admission
/// sizes them ([`admission::node_cpus`]), at least its `NumCPUs=` spread over its nodes;
/// memory per CPU follows.
fn resize_cpus(rec: &mut JobRecord) {
    let per_node = match rec.node_shape.ntasks_per_node {
        0 => rec.ntasks.max(1).div_ceil(rec.num_nodes.max(1)),
        t => t,
    };
    // The CPUs an update's `NumCPUs=` asked for, spread over the job's nodes.
    let asked = rec.min_cpus_set.map_or(0, |n| n.div_ceil(rec.num_nodes.max(1)));
    let cpus = admission::node_cpus(per_node, rec.cpus_per_task, rec.sockets_per_node, rec.node_shape.min_cpus).max(asked);
    let r = &mut rec.spec.request;
    r.cpu_milli_per_node = u64::from(cpus) * 1000;
    if let Some(m) = rec.mem_per_cpu_mib {
        r.mem_mib_per_node = m.saturating_mul(u64::from(cpus));
        rec.mem_per_node_mib = r.mem_mib_per_node;
    }
}

/// `scontrol update JobId= NumNodes=N` on a running job (Slurm 22.05 `_update_job`: a running
/// job's node count may only go down, releasing nodes at once; growing a rigid one is
/// `ESLURM_NOT_SUPPORTED`). For an elastic job N is its
/// new maximum, within its range (`MIN <= N <= MAX`; as for any running job it never goes
/// up, `ESLURM_INVALID_NODE_COUNT`), and growth above it is shrunk with notice (SIGTERM, the
/// deadline, SIGKILL); a GPU-granular elastic job has no node count to set
/// (`ESLURM_NOT_SUPPORTED`). The core carries it out (`Event::Resize`, sent by
/// [`Controller::update`]).
fn running_num_nodes(rec: &mut JobRecord, n: u32) -> Result<(), SlurmError> {
    use flotilla_core::job::ElasticUnit;
    match rec.spec.elastic.as_mut() {
        Some(e) if e.unit == ElasticUnit::Gpus => Err(SlurmError::new(ESLURM_NOT_SUPPORTED)),
        Some(e) if n < e.min || n > e.max => Err(SlurmError::new(ESLURM_INVALID_NODE_COUNT)),
        Some(e) => {
            e.max = n;
            Ok(())
        }
        // Growing a running rigid job: "not supported on this system" (goldens-extra 0914).
        None if n > rec.nodes.len() as u32 => Err(SlurmError::new(ESLURM_NOT_SUPPORTED)),
        None if n == 0 => Err(SlurmError::new(ESLURM_INVALID_NODE_COUNT)),
        None => Ok(()),
    }
}

/// The nodes of hostlist `v` (empty: none), each known to the cluster, without repeats;
/// otherwise `ESLURM_INVALID_NODE_NAME` (Slurm's `node_name2bitmap`).
fn node_ids(v: &str, sched: &Scheduler) -> Result<Vec<flotilla_core::cluster::NodeId>, SlurmError> {
    let invalid = || SlurmError::new(ESLURM_INVALID_NODE_NAME);
    let names = flotilla_core::hostlist::expand(v).map_err(|_| invalid())?;
    let mut ids = names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| sched.cluster().node_id(n).ok_or_else(invalid))
        .collect::<Result<Vec<_>, _>>()?;
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// `scontrol update job TimeLimit=`: a user may not raise a pending job's limit above its
/// partition's `MaxTime`, nor a running job's limit at all; an admin may do either. Below the
/// job's minimum time (`time_min`, minutes) it is `ESLURM_INVALID_TIME_MIN_LIMIT`.
fn change_time_limit(
    rec: &mut JobRecord,
    t: TimeLimitWire,
    time_min: Option<u32>,
    ident: Ident,
    sched: &Scheduler,
) -> Result<(), SlurmError> {
    let new = t.minutes();
    // `_update_job`: never below the job's minimum time.
    if let (Some(n), Some(m)) = (new, time_min) {
        if n < m {
            return Err(SlurmError::new(ESLURM_INVALID_TIME_MIN_LIMIT));
        }
    }
    if !ident.admin {
        let above = |limit: Option<u64>| match (new, limit) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(n), Some(l)) => u64::from(n) > l,
        };
        if rec.state == JobState::Pending {
            let max = sched.cluster().partitions[rec.spec.partition.0 as usize].max_time_min;
            if above(max) {
                return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
            }
        } else if above(rec.time_limit_min.map(u64::from)) {
            return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
    }
    rec.set_time_limit(new);
    Ok(())
}

/// `scontrol update EndTime=` as Slurm 22.05's `_update_job` takes it: of a running job only
/// (`ESLURM_JOB_NOT_RUNNING`, also while it is being stopped), not in the past
/// (`ESLURM_INVALID_TIME_VALUE`); a user may only bring the end closer
/// (`ESLURM_ACCESS_DENIED`), an operator may also move it later. The time limit moves by the
/// difference rounded to the nearest minute (`time_limit += (delta + 30) / 60`); Flotilla's end
/// of a run is its start plus its limit, so the new end is that, within 30 s of the one asked
/// (Slurm keeps the exact second). A job without a limit ends a year after its start, as
/// Slurm's `end_time` for `INFINITE`.
fn set_end_time(rec: &mut JobRecord, end: i64, ident: Ident, now: i64) -> Result<(), SlurmError> {
    const YEAR_S: i64 = 365 * 24 * 3600;
    let start = match (rec.state, rec.start_time) {
        (JobState::Running, Some(s)) if rec.stopping.is_none() => s,
        _ => return Err(SlurmError::new(ESLURM_JOB_NOT_RUNNING)),
    };
    if end < now {
        return Err(SlurmError::new(ESLURM_INVALID_TIME_VALUE));
    }
    let limit_s = rec.time_limit_min.map_or(YEAR_S, |m| i64::from(m) * 60);
    let current = start + limit_s;
    if !ident.admin && end >= current {
        return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
    }
    // C's integer division, toward zero, as Rust's.
    let minutes = (limit_s / 60 + (end - current + 30) / 60).clamp(0, i64::from(u32::MAX - 1));
    rec.set_time_limit(Some(minutes as u32));
    Ok(())
}

/// A pending job's node count set by `scontrol update NumNodes=MIN[-MAX]`, as Slurm 22.05's
/// `_update_job` resets `min_nodes` and `max_nodes`: `max` `None` (`NumNodes=N`) keeps the
/// job's maximum (0: not bounded). A minimum below 1, or a bounded maximum below the
/// minimum, is `ESLURM_INVALID_NODE_COUNT` and changes nothing (on the reference a `-N1` job
/// refuses `NumNodes=3`, a `-N2-5` one takes it as `3-5`; goldens-extra 0924). The task count
/// is at least the new minimum, and so the CPUs asked for; the request is a node range when
/// its nodes are alike ([`admission::range_max`]), as at submission.
fn set_pending_nodes(rec: &mut JobRecord, min: u32, max: Option<u32>) -> Result<(), SlurmError> {
    let max = max.unwrap_or(rec.max_nodes);
    if min == 0 || (max != 0 && max < min) {
        return Err(SlurmError::new(ESLURM_INVALID_NODE_COUNT));
    }
    let r = &mut rec.spec.request;
    let gpus = match r.gpus_per_node {
        Some(g) => g.checked_mul(min).ok_or_else(|| SlurmError::new(ESLURM_INVALID_NODE_COUNT))?,
        None => r.gpus,
    };
    r.nodes = Some(min);
    r.gpus = gpus;
    r.nodes_max = admission::range_max(min, max, rec.ntasks_given && rec.node_shape.ntasks_per_node == 0, gpus, r.gpus_per_node).filter(|_| rec.spec.elastic.is_none());
    // `min_cpus` rises to the tasks' CPUs (or `pn_min_cpus` a node) if they are more; it
    // never falls (`_update_job`: NumNodes=3 of a `-N2-5` job shows NumCPUs=3).
    let before = rec.requested_cpus();
    let cpt = rec.cpus_per_task.max(1);
    rec.num_nodes = min;
    rec.max_nodes = max;
    rec.ntasks = rec.ntasks.max(min);
    rec.gpus = gpus;
    let want = rec.ntasks.saturating_mul(cpt).max(rec.node_shape.min_cpus.max(cpt).saturating_mul(min));
    if want > before {
        rec.min_cpus_set = Some(want);
    }
    Ok(())
}

/// `scontrol update job Gres=gpu[:type]:N` of a pending job: N GPUs on each of its nodes
/// (only `gpu` is a GRES here; the last one named wins). Errors: another GRES name, or a
/// count beyond `u32`, `ESLURM_INVALID_GRES`.
fn change_gres(rec: &mut JobRecord, g: &[flotilla_proto::GresSpec]) -> Result<(), SlurmError> {
    let mut per_node = 0u32;
    let mut types = Vec::new();
    for x in g {
        if x.name != "gpu" {
            return Err(SlurmError::new(ESLURM_INVALID_GRES));
        }
        per_node = u32::try_from(x.count).map_err(|_| SlurmError::new(ESLURM_INVALID_GRES))?;
        types = x.gpu_type.clone().into_iter().collect();
    }
    let nodes = rec.spec.request.nodes.unwrap_or(1);
    let r = &mut rec.spec.request;
    r.gpus_per_node = (per_node > 0).then_some(per_node);
    r.gpus = per_node.checked_mul(nodes).ok_or_else(|| SlurmError::new(ESLURM_INVALID_GRES))?;
    r.nodes = Some(nodes);
    r.gpu_types = types;
    rec.gpus = r.gpus;
    rec.gres = g.iter().map(|x| (x.name.clone(), x.gpu_type.clone(), x.count)).collect();
    // `TresPerNode=` is written from the new GRES from now on.
    rec.tres_per_node = None;
    Ok(())
}
