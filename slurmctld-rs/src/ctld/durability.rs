//! When the store cannot commit (a full disk, a disk quota, an I/O error): the controller
//! neither panics nor lets its memory run ahead of the database for anything a client was
//! told.
//!
//! A turn whose commit fails keeps its batch and retries it at every later turn (each tick,
//! 1 s, or event). Meanwhile:
//! - the jobs submitted in the failed turn are taken out of memory again (the core, the job
//!   table, the batch) and their submitters get Slurm's `ESLURM_WRITING_TO_FILE` ("I/O error
//!   writing script/environment to file", what Slurm 22.05 answers when it cannot save a
//!   submission's script, `job_mgr.c` `_copy_job_desc_to_file`): a refused job exists nowhere;
//! - the other replies of the uncommitted turns and every message to node daemons are held
//!   until a commit succeeds (nothing reaches a node, and no client hears "done", before its
//!   commit);
//! - queries are answered at once; new work (submissions, steps, services, updates, holds,
//!   requeues, node updates) is refused with `ESLURM_WRITING_TO_FILE` before it changes
//!   anything; ending work (cancel, a step's or an allocation's end, a service's deletion)
//!   and node reports are handled in memory and wait for the commit;
//! - no scheduling cycle runs, so nothing new is bound.
//!
//! When a commit succeeds again, the held replies and node messages go out in order. Errors
//! that no free space cures (a GPU bound twice, a corrupt database) still fail stop
//! ([`crate::store::StoreError::may_recover`]).

use super::{prov_id, Controller, Outgoing, Reply};
use crate::store::{AllocOp, StoreError, WriteBatch};
use flotilla_core::job::JobId;
use flotilla_core::sched::Event as CoreEvent;
use flotilla_proto::errno::ESLURM_WRITING_TO_FILE;
use flotilla_proto::{Request, Response, SlurmError};
use tokio::sync::oneshot;
use tracing::{error, info, warn};

/// What a request does to the controller's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Reads only: answered even while commits fail.
    Query,
    /// Adds work or changes it: refused while commits fail.
    NewWork,
    /// Ends work: handled, its reply waits for a commit.
    Ending,
}

/// The class of a request.
pub(super) fn class(req: &Request) -> Class {
    match req {
        Request::QueryJobs(_)
        | Request::QueryNodes(_)
        | Request::QueryPartitions
        | Request::Stats
        | Request::IssueCredential
        | Request::IssueToken { .. }
        | Request::Register(_)
        | Request::Ping
        | Request::Takeover
        | Request::QuerySteps(_)
        | Request::QueryServices { .. }
        | Request::QueryAlerts
        | Request::QueryAcct(_)
        | Request::QueryQueue(_)
        | Request::QueryQueueParts(_)
        | Request::QueryTurns
        | Request::QueryUpdateTimes
        | Request::QueryTurnTimes
        | Request::Diag
        | Request::DiagReset
        | Request::AcctMgrShow
        | Request::QueryShares(_)
        | Request::QueryPriorities(_)
        | Request::QueryElastic { .. }
        | Request::QueryReclaimable
        | Request::QueryPartitionStates => Class::Query,
        Request::SubmitJob(_)
        | Request::SubmitElastic(_)
        | Request::HoldRelease(_)
        | Request::Requeue(_)
        | Request::RequeueSpecialExit(_)
        | Request::UpdateJob(_)
        | Request::UpdateNode(_)
        | Request::UpdatePartition(_)
        | Request::CreateStep(_)
        | Request::ServiceCreate(_)
        | Request::ServiceScale { .. }
        | Request::AcctMgrChange(_) => Class::NewWork,
        Request::CancelJob(_)
        | Request::SignalStep(_)
        | Request::StepComplete(_)
        | Request::ReleaseAllocation(_)
        | Request::ServiceDelete { .. } => Class::Ending,
    }
}

/// The controller's state while its commits fail.
#[derive(Debug, Default)]
pub(super) struct Degraded {
    /// The last commit's error.
    error: String,
    /// Replies of uncommitted turns, in order.
    replies: Vec<(oneshot::Sender<Reply>, Reply)>,
    /// Node messages of uncommitted turns, in order.
    node_out: Vec<(usize, Outgoing)>,
}

impl Degraded {
    /// Replies of uncommitted turns held (`sdiag`'s DBD agent queue size).
    pub(super) fn held(&self) -> usize {
        self.replies.len()
    }
}

impl Controller {
    /// The commit of `batch` failed with `e`: fail stop unless free space or a working disk
    /// may cure it; else keep the batch for the next turn, take this turn's submissions out
    /// again and hold the turn's replies and node messages.
    pub(super) fn commit_failed(&mut self, batch: WriteBatch, e: StoreError, now: i64) {
        if let StoreError::LeaseLost { .. } = e {
            super::step_down(&e);
        }
        if !e.may_recover() {
            // Fail stop (STYLE.md): restart recovers from the last commit.
            panic!("cannot commit controller state: {e}");
        }
        match &self.degraded {
            None => error!("cannot commit controller state: {e}; refusing new work until the state database can be written"),
            Some(d) if d.error != e.to_string() => warn!("commit still failing: {e}"),
            Some(_) => {}
        }
        self.batch = batch;
        self.roll_back_submissions(now);
        let d = self.degraded.get_or_insert_with(Degraded::default);
        d.error = e.to_string();
        d.replies.append(&mut self.replies);
        d.node_out.append(&mut self.node_out);
    }

    /// A commit succeeded: if commits had failed, the held replies and node messages go
    /// first, in their order.
    pub(super) fn commit_succeeded(&mut self) {
        if let Some(mut d) = self.degraded.take() {
            info!(replies = d.replies.len(), messages = d.node_out.len(), "state database written again: accepting new work");
            d.replies.append(&mut self.replies);
            self.replies = d.replies;
            d.node_out.append(&mut self.node_out);
            self.node_out = d.node_out;
        }
    }

    /// Whether commits are failing (no cycle runs, new work is refused).
    pub(super) fn degraded(&self) -> bool {
        self.degraded.is_some()
    }

    /// The last commit's error while commits fail; `None` when the last one succeeded.
    pub fn commit_failing(&self) -> Option<&str> {
        self.degraded.as_ref().map(|d| d.error.as_str())
    }

    /// Takes the jobs this turn's replies call submitted out of memory and the batch, and
    /// answers their submitters `ESLURM_WRITING_TO_FILE` at once.
    fn roll_back_submissions(&mut self, now: i64) {
        let mut kept = Vec::with_capacity(self.replies.len());
        for (tx, r) in std::mem::take(&mut self.replies) {
            match r {
                Reply::Msg(Response::Submitted(s)) => {
                    self.roll_back_job(s.job_id, now);
                    let refused = Response::Error(SlurmError::new(ESLURM_WRITING_TO_FILE));
                    self.answers.push((tx, refused.into()));
                }
                r => kept.push((tx, r)),
            }
        }
        self.replies = kept;
        super::check_core_invariants(&self.sched);
    }

    /// Removes job `id` (and the array tasks it started) from memory and from the batch, as
    /// if it had never been submitted.
    fn roll_back_job(&mut self, id: u64, now: i64) {
        warn!(job = id, "submission refused: its commit failed");
        if let Some(tasks) = self.in_core_tasks.remove(&id) {
            for t in tasks {
                self.core_event(CoreEvent::Cancel(JobId(prov_id(id, t))), now);
            }
        }
        let ids: Vec<u64> = self
            .jobs
            .values()
            .filter(|r| r.id == id || r.array_job_id == Some(id))
            .map(|r| r.id)
            .collect();
        for rid in ids {
            let Some(r) = self.jobs.remove(&rid) else { continue };
            self.submit_charges.mark(rid);
            self.sched.free_job_id(rid);
            self.core_event(CoreEvent::Cancel(r.spec.id), now);
            self.core_map.retain(|_, v| *v != rid);
            self.deps.remove(&rid);
            self.array_metas.remove(&rid);
            for n in &mut self.nodes {
                n.jobs.remove(&rid);
            }
            let b = &mut self.batch;
            b.jobs.remove(&rid);
            b.acct.remove(&rid);
            b.steps.remove(&rid);
            b.scripts.retain(|(j, _, _)| *j != rid);
            b.allocs.retain(|op| match op {
                AllocOp::Insert { job_id, .. } | AllocOp::DeleteJob(job_id) | AllocOp::DeleteNode { job_id, .. } => *job_id != rid,
            });
            b.step_rows.retain(|s| s.job_id != rid);
            b.run_steps.retain(|r| r.job_id != rid);
            b.acct_rows.retain(|a| a.job.job_id != rid);
            self.node_out.retain(|(_, o)| !matches!(o, Outgoing::Bind(j) if *j == rid));
            self.stats.submitted = self.stats.submitted.saturating_sub(1);
        }
    }
}
