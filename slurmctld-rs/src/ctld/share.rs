//! The fair-share and priority queries: `sshare` (`REQUEST_SHARE_INFO`) and `sprio`
//! (`REQUEST_PRIORITY_FACTORS`), answered from the scheduler's Fair Tree and from the very
//! priority computation its order stage ranks with.

use super::Controller;
use flotilla_core::assoc::{AssocId, AssocTree, SHARES_PARENT};
use flotilla_core::job::JobId;
use flotilla_proto::share::{PrioFactors, PrioQuery, PrioReply, PrioRow, ShareQuery, ShareRow};
use flotilla_proto::Response;

/// The associations in `sshare`'s order (Slurm's `slurmdb_sort_hierarchical_assoc_list`):
/// depth first from the root, each account's user associations first (by user, then
/// partition), then its sub-accounts by name.
fn hierarchical(tree: &AssocTree) -> Vec<AssocId> {
    let mut out = Vec::with_capacity(tree.len());
    let Some(root) = tree.root() else { return out };
    let mut kids: std::collections::BTreeMap<AssocId, Vec<AssocId>> = std::collections::BTreeMap::new();
    for a in tree.assocs() {
        if let Some(p) = a.parent {
            kids.entry(p).or_default().push(a.id);
        }
    }
    let mut stack = vec![root.id];
    while let Some(id) = stack.pop() {
        out.push(id);
        let mut children: Vec<&flotilla_core::assoc::Association> =
            kids.get(&id).map(|v| v.iter().filter_map(|c| tree.get(*c)).collect()).unwrap_or_default();
        children.sort_by(|a, b| {
            (a.user.is_none(), a.user.as_deref().unwrap_or(&a.account), a.partition.as_deref(), a.id).cmp(&(
                b.user.is_none(),
                b.user.as_deref().unwrap_or(&b.account),
                b.partition.as_deref(),
                b.id,
            ))
        });
        stack.extend(children.iter().rev().map(|c| c.id));
    }
    out
}

fn matches(list: &[String], name: &str) -> bool {
    list.is_empty() || list.iter().any(|x| x.eq_ignore_ascii_case(name))
}

impl Controller {
    /// Restores the fair-share usage saved before the restart (its age decays it at the
    /// first cycle; `PriorityUsageResetPeriod=NOW` clears it). Errors: the store's.
    pub(super) fn recover_usage(&mut self, now: i64) -> Result<(), crate::store::StoreError> {
        let usage = self.store.load_usage()?;
        let empty = usage.raw.is_empty();
        self.sched.restore_usage(usage, u64::try_from(now).unwrap_or(0));
        self.usage_saved = Some((now, empty));
        Ok(())
    }

    /// After a cycle: puts the fair-share usage in this turn's batch when
    /// `PriorityCalcPeriod` has passed since it was last saved (an empty usage is written
    /// once, so a cleared usage does not come back after a restart).
    pub(super) fn persist_usage(&mut self, now: i64) {
        let period = i64::try_from(self.sched.usage_config().calc_period_s).unwrap_or(i64::MAX);
        let usage = self.sched.usage();
        let empty = usage.raw.is_empty();
        let due = match self.usage_saved {
            None => true,
            Some((at, was_empty)) => now - at >= period && !(empty && was_empty),
        };
        if due {
            self.batch.fair_usage = Some(usage.clone());
            self.usage_saved = Some((now, empty));
        }
    }

    /// `sshare`: the associations `q` selects (Slurm's `assoc_mgr_get_shares`), with their
    /// fair-share values as of the last cycle.
    pub(super) fn query_shares(&self, q: &ShareQuery) -> Response {
        let acct = self.sched.accounting();
        let fair = self.sched.fair_tree();
        let tree = &acct.tree;
        let mut rows = Vec::new();
        for id in hierarchical(tree) {
            let Some(a) = tree.get(id) else { continue };
            if a.user.as_deref().is_some_and(|u| !matches(&q.users, u)) || !matches(&q.accounts, &a.account) {
                continue;
            }
            let root = a.parent.is_none();
            let f = fair.row(id);
            let parent = match &a.user {
                Some(_) => Some(a.account.clone()),
                None => tree.parent(id).map(|p| p.account.clone()),
            };
            rows.push(ShareRow {
                id: id.0,
                cluster: String::new(),
                account: a.account.clone(),
                parent,
                user: a.user.clone(),
                partition: a.partition.clone(),
                raw_shares: (!root).then_some(a.shares),
                norm_shares: f.map_or(0.0, |r| r.norm_shares),
                raw_usage: f.map_or(0.0, |r| r.raw_usage),
                norm_usage: if root { None } else { Some(f.map_or(0.0, |r| r.norm_usage)) },
                effectv_usage: f.map_or(if root { 1.0 } else { 0.0 }, |r| r.effectv_usage),
                fairshare: if a.user.is_some() { Some(f.and_then(|r| r.fairshare).unwrap_or(0.0)) } else { None },
                level_fs: if a.shares == SHARES_PARENT { None } else { f.and_then(|r| r.level_fs) },
            });
        }
        Response::Shares(rows)
    }

    /// `sprio`: the pending jobs `q` selects with the priority and weighted factors the
    /// scheduler computes for them at `now`, by job id.
    pub(super) fn query_priorities(&self, q: &PrioQuery, now: i64) -> Response {
        let now = u64::try_from(now).unwrap_or(0);
        let conv = |f: flotilla_core::sched::PriorityFactors| PrioFactors {
            age: f.age,
            assoc: f.assoc,
            fairshare: f.fairshare,
            job_size: f.job_size,
            partition: f.partition,
            qos: f.qos,
            site: f.site,
            nice: f.nice,
        };
        let cluster = self.sched.cluster();
        let mut jobs = Vec::new();
        for (&id, rec) in &self.jobs {
            if !q.jobs.is_empty() && !q.jobs.contains(&id) {
                continue;
            }
            let core = rec.spec.id.0;
            if core != id && self.core_map.get(&core) != Some(&id) {
                continue;
            }
            let Some(spec) = self.sched.pending_spec(JobId(core)) else { continue };
            let partition = cluster.partitions.get(spec.partition.0 as usize).map(|p| p.name.clone()).unwrap_or_default();
            if !matches(&q.users, &spec.user) || !matches(&q.partitions, &partition) {
                continue;
            }
            let Some((priority, factors)) = self.sched.priority_of(JobId(core), now) else { continue };
            jobs.push(PrioRow {
                job_id: id,
                user: spec.user.clone(),
                partition,
                priority,
                factors: factors.map(conv).unwrap_or_default(),
            });
        }
        Response::Priorities(PrioReply {
            priority_type: self.sched.priority_name().to_string(),
            weights: self.sched.priority_weights().map(conv).unwrap_or_default(),
            jobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::assoc::Association;

    fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>) -> Association {
        Association::new(AssocId(id), parent.map(AssocId), account, user)
    }

    /// Slurm's order (the reference's `sshare -a`): root, its user associations, then its
    /// accounts by name, each followed by its own.
    #[test]
    fn sshare_order_is_hierarchical_users_first() {
        let tree = AssocTree::new(vec![
            assoc(1, None, "root", None),
            assoc(2, Some(1), "research", None),
            assoc(3, Some(1), "chem", None),
            assoc(4, Some(2), "research", Some("bob")),
            assoc(5, Some(2), "research", Some("alice")),
            assoc(6, Some(1), "root", Some("root")),
            assoc(7, Some(3), "chem", Some("bob")),
            assoc(8, Some(2), "ml", None),
        ])
        .unwrap();
        let names: Vec<String> = hierarchical(&tree)
            .into_iter()
            .map(|id| {
                let a = tree.get(id).unwrap();
                format!("{}:{}", a.account, a.user.as_deref().unwrap_or(""))
            })
            .collect();
        assert_eq!(
            names,
            ["root:", "root:root", "chem:", "chem:bob", "research:", "research:alice", "research:bob", "ml:"]
        );
    }
}
