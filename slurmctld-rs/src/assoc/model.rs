//! From the accounting database's rows to what the controller enforces: the core's
//! [`Accounting`] (associations and QOS), the quota tree of guarantees and borrowing, the
//! per-user job limits and the accounts users may charge. TRES strings as Slurm writes them.

use super::AssocDb;
use flotilla_core::assoc::{Accounting, AssocId, AssocLimits, AssocTree, Association, Enforce, PreemptMode, Qos, TresLimits};
use flotilla_core::quota::{QuotaScope, QuotaTree};
use flotilla_proto::acctmgr::{AssocRow, QosRow};
use std::collections::BTreeMap;

/// Parses a TRES list (`cpu=4,mem=500G,node=2,billing=9,gres/gpu=8`; mem in MiB unless a
/// `K`/`M`/`G`/`T` suffix says otherwise). A count of `-1` clears that TRES: it comes back
/// as `Some(None)` in the second result. Errors: an unknown TRES or a bad count, as text.
#[allow(clippy::type_complexity)]
pub fn parse_tres(s: &str) -> Result<Vec<(&'static str, Option<u64>)>, String> {
    let mut out = Vec::new();
    for item in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(|| format!("Invalid TRES '{item}'"))?;
        let name = match k.to_ascii_lowercase().as_str() {
            "cpu" => "cpu",
            "mem" => "mem",
            "node" => "node",
            "billing" => "billing",
            "gres/gpu" => "gres/gpu",
            g if g.starts_with("gres/gpu:") => "gres/gpu",
            _ => return Err(format!("Invalid TRES '{item}'")),
        };
        if v == "-1" {
            out.push((name, None));
            continue;
        }
        let (num, mult) = match (name, v.char_indices().last()) {
            ("mem", Some((i, c))) if c.is_ascii_alphabetic() => {
                let m = match c.to_ascii_uppercase() {
                    'K' => 0,
                    'M' => 1,
                    'G' => 1024,
                    'T' => 1024 * 1024,
                    _ => return Err(format!("Invalid TRES '{item}'")),
                };
                (&v[..i], m)
            }
            _ => (v, 1),
        };
        let n: u64 = num.parse().map_err(|_| format!("Invalid TRES '{item}'"))?;
        out.push((name, Some(if mult == 0 { n / 1024 } else { n * mult })));
    }
    Ok(out)
}

/// A TRES list as [`TresLimits`]. Errors: [`parse_tres`]'s.
pub fn tres_limits(s: &str) -> Result<TresLimits, String> {
    let mut t = TresLimits::default();
    for (k, v) in parse_tres(s)? {
        match k {
            "cpu" => t.cpu = v,
            "mem" => t.mem_mb = v,
            "node" => t.node = v,
            "billing" => t.billing = v,
            _ => t.gpu = v,
        }
    }
    Ok(t)
}

/// `t` as Slurm prints it: TRES id order (cpu, mem, node, billing, gres/gpu), mem in `M`
/// or `G`; empty when nothing is limited.
pub fn fmt_tres(t: &TresLimits) -> String {
    let mut parts = Vec::new();
    if let Some(v) = t.cpu {
        parts.push(format!("cpu={v}"));
    }
    if let Some(v) = t.mem_mb {
        parts.push(if v > 0 && v % 1024 == 0 { format!("mem={}G", v / 1024) } else { format!("mem={v}M") });
    }
    if let Some(v) = t.node {
        parts.push(format!("node={v}"));
    }
    if let Some(v) = t.billing {
        parts.push(format!("billing={v}"));
    }
    if let Some(v) = t.gpu {
        parts.push(format!("gres/gpu={v}"));
    }
    parts.join(",")
}

/// `old` with the TRES of `set` replaced (Slurm merges a `GrpTRES=` into the TRES already
/// limited; `=-1` removes one). Errors: [`parse_tres`]'s.
pub fn merge_tres(old: &str, set: &str) -> Result<String, String> {
    let mut t = tres_limits(old).unwrap_or_default();
    if set == "-1" {
        return Ok(String::new());
    }
    for (k, v) in parse_tres(set)? {
        match k {
            "cpu" => t.cpu = v,
            "mem" => t.mem_mb = v,
            "node" => t.node = v,
            "billing" => t.billing = v,
            _ => t.gpu = v,
        }
    }
    Ok(fmt_tres(&t))
}

fn association(a: &AssocRow) -> Association {
    let tres = |s: &str| tres_limits(s).unwrap_or_default();
    Association {
        id: AssocId(a.id),
        parent: a.parent.map(AssocId),
        account: a.account.clone(),
        user: (!a.user.is_empty()).then(|| a.user.clone()),
        partition: (!a.partition.is_empty()).then(|| a.partition.clone()),
        shares: a.shares,
        priority: a.priority,
        limits: AssocLimits {
            grp_tres: tres(&a.grp_tres),
            grp_jobs: a.grp_jobs,
            grp_submit: a.grp_submit,
            max_jobs: a.max_jobs,
            max_submit_jobs: a.max_submit,
            max_tres_per_job: tres(&a.max_tres_per_job),
            max_wall_min: a.max_wall_min,
        },
        default_qos: (!a.default_qos.is_empty()).then(|| a.default_qos.clone()),
        qos: a.qos.clone(),
        guaranteed_gpus: a.guaranteed_gpus,
    }
}

/// A QOS row as the core's [`Qos`].
pub fn qos(q: &QosRow) -> Qos {
    let tres = |s: &str| tres_limits(s).unwrap_or_default();
    Qos {
        priority: q.priority,
        grp_tres: tres(&q.grp_tres),
        grp_jobs: q.grp_jobs,
        grp_submit: q.grp_submit,
        max_jobs_per_user: q.max_jobs_per_user,
        max_submit_jobs_per_user: q.max_submit_per_user,
        max_tres_per_job: tres(&q.max_tres_per_job),
        max_tres_per_user: tres(&q.max_tres_per_user),
        max_wall_min: q.max_wall_min,
        preempt: q.preempt.clone(),
        preempt_mode: match q.preempt_mode.as_str() {
            "cancel" => PreemptMode::Cancel,
            "requeue" => PreemptMode::Requeue,
            "suspend" => PreemptMode::Suspend,
            _ => PreemptMode::Off,
        },
        preempt_exempt_time_s: q.preempt_exempt_s,
        flags: q.flags.clone(),
        usage_factor: q.usage_factor,
        ..Qos::new(&q.name)
    }
}

/// What the controller builds from the database.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    /// The core's associations and QOS.
    pub accounting: Accounting,
    /// Account and user associations as quota scopes (`user@account`): guarantees,
    /// `GrpTRES=gres/gpu=N` ceilings, `MaxJobs`/`MaxSubmitJobs`.
    pub quotas: QuotaTree,
    /// `(user, account)` pairs users may charge; empty while only Slurm's default objects
    /// exist (every account accepted unless enforced, as before any association).
    pub pairs: Vec<(String, String)>,
    /// Users' `DefaultAccount`s (same rule as `pairs`).
    pub default_accounts: BTreeMap<String, String>,
}

/// Builds [`Derived`] from `db` with `enforce`. A tree the core refuses (cannot happen
/// through `sacctmgr`, which keeps parents) is logged and left out.
pub fn derive(db: &AssocDb, enforce: Enforce) -> Derived {
    let tree = match AssocTree::new(db.assocs.values().map(association).collect()) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("accounting database: {e}; associations not enforced");
            AssocTree::default()
        }
    };
    let accounting = Accounting { tree, qos: db.qos.iter().map(|q| (q.name.clone(), qos(q))).collect(), enforce };
    let mut scopes = Vec::new();
    let account_of = |id: Option<u32>| id.and_then(|p| db.assocs.get(&p)).map(|p| p.account.clone());
    for a in db.assocs.values().filter(|a| a.partition.is_empty()) {
        let gpus = tres_limits(&a.grp_tres).unwrap_or_default().gpu;
        let (name, parent) = if a.user.is_empty() {
            (a.account.clone(), account_of(a.parent))
        } else {
            (format!("{}@{}", a.user, a.account), Some(a.account.clone()))
        };
        scopes.push(QuotaScope {
            name,
            parent,
            guaranteed_gpus: a.guaranteed_gpus,
            max_gpus: gpus.map(|g| g.min(u64::from(u32::MAX)) as u32),
            max_submit_jobs: a.max_submit,
            max_jobs: a.max_jobs,
        });
    }
    let quotas = QuotaTree::new(scopes).unwrap_or_else(|e| {
        tracing::error!("accounting database: quota tree: {e}; quotas off");
        QuotaTree::default()
    });
    let only_defaults = db.assocs.values().all(|a| a.account == "root" && (a.user.is_empty() || a.user == "root"));
    let (pairs, default_accounts) = if only_defaults {
        (Vec::new(), BTreeMap::new())
    } else {
        let pairs = db.assocs.values().filter(|a| !a.user.is_empty()).map(|a| (a.user.clone(), a.account.clone())).collect();
        let defaults = db
            .users
            .values()
            .filter(|u| !u.default_account.is_empty())
            .map(|u| (u.name.clone(), u.default_account.clone()))
            .collect();
        (pairs, defaults)
    };
    Derived { accounting, quotas, pairs, default_accounts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_strings_parse_merge_and_print_as_slurm() {
        let t = tres_limits("gres/gpu=8,cpu=64,mem=2G").unwrap();
        assert_eq!((t.cpu, t.mem_mb, t.gpu), (Some(64), Some(2048), Some(8)));
        assert_eq!(fmt_tres(&t), "cpu=64,mem=2G,gres/gpu=8");
        assert_eq!(merge_tres("cpu=64,gres/gpu=8", "cpu=-1").unwrap(), "gres/gpu=8");
        assert_eq!(merge_tres("cpu=64", "gres/gpu=16").unwrap(), "cpu=64,gres/gpu=16");
        assert_eq!(merge_tres("cpu=64", "-1").unwrap(), "");
        assert!(tres_limits("bogus=1").is_err());
        assert!(tres_limits("cpu=x").is_err());
        assert_eq!(tres_limits("mem=1000").unwrap().mem_mb, Some(1000));
    }
}
