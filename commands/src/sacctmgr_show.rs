//! `sacctmgr show|list`: Slurm 22.05's fields (`src/sacctmgr/common.c`
//! `sacctmgr_process_format_field`: names matched by prefix, headers, widths), rows in its
//! order (associations hierarchically: an account, its users, then its sub-accounts) and
//! its three layouts (columns, `-p`, `-P`).

use flotilla_core::time::{mins2time_str, secs2time_str};
use flotilla_proto::acctmgr::{AcctData, AssocRow, Entity, QosRow};
use std::collections::BTreeMap;

/// One column: canonical name, shortest prefix accepted, header, width (negative: left).
type Spec = (&'static str, usize, &'static str, i32);

/// Fields in Slurm's matching order.
const FIELDS: &[Spec] = &[
    ("Account", 3, "Account", 10),
    ("Acct", 4, "Account", 10),
    ("AdminLevel", 2, "Admin", 9),
    ("Clusters", 2, "Cluster", 10),
    ("ControlHost", 8, "ControlHost", 15),
    ("ControlPort", 8, "ControlPort", 12),
    ("DefaultAccount", 8, "Def Acct", 10),
    ("DefaultQOS", 8, "Def QOS", 9),
    ("Description", 3, "Descr", 20),
    ("Flags", 2, "Flags", 20),
    ("GraceTime", 3, "GraceTime", 10),
    ("GrpCPUs", 6, "GrpCPUs", 8),
    ("GrpCPUMins", 7, "GrpCPUMins", 11),
    ("GrpTRES", 7, "GrpTRES", 13),
    ("GrpTRESMins", 7, "GrpTRESMins", 13),
    ("GrpTRESRunMins", 10, "GrpTRESRunMins", 13),
    ("GrpJobs", 4, "GrpJobs", 7),
    ("GrpMemory", 4, "GrpMem", 7),
    ("GrpNodes", 4, "GrpNodes", 8),
    ("GrpSubmitJobs", 4, "GrpSubmit", 9),
    ("GrpWall", 4, "GrpWall", 11),
    ("GuaranteedGPUs", 3, "GuaranteedGPUs", 14),
    ("ID", 2, "ID", 6),
    ("MaxCPUMins", 7, "MaxCPUMins", 11),
    ("MaxCPUs", 5, "MaxCPUs", 8),
    ("MaxTRES", 7, "MaxTRES", 13),
    ("MaxTRESPerJob", 8, "MaxTRES", 13),
    ("MaxTRESPerNode", 11, "MaxTRESPerNode", 14),
    ("MaxTRESMins", 8, "MaxTRESMins", 13),
    ("MaxTRESPA", 9, "MaxTRESPA", 13),
    ("MaxTRESPU", 9, "MaxTRESPU", 13),
    ("MaxTRESPerUser", 11, "MaxTRESPU", 13),
    ("MaxJobs", 4, "MaxJobs", 7),
    ("MaxJobsPA", 9, "MaxJobsPA", 9),
    ("MaxJobsPU", 9, "MaxJobsPU", 9),
    ("MaxJobsPerUser", 10, "MaxJobsPU", 9),
    ("MaxNodes", 4, "MaxNodes", 8),
    ("MaxSubmitJobs", 4, "MaxSubmit", 9),
    ("MaxSubmitPA", 11, "MaxSubmitPA", 11),
    ("MaxSubmitPU", 11, "MaxSubmitPU", 11),
    ("MaxSubmitJobsPerUser", 15, "MaxSubmitPU", 11),
    ("MaxWall", 4, "MaxWall", 11),
    ("MinTRES", 4, "MinTRES", 13),
    ("Name", 2, "Name", 10),
    ("Organization", 1, "Org", 20),
    ("ParentID", 7, "ParentID", 8),
    ("ParentName", 7, "ParentName", 10),
    ("Partition", 4, "Partition", 10),
    ("PreemptMode", 8, "PreemptMode", 11),
    ("PreemptExemptTime", 8, "PreemptExemptTime", 19),
    ("Preempt", 7, "Preempt", 10),
    ("Priority", 3, "Priority", 10),
    ("QOSLevel", 3, "QOS", 20),
    ("RPC", 1, "RPC", 5),
    ("Share", 1, "Share", 9),
    ("FairShare", 2, "Share", 9),
    ("UsageFactor", 6, "UsageFactor", 11),
    ("UsageThres", 6, "UsageThres", 10),
    ("User", 1, "User", 10),
];

/// A column chosen by `format=`: its spec and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Canonical name.
    pub name: &'static str,
    /// Header.
    pub header: &'static str,
    /// Width; negative: left-justified.
    pub width: i32,
}

/// The column `w` names (`Name` or `Name%N`). Errors: Slurm's `Unknown field '...'`.
pub fn column(w: &str) -> Result<Column, String> {
    let (name, width) = match w.split_once('%') {
        Some((n, v)) => (n, v.parse::<i32>().ok()),
        None => (w, None),
    };
    let l = name.to_ascii_lowercase();
    let spec = FIELDS
        .iter()
        .find(|(n, min, _, _)| {
            let n = n.to_ascii_lowercase();
            n == l || (l.len() >= *min && n.starts_with(&l))
        })
        .ok_or_else(|| format!("Unknown field '{}'\n", w.to_ascii_lowercase()))?;
    Ok(Column { name: spec.0, header: spec.2, width: width.unwrap_or(spec.3) })
}

/// The default columns of `entity` (`withassoc`: with the association's).
pub fn default_format(entity: Entity, withassoc: bool) -> &'static str {
    match (entity, withassoc) {
        (Entity::Assoc, _) => "Cluster,Account,User,Partition,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpWall,GrpTRESMins,MaxJobs,MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins",
        (Entity::Account, false) => "Account,Descr,Org",
        (Entity::Account, true) => "Account,Descr,Org,Cluster,ParentName,User,Share,Priority,GrpJobs,GrpNodes,GrpCPUs,GrpMem,GrpSubmit,GrpWall,GrpCPUMins,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,MaxCPUMins,QOS,DefaultQOS",
        (Entity::User, false) => "User,DefaultAccount,Admin",
        (Entity::User, true) => "User,DefaultAccount,Admin,Cluster,Account,Partition,Share,Priority,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,MaxCPUMins,QOS,DefaultQOS",
        (Entity::Qos, _) => "Name,Priority,GraceTime,Preempt,PreemptExemptTime,PreemptMode,Flags%40,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJobs,GrpSubmit,GrpWall,MaxTRES,MaxTRESPerNode,MaxTRESMins,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU,MaxTRESPA,MaxJobsPA,MaxSubmitPA,MinTRES",
        (Entity::Cluster, _) => "Cluster,ControlHost,ControlPort,RPC,Share,GrpJobs,GrpTRES,GrpSubmit,MaxJobs,MaxTRES,MaxSubmit,MaxWall,QOS,DefaultQOS",
    }
}

/// How rows are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// `-n`.
    pub noheader: bool,
    /// `-p`: `|` after every field.
    pub parsable: bool,
    /// `-P`: `|` between fields.
    pub parsable2: bool,
}

/// Prints `rows` under `cols` (Slurm's `print_fields`: right-justified to the width, a
/// value too long cut with `+`; a header too long cut).
pub fn render(cols: &[Column], rows: &[Vec<String>], layout: Layout) -> String {
    let mut s = String::new();
    let parsable = layout.parsable || layout.parsable2;
    let line = |s: &mut String, vals: &mut dyn Iterator<Item = (Column, &str)>, header: bool| {
        let mut first = true;
        for (c, v) in vals {
            if parsable {
                if layout.parsable2 && !first {
                    s.push('|');
                }
                s.push_str(v);
                if layout.parsable {
                    s.push('|');
                }
            } else {
                let w = c.width.unsigned_abs() as usize;
                let n = v.chars().count();
                let v: String = if n > w && !header {
                    v.chars().take(w.saturating_sub(1)).chain(std::iter::once('+')).collect()
                } else {
                    v.chars().take(w).collect()
                };
                if c.width < 0 {
                    s.push_str(&format!("{v:<w$} "));
                } else {
                    s.push_str(&format!("{v:>w$} "));
                }
            }
            first = false;
        }
        s.push('\n');
    };
    if !layout.noheader {
        line(&mut s, &mut cols.iter().map(|c| (*c, c.header)), true);
        if !parsable {
            for c in cols {
                s.push_str(&"-".repeat(c.width.unsigned_abs() as usize));
                s.push(' ');
            }
            s.push('\n');
        }
    }
    for r in rows {
        line(&mut s, &mut cols.iter().copied().zip(r.iter().map(String::as_str)), false);
    }
    s
}

/// Lookups over the rows: associations by id, the cluster's name.
#[derive(Debug)]
pub struct View<'a> {
    data: &'a AcctData,
    by_id: BTreeMap<u32, &'a AssocRow>,
    cluster: String,
}

fn num(v: Option<u32>) -> String {
    v.map_or(String::new(), |n| n.to_string())
}

fn tres_item(t: &str, name: &str) -> String {
    t.split(',').find_map(|i| i.strip_prefix(name).and_then(|r| r.strip_prefix('='))).unwrap_or("").to_string()
}

impl<'a> View<'a> {
    /// Over `data`.
    pub fn new(data: &'a AcctData) -> View<'a> {
        let cluster = data.clusters.iter().find(|c| c.rpc != 0).or(data.clusters.first()).map_or(String::new(), |c| c.name.clone());
        View { data, by_id: data.assocs.iter().map(|a| (a.id, a)).collect(), cluster }
    }

    fn inherited<T: Clone>(&self, a: &AssocRow, pick: impl Fn(&AssocRow) -> Option<T>) -> Option<T> {
        let mut cur = Some(a);
        while let Some(x) = cur {
            if let Some(v) = pick(x) {
                return Some(v);
            }
            cur = x.parent.and_then(|p| self.by_id.get(&p).copied());
        }
        None
    }

    /// Depth of `a` under root (root 0).
    fn depth(&self, a: &AssocRow) -> usize {
        let mut d = 0;
        let mut cur = a.parent;
        while let Some(p) = cur {
            d += 1;
            cur = self.by_id.get(&p).and_then(|x| x.parent);
            if d > self.by_id.len() {
                break;
            }
        }
        d
    }

    /// Associations in Slurm's order: each account, its users (name; a partition's before
    /// the partition-less), then its sub-accounts (name), depth first from root.
    pub fn ordered(&self) -> Vec<&'a AssocRow> {
        let mut kids: BTreeMap<Option<u32>, Vec<&AssocRow>> = BTreeMap::new();
        for a in &self.data.assocs {
            kids.entry(a.parent).or_default().push(a);
        }
        let mut out = Vec::with_capacity(self.data.assocs.len());
        let mut stack: Vec<&AssocRow> = kids.get(&None).cloned().unwrap_or_default();
        stack.reverse();
        while let Some(a) = stack.pop() {
            out.push(a);
            if !a.user.is_empty() {
                continue;
            }
            let mut c = kids.get(&Some(a.id)).cloned().unwrap_or_default();
            c.sort_by(|x, y| {
                (!x.user.is_empty()).cmp(&!y.user.is_empty()).reverse().then_with(|| {
                    (&x.user, &x.account).cmp(&(&y.user, &y.account)).then_with(|| y.partition.cmp(&x.partition))
                })
            });
            stack.extend(c.into_iter().rev());
        }
        out
    }

    /// Field `c` of association `a` (`tree`: the account indented by depth).
    pub fn assoc_field(&self, c: &str, a: &AssocRow, tree: bool) -> String {
        match c {
            "Account" | "Acct" if tree => {
                let d = self.depth(a);
                format!("{}{}", " ".repeat(d), a.account)
            }
            "Account" | "Acct" => a.account.clone(),
            "Clusters" => self.cluster.clone(),
            "User" => a.user.clone(),
            "Partition" => a.partition.clone(),
            "Share" | "FairShare" => if a.shares == u32::MAX { "parent".into() } else { a.shares.to_string() },
            "Priority" => num(self.inherited(a, |x| x.priority)),
            "GrpJobs" => num(a.grp_jobs),
            "GrpSubmitJobs" => num(a.grp_submit),
            "GrpTRES" => a.grp_tres.clone(),
            "GrpCPUs" => tres_item(&a.grp_tres, "cpu"),
            "GrpMemory" => tres_item(&a.grp_tres, "mem"),
            "GrpNodes" => tres_item(&a.grp_tres, "node"),
            "GrpWall" => a.grp_wall_min.map_or(String::new(), mins2time_str),
            "MaxJobs" => num(self.inherited(a, |x| x.max_jobs)),
            "MaxSubmitJobs" => num(self.inherited(a, |x| x.max_submit)),
            "MaxTRES" | "MaxTRESPerJob" => self.inherited(a, |x| (!x.max_tres_per_job.is_empty()).then(|| x.max_tres_per_job.clone())).unwrap_or_default(),
            "MaxCPUs" => tres_item(&self.assoc_field("MaxTRES", a, false), "cpu"),
            "MaxNodes" => tres_item(&self.assoc_field("MaxTRES", a, false), "node"),
            "MaxTRESPerNode" => self.inherited(a, |x| (!x.max_tres_per_node.is_empty()).then(|| x.max_tres_per_node.clone())).unwrap_or_default(),
            "MaxWall" => self.inherited(a, |x| x.max_wall_min).map_or(String::new(), mins2time_str),
            "QOSLevel" => {
                let mut q = self.inherited(a, |x| (!x.qos.is_empty()).then(|| x.qos.clone())).unwrap_or_default();
                q.sort();
                q.join(",")
            }
            "DefaultQOS" => self.inherited(a, |x| (!x.default_qos.is_empty()).then(|| x.default_qos.clone())).unwrap_or_default(),
            "ID" => a.id.to_string(),
            "ParentID" => a.parent.map_or(String::new(), |p| p.to_string()),
            "ParentName" if a.user.is_empty() => a.parent.and_then(|p| self.by_id.get(&p)).map_or(String::new(), |p| p.account.clone()),
            "GuaranteedGPUs" => a.guaranteed_gpus.to_string(),
            _ => String::new(),
        }
    }

    /// Field `c` of a QOS.
    pub fn qos_field(&self, c: &str, q: &QosRow) -> String {
        match c {
            "Name" => q.name.clone(),
            "Description" => q.description.clone(),
            "Priority" => q.priority.to_string(),
            "GraceTime" => secs2time_str(q.grace_time_s as i64),
            "Preempt" => q.preempt.join(","),
            "PreemptMode" => q.preempt_mode.clone(),
            "PreemptExemptTime" => q.preempt_exempt_s.map_or(String::new(), |s| secs2time_str(s as i64)),
            "Flags" => q.flags.join(","),
            "UsageFactor" => format!("{:.6}", q.usage_factor),
            "GrpTRES" => q.grp_tres.clone(),
            "GrpJobs" => num(q.grp_jobs),
            "GrpSubmitJobs" => num(q.grp_submit),
            "GrpWall" => q.grp_wall_min.map_or(String::new(), mins2time_str),
            "MaxTRES" | "MaxTRESPerJob" => q.max_tres_per_job.clone(),
            "MaxTRESPU" | "MaxTRESPerUser" => q.max_tres_per_user.clone(),
            "MaxJobsPU" | "MaxJobsPerUser" => num(q.max_jobs_per_user),
            "MaxSubmitPU" | "MaxSubmitJobsPerUser" => num(q.max_submit_per_user),
            "MaxWall" => q.max_wall_min.map_or(String::new(), mins2time_str),
            _ => String::new(),
        }
    }

    /// The table of `entity` for `cols`, filtered by `conds` (lower-cased keys) and
    /// `names`.
    pub fn rows(&self, entity: Entity, cols: &[Column], conds: &Conds, withassoc: bool, tree: bool) -> Vec<Vec<String>> {
        let pick = |a: &AssocRow| conds.assoc(a, &self.cluster);
        match entity {
            Entity::Assoc => self.ordered().into_iter().filter(|a| pick(a)).map(|a| cols.iter().map(|c| self.assoc_field(c.name, a, tree)).collect()).collect(),
            Entity::Qos => self
                .data
                .qos
                .iter()
                .filter(|q| conds.names.is_empty() || conds.names.contains(&q.name))
                .map(|q| cols.iter().map(|c| self.qos_field(c.name, q)).collect())
                .collect(),
            Entity::Cluster => {
                let root = self.data.assocs.iter().find(|a| a.parent.is_none());
                self.data
                    .clusters
                    .iter()
                    .filter(|c| conds.names.is_empty() || conds.names.contains(&c.name))
                    .map(|cl| {
                        cols.iter()
                            .map(|c| match c.name {
                                "Clusters" => cl.name.clone(),
                                "ControlHost" => cl.control_host.clone(),
                                "ControlPort" => cl.control_port.to_string(),
                                "RPC" => cl.rpc.to_string(),
                                f => root.filter(|_| cl.name == self.cluster).map_or(String::new(), |r| self.assoc_field(f, r, false)),
                            })
                            .collect()
                    })
                    .collect()
            }
            Entity::Account => self.account_rows(cols, conds, withassoc),
            Entity::User => self.user_rows(cols, conds, withassoc),
        }
    }

    fn account_rows(&self, cols: &[Column], conds: &Conds, withassoc: bool) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for acct in self.data.accounts.iter().filter(|a| conds.names.is_empty() || conds.names.contains(&a.name)) {
            let own = |c: &str| match c {
                "Account" | "Acct" => Some(acct.name.clone()),
                "Description" => Some(acct.description.clone()),
                "Organization" => Some(acct.organization.clone()),
                _ => None,
            };
            if !withassoc {
                out.push(cols.iter().map(|c| own(c.name).unwrap_or_default()).collect());
                continue;
            }
            let mut assocs: Vec<&AssocRow> = self.data.assocs.iter().filter(|a| a.account == acct.name).collect();
            assocs.sort_by(|x, y| (!x.user.is_empty(), &y.user).cmp(&(!y.user.is_empty(), &x.user)));
            for a in assocs {
                out.push(cols.iter().map(|c| own(c.name).unwrap_or_else(|| self.assoc_field(c.name, a, false))).collect());
            }
        }
        out
    }

    fn user_rows(&self, cols: &[Column], conds: &Conds, withassoc: bool) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let per_assoc = withassoc || cols.iter().any(|c| matches!(c.name, "Account" | "Acct" | "Partition" | "MaxJobs" | "Share"));
        for u in self.data.users.iter().filter(|u| conds.names.is_empty() || conds.names.contains(&u.name)) {
            let own = |c: &str| match c {
                "User" | "Name" => Some(u.name.clone()),
                "DefaultAccount" => Some(u.default_account.clone()),
                "AdminLevel" => Some(u.admin_level.as_str().to_string()),
                _ => None,
            };
            if !per_assoc {
                out.push(cols.iter().map(|c| own(c.name).unwrap_or_default()).collect());
                continue;
            }
            let mut assocs: Vec<&AssocRow> = self.data.assocs.iter().filter(|a| a.user == u.name && conds.assoc(a, &self.cluster)).collect();
            assocs.sort_by(|x, y| (&x.account, &y.partition).cmp(&(&y.account, &x.partition)).then(std::cmp::Ordering::Equal));
            assocs.sort_by(|x, y| x.account.cmp(&y.account).then_with(|| y.partition.cmp(&x.partition)));
            for a in assocs {
                out.push(cols.iter().map(|c| own(c.name).unwrap_or_else(|| self.assoc_field(c.name, a, false))).collect());
            }
        }
        out
    }
}

/// `where` conditions of a `show`.
#[derive(Debug, Clone, Default)]
pub struct Conds {
    /// Names (bare words, `name=`).
    pub names: Vec<String>,
    /// `account=`.
    pub accounts: Vec<String>,
    /// `user=`.
    pub users: Vec<String>,
    /// `partition=`.
    pub partitions: Vec<String>,
    /// `cluster=`.
    pub clusters: Vec<String>,
    /// `id=`.
    pub ids: Vec<String>,
}

impl Conds {
    /// Whether association `a` of `cluster` passes.
    pub fn assoc(&self, a: &AssocRow, cluster: &str) -> bool {
        let ok = |l: &Vec<String>, v: &str| l.is_empty() || l.iter().any(|x| x == v);
        ok(&self.accounts, &a.account)
            && ok(&self.users, &a.user)
            && ok(&self.partitions, &a.partition)
            && ok(&self.clusters, cluster)
            && ok(&self.ids, &a.id.to_string())
    }
}
