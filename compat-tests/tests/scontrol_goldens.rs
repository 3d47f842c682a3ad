//! Real Slurm 22.05's goldens for `scontrol --version` and `scontrol show host…`, replayed
//! against our `scontrol` byte for byte (stdout, stderr, exit code), each under
//! `/bin/bash -c` with the case's exact environment and our binary first on `PATH`.

use flotilla_compat_tests::{goldens_dir, load_goldens, GoldenCase};

/// Cases this test owns: `scontrol show host…` (with or without `SLURM_*NODELIST=`
/// assignments in front) and scontrol's version.
fn is_ours(case: &GoldenCase) -> bool {
    let cmd = case.command();
    cmd.starts_with("scontrol show host")
        || cmd == "scontrol --version"
        || cmd == "scontrol -V"
        || cmd == "scontrol version"
}

#[test]
fn scontrol_hostlist_and_version_goldens() {
    if !goldens_dir().is_dir() {
        eprintln!(
            "skipped: no goldens at {} (set FLOTILLA_SHARED_DIR)",
            goldens_dir().display()
        );
        return;
    }
    flotilla_compat_tests::build_binaries();
    let bin_dir = flotilla_compat_tests::bin_dir_with(&["scontrol"]);
    let bin_dir = bin_dir.as_path();
    let cwd = std::env::temp_dir();
    let cases: Vec<GoldenCase> = load_goldens()
        .expect("goldens load")
        .into_iter()
        .filter(is_ours)
        .collect();
    // 0003 (version) and 0004-0018 (hostnames, hostlist, hostlistsorted) at the time of writing.
    assert!(
        cases.len() >= 16,
        "only {} scontrol hostlist/version goldens found",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let got = case.run_with_path(&[bin_dir], &cwd).expect("bash runs");
        if let Err(diff) = case.compare(&got) {
            failures.push(diff);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} goldens differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    eprintln!("{} scontrol goldens pass", cases.len());
}
