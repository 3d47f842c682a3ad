//! Quotas with borrowing: the account tree's usage by running jobs, the borrow ledger, the
//! `MaxGPUs` ceiling and the guarantee test; and the `MaxJobs` count of each user's running
//! jobs per association.
//!
//! Inside each quota scope, running jobs fill the guarantee oldest first; the rest borrow,
//! and borrowed work is what preemption reclaims first (newest borrowed first).

use super::{Owner, Scheduler};
use crate::cluster::Time;
use crate::job::{JobId, JobSpec};
use crate::quota::{QuotaTree, ScopeId};
use std::collections::{BTreeMap, HashMap};

impl Scheduler {
    /// Sets the account tree (quota.conf); empty turns quotas off.
    pub fn set_quotas(&mut self, quotas: QuotaTree) {
        self.touch_fit();
        self.quotas = quotas;
        self.scope_used = vec![0; self.quotas.len()];
    }

    /// Sets the tree whose `MaxJobs=` limits each user's running jobs in an association
    /// (Slurm's association `MaxJobs`; pending reason `AssocMaxJobsLimit`); empty: none.
    pub fn set_job_limits(&mut self, tree: QuotaTree) {
        self.touch_fit();
        self.job_limits = tree;
    }

    /// The most running jobs `spec`'s user may have in `spec`'s account (`MaxJobs=` of its
    /// association or the nearest ancestor setting it); `None`: no limit. Service replicas
    /// have none.
    pub(super) fn max_running_jobs(&self, id: JobId, spec: &JobSpec) -> Option<u32> {
        if self.job_limits.is_empty() || self.replica_service.contains_key(&id) {
            return None;
        }
        self.job_limits.job_limits(&spec.user, &spec.account).1
    }

    /// Running jobs per (user, account), service replicas left out: what `MaxJobs=` counts.
    pub(super) fn running_per_association(&self) -> HashMap<(String, String), u32> {
        let mut m: HashMap<(String, String), u32> = HashMap::new();
        for (id, r) in &self.running {
            if !self.replica_service.contains_key(id) {
                *m.entry((r.spec.user.clone(), r.spec.account.clone())).or_default() += 1;
            }
        }
        m
    }

    /// Sets the associations, QOS and enforcement (the accounting database's, as `sacctmgr`
    /// edits it); the default turns accounting off.
    pub fn set_accounting(&mut self, accounting: crate::assoc::Accounting) {
        self.touch_fit();
        self.accounting = accounting;
        self.acct_gen += 1;
        self.limit_cache.clear();
    }

    /// The associations, QOS and enforcement in force.
    pub fn accounting(&self) -> &crate::assoc::Accounting {
        &self.accounting
    }

    /// The account tree.
    pub fn quotas(&self) -> &QuotaTree {
        &self.quotas
    }

    /// The borrow ledger: running jobs beyond their guarantee and since when (s).
    pub fn borrow_ledger(&self) -> &BTreeMap<JobId, Time> {
        &self.borrowed
    }

    /// Recomputes quota usage and the borrow ledger: inside each scope, running jobs fill the
    /// guarantee oldest first; the rest borrow.
    pub(super) fn refresh_quota(&mut self, now: Time) {
        if self.quotas.is_empty() {
            return;
        }
        self.scope_used = vec![0; self.quotas.len()];
        let mut by_scope: BTreeMap<ScopeId, Vec<(Time, JobId, u32)>> = BTreeMap::new();
        for (id, r) in &self.running {
            if r.service().is_some() {
                continue;
            }
            if let Some(sc) = self.quotas.scope_of(&r.spec.user, &r.spec.account) {
                let g = r.gpus();
                for a in self.quotas.chain(sc) {
                    self.scope_used[a.0 as usize] += g;
                }
                // An elastic job's grown part is always borrowed: only its base fills the
                // guarantee.
                by_scope.entry(sc).or_default().push((r.start, *id, g - r.grown_gpus()));
            }
        }
        let mut borrowed: BTreeMap<JobId, Time> = BTreeMap::new();
        for (sc, mut jobs) in by_scope {
            jobs.sort_unstable();
            let guarantee = self.quotas.scope(sc).guaranteed_gpus;
            let mut used = 0u32;
            for (_, id, g) in jobs {
                used += g;
                if used > guarantee {
                    borrowed.insert(id, self.borrowed.get(&id).copied().unwrap_or(now));
                }
            }
        }
        let cluster = &self.cluster;
        for (id, r) in self.running.iter_mut() {
            let b = borrowed.contains_key(id);
            let grown: Vec<_> = r.grown.iter().flat_map(|g| g.allocs.iter().copied()).collect();
            for a in &mut r.allocs {
                let pool = matches!(a.owner, Owner::Job(_)) && cluster.node(a.part.node).inference_pool;
                a.borrowed = b || pool || grown.contains(&a.id);
            }
        }
        self.borrowed = borrowed;
    }

    /// True when starting `spec` would take its scope or an ancestor past `max_gpus`.
    pub(super) fn over_max(&self, spec: &JobSpec) -> bool {
        let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) else {
            return false;
        };
        let g = spec.request.gpus;
        self.quotas.chain(sc).any(|a| {
            self.quotas
                .scope(a)
                .max_gpus
                .is_some_and(|m| self.scope_used.get(a.0 as usize).copied().unwrap_or(0) + g > m)
        })
    }

    /// Charges a started job to its scopes (usage changes within a cycle).
    pub(super) fn charge(&mut self, spec: &JobSpec, gpus: u32, now: Time) {
        if let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) {
            let chain: Vec<ScopeId> = self.quotas.chain(sc).collect();
            for a in chain {
                if let Some(u) = self.scope_used.get_mut(a.0 as usize) {
                    *u += gpus;
                }
            }
            // The newest work of a scope is what exceeds its guarantee: it borrows from now.
            if self.scope_used.get(sc.0 as usize).copied().unwrap_or(0) > self.quotas.scope(sc).guaranteed_gpus {
                self.borrowed.insert(spec.id, now);
            }
        }
    }

    /// Charges an elastic job's growth of `gpus` to its scopes (within a cycle; always
    /// borrowed, so the borrow ledger is untouched).
    pub(super) fn charge_growth(&mut self, spec: &JobSpec, gpus: u32) {
        if let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) {
            let chain: Vec<ScopeId> = self.quotas.chain(sc).collect();
            for a in chain {
                if let Some(u) = self.scope_used.get_mut(a.0 as usize) {
                    *u += gpus;
                }
            }
        }
    }

    /// True when `spec` would run inside its scope's guarantee.
    pub(super) fn within_guarantee(&self, spec: &JobSpec) -> bool {
        let Some(sc) = self.quotas.scope_of(&spec.user, &spec.account) else {
            return false;
        };
        let used = self.scope_used.get(sc.0 as usize).copied().unwrap_or(0);
        used + spec.request.gpus <= self.quotas.scope(sc).guaranteed_gpus
    }
}
