//! `sshare` and `sprio` as binaries against a local cluster: the reference's texts for
//! `priority/basic` (s18-ref's golden `0106_sprio_basic`), the exporter's line, and with
//! `priority/multifactor` the weights line (`0147_sprio_w`, without its TRES column) and a
//! pending job's row.

use flotilla_compat_tests::cluster::LocalCluster;

fn conf(extra: &str) -> tempfile::TempDir {
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    let mut text = std::fs::read_to_string(conf.path().join("slurm.conf")).unwrap();
    text.push_str(extra);
    std::fs::write(conf.path().join("slurm.conf"), text).unwrap();
    conf
}

fn run(c: &LocalCluster, prog: &str, args: &[&str]) -> (i32, String, String) {
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    let o = c.run(prog, args, &w);
    (o.status.code().unwrap_or(-1), String::from_utf8(o.stdout).unwrap(), String::from_utf8(o.stderr).unwrap())
}

const SSHARE_HEADER: &str = "\
Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare 
-------------------- ---------- ---------- ----------- ----------- ------------- ---------- 
";

#[test]
fn sshare_and_sprio_talk_to_the_controller() {
    flotilla_compat_tests::build_binaries();
    let dir = conf("");
    let c = LocalCluster::start_with(Some(dir.path()), |_| {});
    assert_eq!(
        run(&c, "sprio", &[]),
        (1, String::new(), "You are not running a supported priority plugin\n(priority/basic).\nOnly 'priority/multifactor' is supported.\n".into())
    );
    assert_eq!(run(&c, "sprio", &["--bogus"]), (1, String::new(), "sprio: unrecognized option '--bogus'\nTry \"sprio --help\" for more information\n".into()));
    // A fresh accounting database: Slurm's default objects, account root and user root in it,
    // as sshare prints them under priority/basic (no fair share computed: golden 0107's form).
    let fresh = format!(
        "{SSHARE_HEADER}root                                                             0      0.000000            \n root                      root          1                       0      0.000000   0.000000 \n"
    );
    assert_eq!(run(&c, "sshare", &[]), (0, fresh, String::new()));
    assert_eq!(run(&c, "sshare", &["-n", "-P", "-o", "account,fairshare"]), (0, "root|\n root|0.000000\n".into(), String::new()));
    assert_eq!(run(&c, "sshare", &["-o", "NoSuchField"]), (1, String::new(), "sshare: error: Invalid field requested: \"nosuchfield\"\n".into()));
    drop(c);

    let dir = conf(
        "PriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightFairshare=10000\n\
         PriorityWeightJobSize=1000\nPriorityWeightPartition=1000\nPriorityWeightQOS=1000\n",
    );
    let c = LocalCluster::start_with(Some(dir.path()), |_| {});
    assert_eq!(
        run(&c, "sprio", &["-w"]),
        (
            0,
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS\n        \
             Weights                               1       1000      10000       1000       1000       1000\n"
                .into(),
            String::new()
        )
    );
    let (code, id, err) = run(&c, "sbatch", &["--parsable", "--begin=now+1hour", "-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_string();
    let (code, out, err) = run(&c, "sprio", &["-h", "-j", &id, "-o", "%.15i %.8u %.10P"]);
    assert_eq!(code, 0, "{err}");
    // Both partitions have PriorityJobFactor 1, so the partition factor is 1 × 1000.
    assert_eq!(out, format!("{id:>15} {:>8}       1000\n", "root"));
    assert_eq!(run(&c, "sprio", &["-j", "999999"]), (0, "Unable to find jobs matching user/id(s) specified\n".into(), String::new()));
}
