//! Fair share from decayed usage: Slurm's `priority/multifactor` usage accounting and its
//! Fair Tree algorithm (the default `PriorityFlags` since Slurm 19.05).
//!
//! - [`BillingWeights`]: a partition's `TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0`;
//!   [`billing`] the billing rate of an allocation (without weights: its CPUs, as Slurm).
//! - [`ResetPeriod`]: `PriorityUsageResetPeriod`, with its calendar boundaries in UTC.
//! - [`Usage`]: raw usage per association in billing-seconds, charged to the job's
//!   association and all its ancestors, decayed by `PriorityDecayHalfLife` exactly per
//!   elapsed interval (`usage × 2^(−Δt/half_life)`), cleared at each reset boundary. Driven by
//!   the `now` handed in; serialisable so the controller persists it.
//! - [`fair_tree`]: the Fair Tree ranking (`fair_tree.c`, `doc/html/fair_tree.shtml`) and
//!   the values `sshare` prints (`RawShares`, `NormShares`, `RawUsage`, `NormUsage`,
//!   `EffectvUsage`, `LevelFS`, `FairShare`).
//!
//! Pure: no clock, no I/O.

use crate::assoc::{AssocId, AssocTree, SHARES_PARENT};
use crate::cluster::Time;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Slurm's `NO_VAL` as a level FS: the value a `Fairshare=parent` account gets (it sorts
/// above every real value but infinity).
pub const LEVEL_FS_NO_VAL: f64 = 4_294_967_294.0;

/// Why a fair-share setting is not valid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FairShareError {
    /// A `TRESBillingWeights` entry that is not `TRES=number[KMGTP]`.
    #[error("invalid TRESBillingWeights `{0}'")]
    BillingWeights(String),
}

/// A partition's `TRESBillingWeights` (Slurm `slurm_get_tres_weight_array`): billing per
/// allocated CPU, MiB of memory, node and GPU. TRES Flotilla does not allocate (licenses,
/// burst buffers, typed GPUs such as `GRES/gpu:h100`) are accepted and bill nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BillingWeights {
    /// Per CPU (`CPU=`).
    pub cpu: f64,
    /// Per MiB (`Mem=`; `Mem=0.25G` is 0.25 per GiB).
    pub mem_per_mib: f64,
    /// Per node (`Node=`).
    pub node: f64,
    /// Per GPU (`GRES/gpu=`).
    pub gpu: f64,
}

impl BillingWeights {
    /// Parses `CPU=1.0,Mem=0.25G,GRES/gpu=2.0` (names any case). A unit suffix `K`, `M`,
    /// `G`, `T`, `P` scales the weight to one per that many MiB-based units, as Slurm does
    /// (the weight is divided by the suffix's multiple of a mebi-unit: `G` → /1024, `K` →
    /// ×1024). Errors: [`FairShareError::BillingWeights`] on an entry without `=`, an
    /// empty name or a value that is not a non-negative number.
    pub fn parse(text: &str) -> Result<BillingWeights, FairShareError> {
        let mut w = BillingWeights::default();
        let bad = || FairShareError::BillingWeights(text.to_string());
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry.split_once('=').ok_or_else(bad)?;
            let name = name.trim().to_ascii_lowercase();
            let value = value.trim();
            if name.is_empty() {
                return Err(bad());
            }
            let (num, scale) = match value.chars().last() {
                Some(c) if c.is_ascii_alphabetic() => {
                    let scale = match c.to_ascii_uppercase() {
                        'K' => 1024.0,
                        'M' => 1.0,
                        'G' => 1.0 / 1024.0,
                        'T' => 1.0 / (1024.0 * 1024.0),
                        'P' => 1.0 / (1024.0 * 1024.0 * 1024.0),
                        _ => return Err(bad()),
                    };
                    (&value[..value.len() - 1], scale)
                }
                _ => (value, 1.0),
            };
            let n: f64 = num.parse().map_err(|_| bad())?;
            if !n.is_finite() || n < 0.0 {
                return Err(bad());
            }
            let n = n * scale;
            match name.as_str() {
                "cpu" => w.cpu = n,
                "mem" => w.mem_per_mib = n,
                "node" => w.node = n,
                "gres/gpu" => w.gpu = n,
                _ => {}
            }
        }
        Ok(w)
    }
}

/// What an allocation holds, summed over its nodes: CPUs (fractional for milli-CPUs), MiB,
/// nodes, GPUs (fractional for shares of one GPU).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TresAlloc {
    /// CPUs.
    pub cpus: f64,
    /// MiB.
    pub mem_mib: f64,
    /// Nodes.
    pub nodes: f64,
    /// GPUs.
    pub gpus: f64,
}

/// The billing rate (billing units per second of run time) of `alloc` in a partition with
/// `weights`: Σ weight × count; without weights Slurm bills the allocated CPUs.
pub fn billing(weights: Option<&BillingWeights>, alloc: &TresAlloc) -> f64 {
    match weights {
        None => alloc.cpus,
        Some(w) => w.cpu * alloc.cpus + w.mem_per_mib * alloc.mem_mib + w.node * alloc.nodes + w.gpu * alloc.gpus,
    }
}

/// `PriorityUsageResetPeriod`: when all usage is cleared (Slurm `priority_multifactor.c`
/// `_decay_thread`); boundaries are calendar times in UTC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResetPeriod {
    /// `NONE` (default): never.
    #[default]
    None,
    /// `NOW`: once, when the controller starts.
    Now,
    /// `DAILY`: at midnight.
    Daily,
    /// `WEEKLY`: Sunday at midnight.
    Weekly,
    /// `MONTHLY`: the first of the month at midnight.
    Monthly,
    /// `QUARTERLY`: January, April, July and October the first at midnight.
    Quarterly,
    /// `YEARLY`: January the first at midnight.
    Yearly,
}

/// The words `PriorityUsageResetPeriod=` accepts.
pub const RESET_PERIODS: &[&str] = &["NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY"];

impl ResetPeriod {
    /// Parses one of [`RESET_PERIODS`], any case.
    pub fn parse(s: &str) -> Option<ResetPeriod> {
        Some(match s.to_ascii_uppercase().as_str() {
            "NONE" => ResetPeriod::None,
            "NOW" => ResetPeriod::Now,
            "DAILY" => ResetPeriod::Daily,
            "WEEKLY" => ResetPeriod::Weekly,
            "MONTHLY" => ResetPeriod::Monthly,
            "QUARTERLY" => ResetPeriod::Quarterly,
            "YEARLY" => ResetPeriod::Yearly,
            _ => return None,
        })
    }

    /// The latest reset boundary at or before `t` (s since the epoch, UTC); `None` for
    /// `NONE` and `NOW`, which have no calendar boundaries.
    pub fn boundary_at_or_before(self, t: Time) -> Option<Time> {
        use crate::time::calendar::{civil, days_from_civil};
        let t = i64::try_from(t).unwrap_or(i64::MAX);
        let day = t.div_euclid(86_400);
        let (y, m, _, _, _, _) = civil(t);
        let days = match self {
            ResetPeriod::None | ResetPeriod::Now => return None,
            ResetPeriod::Daily => day,
            // 1970-01-01 was a Thursday: day 3 was the first Sunday.
            ResetPeriod::Weekly => day - (day - 3).rem_euclid(7),
            ResetPeriod::Monthly => days_from_civil(y, m, 1),
            ResetPeriod::Quarterly => days_from_civil(y, (m - 1) / 3 * 3 + 1, 1),
            ResetPeriod::Yearly => days_from_civil(y, 1, 1),
        };
        u64::try_from(days * 86_400).ok()
    }
}

/// The usage settings (slurm.conf `PriorityDecayHalfLife`, `PriorityUsageResetPeriod`,
/// `PriorityCalcPeriod`) and the partitions' billing weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageConfig {
    /// `PriorityDecayHalfLife` in seconds (default 7 days); 0 = no decay.
    pub half_life_s: u64,
    /// `PriorityUsageResetPeriod`.
    pub reset: ResetPeriod,
    /// `PriorityCalcPeriod` in seconds (default 5 min): how often the controller persists
    /// usage.
    pub calc_period_s: u64,
    /// Per partition (by index): its `TRESBillingWeights`, `None` = bill CPUs.
    pub billing: Vec<Option<BillingWeights>>,
    /// Per partition (by index): its `PriorityJobFactor` (the partition factor is it over the
    /// largest).
    pub partition_job_factor: Vec<u32>,
}

impl Default for UsageConfig {
    fn default() -> Self {
        UsageConfig {
            half_life_s: 7 * 86_400,
            reset: ResetPeriod::None,
            calc_period_s: 300,
            billing: Vec::new(),
            partition_job_factor: Vec::new(),
        }
    }
}

impl UsageConfig {
    /// The settings of a parsed `slurm.conf`. Errors: a partition's bad
    /// `TRESBillingWeights` ([`FairShareError`]).
    pub fn from_config(conf: &crate::config::ClusterConfig) -> Result<UsageConfig, FairShareError> {
        let p = &conf.priority;
        let billing = conf
            .partitions
            .iter()
            .map(|part| part.tres_billing_weights.as_deref().map(BillingWeights::parse).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UsageConfig {
            half_life_s: p.decay_half_life_s,
            reset: p.usage_reset_period,
            calc_period_s: p.calc_period_s,
            billing,
            partition_job_factor: conf.partitions.iter().map(|p| p.priority_job_factor).collect(),
        })
    }

    /// The partition factor of partition `index` in [0, 1]: its `PriorityJobFactor` over
    /// the largest (Slurm's `norm_priority`); 0 when no partition has a factor.
    pub fn partition_factor(&self, index: usize) -> f64 {
        let max = self.partition_job_factor.iter().copied().max().unwrap_or(0);
        match (self.partition_job_factor.get(index), max) {
            (Some(&f), m) if m > 0 => f64::from(f) / f64::from(m),
            _ => 0.0,
        }
    }
}

/// Raw usage per association (billing-seconds, decayed), with the time it was last brought
/// up to date and the last reset. What the controller persists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Raw usage by association (absent = 0).
    pub raw: BTreeMap<AssocId, f64>,
    /// When usage was last decayed and charged (s); `None` before the first update.
    pub last_update: Option<Time>,
    /// When usage was last cleared by the reset period (s).
    pub last_reset: Option<Time>,
}

impl Usage {
    /// Raw usage of `id` (0 when none).
    pub fn get(&self, id: AssocId) -> f64 {
        self.raw.get(&id).copied().unwrap_or(0.0)
    }

    /// Called when the controller starts (after restoring): `PriorityUsageResetPeriod=NOW`
    /// clears all usage.
    pub fn on_start(&mut self, config: &UsageConfig, now: Time) {
        if config.reset == ResetPeriod::Now {
            self.raw.clear();
            self.last_reset = Some(now);
        }
    }

    /// Brings usage up to `now`: clears it if a reset boundary passed since the last update,
    /// then decays what is left by `2^(−Δt/half_life)` for the Δt elapsed. Returns Δt (s),
    /// the run time to charge the running allocations for (0 on the first call and when
    /// time did not move forward).
    pub fn advance(&mut self, config: &UsageConfig, now: Time) -> u64 {
        let Some(last) = self.last_update else {
            self.last_update = Some(now);
            return 0;
        };
        if now <= last {
            return 0;
        }
        if let Some(b) = config.reset.boundary_at_or_before(now) {
            if b > last {
                self.raw.clear();
                self.last_reset = Some(b);
            }
        }
        let dt = now - last;
        if config.half_life_s > 0 && !self.raw.is_empty() {
            let factor = decay_factor(dt, config.half_life_s);
            for v in self.raw.values_mut() {
                *v *= factor;
            }
        }
        self.last_update = Some(now);
        dt
    }

    /// Adds `amount` billing-seconds to `assoc` and every ancestor up to the root.
    pub fn charge(&mut self, tree: &AssocTree, assoc: AssocId, amount: f64) {
        if amount <= 0.0 || !amount.is_finite() {
            return;
        }
        for a in tree.ancestry(assoc) {
            *self.raw.entry(a.id).or_insert(0.0) += amount;
        }
    }
}

/// The decay over `dt` seconds with half-life `half_life_s` (> 0): `2^(−dt/half_life)`.
pub fn decay_factor(dt: u64, half_life_s: u64) -> f64 {
    (-(dt as f64) / half_life_s as f64).exp2()
}

/// One association's fair-share values, as `sshare` prints them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareRow {
    /// The association.
    pub id: AssocId,
    /// `RawShares` (`Fairshare=`; [`SHARES_PARENT`] for `parent`).
    pub raw_shares: u32,
    /// `NormShares`: shares over the sum of its siblings' shares (a `Fairshare=parent`
    /// association shows its fair-share parent's; 0 for the root, as Slurm).
    pub norm_shares: f64,
    /// `RawUsage`: decayed billing-seconds of it and its children.
    pub raw_usage: f64,
    /// `NormUsage`: raw usage over the root's, at most 1 (0 when the root has none; `sshare`
    /// leaves the root's blank).
    pub norm_usage: f64,
    /// `EffectvUsage`: raw usage over its fair-share parent's (Fair Tree's U); 1 for the
    /// root.
    pub effectv_usage: f64,
    /// `LevelFS`: S/U among its siblings (infinity for no usage, 0 for no shares,
    /// [`LEVEL_FS_NO_VAL`] for a `Fairshare=parent` account); `None` for the root.
    pub level_fs: Option<f64>,
    /// `FairShare`: the fair-share factor in [0, 1] (rank over the number of user
    /// associations); `None` for accounts.
    pub fairshare: Option<f64>,
}

/// The result of a Fair Tree computation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FairTree {
    /// One row per association, in the tree's order (parents before children).
    pub rows: Vec<ShareRow>,
    /// Position of each association in `rows`.
    pub index: BTreeMap<AssocId, usize>,
}

impl FairTree {
    /// The fair-share factor of user association `id` (0 when unknown).
    pub fn factor(&self, id: AssocId) -> f64 {
        self.row(id).and_then(|r| r.fairshare).unwrap_or(0.0)
    }

    /// The row of `id`.
    pub fn row(&self, id: AssocId) -> Option<&ShareRow> {
        self.index.get(&id).map(|&i| &self.rows[i])
    }
}

/// Slurm's Fair Tree (`fair_tree.c` `_apply_priority_fs`, `_calc_tree_fs`):
///
/// - Each association's fair-share parent is its nearest ancestor whose shares are not
///   `parent` (the root counts as a real ancestor); its siblings are the other
///   associations with that fair-share parent, so a `Fairshare=parent` account's children
///   join its parent's sibling set.
/// - S = shares over the siblings' total (a `parent` association adds nothing to it);
///   U = raw usage over the fair-share parent's; Level FS = S/U (infinity when U = 0, 0 when
///   S = 0); a `parent` user gets infinity, a `parent` account [`LEVEL_FS_NO_VAL`].
/// - Depth first from the root, each sibling set is visited by Level FS descending, users
///   before accounts on equal values, else in tree order (Slurm's `qsort` leaves such ties
///   unordered). Each user visited takes the rank counter (which starts at the number of
///   user associations and goes down by one per user); a user tied with the sibling just
///   before it, or first in the set of an account tied with its predecessor, keeps the
///   previous rank instead. Fair share = rank / user associations.
///
/// Slurm 22.05's merging of tied accounts (`_count_tied_accounts`) only counts users after
/// the account, which the sort never places there, so tied accounts are visited one after
/// another, each passing the tie to its first child; so here.
///
/// Cost: O(n log n) for n associations.
pub fn fair_tree(tree: &AssocTree, usage: &Usage) -> FairTree {
    let assocs = tree.assocs();
    let n = assocs.len();
    let index: BTreeMap<AssocId, usize> = assocs.iter().enumerate().map(|(i, a)| (a.id, i)).collect();
    let mut rows: Vec<ShareRow> = assocs
        .iter()
        .map(|a| ShareRow {
            id: a.id,
            raw_shares: a.shares,
            norm_shares: 0.0,
            raw_usage: usage.get(a.id),
            norm_usage: 0.0,
            effectv_usage: 0.0,
            level_fs: None,
            fairshare: None,
        })
        .collect();
    if n == 0 {
        return FairTree { rows, index };
    }
    let parent: Vec<Option<usize>> = assocs.iter().map(|a| a.parent.and_then(|p| index.get(&p).copied())).collect();
    let uses_parent: Vec<bool> = (0..n).map(|i| assocs[i].shares == SHARES_PARENT && parent[i].is_some()).collect();
    // Parents come first, so a parent's fair-share parent is known before its children's.
    let mut fs_parent: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        fs_parent[i] = parent[i].and_then(|p| if uses_parent[p] { fs_parent[p] } else { Some(p) });
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut level_shares = vec![0u64; n];
    for i in 0..n {
        if let Some(p) = fs_parent[i] {
            children[p].push(i);
            if !uses_parent[i] {
                level_shares[p] += u64::from(assocs[i].shares);
            }
        }
    }
    let root_usage = rows[0].raw_usage;
    for i in 0..n {
        let own = match fs_parent[i] {
            // Slurm never normalises the root's shares.
            None => 0.0,
            Some(p) if uses_parent[i] => rows[p].norm_shares,
            Some(p) if level_shares[p] == 0 => 0.0,
            Some(p) => f64::from(assocs[i].shares) / level_shares[p] as f64,
        };
        rows[i].norm_shares = own;
        rows[i].norm_usage = if root_usage > 0.0 { (rows[i].raw_usage / root_usage).min(1.0) } else { 0.0 };
        if fs_parent[i].is_none() {
            // Slurm's root: U = 1 (`priority_p_reconfig`), no level FS.
            rows[i].effectv_usage = 1.0;
        }
        if let Some(p) = fs_parent[i] {
            let pu = rows[p].raw_usage;
            rows[i].effectv_usage = if pu > 0.0 { rows[i].raw_usage / pu } else { 0.0 };
            let user = assocs[i].user.is_some();
            rows[i].level_fs = Some(if uses_parent[i] {
                if user {
                    f64::INFINITY
                } else {
                    LEVEL_FS_NO_VAL
                }
            } else if own == 0.0 {
                0.0
            } else {
                own / rows[i].effectv_usage
            });
        }
    }
    let users = assocs.iter().filter(|a| a.user.is_some()).count() as u32;
    let mut walk = Walk {
        is_user: assocs.iter().map(|a| a.user.is_some()).collect(),
        level: rows.iter().map(|r| r.level_fs.unwrap_or(LEVEL_FS_NO_VAL)).collect(),
        children,
        rank: users,
        rnt: users,
        factor: vec![None; n],
        users,
    };
    let top = std::mem::take(&mut walk.children[0]);
    walk.visit(top, false);
    for (row, f) in rows.iter_mut().zip(walk.factor) {
        row.fairshare = f;
    }
    FairTree { rows, index }
}

/// The depth-first ranking state of [`fair_tree`].
struct Walk {
    is_user: Vec<bool>,
    level: Vec<f64>,
    children: Vec<Vec<usize>>,
    rank: u32,
    rnt: u32,
    factor: Vec<Option<f64>>,
    users: u32,
}

impl Walk {
    fn visit(&mut self, mut set: Vec<usize>, account_tied: bool) {
        // Level FS descending, users first on ties, else tree order (stable sort).
        set.sort_by(|&a, &b| {
            self.level[b]
                .partial_cmp(&self.level[a])
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(self.is_user[b].cmp(&self.is_user[a]))
        });
        // Slurm starts the comparison from NO_VAL.
        let mut prev = LEVEL_FS_NO_VAL;
        for (k, &i) in set.iter().enumerate() {
            let tied = if k == 0 && account_tied { true } else { prev == self.level[i] };
            if self.is_user[i] {
                if !tied {
                    self.rank = self.rnt;
                }
                self.factor[i] = Some(f64::from(self.rank) / f64::from(self.users));
                self.rnt = self.rnt.saturating_sub(1);
            } else {
                let kids = std::mem::take(&mut self.children[i]);
                self.visit(kids, tied);
            }
            prev = self.level[i];
        }
    }
}

#[cfg(test)]
mod tests;
