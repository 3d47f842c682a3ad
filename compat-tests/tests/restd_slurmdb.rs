//! slurmrestd's accounting endpoints, `/slurmdb/vX/` (GET), end to end: a local cluster, an
//! account and a user added with the real `sacctmgr`, two jobs run to completion with the
//! real `sbatch` (one ends 0, one exits 3), then every endpoint in every version.
//!
//! The data_parser versions (v0.0.41–v0.0.44): each answer against the schema slurmrestd
//! serves (`/openapi/v3`, strictly) and the real `slurmrestapi` 25.11.4 client's models
//! (`restd::check_models`); the client itself over TCP with an `scontrol token` JWT for the
//! jobs and the accounts. v0.0.38: each answer against the served schema and, key by key and
//! type by type, against what real slurmrestd 22.05.8 answered on the reference cluster
//! (`goldens-rest/v0.0.38/db_*.json`), error numbers and statuses included; so is the real
//! `sacct --json` (`sacct_json.json`). Needs root
//! (`FLOTILLA_TEST_ROOT=1`): sacctmgr's changes are an administrator's.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{check_models, golden38, shape_differences, Checker, Restd, Via};
use flotilla_compat_tests::wait::wait_until;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const VERSIONS: [&str; 4] = ["v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"];

fn run_ok(c: &LocalCluster, name: &str, args: &[&str], cwd: &std::path::Path) -> String {
    let o = c.run(name, args, cwd);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{name} {args:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn jobs_of(j: &Value) -> Vec<u64> {
    j["jobs"].as_array().map(|a| a.iter().filter_map(|x| x["job_id"].as_u64()).collect()).unwrap_or_default()
}

/// The real `slurmrestapi` client's `SlurmdbApi` over TCP with a token: jobs, one job,
/// accounts and one account in each data_parser version.
const CLIENT_PY: &str = r##"
import sys
import slurmrestapi
from slurmrestapi.api.slurmdb_api import SlurmdbApi

url, user, token, ok_id, fail_id = sys.argv[1:6]
cfg = slurmrestapi.Configuration(host=url)
cfg.api_key["user"] = user
cfg.api_key["token"] = token
api = SlurmdbApi(slurmrestapi.ApiClient(cfg))
for v in ["0041", "0042", "0043", "0044"]:
    call = lambda n, *a, **k: getattr(api, f"slurmdb_v{v}_{n}")(*a, **k)
    jobs = call("get_jobs").jobs
    ids = [j.job_id for j in jobs]
    assert int(ok_id) in ids and int(fail_id) in ids, ids
    one = call("get_job", ok_id).jobs
    assert [j.job_id for j in one] == [int(ok_id)], one
    assert one[0].state.current == ["COMPLETED"], one[0].state
    failed = call("get_jobs", job_name="db-fail").jobs
    assert [j.job_id for j in failed] == [int(fail_id)], failed
    assert failed[0].exit_code.return_code.number == 3, failed[0].exit_code
    accts = call("get_accounts").accounts
    assert "physics" in [a.name for a in accts], accts
    a = call("get_account", "physics").accounts
    assert [(x.name, x.organization) for x in a] == [("physics", "science")], a
    print(f"ok v{v}")
"##;

#[test]
fn slurmdb_endpoints_answer_as_slurms_in_every_version() {
    if !flotilla_compat_tests::root_tests("adds an account and a user with sacctmgr (an administrator's change)") {
        return;
    }
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let mut ck = Checker::new(&r);
    let w = c.dir().join("db-work");
    std::fs::create_dir_all(&w).expect("work dir");
    run_ok(&c, "sacctmgr", &["-i", "add", "account", "physics", "Description=physics", "Organization=science"], &w);
    run_ok(&c, "sacctmgr", &["-i", "add", "user", "alice", "Account=physics"], &w);
    let id = |out: String| out.trim().split(';').next().and_then(|x| x.parse::<u64>().ok()).unwrap_or_else(|| panic!("sbatch: {out:?}"));
    let ok = id(run_ok(&c, "sbatch", &["--parsable", "-J", "db-ok", "-t", "5", "--wrap", "true"], &w));
    let fail = id(run_ok(&c, "sbatch", &["--parsable", "-J", "db-fail", "--wrap", "exit 3"], &w));
    let last = std::cell::RefCell::new(Value::Null);
    let state_is = |job: u64, want: &str| {
        *last.borrow_mut() = r.get(&format!("/slurmdb/v0.0.42/job/{job}")).json();
        last.borrow()["jobs"][0]["state"]["current"] == json!([want])
    };
    wait_until(&format!("job {ok} COMPLETED"), Duration::from_secs(60), || state_is(ok, "COMPLETED"), || format!("{:#}", last.borrow()));
    wait_until(&format!("job {fail} FAILED"), Duration::from_secs(60), || state_is(fail, "FAILED"), || format!("{:#}", last.borrow()));

    for v in VERSIONS {
        let p = |s: &str| format!("/slurmdb/{v}/{s}");
        let get = |s: &str| {
            let a = r.get(&p(s));
            assert_eq!(a.status, 200, "{v} {s}: {}", a.body);
            a
        };
        // Jobs and their filters.
        let j = ck.check_v(&get("jobs/"), "get", &p("jobs/"), v, "{}OpenapiSlurmdbdJobsResp");
        assert!(jobs_of(&j).contains(&ok) && jobs_of(&j).contains(&fail), "{j:#}");
        assert_eq!(j["meta"]["plugin"]["type"], "openapi/slurmdbd");
        let one = ck.check_v(&get(&format!("job/{ok}")), "get", &p("job/{job_id}"), v, "{}OpenapiSlurmdbdJobsResp");
        assert_eq!(jobs_of(&one), [ok]);
        let job = &one["jobs"][0];
        assert_eq!((job["name"].as_str(), job["exit_code"]["status"].clone()), (Some("db-ok"), json!(["SUCCESS"])), "{job:#}");
        assert_eq!(job["time"]["limit"], json!({"set": true, "infinite": false, "number": 5}), "{job:#}");
        assert!(job["time"]["start"].as_i64().unwrap_or(0) > 0 && job["time"]["end"].as_i64() >= job["time"]["start"].as_i64(), "{job:#}");
        assert_eq!(job["steps"][0]["step"]["id"], format!("{ok}.batch"), "{job:#}");
        assert_eq!(job["tres"]["allocated"][0]["type"], "cpu", "{job:#}");
        let f = ck.check_v(&get("jobs/?job_name=db-fail"), "get", &p("jobs/"), v, "{}OpenapiSlurmdbdJobsResp");
        assert_eq!(jobs_of(&f), [fail], "{f:#}");
        assert_eq!(f["jobs"][0]["exit_code"]["return_code"]["number"], 3, "{f:#}");
        let f = ck.check_v(&get("jobs/?state=FAILED&users=root"), "get", &p("jobs/"), v, "{}OpenapiSlurmdbdJobsResp");
        assert_eq!(jobs_of(&f), [fail], "{f:#}");
        // Nothing found: a success with Slurm's warning.
        let none = ck.check_v(&get("jobs/?account=nosuch"), "get", &p("jobs/"), v, "{}OpenapiSlurmdbdJobsResp");
        assert_eq!(none["jobs"], json!([]));
        assert_eq!(none["warnings"][0]["description"], "slurmdb_jobs_get() found nothing", "{none:#}");
        let none = ck.check_v(&get("job/999999"), "get", &p("job/{job_id}"), v, "{}OpenapiSlurmdbdJobsResp");
        assert_eq!(none["jobs"], json!([]));
        let a = r.get(&p("job/notanid"));
        assert_eq!(a.status, 422, "{}", a.body);
        assert_eq!(ck.check_v(&a, "get", &p("job/{job_id}"), v, "{}OpenapiSlurmdbdJobsResp")["errors"][0]["error_number"], 9000);
        let a = r.get(&p("jobs/?start_time=soon"));
        assert_eq!(a.status, 422, "{}", a.body);
        // The accounting rows.
        let accts = ck.check_v(&get("accounts/"), "get", &p("accounts/"), v, "{}OpenapiAccountsResp");
        let names: Vec<&str> = accts["accounts"].as_array().unwrap().iter().filter_map(|a| a["name"].as_str()).collect();
        assert!(names.contains(&"physics") && names.contains(&"root"), "{accts:#}");
        let one = ck.check_v(&get("account/physics"), "get", &p("account/{account_name}"), v, "{}OpenapiAccountsResp");
        assert_eq!(one["accounts"].as_array().map(Vec::len), Some(1), "{one:#}");
        assert_eq!((one["accounts"][0]["organization"].as_str(), one["accounts"][0]["associations"][0]["account"].as_str()), (Some("science"), Some("physics")));
        let none = ck.check_v(&get("account/nosuch"), "get", &p("account/{account_name}"), v, "{}OpenapiAccountsResp");
        assert_eq!((none["accounts"].clone(), none["warnings"][0]["description"].as_str()), (json!([]), Some("slurmdb_accounts_get() found nothing")));
        let users = ck.check_v(&get("users/"), "get", &p("users/"), v, "{}OpenapiUsersResp");
        assert!(users["users"].as_array().unwrap().iter().any(|u| u["name"] == "alice"), "{users:#}");
        let alice = ck.check_v(&get("user/alice"), "get", &p("user/{name}"), v, "{}OpenapiUsersResp");
        assert_eq!(alice["users"][0]["default"]["account"], "physics", "{alice:#}");
        assert_eq!(alice["users"][0]["administrator_level"], json!(["None"]));
        let assocs = ck.check_v(&get("associations/"), "get", &p("associations/"), v, "{}OpenapiAssocsResp");
        let mine: Vec<&Value> = assocs["associations"].as_array().unwrap().iter().filter(|a| a["user"] == "alice").collect();
        assert_eq!(mine.len(), 1, "{assocs:#}");
        assert_eq!((mine[0]["account"].as_str(), mine[0]["parent_account"].as_str(), mine[0]["is_default"].as_bool()), (Some("physics"), Some("physics"), Some(true)), "{assocs:#}");
        let f = ck.check_v(&get("associations/?account=physics&user=alice"), "get", &p("associations/"), v, "{}OpenapiAssocsResp");
        assert_eq!(f["associations"].as_array().map(Vec::len), Some(1), "{f:#}");
        let qos = ck.check_v(&get("qos/"), "get", &p("qos/"), v, "{}OpenapiSlurmdbdQosResp");
        assert!(qos["qos"].as_array().unwrap().iter().any(|q| q["name"] == "normal"), "{qos:#}");
        let normal = ck.check_v(&get("qos/normal"), "get", &p("qos/{qos}"), v, "{}OpenapiSlurmdbdQosResp");
        assert_eq!((normal["qos"].as_array().map(Vec::len), normal["qos"][0]["id"].as_i64()), (Some(1), Some(1)), "{normal:#}");
        let tres = ck.check_v(&get("tres/"), "get", &p("tres/"), v, "{}OpenapiTresResp");
        assert_eq!(tres["TRES"][0], json!({"type": "cpu", "name": "", "id": 1, "count": 0}));
        let conf = ck.check_v(&get("config"), "get", &p("config"), v, "{}OpenapiSlurmdbdConfigResp");
        assert_eq!(conf["accounts"], accts["accounts"]);
        assert_eq!(conf["qos"], qos["qos"]);
        let d = ck.check_v(&get("diag/"), "get", &p("diag/"), v, "{}OpenapiSlurmdbdStatsResp");
        assert!(d["statistics"]["RPCs"].as_array().is_some_and(|x| !x.is_empty()), "{d:#}");
        assert!(d["statistics"]["time_start"].as_i64().unwrap_or(0) > 0, "{d:#}");
    }
    check_models(&ck.seen).unwrap_or_else(|e| panic!("the slurmrestapi models refuse answers:\n{e}"));

    // v0.0.38 against real 22.05.8's recordings, whole documents, key by key and by type.
    let v = "v0.0.38";
    let p = |s: &str| format!("/slurmdb/{v}/{s}");
    for (golden, path, spec_path) in [
        ("db_jobs", "jobs/?job_name=db-ok".to_string(), "jobs/"),
        ("db_job_3", format!("job/{fail}"), "job/{job_id}"),
        ("db_accounts", "accounts/".to_string(), "accounts/"),
        ("db_account_research", "account/physics".to_string(), "account/{account_name}"),
        ("db_associations", "associations/".to_string(), "associations/"),
        ("db_users", "users/".to_string(), "users/"),
        ("db_user_alice", "user/alice".to_string(), "user/{user_name}"),
        ("db_qos", "qos/".to_string(), "qos/"),
        ("db_qos_normal", "qos/normal".to_string(), "qos/{qos_name}"),
        ("db_tres", "tres/".to_string(), "tres/"),
        ("db_job_missing", "job/999999".to_string(), "job/{job_id}"),
    ] {
        let g = golden38(golden);
        let a = r.get(&p(&path));
        assert_eq!(u64::from(a.status), g["status"].as_u64().unwrap(), "{golden}: {}", a.body);
        let ours = ck.check_v(&a, "get", &p(spec_path), v, "");
        let bad = shape_differences("$", &ours, &g["response"]);
        assert!(bad.is_empty(), "{golden} ({path}): {bad:#?}\nours: {ours:#}");
        let num = |d: &Value| d["errors"][0]["error_number"].as_i64();
        assert_eq!(num(&ours), num(&g["response"]), "{golden}: {ours:#}");
    }
    let j = r.get(&p(&format!("job/{ok}"))).json();
    assert_eq!((j["jobs"][0]["state"]["current"].as_str(), j["jobs"][0]["exit_code"].clone()), (Some("COMPLETED"), json!({"status": "SUCCESS", "return_code": 0})), "{j:#}");
    let j = r.get(&p(&format!("job/{fail}"))).json();
    assert_eq!(j["jobs"][0]["exit_code"], json!({"status": "ERROR", "return_code": 3}), "{j:#}");
    // The configuration: root is an administrator, so every list and no error (22.05 refuses a
    // user who is not, as the recording, alice's, shows: 2002 and 500).
    let a = r.get(&p("config"));
    assert_eq!(a.status, 200, "{}", a.body);
    let conf = ck.check_v(&a, "get", &p("config"), v, "");
    let mut g = golden38("db_config")["response"].clone();
    g["errors"] = json!([]);
    let bad = shape_differences("$", &conf, &g);
    assert!(bad.is_empty(), "db_config: {bad:#?}\nours: {conf:#}");
    let a = r.get(&p("diag/"));
    assert_eq!(a.status, 200, "{}", a.body);
    ck.check_v(&a, "get", &p("diag/"), v, "");

    // A user who is not an operator (alice, with a token) is refused the configuration and the
    // statistics, as 22.05 refused the recording's alice: 2002, HTTP 500, the lists still sent
    // for the configuration.
    let out = run_ok(&c, "scontrol", &["token", "username=alice"], &w);
    let alice_token = out.trim().strip_prefix("SLURM_JWT=").unwrap_or_else(|| panic!("{out:?}")).to_string();
    let as_alice = [("X-SLURM-USER-NAME", "alice"), ("X-SLURM-USER-TOKEN", alice_token.as_str())];
    for (golden, path) in [("db_diag", "diag/"), ("db_config", "config")] {
        let g = golden38(golden);
        let a = r.call(Via::Tcp, "GET", &p(path), &as_alice, None);
        assert_eq!(u64::from(a.status), g["status"].as_u64().unwrap(), "{golden} as alice: {}", a.body);
        let ours = ck.check_v(&a, "get", &p(path), v, "");
        let bad = shape_differences("$", &ours, &g["response"]);
        assert!(bad.is_empty(), "{golden} as alice: {bad:#?}\nours: {ours:#}");
        assert_eq!(ours["errors"], g["response"]["errors"], "{golden} as alice");
    }

    // `sacct --json`: 22.05's job list with its envelope, as the recording of `sacct --json`.
    let out = run_ok(&c, "sacct", &["--json", "-j", &format!("{ok},{fail}")], &w);
    let ours: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("sacct --json ({e}): {out}"));
    assert_eq!(jobs_of(&ours), [ok, fail], "{ours:#}");
    let g = golden38("sacct_json");
    let bad = shape_differences("$", &ours, &g["stdout"]);
    assert!(bad.is_empty(), "sacct --json: {bad:#?}\nours: {ours:#}");
    assert_eq!(ours["jobs"][1]["exit_code"], json!({"status": "ERROR", "return_code": 3}));

    // The real client over TCP with a token.
    let url = c.restd_url().expect("flotilla dev up starts slurmrestd").to_string();
    let out = run_ok(&c, "scontrol", &["token"], &w);
    let token = out.trim().strip_prefix("SLURM_JWT=").unwrap_or_else(|| panic!("{out:?}")).to_string();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().expect("my user").name;
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("client.py");
    std::fs::write(&script, CLIENT_PY).expect("write the client script");
    let o = Command::new(flotilla_compat_tests::restd::python())
        .arg(&script)
        .args([url.as_str(), user.as_str(), token.as_str(), &ok.to_string(), &fail.to_string()])
        .output()
        .expect("python runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the slurmrestapi client failed:\n{text}");
    assert_eq!(text.matches("ok v00").count(), 4, "{text}");
}
