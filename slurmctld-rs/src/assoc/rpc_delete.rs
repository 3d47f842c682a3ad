//! `sacctmgr delete account|user|assoc|qos|cluster` (Slurm 22.05's texts).

use super::db::AssocOp;
use super::rpc::Out;
use super::rpc_modify::cond_values;
use super::AssocDb;
use flotilla_proto::acctmgr::{AcctMgrChange, Entity};
use std::fmt::Write as _;

/// `sacctmgr delete`.
pub fn delete(db: &mut AssocDb, e: Entity, ch: &AcctMgrChange, out: &mut Out) {
    if ch.clauses.names.is_empty() && ch.clauses.conds.is_empty() {
        return out.err(" No conditions given to remove, not executing.\n");
    }
    let mut names = ch.clauses.names.clone();
    names.extend(cond_values(ch, &["name", "names"]));
    match e {
        Entity::Account => {
            names.extend(cond_values(ch, &["account", "accounts", "acct"]));
            delete_accounts(db, &names, out)
        }
        Entity::User | Entity::Assoc => {
            names.extend(cond_values(ch, &["user", "users"]));
            let accounts = cond_values(ch, &["account", "accounts", "acct"]);
            delete_users(db, &names, &accounts, e == Entity::Assoc, out)
        }
        Entity::Qos => {
            let mut done = String::new();
            for n in &names {
                if n == "normal" || !db.qos.iter().any(|q| &q.name == n) {
                    continue;
                }
                db.qos.retain(|q| &q.name != n);
                db.record(AssocOp::DelQos(n.clone()));
                let users: Vec<_> = db.assocs.values().filter(|a| a.qos.contains(n) || &a.default_qos == n).cloned().collect();
                for mut a in users {
                    a.qos.retain(|q| q != n);
                    if &a.default_qos == n {
                        a.default_qos.clear();
                    }
                    db.put_assoc(a);
                }
                let _ = writeln!(done, "  {n}");
            }
            finish(out, " Deleting QOS(s)...\n", &done)
        }
        Entity::Cluster => {
            let mut done = String::new();
            for n in &names {
                if n != &db.cluster && db.clusters.remove(n).is_some() {
                    db.record(AssocOp::DelCluster(n.clone()));
                    let _ = writeln!(done, "  {n}");
                }
            }
            finish(out, " Deleting clusters...\n", &done)
        }
    }
}

fn finish(out: &mut Out, head: &str, done: &str) {
    if done.is_empty() {
        return out.fail_out(" Nothing deleted\n");
    }
    out.out(&format!("{head}{done}"));
    out.changed = true;
}

fn delete_accounts(db: &mut AssocDb, names: &[String], out: &mut Out) {
    if names.iter().any(|n| n == "root") {
        return out.err(" You are not allowed to remove the root account.\n Use remove cluster instead.\n");
    }
    let mut done = String::new();
    for n in names {
        if db.accounts.remove(n).is_none() {
            continue;
        }
        db.record(AssocOp::DelAccount(n.clone()));
        // The account's associations and everything below them.
        let mut gone: Vec<u32> = db.assocs.values().filter(|a| &a.account == n).map(|a| a.id).collect();
        let mut i = 0;
        while i < gone.len() {
            let p = gone[i];
            gone.extend(db.assocs.values().filter(|a| a.parent == Some(p)).map(|a| a.id));
            i += 1;
        }
        for id in gone {
            db.del_assoc(id);
        }
        let _ = writeln!(done, "  {n}");
    }
    // Users left without an association in their default account have none (Slurm clears
    // `DefaultAccount`, also for the sub-accounts' users whose associations went).
    let users: Vec<_> = db
        .users
        .values()
        .filter(|u| !u.default_account.is_empty())
        .filter(|u| !db.assocs.values().any(|a| a.user == u.name && a.account == u.default_account))
        .cloned()
        .collect();
    for mut u in users {
        u.default_account.clear();
        db.put_user(u);
    }
    finish(out, " Deleting accounts...\n", &done)
}

fn delete_users(db: &mut AssocDb, users: &[String], accounts: &[String], assoc_entity: bool, out: &mut Out) {
    if accounts.is_empty() && !assoc_entity {
        let mut done = String::new();
        for u in users {
            if u == "root" || db.users.remove(u).is_none() {
                continue;
            }
            db.record(AssocOp::DelUser(u.clone()));
            let ids: Vec<u32> = db.assocs.values().filter(|a| &a.user == u).map(|a| a.id).collect();
            for id in ids {
                db.del_assoc(id);
            }
            let _ = writeln!(done, "  {u}");
        }
        return finish(out, " Deleting users...\n", &done);
    }
    let ids: Vec<u32> = db
        .assocs
        .values()
        .filter(|a| !a.user.is_empty() && (users.is_empty() || users.contains(&a.user)))
        .filter(|a| accounts.is_empty() || accounts.contains(&a.account))
        .map(|a| a.id)
        .collect();
    let mut lines = String::new();
    let touched: Vec<String> = ids.iter().map(|id| db.assocs[id].user.clone()).collect();
    for id in &ids {
        let a = &db.assocs[id];
        let _ = writeln!(lines, "  C = {:<10} A = {:<10} U = {:<9}", db.cluster, a.account, a.user);
    }
    for id in ids {
        db.del_assoc(id);
    }
    if lines.is_empty() {
        return out.fail_out(" Nothing deleted\n");
    }
    out.out(&format!(" Deleting user associations...\n{lines}"));
    let orphans: Vec<String> =
        db.users.keys().filter(|u| touched.contains(u) && *u != "root" && !db.assocs.values().any(|a| &a.user == *u)).cloned().collect();
    if !orphans.is_empty() {
        out.out(" Deleting users (No Associations)...\n");
        for u in orphans {
            db.users.remove(&u);
            db.record(AssocOp::DelUser(u.clone()));
            out.out(&format!("  {u}\n"));
        }
    }
    out.changed = true;
}
