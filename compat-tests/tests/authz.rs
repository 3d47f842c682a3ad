//! Authorisation on a local cluster, as root with the real users alice (2001) and bob (2002)
//! running the commands (`runuser`): what each attack of issue #17 prints, with Slurm's text
//! and exit code — partition access keys of a migrated slurm.conf (`RootOnly`), accounts
//! without an association, `PrivateData=jobs`, and an admin hold a user tries to lift with
//! `uhold` then `release` (golden 0219's text). Needs root (`FLOTILLA_TEST_ROOT=1`).

use flotilla_compat_tests::cluster::LocalCluster;
use std::process::Output;

fn text(o: &Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn access_keys_accounts_private_data_and_holds_as_real_users() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        eprintln!("SKIPPED: runs commands as alice (2001) and bob (2002) on a local cluster; needs root (FLOTILLA_TEST_ROOT=1)");
        return;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but not root");
    assert!(flotilla_compat_tests::sh("command -v runuser >/dev/null"), "runuser is needed");
    for (name, uid) in [("alice", 2001), ("bob", 2002)] {
        assert!(flotilla_compat_tests::sh(&format!("id {name} >/dev/null 2>&1 || useradd -u {uid} -m -s /bin/bash {name}")), "useradd {name}");
    }
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    let slurm_conf = std::fs::read_to_string(refconf.join("slurm.conf")).unwrap();
    std::fs::write(
        conf.path().join("slurm.conf"),
        format!(
            "PrivateData=jobs\nAccountingStorageEnforce=associations\n{slurm_conf}\n\
             PartitionName=admins Nodes=gpu01 RootOnly=YES MaxTime=30\n"
        ),
    )
    .unwrap();
    std::fs::write(conf.path().join("quota.conf"), "Account=research Users=alice,bob,root\nAccount=ops Users=root\n").unwrap();
    flotilla_compat_tests::sh(&format!("chmod 755 {}", conf.path().display()));
    let c = LocalCluster::start_with(Some(conf.path()), |_| {});
    flotilla_compat_tests::sh(&format!("chmod 755 {}", c.dir().display()));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    flotilla_compat_tests::sh(&format!("chmod 1777 {}", w.display()));

    // RootOnly: alice may not submit there; root may.
    let o = c.run_as(Some("alice"), "sbatch", &["-p", "admins", "-o", "/dev/null", "--wrap", "true"], &w);
    assert_eq!(text(&o), (1, String::new(), "sbatch: error: Batch job submission failed: Access/permission denied\n".into()));
    // An account alice has no association with, associations enforced (without
    // `AccountingStorageEnforce=associations` Slurm 22.05 charges her default account
    // instead: goldens-extra a11).
    let o = c.run_as(Some("alice"), "sbatch", &["-A", "ops", "-o", "/dev/null", "--wrap", "true"], &w);
    assert_eq!(
        text(&o),
        (1, String::new(), "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n".into())
    );

    // Alice's held job: bob does not see it (PrivateData=jobs), root does.
    let o = c.run_as(Some("alice"), "sbatch", &["--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"], &w);
    let (rc, out, err) = text(&o);
    assert_eq!(rc, 0, "{err}");
    let id = out.trim().to_string();
    let o = c.run_as(Some("bob"), "squeue", &["-h", "-o", "%i"], &w);
    assert_eq!(text(&o), (0, String::new(), String::new()), "bob sees no job of alice's");
    let o = c.run_as(None, "squeue", &["-h", "-o", "%i"], &w);
    assert_eq!(text(&o).1.trim(), id, "root sees it");

    // An admin hold: alice's uhold succeeds and changes nothing; her release is refused.
    assert_eq!(text(&c.run_as(None, "scontrol", &["hold", &id], &w)).0, 0);
    assert_eq!(text(&c.run_as(Some("alice"), "scontrol", &["uhold", &id], &w)).0, 0);
    let o = c.run_as(Some("alice"), "squeue", &["-h", "-j", &id, "-o", "%r"], &w);
    assert_eq!(text(&o).1, "JobHeldAdmin\n");
    let o = c.run_as(Some("alice"), "scontrol", &["release", &id], &w);
    assert_eq!(
        text(&o),
        (1, String::new(), format!("Access/permission denied for job {id}\nslurm_suspend error: Access/permission denied\n"))
    );
    assert_eq!(text(&c.run_as(None, "scancel", &[&id], &w)).0, 0);
}
