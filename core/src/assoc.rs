//! The accounting model: Slurm's associations and QOS with their limits, as the scheduler
//! reads them.
//!
//! The controller builds an [`Accounting`] from the accounting database (what `sacctmgr`
//! edits) and hands it to the core with [`crate::sched::Scheduler::set_accounting`]; the core
//! enforces its limits in the cycle, computes fair share over its tree and derives the quota
//! tree (guarantees and borrowing) from it. Pure data plus lookups: no I/O.
//!
//! Shapes follow Slurm's (`slurmdb_assoc_rec_t`, `slurmdb_qos_rec_t`): an association is a
//! (cluster, account, user, partition) tuple; account associations form a tree under the
//! cluster's `root` account; user associations are its leaves. A limit is `None` when unset
//! (Slurm's `INFINITE`/`NO_VAL`); an unset limit of a user association is inherited from the
//! nearest account association above it that sets one, as `sacctmgr` propagates parent limits
//! ([`AssocTree::inherited`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Slurm's `Fairshare=parent`: the association has no shares of its own; its usage and
/// shares count as its parent's (Fair Tree treats its children as the parent's).
pub const SHARES_PARENT: u32 = u32::MAX;

/// Per-TRES limits (`GrpTRES=cpu=64,mem=500G,node=4,gres/gpu=16,billing=100`); `None` = no
/// limit on that TRES. Units: CPUs, MiB, nodes, GPUs, billing units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TresLimits {
    /// `cpu=`: CPUs.
    #[serde(default)]
    pub cpu: Option<u64>,
    /// `mem=`: MiB.
    #[serde(default)]
    pub mem_mb: Option<u64>,
    /// `node=`: nodes.
    #[serde(default)]
    pub node: Option<u64>,
    /// `gres/gpu=`: GPUs.
    #[serde(default)]
    pub gpu: Option<u64>,
    /// `billing=`: billing units.
    #[serde(default)]
    pub billing: Option<u64>,
}

impl TresLimits {
    /// True when no TRES is limited.
    pub fn is_empty(&self) -> bool {
        *self == TresLimits::default()
    }
}

/// An association's limits as Slurm names them (`sacctmgr modify ... set GrpTRES=...`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssocLimits {
    /// `GrpTRES`: TRES all running jobs of the association and its children may hold.
    #[serde(default)]
    pub grp_tres: TresLimits,
    /// `GrpJobs`: running jobs of the association and its children.
    #[serde(default)]
    pub grp_jobs: Option<u32>,
    /// `GrpSubmit` (`GrpSubmitJobs`): pending and running jobs of the association and its
    /// children.
    #[serde(default)]
    pub grp_submit: Option<u32>,
    /// `MaxJobs`: running jobs per user in the association.
    #[serde(default)]
    pub max_jobs: Option<u32>,
    /// `MaxSubmitJobs`: pending and running jobs per user in the association.
    #[serde(default)]
    pub max_submit_jobs: Option<u32>,
    /// `MaxTRESPerJob` (`MaxTRES`): TRES one job may ask for.
    #[serde(default)]
    pub max_tres_per_job: TresLimits,
    /// `MaxWall` (`MaxWallDurationPerJob`): minutes.
    #[serde(default)]
    pub max_wall_min: Option<u32>,
}

/// Id of an association: its index in [`AssocTree::assocs`] is *not* the id; ids are the
/// database's (`id_assoc`), stable across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AssocId(pub u32);

/// One association.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Association {
    /// Database id (`ID` in `sacctmgr show assoc format=id`).
    pub id: AssocId,
    /// The parent account's association; `None` only for the cluster's `root`.
    pub parent: Option<AssocId>,
    /// Account name (`root` for the root association).
    pub account: String,
    /// User name; `None` for an account association.
    pub user: Option<String>,
    /// Partition; `None` = all partitions.
    pub partition: Option<String>,
    /// `Fairshare=` shares (Slurm's default 1); [`SHARES_PARENT`] for `Fairshare=parent`.
    pub shares: u32,
    /// `Priority=`: added to the job's priority (multifactor's association factor); `None`
    /// unset.
    pub priority: Option<u32>,
    /// Limits set on this association itself (not inherited).
    pub limits: AssocLimits,
    /// `DefaultQOS`; `None` = inherited (finally `normal`).
    pub default_qos: Option<String>,
    /// `QOS=`: the QOS its jobs may use; empty = inherited.
    pub qos: Vec<String>,
    /// Flotilla's `GuaranteedGPUs`: GPUs this scope holds that are never preempted; use above
    /// it borrows (up to `GrpTRES=gres/gpu=N`) and is reclaimed newest-borrowed first.
    pub guaranteed_gpus: u32,
}

impl Association {
    /// An association with Slurm's defaults for a new one (`sacctmgr add`): all partitions,
    /// `Fairshare=1`, no priority, no limits, no QOS of its own, no guarantee. `user`: `None`
    /// for an account association.
    pub fn new(id: AssocId, parent: Option<AssocId>, account: &str, user: Option<&str>) -> Association {
        Association {
            id,
            parent,
            account: account.to_string(),
            user: user.map(str::to_string),
            partition: None,
            shares: 1,
            priority: None,
            limits: AssocLimits::default(),
            default_qos: None,
            qos: Vec::new(),
            guaranteed_gpus: 0,
        }
    }
}

/// Slurm's `PreemptMode` of a QOS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptMode {
    /// `OFF` (the cluster's mode applies).
    #[default]
    Off,
    /// `CANCEL`.
    Cancel,
    /// `REQUEUE`.
    Requeue,
    /// `SUSPEND`.
    Suspend,
}

/// A QOS (`sacctmgr add qos`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qos {
    /// Name (`normal` exists by default).
    pub name: String,
    /// `Priority=` (the multifactor QOS factor is this over the largest QOS priority).
    pub priority: u32,
    /// `GrpTRES`: TRES all running jobs of the QOS may hold.
    #[serde(default)]
    pub grp_tres: TresLimits,
    /// `GrpJobs`.
    #[serde(default)]
    pub grp_jobs: Option<u32>,
    /// `GrpSubmitJobs`.
    #[serde(default)]
    pub grp_submit: Option<u32>,
    /// `MaxJobsPerUser`.
    #[serde(default)]
    pub max_jobs_per_user: Option<u32>,
    /// `MaxSubmitJobsPerUser`.
    #[serde(default)]
    pub max_submit_jobs_per_user: Option<u32>,
    /// `MaxTRESPerJob`.
    #[serde(default)]
    pub max_tres_per_job: TresLimits,
    /// `MaxTRESPerUser`.
    #[serde(default)]
    pub max_tres_per_user: TresLimits,
    /// `MaxWall` (`MaxWallDurationPerJob`): minutes.
    #[serde(default)]
    pub max_wall_min: Option<u32>,
    /// `Preempt=`: the QOS this one may preempt.
    #[serde(default)]
    pub preempt: Vec<String>,
    /// `PreemptMode=`.
    #[serde(default)]
    pub preempt_mode: PreemptMode,
    /// `PreemptExemptTime=`: seconds a job of this QOS runs before it may be preempted.
    #[serde(default)]
    pub preempt_exempt_time_s: Option<u64>,
    /// `Flags=` (Slurm's names: `DenyOnLimit`, `NoReserve`, `OverPartQOS`, ...).
    #[serde(default)]
    pub flags: Vec<String>,
    /// `UsageFactor=` (default 1.0): multiplies the usage its jobs accrue.
    #[serde(default = "one")]
    pub usage_factor: f64,
}

fn one() -> f64 {
    1.0
}

impl Qos {
    /// A QOS with Slurm's defaults: priority 0, no limits, usage factor 1.
    pub fn new(name: &str) -> Qos {
        Qos {
            name: name.to_string(),
            priority: 0,
            grp_tres: TresLimits::default(),
            grp_jobs: None,
            grp_submit: None,
            max_jobs_per_user: None,
            max_submit_jobs_per_user: None,
            max_tres_per_job: TresLimits::default(),
            max_tres_per_user: TresLimits::default(),
            max_wall_min: None,
            preempt: Vec::new(),
            preempt_mode: PreemptMode::Off,
            preempt_exempt_time_s: None,
            flags: Vec::new(),
            usage_factor: 1.0,
        }
    }
}

/// `AccountingStorageEnforce=` (Slurm's `ACCOUNTING_ENFORCE_*`): `limits` implies
/// `associations`, `qos` implies `associations`, `safe` implies `associations,limits`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforce {
    /// `associations`: a job needs a valid association.
    pub associations: bool,
    /// `limits`: association limits are enforced.
    pub limits: bool,
    /// `qos`: a job needs a valid QOS; QOS limits are enforced.
    pub qos: bool,
    /// `safe`: a job that could not finish within `GrpTRESMins`-style limits does not start.
    pub safe: bool,
}

/// Why an association tree is not valid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AssocError {
    /// Two associations with one id.
    #[error("association id {0} used twice")]
    DuplicateId(u32),
    /// Two associations with one (account, user, partition).
    #[error("association {0} given twice")]
    Duplicate(String),
    /// A parent id that is not in the tree, or an account association's parent is a user's.
    #[error("association {0}: parent {1} is not an account association of the tree")]
    BadParent(u32, u32),
    /// No root, more than one, or a cycle.
    #[error("association tree: {0}")]
    Shape(String),
}

/// The association tree of one cluster: the root, account associations, user associations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssocTree {
    /// All associations, parents before children (sorted by depth, then by id).
    assocs: Vec<Association>,
    /// Id → index into `assocs`.
    index: BTreeMap<AssocId, usize>,
    /// account → user or "" → partition or "" → id: nested so that a lookup borrows its
    /// key's strings (the order stage and the usage update ask for many jobs every cycle).
    by_key: BTreeMap<String, BTreeMap<String, BTreeMap<String, AssocId>>>,
}

impl AssocTree {
    /// Builds and checks a tree: ids unique, exactly one root (no parent), every parent an
    /// account association in the tree, no cycle, no (account, user, partition) twice.
    /// Errors: [`AssocError`].
    pub fn new(mut assocs: Vec<Association>) -> Result<AssocTree, AssocError> {
        let mut index = BTreeMap::new();
        for (i, a) in assocs.iter().enumerate() {
            if index.insert(a.id, i).is_some() {
                return Err(AssocError::DuplicateId(a.id.0));
            }
        }
        let roots = assocs.iter().filter(|a| a.parent.is_none()).count();
        if roots != 1 && !assocs.is_empty() {
            return Err(AssocError::Shape(format!("{roots} roots, want 1")));
        }
        for a in &assocs {
            if let Some(p) = a.parent {
                match index.get(&p) {
                    Some(&pi) if assocs[pi].user.is_none() => {}
                    _ => return Err(AssocError::BadParent(a.id.0, p.0)),
                }
            }
        }
        // Depth of each (detects cycles: a depth past the tree's size).
        let mut depth = vec![0usize; assocs.len()];
        for (i, d) in depth.iter_mut().enumerate() {
            let mut cur = assocs[i].parent;
            while let Some(p) = cur {
                *d += 1;
                if *d > assocs.len() {
                    return Err(AssocError::Shape(format!("cycle through association {}", assocs[i].id.0)));
                }
                cur = assocs[index[&p]].parent;
            }
        }
        let mut order: Vec<usize> = (0..assocs.len()).collect();
        order.sort_by_key(|&i| (depth[i], assocs[i].id));
        let mut slots: Vec<Option<Association>> = assocs.drain(..).map(Some).collect();
        let assocs: Vec<Association> = order.iter().map(|&i| slots[i].take().expect("each once")).collect();
        let index: BTreeMap<AssocId, usize> = assocs.iter().enumerate().map(|(i, a)| (a.id, i)).collect();
        let mut by_key: BTreeMap<String, BTreeMap<String, BTreeMap<String, AssocId>>> = BTreeMap::new();
        for a in &assocs {
            let users = by_key.entry(a.account.clone()).or_default();
            let parts = users.entry(a.user.clone().unwrap_or_default()).or_default();
            if parts.insert(a.partition.clone().unwrap_or_default(), a.id).is_some() {
                return Err(AssocError::Duplicate(Self::describe(a)));
            }
        }
        Ok(AssocTree { assocs, index, by_key })
    }

    /// The association keyed (account, user or "", partition or ""), without building a key.
    fn lookup(&self, account: &str, user: &str, partition: &str) -> Option<AssocId> {
        self.by_key.get(account)?.get(user)?.get(partition).copied()
    }

    fn describe(a: &Association) -> String {
        format!(
            "account={} user={} partition={}",
            a.account,
            a.user.as_deref().unwrap_or(""),
            a.partition.as_deref().unwrap_or("")
        )
    }

    /// True when there are no associations (accounting off).
    pub fn is_empty(&self) -> bool {
        self.assocs.is_empty()
    }

    /// Number of associations.
    pub fn len(&self) -> usize {
        self.assocs.len()
    }

    /// All associations, parents before children.
    pub fn assocs(&self) -> &[Association] {
        &self.assocs
    }

    /// The root association, if any.
    pub fn root(&self) -> Option<&Association> {
        self.assocs.first()
    }

    /// The association with id `id`.
    pub fn get(&self, id: AssocId) -> Option<&Association> {
        self.index.get(&id).map(|&i| &self.assocs[i])
    }

    /// The parent of `id`.
    pub fn parent(&self, id: AssocId) -> Option<&Association> {
        self.get(id)?.parent.and_then(|p| self.get(p))
    }

    /// Direct children of `id`, in id order.
    pub fn children(&self, id: AssocId) -> impl Iterator<Item = &Association> + '_ {
        self.assocs.iter().filter(move |a| a.parent == Some(id))
    }

    /// `id` and its ancestors up to the root, nearest first.
    pub fn ancestry(&self, id: AssocId) -> impl Iterator<Item = &Association> + '_ {
        let mut cur = self.get(id);
        std::iter::from_fn(move || {
            let a = cur?;
            cur = a.parent.and_then(|p| self.get(p));
            Some(a)
        })
    }

    /// The account association of `account` (partition-less), if it exists.
    pub fn account(&self, account: &str) -> Option<&Association> {
        self.lookup(account, "", "").and_then(|id| self.get(id))
    }

    /// The association a job of `user` charging `account` in `partition` runs under, as
    /// Slurm picks it (`assoc_mgr_fill_in_assoc`): the user's association for that partition,
    /// else the user's partition-less one; `None` if the user has neither (the job is
    /// refused under `AccountingStorageEnforce=associations`).
    pub fn find(&self, user: &str, account: &str, partition: Option<&str>) -> Option<&Association> {
        let parts = self.by_key.get(account)?.get(user)?;
        partition.and_then(|p| parts.get(p)).or_else(|| parts.get("")).and_then(|&id| self.get(id))
    }

    /// The index of `id` in [`AssocTree::assocs`] (parents before children), for per-
    /// association tables.
    pub fn position(&self, id: AssocId) -> Option<usize> {
        self.index.get(&id).copied()
    }

    /// The QOS a job of association `id` gets when it names none: the nearest `DefaultQOS`
    /// up the chain, else Slurm's `normal`.
    pub fn default_qos(&self, id: AssocId) -> &str {
        self.ancestry(id).find_map(|a| a.default_qos.as_deref()).unwrap_or(crate::job::DEFAULT_QOS)
    }

    /// Whether a job of association `id` may use QOS `qos`: the nearest non-empty `QOS=` list
    /// up the chain names it; with no list anywhere, only `normal` (Slurm gives every new
    /// association `QOS=normal`).
    pub fn allows_qos(&self, id: AssocId, qos: &str) -> bool {
        match self.ancestry(id).find(|a| !a.qos.is_empty()) {
            Some(a) => a.qos.iter().any(|q| q == qos),
            None => qos == crate::job::DEFAULT_QOS,
        }
    }

    /// A limit of `id` with inheritance: the value `pick` reads on `id`, else on the nearest
    /// ancestor where it is set; `None` if no association up to the root sets it.
    pub fn inherited<T: Copy>(&self, id: AssocId, pick: impl Fn(&Association) -> Option<T>) -> Option<T> {
        self.ancestry(id).find_map(pick)
    }
}

/// What the scheduler is given about accounting: the association tree, the QOS and what is
/// enforced. Empty (the default) = accounting off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accounting {
    /// The associations of this cluster.
    pub tree: AssocTree,
    /// The QOS by name.
    pub qos: BTreeMap<String, Qos>,
    /// `AccountingStorageEnforce`.
    pub enforce: Enforce,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>) -> Association {
        Association::new(AssocId(id), parent.map(AssocId), account, user)
    }

    #[test]
    fn builds_finds_and_inherits() {
        let mut research = assoc(2, Some(1), "research", None);
        research.limits.max_jobs = Some(4);
        let mut alice = assoc(3, Some(2), "research", Some("alice"));
        alice.partition = Some("debug".into());
        let bob = assoc(4, Some(2), "research", Some("bob"));
        let t = AssocTree::new(vec![bob, alice, assoc(1, None, "root", None), research]).unwrap();
        assert_eq!(t.root().unwrap().account, "root");
        assert_eq!(t.assocs().iter().map(|a| a.id.0).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert_eq!(t.find("bob", "research", Some("batch")).unwrap().id, AssocId(4));
        assert_eq!(t.find("alice", "research", Some("debug")).unwrap().id, AssocId(3));
        assert!(t.find("alice", "research", Some("batch")).is_none());
        assert_eq!(t.inherited(AssocId(4), |a| a.limits.max_jobs), Some(4));
        assert_eq!(t.inherited(AssocId(1), |a| a.limits.max_jobs), None);
        assert_eq!(t.children(AssocId(2)).count(), 2);
        assert_eq!(t.ancestry(AssocId(4)).map(|a| a.id.0).collect::<Vec<_>>(), vec![4, 2, 1]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 256, ..Default::default() })]
        /// `find` and `account` give what a scan of the associations gives by Slurm's rule:
        /// the user's association for the partition, else its partition-less one.
        #[test]
        fn lookups_match_a_scan(
            keys in proptest::collection::btree_set((0usize..3, 0usize..4, 0usize..3), 0..20),
            queries in proptest::collection::vec((0usize..4, 0usize..5, 0usize..4), 1..30),
        ) {
            let (accounts, users, parts) = (["a", "b", "c", "zz"], ["", "u1", "u2", "u3", "nobody"], ["", "p", "q", "r"]);
            let mut assocs = vec![assoc(1, None, "root", None)];
            // Account associations first, so every user association has a parent.
            let mut id = 1;
            let mut account_id = BTreeMap::new();
            for &(a, u, p) in &keys {
                if u == 0 && p == 0 {
                    id += 1;
                    assocs.push(assoc(id, Some(1), accounts[a], None));
                    account_id.insert(a, id);
                }
            }
            for &(a, u, p) in &keys {
                if u == 0 && p == 0 {
                    continue;
                }
                let parent = *account_id.entry(a).or_insert_with(|| {
                    id += 1;
                    assocs.push(assoc(id, Some(1), accounts[a], None));
                    id
                });
                if u == 0 {
                    continue;
                }
                id += 1;
                let mut x = assoc(id, Some(parent), accounts[a], Some(users[u]));
                x.partition = (p > 0).then(|| parts[p].to_string());
                assocs.push(x);
            }
            let t = AssocTree::new(assocs.clone()).unwrap();
            let scan = |account: &str, user: &str, part: Option<&str>| {
                assocs
                    .iter()
                    .find(|x| x.account == account && x.user.as_deref().unwrap_or("") == user && x.partition.as_deref() == part)
                    .map(|x| x.id)
            };
            for (a, u, p) in queries {
                let part = (p > 0).then_some(parts[p]);
                let want = part.and_then(|p| scan(accounts[a], users[u], Some(p))).or_else(|| scan(accounts[a], users[u], None));
                proptest::prop_assert_eq!(t.find(users[u], accounts[a], part).map(|x| x.id), want);
                proptest::prop_assert_eq!(t.account(accounts[a]).map(|x| x.id), scan(accounts[a], "", None));
            }
        }
    }

    #[test]
    fn refuses_bad_trees() {
        let r = assoc(1, None, "root", None);
        assert_eq!(AssocTree::new(vec![r.clone(), r.clone()]), Err(AssocError::DuplicateId(1)));
        assert!(matches!(
            AssocTree::new(vec![r.clone(), assoc(2, Some(9), "a", None)]),
            Err(AssocError::BadParent(2, 9))
        ));
        assert!(matches!(
            AssocTree::new(vec![r.clone(), assoc(2, Some(1), "a", Some("u")), assoc(3, Some(2), "b", None)]),
            Err(AssocError::BadParent(3, 2))
        ));
        assert!(matches!(AssocTree::new(vec![assoc(1, Some(2), "a", None), assoc(2, Some(1), "b", None)]), Err(AssocError::Shape(_))));
        assert!(matches!(
            AssocTree::new(vec![r, assoc(2, Some(1), "a", None), assoc(3, Some(1), "a", None)]),
            Err(AssocError::Duplicate(_))
        ));
    }
}
