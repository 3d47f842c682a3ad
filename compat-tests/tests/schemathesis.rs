//! schemathesis (PyPI, pinned in `rest-venv.sh`) against the OpenAPI document slurmrestd
//! serves (`/openapi/v3`), on `flotilla dev up`'s own slurmrestd over TCP with a JWT: property
//! based requests to every operation (its examples, coverage and fuzzing phases, and stateful
//! sequences), bounded by a fixed seed and example count. Checked: no 5xx
//! (`not_a_server_error`), every answer conforms to the schema the spec gives for its status
//! (`response_schema_conformance`) and has the content type the spec says.
//!
//! v0.0.38 is held to the schema and content type but not to "no 5xx": Slurm 22.05's
//! slurmrestd answers 500 for every refused request (an unknown job or node, a bad
//! submission: see `compat-tests/goldens-rest/README.md`), and v0.0.38 answers as 22.05 does.
//!
//! The requests are made as alice (root's `scontrol token username=alice`): fuzzed job
//! submissions that the controller accepts run as her, never as root. Needs root
//! (`FLOTILLA_TEST_ROOT=1`) for that.

use flotilla_compat_tests::cluster::LocalCluster;
use std::process::Command;

fn schemathesis(dir: &std::path::Path, url: &str, token: &str, filter: &[&str], checks: &str) -> (bool, String) {
    let bin = flotilla_compat_tests::restd::python().with_file_name("schemathesis");
    // Its cache (`.schemathesis/`) goes to the cluster's temp dir, not the source tree.
    let o = Command::new(&bin)
        .current_dir(dir)
        .args(["run", &format!("{url}/openapi/v3")])
        .args(["-H", "X-SLURM-USER-NAME: alice", "-H", &format!("X-SLURM-USER-TOKEN: {token}")])
        .args(filter)
        .args(["--checks", checks, "--max-examples", "25", "--seed", "20261202", "--workers", "1"])
        .args(["--no-color", "--warnings", "off", "--request-timeout", "30"])
        .env("SCHEMATHESIS_HOOKS", "")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.success(), text)
}

#[test]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    if !flotilla_compat_tests::root_tests("fuzzes the REST API as alice (2001) on a local cluster") {
        return;
    }
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let url = c.restd_url().expect("flotilla dev up starts slurmrestd").to_string();
    let o = c.run("scontrol", &["token", "username=alice", "lifespan=3600"], c.dir());
    let out = String::from_utf8_lossy(&o.stdout);
    let token = out.trim().strip_prefix("SLURM_JWT=").unwrap_or_else(|| panic!("scontrol token: {out}"));
    let (ok, text) = schemathesis(
        c.dir(),
        &url,
        token,
        &["--exclude-path-regex", "v0\\.0\\.38"],
        "not_a_server_error,response_schema_conformance,content_type_conformance",
    );
    assert!(ok, "schemathesis (v0.0.41-44, slurmdb, fleet):\n{text}");
    let (ok, text) = schemathesis(c.dir(), &url, token, &["--include-path-regex", "v0\\.0\\.38"], "response_schema_conformance,content_type_conformance");
    assert!(ok, "schemathesis (v0.0.38):\n{text}");
    // The requests were authenticated and reached the controller as alice (not all refused
    // at the door, which would make the checks vacuous): sdiag's RPCs by user.
    let o = c.run("sdiag", &[], c.dir());
    let sdiag = String::from_utf8_lossy(&o.stdout);
    let alice: u64 = sdiag
        .lines()
        .find(|l| l.trim_start().starts_with("alice "))
        .and_then(|l| l.split("count:").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no RPCs of alice in sdiag:\n{sdiag}"));
    assert!(alice >= 100, "only {alice} RPCs of alice reached the controller:\n{sdiag}");
}
