//! `sacctmgr add|modify|delete`: the change on the accounting database and the text
//! Slurm 22.05 prints for it (`src/sacctmgr/{account,user,qos,cluster}_functions.c` and
//! slurmdbd's `as_mysql_{assoc,user}.c` object lines), reimplemented.
//!
//! Only admins change anything: root, `SlurmUser`, or a user with `AdminLevel=Operator` or
//! `Administrator`. Another user's change is refused with slurmdbd's texts (an `add` still
//! prints its summary first, as `sacctmgr` prints it before asking the database).

use super::model::merge_tres;
use super::{new_qos, AssocDb};
use flotilla_core::time::{time_str2mins, SlurmDuration};
use flotilla_proto::acctmgr::{AccountRow, Action, AcctMgrChange, AcctMgrOutcome, AdminLevel, AssocRow, Entity, QosRow, UserRow};
use std::fmt::Write as _;

/// Slurm's QOS flags (`str_2_qos_flags`).
pub const QOS_FLAGS: &[&str] = &[
    "DenyOnLimit",
    "EnforceUsageThreshold",
    "NoReserve",
    "PartitionMaxNodes",
    "PartitionMinNodes",
    "OverPartQOS",
    "PartitionTimeLimit",
    "RequiresReservation",
    "NoDecay",
    "UsageFactorSafe",
];

const DENIED: &str = "sacctmgr: error: Your user doesn't have privilege to perform this action\n Error with request: Access/permission denied\n";

/// Carries out `ch` for `user` (`admin`: root or `SlurmUser`) on `db`: with `ch.commit` the
/// change stays in `db` (its rows recorded for the commit), else `db` is left as it was and
/// the outcome says what would happen.
pub fn change(db: &mut AssocDb, user: &str, admin: bool, ch: &AcctMgrChange) -> AcctMgrOutcome {
    let may = admin || db.is_operator(user);
    if !may && ch.action != Action::Add {
        return AcctMgrOutcome { stderr: DENIED.into(), exit_code: 1, ..Default::default() };
    }
    let mut scratch = db.clone();
    let mut out = Out::default();
    match (ch.action, ch.entity) {
        (Action::Add, Entity::Account) => add_account(&mut scratch, ch, &mut out),
        (Action::Add, Entity::User) => add_user(&mut scratch, ch, &mut out),
        (Action::Add, Entity::Qos) => add_qos(&mut scratch, ch, &mut out),
        (Action::Add, Entity::Cluster) => add_cluster(&mut scratch, ch, &mut out),
        (Action::Modify, e) => super::rpc_modify::modify(&mut scratch, e, ch, &mut out),
        (Action::Delete, e) => super::rpc_delete::delete(&mut scratch, e, ch, &mut out),
        (Action::Add, Entity::Assoc) => {
            out.err("No valid entity in add command\nInput line must include \"Account\", \"Cluster\", \"Coordinator\", \"Federation\", \"QOS\", \"Resource\", or \"User\"\n");
        }
    }
    if !may && out.changed {
        let what = match ch.entity {
            Entity::Account => "accounts",
            Entity::User => "users",
            Entity::Qos => "QOS",
            _ => "clusters",
        };
        out.err(&format!(" Problem adding {what}: Access/permission denied\n"));
        out.changed = false;
    }
    if ch.commit && out.changed {
        *db = scratch;
    }
    AcctMgrOutcome { stdout: out.stdout, stderr: out.stderr, exit_code: out.exit_code, changed: out.changed }
}

/// Output being built.
#[derive(Debug, Default)]
pub struct Out {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit status.
    pub exit_code: i32,
    /// Something changed.
    pub changed: bool,
}

impl Out {
    /// An error line (exit status 1).
    pub fn err(&mut self, s: &str) {
        self.stderr.push_str(s);
        self.exit_code = 1;
    }

    /// Output.
    pub fn out(&mut self, s: &str) {
        self.stdout.push_str(s);
    }

    /// Output, then exit status 1 (Slurm's "Nothing ..." lines).
    pub fn fail_out(&mut self, s: &str) {
        self.stdout.push_str(s);
        self.exit_code = 1;
    }
}

/// Lower-cased key without `+`/`-` of `+=`/`-=`, and that sign.
pub fn key(k: &str) -> (String, Option<char>) {
    let l = k.to_ascii_lowercase();
    match l.chars().last() {
        Some(c @ ('+' | '-')) => (l[..l.len() - 1].to_string(), Some(c)),
        _ => (l, None),
    }
}

fn count(k: &str, v: &str) -> Result<Option<u32>, String> {
    if v == "-1" || v.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    v.parse().map(Some).map_err(|_| format!("sacctmgr: error: Invalid value for {k} ({v})\n"))
}

fn minutes(k: &str, v: &str) -> Result<Option<u32>, String> {
    match time_str2mins(v) {
        Ok(SlurmDuration::Infinite) => Ok(None),
        Ok(SlurmDuration::Finite(m)) if m >= 0 => Ok(Some(m as u32)),
        _ => Err(format!("sacctmgr: error: Invalid value for {k} ({v})\n")),
    }
}

fn tres(k: &str, old: &str, v: &str) -> Result<String, String> {
    merge_tres(old, v).map_err(|e| format!("sacctmgr: error: {e} for {k}\n"))
}

fn bad_qos(db: &AssocDb, names: &[&str]) -> Option<String> {
    let bad = names.iter().find(|n| !db.qos.iter().any(|q| q.name == **n))?;
    let valid: Vec<&str> = db.qos.iter().map(|q| q.name.as_str()).collect();
    Some(format!("sacctmgr: error: You gave a bad qos '{bad}'. Valid QOS's are {}\n", valid.join(",")))
}

/// Applies one association `Key=Value` to `a`. `Ok(false)`: not an association key.
/// Errors: the text to print (bad value, unknown QOS).
pub fn set_assoc(db: &AssocDb, a: &mut AssocRow, k: &str, v: &str) -> Result<bool, String> {
    let (kl, sign) = key(k);
    match kl.as_str() {
        "fairshare" | "share" | "shares" => {
            a.shares = if v.eq_ignore_ascii_case("parent") { u32::MAX } else { count(k, v)?.unwrap_or(1) }
        }
        "priority" => a.priority = count(k, v)?,
        "grptres" => a.grp_tres = tres(k, &a.grp_tres, v)?,
        "grpcpus" | "grpcpu" => a.grp_tres = tres(k, &a.grp_tres, &format!("cpu={v}"))?,
        "grpmem" | "grpmemory" => a.grp_tres = tres(k, &a.grp_tres, &format!("mem={v}"))?,
        "grpnodes" => a.grp_tres = tres(k, &a.grp_tres, &format!("node={v}"))?,
        "grpjobs" => a.grp_jobs = count(k, v)?,
        "grpsubmitjobs" | "grpsubmit" => a.grp_submit = count(k, v)?,
        "grpwall" => a.grp_wall_min = minutes(k, v)?,
        "maxjobs" => a.max_jobs = count(k, v)?,
        "maxsubmitjobs" | "maxsubmit" => a.max_submit = count(k, v)?,
        "maxtres" | "maxtresperjob" => a.max_tres_per_job = tres(k, &a.max_tres_per_job, v)?,
        "maxcpus" | "maxcpusperjob" => a.max_tres_per_job = tres(k, &a.max_tres_per_job, &format!("cpu={v}"))?,
        "maxnodes" | "maxnodesperjob" => a.max_tres_per_job = tres(k, &a.max_tres_per_job, &format!("node={v}"))?,
        "maxtrespernode" => a.max_tres_per_node = tres(k, &a.max_tres_per_node, v)?,
        "maxwall" | "maxwalldurationperjob" => a.max_wall_min = minutes(k, v)?,
        "guaranteedgpus" => a.guaranteed_gpus = count(k, v)?.unwrap_or(0),
        "defaultqos" => {
            if v == "-1" || v.is_empty() {
                a.default_qos.clear();
            } else {
                if let Some(e) = bad_qos(db, &[v]) {
                    return Err(e);
                }
                a.default_qos = v.to_string();
            }
        }
        "qos" | "qoslevel" => {
            let names: Vec<&str> = v.split(',').filter(|s| !s.is_empty() && *s != "-1").collect();
            if let Some(e) = bad_qos(db, &names) {
                return Err(format!("{e} Unknown option: {k}={v}\n Use keyword 'where' to modify condition\n"));
            }
            if a.qos.is_empty() {
                a.qos = effective_qos(db, a);
            }
            match sign {
                Some('+') => a.qos.extend(names.iter().map(|s| s.to_string())),
                Some(_) => a.qos.retain(|q| !names.contains(&q.as_str())),
                None => a.qos = names.iter().map(|s| s.to_string()).collect(),
            }
            a.qos.sort();
            a.qos.dedup();
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The QOS list `a` uses: its own, else the nearest ancestor's.
pub fn effective_qos(db: &AssocDb, a: &AssocRow) -> Vec<String> {
    let mut cur = a.parent;
    while let Some(id) = cur {
        let Some(p) = db.assocs.get(&id) else { break };
        if !p.qos.is_empty() {
            return p.qos.clone();
        }
        cur = p.parent;
    }
    Vec::new()
}

/// The error for a `Key=Value` no entity knows.
pub fn unknown(k: &str, v: &str) -> String {
    format!(" Unknown option: {k}={v}\n Use keyword 'where' to modify condition\n")
}

/// Association limit lines (`sacctmgr_print_assoc_limits`) of the keys given.
fn limit_lines(sets: &[(String, String)]) -> String {
    let mut s = String::new();
    for (k, v) in sets {
        let name = match key(k).0.as_str() {
            "fairshare" | "share" | "shares" => "Fairshare",
            "grpjobs" => "GrpJobs",
            "grpsubmitjobs" | "grpsubmit" => "GrpSubmitJobs",
            "grptres" => "GrpTRES",
            "grpwall" => "GrpWall",
            "maxjobs" => "MaxJobs",
            "maxsubmitjobs" | "maxsubmit" => "MaxSubmitJobs",
            "maxtres" | "maxtresperjob" => "MaxTRESPerJob",
            "maxwall" | "maxwalldurationperjob" => "MaxWall",
            "priority" => "Priority",
            "qos" | "qoslevel" => "QOS",
            "defaultqos" => "DefQOS",
            "guaranteedgpus" => "GuaranteedGPUs",
            _ => continue,
        };
        let _ = writeln!(s, "  {name:<13} = {v}");
    }
    s
}

fn cluster_ok(db: &AssocDb, ch: &AcctMgrChange, out: &mut Out) -> bool {
    for (k, v) in &ch.clauses.sets {
        if key(k).0.starts_with("cluster") && !db.clusters.contains_key(v) {
            out.err(&format!(" This cluster '{v}' doesn't exist.\n        Contact your admin to add it to accounting.\n"));
            return false;
        }
    }
    true
}

fn add_account(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    let c = &ch.clauses;
    if c.names.is_empty() {
        return out.err(" Need name of account to add.\n");
    }
    if !cluster_ok(db, ch, out) {
        return;
    }
    let (mut descr, mut org, mut parent) = (None, None, "root".to_string());
    let mut limits = AssocRow::new(0, None, "", "", "");
    for (k, v) in &c.sets {
        match key(k).0.as_str() {
            "description" | "descr" => descr = Some(v.clone()),
            "organization" | "org" => org = Some(v.clone()),
            "parent" => parent = v.clone(),
            "cluster" | "clusters" | "name" | "names" => {}
            _ => match set_assoc(db, &mut limits, k, v) {
                Ok(true) => {}
                Ok(false) => return out.err(&format!(" Unknown option: {k}={v}\n")),
                Err(e) => return out.err(&e),
            },
        }
    }
    let (mut accts, mut assocs) = (String::new(), String::new());
    for name in &c.names {
        if !db.accounts.contains_key(name) {
            let organization = org.clone().unwrap_or_else(|| if parent != "root" { parent.clone() } else { name.clone() });
            db.put_account(AccountRow { name: name.clone(), description: descr.clone().unwrap_or_else(|| name.clone()), organization });
            let _ = writeln!(accts, "  {name}");
        }
        if db.find(name, "", "").is_some() {
            continue;
        }
        let Some(pid) = db.find(&parent, "", "") else {
            out.err(&format!(
                " Parent account '{parent}' doesn't exist on cluster {}\n        Contact your admin to add this account.\n",
                db.cluster
            ));
            continue;
        };
        let mut a = limits.clone();
        (a.id, a.parent, a.account) = (db.next_id(), Some(pid), name.clone());
        db.put_assoc(a);
        let _ = writeln!(assocs, "  A = {:<10.10} C = {:<10.10}", name, db.cluster);
    }
    if accts.is_empty() && assocs.is_empty() && out.exit_code == 0 {
        return out.fail_out(" Nothing new added.\n");
    }
    if assocs.is_empty() {
        // Slurm adds nothing, not even the accounts, without an association.
        return out.err(" No associations created.\n");
    }
    if !accts.is_empty() {
        let d = descr.as_deref().unwrap_or("Account Name");
        let o = org.as_deref().unwrap_or("Parent/Account Name");
        out.out(&format!(" Adding Account(s)\n{accts} Settings\n  Description     = {d}\n  Organization    = {o}\n"));
    }
    out.out(&format!(" Associations\n{assocs}"));
    if !c.sets.is_empty() {
        out.out(&format!(" Settings\n  Parent        = {parent}\n{}", limit_lines(&c.sets)));
    }
    out.changed = true;
}

fn add_user(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    let c = &ch.clauses;
    if c.names.is_empty() {
        return out.err(" Need name of user to add.\n");
    }
    if !cluster_ok(db, ch, out) {
        return;
    }
    let (mut accounts, mut partitions, mut default, mut admin, mut account_given) = (Vec::new(), Vec::new(), None, None, false);
    let mut limits = AssocRow::new(0, None, "", "", "");
    for (k, v) in &c.sets {
        match key(k).0.as_str() {
            "account" | "accounts" | "acct" => {
                accounts.extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string));
                account_given = true;
            }
            "partition" | "partitions" => partitions.extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            "defaultaccount" => default = Some(v.clone()),
            "adminlevel" => match AdminLevel::parse(v) {
                Some(l) => admin = Some(l),
                None => return out.err(&format!(" Unknown option: {k}={v}\n")),
            },
            "cluster" | "clusters" | "name" | "names" => {}
            _ => match set_assoc(db, &mut limits, k, v) {
                Ok(true) => {}
                Ok(false) => return out.err(&format!(" Unknown option: {k}={v}\n")),
                Err(e) => return out.err(&e),
            },
        }
    }
    if accounts.is_empty() {
        match &default {
            Some(d) => accounts.push(d.clone()),
            None => return out.err(" Need name of account to add user to.\n"),
        }
    }
    if let Some(bad) = accounts.iter().find(|a| db.find(a, "", "").is_none()) {
        return out.err(&format!(
            " This account '{bad}' doesn't exist.\n        Contact your admin to add this account.\n No associations or wckeys created.\n"
        ));
    }
    if partitions.is_empty() {
        partitions.push(String::new());
    }
    let (mut users, mut assocs) = (String::new(), String::new());
    for name in &c.names {
        if !db.users.contains_key(name) {
            let def = default.clone().unwrap_or_else(|| accounts[0].clone());
            db.put_user(UserRow { name: name.clone(), default_account: def, admin_level: admin.unwrap_or_default() });
            let _ = writeln!(users, "  {name}");
        }
        for acct in &accounts {
            for part in &partitions {
                if db.find(acct, name, part).is_some() {
                    continue;
                }
                let mut a = limits.clone();
                (a.id, a.parent, a.account, a.user, a.partition) =
                    (db.next_id(), db.find(acct, "", ""), acct.clone(), name.clone(), part.clone());
                db.put_assoc(a);
                let _ = write!(assocs, "  U = {:<9.9} A = {:<10.10} C = {:<10.10}", name, acct, db.cluster);
                if part.is_empty() {
                    assocs.push('\n');
                } else {
                    let _ = writeln!(assocs, " P = {part:<10.10}");
                }
            }
        }
    }
    if users.is_empty() && assocs.is_empty() {
        return out.fail_out(" Nothing new added.\n");
    }
    if !users.is_empty() {
        out.out(&format!(" Adding User(s)\n{users}"));
        if default.is_some() || admin.is_some() {
            out.out(" Settings =\n");
        }
        if let Some(d) = &default {
            out.out(&format!("  Default Account = {d}\n"));
        }
        if let Some(l) = admin {
            out.out(&format!("  Admin Level     = {}\n", l.as_str()));
        }
    }
    out.out(&format!(" Associations =\n{assocs}"));
    if account_given {
        out.out(&format!(" Non Default Settings\n{}", limit_lines(&c.sets)));
    }
    out.changed = true;
}

/// Applies one QOS `Key=Value`. `Ok(false)`: not a QOS key. Errors: the text to print and
/// whether it goes to stdout (Slurm prints the bad-flag list there).
pub fn set_qos(db: &AssocDb, q: &mut QosRow, k: &str, v: &str) -> Result<bool, (String, bool)> {
    let e = |s: String| (s, false);
    match key(k).0.as_str() {
        "description" => q.description = v.to_string(),
        "priority" => q.priority = count(k, v).map_err(e)?.unwrap_or(0),
        "gracetime" => q.grace_time_s = u64::from(minutes(k, v).map_err(e)?.unwrap_or(0)) * 60,
        "preempt" => {
            let names: Vec<&str> = v.split(',').filter(|s| !s.is_empty()).collect();
            if let Some(m) = bad_qos(db, &names) {
                return Err((m, false));
            }
            q.preempt = names.iter().map(|s| s.to_string()).collect();
        }
        "preemptmode" => {
            let m = v.to_ascii_lowercase();
            if !matches!(m.as_str(), "cluster" | "off" | "cancel" | "requeue" | "suspend") {
                return Err((format!(" Bad Preempt Mode given: {k}={v}\n"), false));
            }
            q.preempt_mode = if m == "off" { "cluster".into() } else { m };
        }
        "preemptexempttime" => {
            q.preempt_exempt_s = match flotilla_core::time::time_str2secs(v) {
                Ok(SlurmDuration::Infinite) => None,
                Ok(SlurmDuration::Finite(s)) if s >= 0 => Some(s as u64),
                _ => return Err(e(format!("sacctmgr: error: Invalid value for {k} ({v})\n"))),
            }
        }
        "flags" => {
            let mut flags = Vec::new();
            for f in v.split(',').filter(|s| !s.is_empty()) {
                match QOS_FLAGS.iter().find(|x| x.eq_ignore_ascii_case(f)) {
                    Some(x) => flags.push(x.to_string()),
                    None => {
                        let m = format!(" Unknown QOS flag used in:\n  '{v}'\n Valid QOS flags are\n  '{}'\n", QOS_FLAGS.join(","));
                        return Err((m, true));
                    }
                }
            }
            q.flags = flags;
        }
        "usagefactor" => q.usage_factor = v.parse().map_err(|_| e(format!("sacctmgr: error: Invalid value for {k} ({v})\n")))?,
        "grptres" => q.grp_tres = tres(k, &q.grp_tres, v).map_err(e)?,
        "grpjobs" => q.grp_jobs = count(k, v).map_err(e)?,
        "grpsubmitjobs" | "grpsubmit" => q.grp_submit = count(k, v).map_err(e)?,
        "grpwall" => q.grp_wall_min = minutes(k, v).map_err(e)?,
        "maxtres" | "maxtresperjob" => q.max_tres_per_job = tres(k, &q.max_tres_per_job, v).map_err(e)?,
        "maxtresperuser" | "maxtrespu" => q.max_tres_per_user = tres(k, &q.max_tres_per_user, v).map_err(e)?,
        "maxjobsperuser" | "maxjobspu" => q.max_jobs_per_user = count(k, v).map_err(e)?,
        "maxsubmitjobsperuser" | "maxsubmitpu" | "maxsubmitjobspu" => q.max_submit_per_user = count(k, v).map_err(e)?,
        "maxwall" | "maxwalldurationperjob" => q.max_wall_min = minutes(k, v).map_err(e)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn add_qos(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    let c = &ch.clauses;
    if c.names.is_empty() {
        return out.err(" Need name of qos to add.\n");
    }
    let mut proto = new_qos("");
    let mut lines = String::new();
    for (k, v) in &c.sets {
        match set_qos(db, &mut proto, k, v) {
            Ok(true) => {
                let shown = if key(k).0 == "preemptmode" { v.to_ascii_uppercase() } else { v.clone() };
                let name = QOS_KEYS.iter().find(|(l, _)| *l == key(k).0).map_or(k.as_str(), |(_, n)| n);
                let _ = writeln!(lines, "  {name:<24} = {shown}");
            }
            Ok(false) => return out.err(&format!(" Unknown option: {k}={v}\n")),
            Err((m, true)) => return out.fail_out(&m),
            Err((m, false)) => return out.err(&m),
        }
    }
    let mut added = String::new();
    let given_descr = c.sets.iter().any(|(k, _)| key(k).0 == "description");
    for name in &c.names {
        if db.qos.iter().any(|q| &q.name == name) {
            continue;
        }
        let mut q = proto.clone();
        q.name = name.clone();
        if !given_descr {
            q.description = name.clone();
        }
        let _ = writeln!(added, "  {name}");
        db.put_qos(q);
    }
    if added.is_empty() {
        return out.fail_out(" Nothing new added.\n");
    }
    let descr = if given_descr { proto.description.clone() } else { c.names[0].clone() };
    let mut sorted: Vec<&str> = lines.lines().filter(|l| !l.trim_start().starts_with("Description")).collect();
    sorted.sort();
    let rest: String = sorted.iter().map(|l| format!("{l}\n")).collect();
    out.out(&format!(" Adding QOS(s)\n{added} Settings\n  Description    = {descr}\n{rest}"));
    out.changed = true;
}

const QOS_KEYS: &[(&str, &str)] = &[
    ("priority", "Priority"),
    ("preempt", "Preempt"),
    ("preemptmode", "PreemptMode"),
    ("preemptexempttime", "PreemptExemptTime"),
    ("flags", "Flags"),
    ("gracetime", "GraceTime"),
    ("usagefactor", "UsageFactor"),
    ("grptres", "GrpTRES"),
    ("grpjobs", "GrpJobs"),
    ("grpsubmitjobs", "GrpSubmitJobs"),
    ("maxtresperuser", "MaxTRESPerUser"),
    ("maxjobsperuser", "MaxJobsPerUser"),
    ("maxsubmitjobsperuser", "MaxSubmitJobsPerUser"),
    ("maxwall", "MaxWall"),
];

fn add_cluster(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    if ch.clauses.names.is_empty() {
        return out.err(" We need a cluster name to add.\n");
    }
    let mut added = String::new();
    for name in &ch.clauses.names {
        if db.clusters.contains_key(name) {
            out.fail_out(&format!(" This cluster {name} already exists.  Not adding.\n"));
            continue;
        }
        db.put_cluster(flotilla_proto::acctmgr::ClusterRow { name: name.clone(), control_host: String::new(), control_port: 0, rpc: 0 });
        let _ = writeln!(added, "  Name           = {name}");
    }
    if !added.is_empty() {
        out.exit_code = 0;
        out.out(&format!(" Adding Cluster(s)\n{added}"));
        out.changed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::acctmgr::parse_clauses;

    fn run(db: &mut AssocDb, action: Action, entity: Entity, words: &str) -> AcctMgrOutcome {
        let w: Vec<String> = words.split_whitespace().map(str::to_string).collect();
        let ch = AcctMgrChange { action, entity, clauses: parse_clauses(&w, action == Action::Add), commit: true };
        change(db, "root", true, &ch)
    }

    /// Goldens 0030, 0090-0093: a bad parent adds nothing; deleting an account takes its
    /// sub-accounts' associations and clears the default account of users left without one
    /// there; deleting a user's last association lists that user only.
    #[test]
    fn deletes_and_refusals_as_slurm() {
        let mut db = AssocDb { cluster: "oracle".into(), ..AssocDb::default() };
        db.ensure_defaults("h", 6817);
        let o = run(&mut db, Action::Add, Entity::Account, "ghost parent=nosuchparent");
        assert_eq!(o.stderr, " Parent account 'nosuchparent' doesn't exist on cluster oracle\n        Contact your admin to add this account.\n No associations created.\n");
        assert!(!db.accounts.contains_key("ghost"));
        run(&mut db, Action::Add, Entity::Account, "physics");
        run(&mut db, Action::Add, Entity::Account, "ml parent=physics");
        run(&mut db, Action::Add, Entity::Account, "chem");
        run(&mut db, Action::Add, Entity::User, "alice account=physics");
        run(&mut db, Action::Add, Entity::User, "dave DefaultAccount=ml");
        run(&mut db, Action::Add, Entity::User, "bob,carol account=chem");
        let o = run(&mut db, Action::Delete, Entity::Account, "physics");
        assert_eq!((o.stdout.as_str(), o.exit_code), (" Deleting accounts...\n  physics\n", 0));
        assert_eq!((db.users["alice"].default_account.as_str(), db.users["dave"].default_account.as_str()), ("", ""));
        assert!(db.find("ml", "", "").is_none() && db.accounts.contains_key("ml"), "ml's association went, its account stays");
        let o = run(&mut db, Action::Delete, Entity::User, "carol where account=chem");
        assert_eq!(
            o.stdout,
            " Deleting user associations...\n  C = oracle     A = chem       U = carol    \n Deleting users (No Associations)...\n  carol\n"
        );
        assert!(db.users.contains_key("dave"), "not one of the users deleted");
    }
}
