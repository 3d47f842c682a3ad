//! `sacctmgr modify account|user|assoc|qos|cluster ... set ...` (Slurm 22.05's texts).

use super::rpc::{key, set_assoc, set_qos, unknown, Out};
use super::AssocDb;
use flotilla_proto::acctmgr::{AcctMgrChange, AdminLevel, AssocRow, Entity};
use std::fmt::Write as _;

/// Keys whose value a user association inherits from its account (Slurm copies them down
/// to the children that do not set their own, and lists those children).
const INHERITED: &[&str] = &["maxjobs", "maxsubmitjobs", "maxsubmit", "maxtres", "maxtresperjob", "maxwall", "priority", "qos", "defaultqos"];

/// Names a `where` (or the bare words) selects for `keys`.
pub fn cond_values(ch: &AcctMgrChange, keys: &[&str]) -> Vec<String> {
    ch.clauses
        .conds
        .iter()
        .filter(|(k, _)| keys.contains(&key(k).0.as_str()))
        .flat_map(|(_, v)| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// `C = oracle     A = research             U = alice    ` (slurmdbd's object line).
pub fn user_line(cluster: &str, a: &AssocRow) -> String {
    let mut s = format!("  C = {:<10} A = {:<20} U = {:<9}", cluster, a.account, a.user);
    if !a.partition.is_empty() {
        let _ = write!(s, " P = {}", a.partition);
    }
    s.push('\n');
    s
}

/// `sacctmgr modify`.
pub fn modify(db: &mut AssocDb, e: Entity, ch: &AcctMgrChange, out: &mut Out) {
    if ch.clauses.sets.is_empty() {
        return out.err(" You didn't give me anything to set\n");
    }
    match e {
        Entity::Account => modify_account(db, ch, out),
        Entity::User | Entity::Assoc => modify_user(db, ch, out, e == Entity::Assoc),
        Entity::Qos => modify_qos(db, ch, out),
        Entity::Cluster => out.err(" Flotilla keeps a cluster's limits on its root association: modify account root\n"),
    }
}

fn modify_account(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    let mut names = ch.clauses.names.clone();
    names.extend(cond_values(ch, &["name", "names", "account", "accounts", "acct"]));
    let targets: Vec<String> = names.into_iter().filter(|n| db.accounts.contains_key(n)).collect();
    let (mut acct_keys, mut assoc_keys) = (Vec::new(), Vec::new());
    for (k, v) in &ch.clauses.sets {
        match key(k).0.as_str() {
            "description" | "organization" => acct_keys.push((k, v)),
            _ => assoc_keys.push((k, v)),
        }
    }
    let mut modified = String::new();
    for name in &targets {
        if acct_keys.is_empty() {
            break;
        }
        let mut a = db.accounts[name].clone();
        for (k, v) in &acct_keys {
            if key(k).0 == "description" {
                a.description = v.to_string();
            } else {
                a.organization = v.to_string();
            }
        }
        db.put_account(a);
        let _ = writeln!(modified, "  {name}");
    }
    let mut lines = String::new();
    let inherited = assoc_keys.iter().any(|(k, _)| INHERITED.contains(&key(k).0.as_str()));
    for name in &targets {
        if assoc_keys.is_empty() {
            break;
        }
        let Some(id) = db.find(name, "", "") else { continue };
        let mut a = db.assocs[&id].clone();
        for (k, v) in &assoc_keys {
            if key(k).0 == "parent" {
                match db.find(v, "", "") {
                    Some(p) if p != id => a.parent = Some(p),
                    _ => return out.err(&format!(" Parent Account {v} doesn't exist.\n")),
                }
                continue;
            }
            match set_assoc(db, &mut a, k, v) {
                Ok(true) => {}
                Ok(false) => return out.err(&unknown(k, v)),
                Err(m) => return out.err(&format!("{m}{}", if m.contains("Unknown option") { String::new() } else { unknown(k, v) })),
            }
        }
        let parent = a.parent.and_then(|p| db.assocs.get(&p)).map_or(String::new(), |p| p.account.clone());
        let _ = writeln!(lines, "  C = {:<10} A = {} of {}", db.cluster, a.account, parent);
        db.put_assoc(a);
        if inherited {
            let mut kids: Vec<&AssocRow> = db.assocs.values().filter(|c| c.parent == Some(id) && !c.user.is_empty()).collect();
            kids.sort_by(|x, y| (&y.user, &y.partition).cmp(&(&x.user, &x.partition)));
            for c in kids {
                lines.push_str(&user_line(&db.cluster, c));
            }
        }
    }
    if modified.is_empty() && lines.is_empty() {
        return out.fail_out(" Nothing modified\n");
    }
    if !modified.is_empty() {
        out.out(&format!(" Modified accounts...\n{modified}"));
    }
    if !lines.is_empty() {
        out.out(&format!(" Modified account associations...\n{lines}"));
    }
    out.changed = true;
}

fn modify_user(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out, assoc_entity: bool) {
    let mut users = if assoc_entity { Vec::new() } else { ch.clauses.names.clone() };
    users.extend(cond_values(ch, &[if assoc_entity { "user" } else { "name" }, "names", "user", "users"]));
    let accounts = cond_values(ch, &["account", "accounts", "acct"]);
    let parts = cond_values(ch, &["partition", "partitions"]);
    let (mut user_keys, mut assoc_keys) = (Vec::new(), Vec::new());
    for (k, v) in &ch.clauses.sets {
        match key(k).0.as_str() {
            "defaultaccount" | "adminlevel" if !assoc_entity => user_keys.push((k, v)),
            _ => assoc_keys.push((k, v)),
        }
    }
    let mut modified = String::new();
    let targets: Vec<String> = users.iter().filter(|u| db.users.contains_key(*u)).cloned().collect();
    for name in &targets {
        if user_keys.is_empty() {
            break;
        }
        let mut u = db.users[name].clone();
        for (k, v) in &user_keys {
            if key(k).0 == "adminlevel" {
                match AdminLevel::parse(v) {
                    Some(l) => u.admin_level = l,
                    None => return out.err(&unknown(k, v)),
                }
            } else if db.find(v, name, "").is_none() && !db.assocs.values().any(|a| &a.account == *v && &a.user == name) {
                return out.fail_out(&format!(
                    " Can't modify because these users aren't associated with new default account '{v}'...\n  U = {name} C = {}\n",
                    db.cluster
                ));
            } else {
                u.default_account = v.to_string();
            }
        }
        db.put_user(u);
        let _ = writeln!(modified, "  {name}");
    }
    let mut lines = String::new();
    if !assoc_keys.is_empty() {
        let mut ids: Vec<u32> = db
            .assocs
            .values()
            .filter(|a| !a.user.is_empty())
            .filter(|a| (users.is_empty() && assoc_entity) || users.contains(&a.user))
            .filter(|a| accounts.is_empty() || accounts.contains(&a.account))
            .filter(|a| parts.is_empty() || parts.contains(&a.partition))
            .map(|a| a.id)
            .collect();
        ids.sort_by_key(|id| (db.assocs[id].account.clone(), db.assocs[id].user.clone()));
        for id in ids {
            let mut a = db.assocs[&id].clone();
            for (k, v) in &assoc_keys {
                match set_assoc(db, &mut a, k, v) {
                    Ok(true) => {}
                    Ok(false) => return out.err(&unknown(k, v)),
                    Err(m) => return out.err(&format!("{m}{}", if m.contains("Unknown option") { String::new() } else { unknown(k, v) })),
                }
            }
            lines.push_str(&user_line(&db.cluster, &a));
            db.put_assoc(a);
        }
    }
    if modified.is_empty() && lines.is_empty() {
        return out.fail_out(" Nothing modified\n");
    }
    if !modified.is_empty() {
        out.out(&format!(" Modified users...\n{modified}"));
    }
    if !lines.is_empty() {
        out.out(&format!(" Modified user associations...\n{lines}"));
    }
    out.changed = true;
}

fn modify_qos(db: &mut AssocDb, ch: &AcctMgrChange, out: &mut Out) {
    let mut names = ch.clauses.names.clone();
    names.extend(cond_values(ch, &["name", "names"]));
    let mut modified = String::new();
    for name in &names {
        let Some(mut q) = db.qos.iter().find(|q| &q.name == name).cloned() else { continue };
        for (k, v) in &ch.clauses.sets {
            match set_qos(db, &mut q, k, v) {
                Ok(true) => {}
                Ok(false) => return out.err(&unknown(k, v)),
                Err((m, true)) => return out.fail_out(&m),
                Err((m, false)) => return out.err(&m),
            }
        }
        db.put_qos(q);
        let _ = writeln!(modified, "  {name}");
    }
    if modified.is_empty() {
        return out.fail_out(" Nothing modified\n");
    }
    out.out(&format!(" Modified qos...\n{modified}"));
    out.changed = true;
}
