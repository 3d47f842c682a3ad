//! `sacctmgr` end to end on a local cluster in production mode (daemons as root): the real
//! binary adds an account and a user, shows them (the rivosinc exporter's line among the
//! layouts), modifies a limit, asks before a delete and discards on `n`, deletes, and refuses
//! a change by a user who is not an admin (alice, 2001, through `runuser`) with slurmdbd's
//! text while letting her show. Texts as Slurm 22.05's goldens (s18-ref's recordings, with
//! this cluster's name). Needs root (`FLOTILLA_TEST_ROOT=1`).

use flotilla_compat_tests::cluster::LocalCluster;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `sacctmgr args` as `user` (`None`: root) with `stdin`.
fn sacctmgr(c: &LocalCluster, user: Option<&str>, args: &[&str], stdin: &str, cwd: &Path) -> (i32, String, String) {
    let bin = flotilla_compat_tests::bin_dir().join("sacctmgr");
    let mut cmd = match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let mut child = cmd
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .envs(c.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sacctmgr runs");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("stdin written");
    let o: Output = child.wait_with_output().expect("sacctmgr ends");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn sacctmgr_adds_shows_modifies_deletes_and_refuses_non_admins() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        eprintln!("SKIPPED: runs sacctmgr as root and as alice (2001) on a local cluster; needs root (FLOTILLA_TEST_ROOT=1)");
        return;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but not root");
    assert!(flotilla_compat_tests::sh("id alice >/dev/null 2>&1 || useradd -u 2001 -m -s /bin/bash alice"), "useradd alice");
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    flotilla_compat_tests::sh(&format!("chmod 755 {}", conf.path().display()));
    let c = LocalCluster::start_with(Some(conf.path()), |_| {});
    flotilla_compat_tests::sh(&format!("chmod 755 {}", c.dir().display()));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    flotilla_compat_tests::sh(&format!("chmod 1777 {}", w.display()));
    let slurm_conf = std::fs::read_to_string(c.slurm_conf()).unwrap();
    let cluster = slurm_conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("ClusterName="))
        .expect("ClusterName")
        .trim()
        .to_string();
    let root = |args: &[&str]| sacctmgr(&c, None, args, "", &w);

    assert_eq!(root(&["--version"]), (0, "slurm-wlm 22.05.8\n".into(), String::new()));
    // Golden 0024.
    let o = root(&["-i", "add", "account", "physics", "Description=physics", "Organization=science"]);
    let want = format!(
        " Adding Account(s)\n  physics\n Settings\n  Description     = physics\n  Organization    = science\n Associations\n  A = physics    C = {:<10.10}\n Settings\n  Parent        = root\n",
        cluster
    );
    assert_eq!(o, (0, want, String::new()));
    assert_eq!(root(&["-i", "add", "account", "physics"]), (1, " Nothing new added.\n".into(), String::new()), "golden 0028");
    let o = root(&["-i", "add", "user", "alice", "account=physics"]);
    assert_eq!(o.0, 0, "{o:?}");
    assert!(o.1.starts_with(" Adding User(s)\n  alice\n Associations =\n  U = alice     A = physics    C = "), "{o:?}");
    assert_eq!(
        root(&["show", "assoc", "format=Account,User", "-P"]),
        (0, "Account|User\nroot|\nroot|root\nphysics|\nphysics|alice\n".into(), String::new())
    );
    let o = root(&["-i", "modify", "user", "alice", "set", "MaxJobs=2", "GrpTRES=cpu=64"]);
    assert_eq!(o.1, format!(" Modified user associations...\n  C = {cluster:<10} A = physics              U = alice    \n"));
    assert_eq!(root(&["show", "assoc", "where", "user=alice", "format=Account,User,MaxJobs,GrpTRES", "-P", "-n"]).1, "physics|alice|2|cpu=64\n");
    // The rivosinc exporter's line (golden 0061's shape).
    assert_eq!(
        root(&["show", "assoc", "format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit", "--noheader", "--parsable2"]).1,
        "|root||||\nroot|root||||\n|physics||||\nalice|physics|64|||\n"
    );
    assert_eq!(root(&["show", "user", "format=User,DefaultAccount,Admin", "-P"]).1, "User|Def Acct|Admin\nalice|physics|None\nroot|root|Administrator\n");

    // alice may show, not change (goldens 0084, 0085).
    let o = sacctmgr(&c, Some("alice"), &["show", "assoc", "format=Account,User", "-n", "-P"], "", &w);
    assert_eq!(o.0, 0, "{o:?}");
    let o = sacctmgr(&c, Some("alice"), &["-i", "modify", "account", "physics", "set", "GrpJobs=1"], "", &w);
    assert_eq!(
        o,
        (1, String::new(), "sacctmgr: error: Your user doesn't have privilege to perform this action\n Error with request: Access/permission denied\n".into())
    );

    // The commit question, answered n (golden 0094): nothing deleted.
    let o = sacctmgr(&c, None, &["delete", "account", "physics"], "n\n", &w);
    assert_eq!(
        o,
        (0, " Deleting accounts...\n  physics\nWould you like to commit changes? (You have 30 seconds to decide)\n(N/y): \n Changes Discarded\n".into(), String::new())
    );
    assert_eq!(root(&["-n", "-P", "list", "account", "format=Account"]).1, "physics\nroot\n");
    assert_eq!(root(&["-i", "delete", "user", "alice"]), (0, " Deleting users...\n  alice\n".into(), String::new()));
    // Answered y (golden 0095).
    let o = sacctmgr(&c, None, &["delete", "account", "physics"], "y\n", &w);
    assert_eq!(o.1, " Deleting accounts...\n  physics\nWould you like to commit changes? (You have 30 seconds to decide)\n(N/y): \n");
    assert_eq!(root(&["-n", "-P", "list", "account", "format=Account"]).1, "root\n");
    assert_eq!(root(&["-i", "delete", "account", "physics"]), (1, " Nothing deleted\n".into(), String::new()), "golden 0093");
    assert_eq!(root(&["show", "assoc", "format=NoSuchField"]), (1, String::new(), "Unknown field 'nosuchfield'\n".into()));
}
