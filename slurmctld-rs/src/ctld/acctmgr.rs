//! `sacctmgr`'s changes in the owner task, and the scheduler's accounting rebuilt from the
//! accounting database after each (see [`crate::assoc`]).

use super::{Controller, Ident};
use flotilla_core::quota::QuotaTree;
use flotilla_proto::acctmgr::AcctMgrChange;
use flotilla_proto::Response;
use std::sync::Arc;

impl Controller {
    /// A `sacctmgr` change by `ident`: carried out (or, without `commit`, described); a
    /// made change is written in this turn's commit and the scheduler's accounting rebuilt
    /// before the turn's cycle. The caller's name comes from its authenticated uid.
    pub(super) fn acctmgr_change(&mut self, ident: Ident, ch: AcctMgrChange) -> Response {
        let name = if ident.admin { String::new() } else { crate::users::lookup(ident.uid) };
        let out = crate::assoc::rpc::change(&mut self.assoc, &name, ident.admin, &ch);
        let ops = self.assoc.take_ops();
        if !ops.is_empty() {
            tracing::info!(uid = ident.uid, rows = ops.len(), "accounting database changed by sacctmgr");
            self.batch.assoc.extend(ops);
            self.apply_accounting();
        }
        Response::AcctMgrOutcome(out)
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
