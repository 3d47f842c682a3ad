//! `sacctmgr`'s changes in the owner task, and the scheduler's accounting rebuilt from the
//! accounting database after each (see [`crate::assoc`]).

use super::{Controller, Ident};
use flotilla_core::quota::QuotaTree;
use crate::job::JobState;
use flotilla_proto::acctmgr::{AcctMgrChange, AcctMgrOutcome, Action};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use flotilla_proto::Response;
use std::sync::Arc;

impl Controller {
    /// A `sacctmgr` change by `ident`: carried out (or, without `commit`, described); a
    /// made change is written in this turn's commit and the scheduler's accounting rebuilt
    /// before the turn's cycle. The caller's name comes from its authenticated uid.
    pub(super) fn acctmgr_change(&mut self, ident: Ident, ch: AcctMgrChange) -> Response {
        let name = if ident.admin { String::new() } else { crate::users::lookup(ident.uid) };
        if ch.action == Action::Delete {
            if let Some(refusal) = self.delete_blocked_by_jobs(&name, ident.admin, &ch) {
                return Response::AcctMgrOutcome(refusal);
            }
        }
        let out = crate::assoc::rpc::change(&mut self.assoc, &name, ident.admin, &ch);
        let ops = self.assoc.take_ops();
        if !ops.is_empty() {
            tracing::info!(uid = ident.uid, rows = ops.len(), "accounting database changed by sacctmgr");
            self.batch.assoc.extend(ops);
            self.apply_accounting();
        }
        Response::AcctMgrOutcome(out)
    }

    /// A delete that would remove an association some started job (running or completing)
    /// charges is refused, as slurmdbd refuses it (`ESLURM_JOBS_RUNNING_ON_ASSOC`, "Job(s)
    /// active, cancel job(s) before remove", each such job listed, exit 1); nothing changes.
    /// The delete is tried on a copy of the database to learn what it would remove. Slurm's
    /// query (`_check_jobs_before_remove`) reads the jobs slurmdbd has recorded as not ended;
    /// the reference listed only started jobs, pending ones of the same association not
    /// (goldens 0169, 0170), and so does this.
    fn delete_blocked_by_jobs(&self, name: &str, admin: bool, ch: &AcctMgrChange) -> Option<AcctMgrOutcome> {
        let mut trial = self.assoc.clone();
        let commit = AcctMgrChange { commit: true, ..ch.clone() };
        if !crate::assoc::rpc::change(&mut trial, name, admin, &commit).changed {
            return None;
        }
        let gone: BTreeSet<(&str, &str)> = self
            .assoc
            .assocs
            .values()
            .filter(|a| !a.user.is_empty() && !trial.assocs.contains_key(&a.id))
            .map(|a| (a.account.as_str(), a.user.as_str()))
            .collect();
        let mut lines = String::new();
        for rec in self.jobs.values() {
            let started = matches!(rec.state, JobState::Running | JobState::Completing);
            if started && !rec.is_array_meta() && gone.contains(&(rec.account.as_str(), rec.user.as_str())) {
                let _ = writeln!(
                    lines,
                    "  JobID = {:<10} C = {:<10} A = {:<10} U = {:<9}",
                    rec.id, self.assoc.cluster, rec.account, rec.user
                );
            }
        }
        if lines.is_empty() {
            return None;
        }
        Some(AcctMgrOutcome {
            stderr: format!(" Error with request: Job(s) active, cancel job(s) before remove\n{lines}"),
            exit_code: 1,
            ..AcctMgrOutcome::default()
        })
    }

    /// Hands what the accounting database says to the scheduler and the checks at
    /// submission: associations and QOS, quotas (when some scope sets a guarantee or a GPU
    /// ceiling: without guarantees every job would count as borrowed), `MaxJobs`/
    /// `MaxSubmitJobs`, the accounts users may charge and their default accounts.
    pub(super) fn apply_accounting(&mut self) {
        if self.assoc.cluster.is_empty() {
            return;
        }
        let d = crate::assoc::model::derive(&self.assoc, self.opts.enforce);
        self.sched.set_accounting(d.accounting);
        let quotas = d.quotas;
        if quotas.has_job_limits() {
            self.sched.set_job_limits(quotas.clone());
            self.opts.job_limits = Some(Arc::new(quotas.clone()));
        } else {
            self.sched.set_job_limits(QuotaTree::default());
            self.opts.job_limits = None;
        }
        self.sched.set_quotas(if quotas.has_limits() { quotas } else { QuotaTree::default() });
        self.opts.access.associations =
            crate::authz::Associations::from_pairs(d.pairs.iter().map(|(u, a)| (u.as_str(), a.as_str())));
        self.opts.admission.default_accounts = d.default_accounts;
        self.sched_dirty = true;
    }
}
