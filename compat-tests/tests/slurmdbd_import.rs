//! A site that moves from Slurm keeps its slurmdbd database: with
//! `AccountingStorageType=accounting_storage/slurmdbd` in slurm.conf and a `slurmdbd.conf`
//! beside it naming a MySQL/MariaDB database, the controller's first start copies that
//! cluster's accounts, users, associations and default accounts into its own accounting
//! database, read-only (the test's database user may only SELECT). Against a real MariaDB
//! started here with Slurm 22.05's table and column names: a job submitted without `-A`
//! shows the user's default account (`is_def`) in squeue, scontrol, sacct and
//! `SLURM_JOB_ACCOUNT`; a restart does not import again (an account removed with sacctmgr
//! stays removed); an unreachable database is a warning and the controller runs without it.
//! Needs root (`FLOTILLA_TEST_ROOT=1`) and Debian's `mariadb-server`.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::mariadb::{self, LocalMariaDb};
use flotilla_compat_tests::wait::wait_until;
use std::path::Path;
use std::time::Duration;

/// Slurm 22.05's tables as `accounting_storage_mysql.c` defines them (the columns the import
/// reads and the ones around them), for ClusterName=oracle; our own statements.
const SCHEMA: &str = "
CREATE TABLE acct_table (creation_time bigint unsigned not null, mod_time bigint unsigned default 0 not null,
  deleted tinyint default 0, name tinytext not null, description text not null, organization text not null,
  primary key (name(42)));
CREATE TABLE user_table (creation_time bigint unsigned not null, mod_time bigint unsigned default 0 not null,
  deleted tinyint default 0, name tinytext not null, admin_level smallint default 1 not null, primary key (name(42)));
CREATE TABLE qos_table (creation_time bigint unsigned not null, mod_time bigint unsigned default 0 not null,
  deleted tinyint default 0, id int not null auto_increment, name tinytext not null, description text,
  flags int unsigned default 0, max_jobs_per_user int default NULL, grp_tres text not null default '',
  priority int unsigned default 0, usage_factor double default 1.0 not null, primary key (id));
CREATE TABLE tres_table (creation_time bigint unsigned not null, deleted tinyint default 0 not null,
  id int not null auto_increment, type tinytext not null, name tinytext not null default '', primary key (id));
CREATE TABLE oracle_assoc_table (creation_time bigint unsigned not null, mod_time bigint unsigned default 0 not null,
  deleted tinyint default 0 not null, is_def tinyint default 0 not null, id_assoc int unsigned not null auto_increment,
  user tinytext not null default '', acct tinytext not null, `partition` tinytext not null default '',
  parent_acct tinytext not null default '', lft int not null, rgt int not null, shares int default 1 not null,
  max_jobs int default NULL, max_jobs_accrue int default NULL, min_prio_thresh int default NULL,
  max_submit_jobs int default NULL, max_tres_pj text not null default '', max_tres_pn text not null default '',
  max_tres_mins_pj text not null default '', max_tres_run_mins text not null default '', max_wall_pj int default NULL,
  grp_jobs int default NULL, grp_jobs_accrue int default NULL, grp_submit_jobs int default NULL,
  grp_tres text not null default '', grp_tres_mins text not null default '', grp_tres_run_mins text not null default '',
  grp_wall int default NULL, priority int unsigned default NULL, def_qos_id int default NULL,
  qos blob not null default '', delta_qos blob not null default '',
  primary key (id_assoc), unique index udex (user(42), acct(42), `partition`(42)));
";

/// A site: root > research (alice's default, bob's too) > nlp (bob's default), root > ops,
/// and a deleted account that must not come over.
const SITE: &str = "
INSERT INTO tres_table (creation_time, id, type, name) VALUES
  (1, 1, 'cpu', ''), (1, 2, 'mem', ''), (1, 3, 'energy', ''), (1, 4, 'node', ''), (1, 5, 'billing', ''), (1, 1001, 'gres', 'gpu');
INSERT INTO qos_table (creation_time, id, name, description, priority) VALUES
  (1, 1, 'normal', 'Normal QOS default', 0), (1, 2, 'high', 'urgent work', 100);
INSERT INTO acct_table (creation_time, deleted, name, description, organization) VALUES
  (1, 0, 'root', 'default root account', 'root'), (1, 0, 'research', 'research', 'oracle'),
  (1, 0, 'nlp', 'language models', 'oracle'), (1, 0, 'ops', 'operations', 'oracle'), (1, 1, 'gone', 'gone', 'oracle');
INSERT INTO user_table (creation_time, name, admin_level) VALUES (1, 'root', 3), (1, 'alice', 1), (1, 'bob', 2);
INSERT INTO oracle_assoc_table (creation_time, deleted, is_def, id_assoc, user, acct, parent_acct, lft, rgt, shares,
  max_jobs, grp_tres, qos) VALUES
  (1, 0, 0, 1, '', 'root', '', 1, 20, 1, NULL, '', ',1,'),
  (1, 0, 1, 2, 'root', 'root', '', 18, 19, 1, NULL, '', ''),
  (1, 0, 0, 3, '', 'research', 'root', 2, 13, 50, NULL, '1001=8,3=5', ''),
  (1, 0, 1, 4, 'alice', 'research', '', 11, 12, 1, NULL, '', ''),
  (1, 0, 0, 5, 'bob', 'research', '', 9, 10, 1, NULL, '', ''),
  (1, 0, 0, 6, '', 'nlp', 'research', 3, 8, 10, 3, '', ',1,2,'),
  (1, 0, 1, 7, 'bob', 'nlp', '', 4, 5, 1, NULL, '', ''),
  (1, 0, 0, 8, 'alice', 'nlp', '', 6, 7, 1, NULL, '', ''),
  (1, 0, 0, 9, '', 'ops', 'root', 14, 15, 1, NULL, '', ''),
  (1, 1, 0, 10, '', 'gone', 'root', 16, 17, 1, NULL, '', '');
";

const PASSWORD: &str = "site-db-secret";

fn ok(c: &LocalCluster, user: Option<&str>, prog: &str, args: &[&str], cwd: &Path) -> String {
    let o = c.run_as(user, prog, args, cwd);
    assert!(o.status.success(), "{prog} {args:?} as {user:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// A config dir: the reference's slurm.conf (ClusterName=oracle,
/// AccountingStorageType=accounting_storage/slurmdbd), gres.conf, topology.conf and a
/// slurmdbd.conf naming the database at 127.0.0.1:`port`.
fn conf_dir(port: u16) -> tempfile::TempDir {
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    let slurm_conf = std::fs::read_to_string(conf.path().join("slurm.conf")).unwrap();
    assert!(
        slurm_conf.contains("AccountingStorageType=accounting_storage/slurmdbd"),
        "the reference's slurm.conf names slurmdbd"
    );
    std::fs::write(
        conf.path().join("slurmdbd.conf"),
        format!(
            "# A site's slurmdbd.conf\nAuthType=auth/munge\nDbdHost=localhost\nStorageType=accounting_storage/mysql\n\
             StorageHost=127.0.0.1\nStoragePort={port}\nStorageUser=slurm\nStoragePass={PASSWORD}\nStorageLoc=slurm_acct_db\n"
        ),
    )
    .unwrap();
    flotilla_compat_tests::sh(&format!("chmod 755 {}", conf.path().display()));
    conf
}

fn ctld_log(c: &LocalCluster) -> String {
    std::fs::read_to_string(c.dir().join("slurmctld.log")).unwrap_or_default()
}

#[test]
fn the_sites_slurmdbd_associations_are_imported_once() {
    if !flotilla_compat_tests::root_tests(
        "runs commands as alice (2001) and bob (2002) against a MariaDB the test starts",
    ) {
        return;
    }
    assert!(
        mariadb::available(),
        "MariaDB is not installed (apt-get install mariadb-server; CI installs it)"
    );
    assert!(flotilla_compat_tests::sh("command -v runuser >/dev/null"), "runuser is needed");
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::ensure_user("bob", 2002);
    flotilla_compat_tests::build_binaries();
    let dbdir = tempfile::Builder::new()
        .prefix("flt-mariadb")
        .tempdir_in("/tmp")
        .unwrap();
    let db = LocalMariaDb::start(dbdir.path()).unwrap_or_else(|e| panic!("{e}"));
    db.sql(&format!(
        "CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'%' IDENTIFIED BY '{PASSWORD}'; \
         GRANT SELECT ON slurm_acct_db.* TO 'slurm'@'%'; USE slurm_acct_db; {SCHEMA} {SITE}"
    ))
    .unwrap_or_else(|e| panic!("{e}"));

    let conf = conf_dir(db.port);
    let mut c = LocalCluster::start_with(Some(conf.path()), |_| {});
    flotilla_compat_tests::sh(&format!("chmod 755 {}", c.dir().display()));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    flotilla_compat_tests::sh(&format!("chmod 1777 {}", w.display()));
    let log = ctld_log(&c);
    assert!(
        log.contains("accounts=3 users=2 associations=9 qos=1")
            && log.contains("imported cluster oracle's associations from slurmdbd's database mysql://slurm@127.0.0.1"),
        "the import is logged with its counts: {log}"
    );
    assert!(!log.contains(PASSWORD), "the password is never logged");

    // alice without -A: her is_def account (research, not nlp) everywhere.
    let id = ok(
        &c,
        Some("alice"),
        "sbatch",
        &["--parsable", "-o", "/dev/null", "--wrap", "sleep 120"],
        &w,
    )
    .trim()
    .to_string();
    assert_eq!(
        ok(
            &c,
            Some("alice"),
            "squeue",
            &["-h", "-j", &id, "-o", "%a"],
            &w
        )
        .trim(),
        "research"
    );
    let show = ok(&c, Some("alice"), "scontrol", &["show", "job", &id], &w);
    assert!(show.contains(" Account=research "), "{show}");
    wait_until(
        "alice's job in sacct",
        Duration::from_secs(60),
        || {
            ok(
                &c,
                Some("alice"),
                "sacct",
                &["-n", "-P", "-X", "-j", &id, "-o", "Account"],
                &w,
            )
            .trim()
                == "research"
        },
        || ctld_log(&c),
    );
    ok(&c, Some("alice"), "scancel", &[&id], &w);
    // bob: nlp (his is_def), also in the job's environment.
    let out = w.join("bob.out");
    let id = ok(
        &c,
        Some("bob"),
        "sbatch",
        &[
            "--parsable",
            "-o",
            out.to_str().unwrap(),
            "--wrap",
            "echo acct=$SLURM_JOB_ACCOUNT",
        ],
        &w,
    )
    .trim()
    .to_string();
    wait_until(
        "bob's job output",
        Duration::from_secs(60),
        || std::fs::read_to_string(&out).is_ok_and(|s| s.contains('\n')),
        || ctld_log(&c),
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "acct=nlp\n",
        "job {id}"
    );
    // The tree, shares and limits came over (sacctmgr shows the inherited MaxJobs and QOS,
    // as Slurm does).
    let assocs = ok(
        &c,
        None,
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "format=account,user,share,maxjobs,grptres,qos",
        ],
        &w,
    );
    for line in [
        "root||1|||normal",
        "research||50||gres/gpu=8|normal",
        "research|alice|1|||normal",
        "research|bob|1|||normal",
        "nlp||10|3||high,normal",
        "nlp|alice|1|3||high,normal",
        "nlp|bob|1|3||high,normal",
        "ops||1|||normal",
    ] {
        assert!(assocs.lines().any(|l| l == line), "{line} in\n{assocs}");
    }
    assert!(
        !assocs.contains("gone"),
        "a deleted account does not come over:\n{assocs}"
    );

    // A restart does not import again: an account removed with sacctmgr stays removed.
    ok(
        &c,
        None,
        "sacctmgr",
        &["-i", "delete", "account", "ops"],
        &w,
    );
    c.restart_controller();
    let accounts = ok(
        &c,
        None,
        "sacctmgr",
        &["-n", "-P", "show", "account", "format=account"],
        &w,
    );
    assert!(
        !accounts.lines().any(|l| l == "ops"),
        "ops came back:\n{accounts}"
    );
    assert!(accounts.lines().any(|l| l == "research"), "{accounts}");
    assert_eq!(
        ctld_log(&c)
            .matches("imported cluster oracle's associations")
            .count(),
        1,
        "imported once"
    );
    drop(c);

    // An unreachable database: a warning naming the cause; the controller runs without it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let conf = conf_dir(port);
    let c = LocalCluster::start_with(Some(conf.path()), |_| {});
    let log = ctld_log(&c);
    let want = format!("could not import the associations of cluster oracle from slurmdbd's database: connecting to mysql://slurm@127.0.0.1:{port}/slurm_acct_db");
    assert!(log.contains(&want), "{want} in\n{log}");
    assert!(!log.contains(PASSWORD), "the password is never logged");
    let accounts = ok(
        &c,
        None,
        "sacctmgr",
        &["-n", "-P", "show", "account", "format=account"],
        c.dir(),
    );
    assert_eq!(accounts.trim(), "root", "only Slurm's default objects");
}
