//! slurmrestd's `/slurm/vX/` endpoints of the data_parser versions (v0.0.41–v0.0.44) end to
//! end: a local cluster, slurmrestd on its Unix socket (`rest_auth/local`), a job submitted,
//! listed, updated and cancelled over REST; nodes, partitions, diag and the error answers.
//!
//! Every answer is checked twice: against the schema slurmrestd serves (`/openapi/v3`, read
//! back and applied strictly: no key it does not name), and against the real `slurmrestapi`
//! 25.11.4 client's models in Python (no unknown key, no required key missing, `from_dict`
//! accepts it). Without that client's venv the test fails (`restd::python`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{check_models, Checker, Restd, Via};
use flotilla_compat_tests::wait::wait_until;
use serde_json::{json, Value};
use std::time::Duration;

const VERSIONS: [&str; 4] = ["v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"];

fn submit_body(dir: &std::path::Path, name: &str) -> String {
    json!({
        "script": "#!/bin/sh\nsleep 300\n",
        "job": {
            "name": name,
            "current_working_directory": dir.display().to_string(),
            "environment": ["PATH=/usr/bin:/bin"],
            "time_limit": {"set": true, "infinite": false, "number": 10},
            "standard_output": dir.join("out-%j.txt").display().to_string(),
        }
    })
    .to_string()
}

#[test]
fn a_job_is_submitted_listed_updated_and_cancelled_in_every_version() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let mut ck = Checker::new(&r);
    let work = c.dir().join("rest-work");
    std::fs::create_dir_all(&work).expect("work dir");
    for v in VERSIONS {
        let p = |s: &str| format!("/slurm/{v}/{s}");
        // Submit.
        let name = format!("rest-{v}");
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(&submit_body(&work, &name)));
        assert_eq!(a.status, 200, "{v} submit: {}", a.body);
        let j = ck.check_v(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(j["errors"], json!([]), "{v}: {j}");
        assert_eq!(j["step_id"], "batch");
        let id = j["job_id"].as_u64().expect("job_id");
        assert!(id > 0);
        // It runs; the list and the single answer show it.
        let job = |ck: &mut Checker| {
            let a = r.get(&p(&format!("job/{id}")));
            assert_eq!(a.status, 200, "{v} job/{id}: {}", a.body);
            let j = ck.check_v(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
            j["jobs"][0].clone()
        };
        // Polled without checks (the answers after the wait are checked).
        let last = std::cell::RefCell::new(Value::Null);
        let state_is = |want: &str| {
            *last.borrow_mut() = r.get(&p(&format!("job/{id}"))).json();
            last.borrow()["jobs"][0]["job_state"] == json!([want])
        };
        wait_until(
            &format!("{v}: job {id} RUNNING"),
            Duration::from_secs(30),
            || state_is("RUNNING"),
            || format!("last: {:#}", last.borrow()),
        );
        let one = job(&mut ck);
        assert_eq!(one["job_id"], id);
        assert_eq!(one["name"], name.as_str());
        assert_eq!(one["time_limit"], json!({"set": true, "infinite": false, "number": 10}));
        assert_eq!(one["current_working_directory"], work.display().to_string());
        assert!(c.nodes().iter().any(|n| one["nodes"] == n.as_str()), "{one:#}");
        assert!(one["start_time"]["number"].as_i64().unwrap_or(0) > 0, "{one:#}");
        assert_eq!(one["exit_code"]["status"], json!(["PENDING"]));
        let a = r.get(&p("jobs/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let all = ck.check_v(&a, "get", &p("jobs/"), v, "{}OpenapiJobInfoResp");
        assert!(all["jobs"].as_array().unwrap().iter().any(|j| j["job_id"] == id), "{all:#}");
        assert_eq!(all["last_update"]["set"], true);
        let a = r.get(&p("jobs/?update_time=0"));
        assert_eq!(a.status, 200, "{}", a.body);
        // Update (scontrol update job Comment= Name=).
        let upd = json!({"comment": format!("via {v}"), "name": format!("{name}-2")}).to_string();
        let a = r.call(Via::Unix, "POST", &p(&format!("job/{id}")), &[], Some(&upd));
        assert_eq!(a.status, 200, "{v} update: {}", a.body);
        let u = ck.check_v(&a, "post", &p("job/{job_id}"), v, "{}OpenapiJobPostResponse");
        assert_eq!(u["results"][0]["error_code"], 0, "{u:#}");
        let one = job(&mut ck);
        assert_eq!(one["comment"], format!("via {v}"));
        assert_eq!(one["name"], format!("{name}-2"));
        // Cancel (DELETE: SIGKILL to the whole job).
        let a = r.call(Via::Unix, "DELETE", &p(&format!("job/{id}")), &[], None);
        assert_eq!(a.status, 200, "{v} delete: {}", a.body);
        let k = ck.check_v(&a, "delete", &p("job/{job_id}"), v, if v == "v0.0.41" { "{}OpenapiResp" } else { "{}OpenapiKillJobResp" });
        assert_eq!(k["errors"], json!([]), "{k:#}");
        if v != "v0.0.41" {
            assert_eq!(k["status"][0]["job_id"]["number"], id);
            assert_eq!(k["status"][0]["error"]["code"], 0);
        }
        wait_until(
            &format!("{v}: job {id} CANCELLED"),
            Duration::from_secs(30),
            || state_is("CANCELLED"),
            || format!("last: {:#}", last.borrow()),
        );
        let done = job(&mut ck);
        assert_eq!(done["exit_code"]["status"].as_array().map(Vec::len), Some(1), "{done:#}");
    }
    check_models(&ck.seen).unwrap_or_else(|e| panic!("the slurmrestapi models refuse answers:\n{e}"));
}

#[test]
fn nodes_partitions_diag_and_errors_answer_as_slurms_in_every_version() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let mut ck = Checker::new(&r);
    let first = c.nodes()[0].clone();
    for v in VERSIONS {
        let p = |s: &str| format!("/slurm/{v}/{s}");
        let a = r.get(&p("nodes/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let n = ck.check_v(&a, "get", &p("nodes/"), v, "{}OpenapiNodesResp");
        let names: Vec<&str> = n["nodes"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert_eq!(names, c.nodes().iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(n["nodes"][0]["state"], json!(["IDLE"]), "{n:#}");
        assert!(n["nodes"][0]["cpus"].as_u64().unwrap() > 0);
        // A query key Slurm does not know is ignored with its warning.
        let a = r.get(&p("nodes/?nosuch=1"));
        assert_eq!(a.status, 200, "{}", a.body);
        let w = ck.check_v(&a, "get", &p("nodes/"), v, "{}OpenapiNodesResp");
        assert!(w["warnings"][0]["description"].as_str().unwrap_or("").contains("nosuch"), "{w:#}");
        let a = r.get(&p(&format!("node/{first}")));
        assert_eq!(a.status, 200, "{}", a.body);
        let one = ck.check_v(&a, "get", &p("node/{node_name}"), v, "{}OpenapiNodesResp");
        assert_eq!(one["nodes"].as_array().map(Vec::len), Some(1));
        let a = r.get(&p("partitions/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let parts = ck.check_v(&a, "get", &p("partitions/"), v, "{}OpenapiPartitionResp");
        let part = parts["partitions"][0]["name"].as_str().expect("a partition").to_string();
        assert_eq!(parts["partitions"][0]["partition"]["state"], json!(["UP"]));
        let a = r.get(&p(&format!("partition/{}", part.to_uppercase())));
        assert_eq!(a.status, 200, "{}", a.body);
        let one = ck.check_v(&a, "get", &p("partition/{partition_name}"), v, "{}OpenapiPartitionResp");
        assert_eq!(one["partitions"][0]["name"], part.as_str());
        let a = r.get(&p("diag/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let d = ck.check_v(&a, "get", &p("diag/"), v, "{}OpenapiDiagResp");
        assert!(d["statistics"]["req_time"]["number"].as_i64().unwrap() > 0, "{d:#}");
        let types = d["statistics"]["rpcs_by_message_type"].as_array().unwrap();
        assert!(types.iter().any(|t| t["message_type"] == "REQUEST_NODE_INFO"), "{d:#}");
        // Errors, each with Slurm's number and HTTP status, still in the answer's shape.
        let a = r.get(&p("job/9999999"));
        assert_eq!(a.status, 404, "{}", a.body);
        let e = ck.check_v(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
        assert_eq!(e["errors"][0]["error_number"], 2017, "{e:#}");
        assert_eq!(e["errors"][0]["error"], "Invalid job id specified");
        assert_eq!(e["jobs"], json!([]));
        let a = r.get(&p("job/notanumber"));
        assert_eq!(a.status, 422, "{}", a.body);
        ck.check_v(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
        let a = r.get(&p("partition/nosuch"));
        assert_eq!(a.status, 422, "{}", a.body);
        let e = ck.check_v(&a, "get", &p("partition/{partition_name}"), v, "{}OpenapiPartitionResp");
        assert_eq!(e["errors"][0]["error_number"], 9000);
        // Slurm 25.11 answers 500 here; a client's unknown name is 404 (rest::dp::http_status).
        let a = r.get(&p("node/nosuch"));
        assert_eq!(a.status, 404, "{}", a.body);
        let e = ck.check_v(&a, "get", &p("node/{node_name}"), v, "{}OpenapiNodesResp");
        assert_eq!(e["errors"][0]["error_number"], 2018);
        let a = r.call(Via::Unix, "DELETE", &p("job/9999999?signal=NOPE"), &[], None);
        assert_eq!(a.status, 422, "{}", a.body);
        // Slurm 25.11: 500; a request error (ESLURM_* 2000-2999) is 400 here.
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(r#"{"job": {"name": "x"}}"#));
        assert_eq!(a.status, 400, "{}", a.body);
        let e = ck.check_v(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(e["errors"][0]["error_number"], 2009, "{e:#}");
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(r#"{"script": "x", "job": {"licenses": "a"}}"#));
        assert_eq!(a.status, 400, "{}", a.body);
        let e = ck.check_v(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(e["errors"][0]["source"], "licenses", "{e:#}");
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some("not json"));
        assert_eq!(a.status, 400, "{}", a.body);
        // Cancelling a job that does not exist: per-job error in status[] (v0.0.42+), as
        // Slurm's kill_jobs results; v0.0.41's answer is the error.
        let a = r.call(Via::Unix, "DELETE", &p("job/9999999"), &[], None);
        let model = if v == "v0.0.41" { "{}OpenapiResp" } else { "{}OpenapiKillJobResp" };
        let k = ck.check_v(&a, "delete", &p("job/{job_id}"), v, model);
        if v == "v0.0.41" {
            assert_eq!(a.status, 404, "{}", a.body);
            assert_eq!(k["errors"][0]["error_number"], 2017);
        } else {
            assert_eq!(a.status, 200, "{}", a.body);
            assert_eq!(k["status"][0]["error"]["code"], 2017, "{k:#}");
        }
    }
    // A partition that is not up shows its own word (`scontrol update State=DRAIN`), not DOWN,
    // in every version and in 22.05's v0.0.38 (`partitions.c`).
    let a = r.get(&format!("/slurm/{}/partitions/", VERSIONS[0]));
    let part = a.json()["partitions"][0]["name"].as_str().expect("a partition").to_string();
    let o = c.run("scontrol", &["update", &format!("PartitionName={part}"), "State=DRAIN"], c.dir());
    assert!(o.status.success(), "scontrol update State=DRAIN: {}", String::from_utf8_lossy(&o.stderr));
    for v in VERSIONS {
        let path = format!("/slurm/{v}/partitions/");
        let parts = ck.check_v(&r.get(&path), "get", &path, v, "{}OpenapiPartitionResp");
        assert_eq!(parts["partitions"][0]["partition"]["state"], json!(["DRAIN"]), "{v}: {parts:#}");
        let path = format!("/slurm/{v}/partition/{part}");
        let one = r.get(&path).json();
        assert_eq!(one["partitions"][0]["partition"]["state"], json!(["DRAIN"]), "{v}: {one:#}");
    }
    // (v0.0.38's models are another client's: its answers are checked in the v0.0.38 test.)
    let parts = r.get("/slurm/v0.0.38/partitions/").json();
    assert_eq!(parts["partitions"][0]["state"], "DRAIN", "{parts:#}");
    // The model check itself refuses what it must (a misspelt key, a required key missing, a
    // word outside an enum), so that its passing above means something.
    let nv = json!({"set": true, "infinite": false, "number": 1});
    for (doc, want) in [
        (json!({"nodes": [{"nmae": "x"}], "last_update": nv}), "'nmae'"),
        (json!({"nodes": []}), "'last_update'"),
        (json!({"nodes": [{"state": ["SLEEPY"]}], "last_update": nv}), "SLEEPY"),
    ] {
        let e = check_models(&[("V0042OpenapiNodesResp".into(), doc.clone(), "negative".into())])
            .expect_err(&format!("the model check took {doc}"));
        assert!(e.contains(want), "{e}");
    }
    let refused = r.call(Via::Tcp, "GET", "/slurm/v0.0.42/jobs", &[], None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    check_models(&ck.seen).unwrap_or_else(|e| panic!("the slurmrestapi models refuse answers:\n{e}"));
}

/// The real `slurmrestapi` client (its `ApiClient` and `SlurmApi`, which read every answer into
/// its models) against the cluster's own slurmrestd on TCP, authenticated with a token from
/// `scontrol token` (`X-SLURM-USER-NAME`, `X-SLURM-USER-TOKEN`): submit, list, read, cancel,
/// nodes, partitions, diag in each data_parser version; a bad token is refused with 401.
const CLIENT_PY: &str = r##"
import sys, time
import slurmrestapi
from slurmrestapi.api.slurm_api import SlurmApi
from slurmrestapi.exceptions import ApiException
import slurmrestapi.models as M

url, user, token, work = sys.argv[1:5]

def api_for(tok, with_user=True):
    cfg = slurmrestapi.Configuration(host=url)
    if with_user:
        cfg.api_key["user"] = user
    cfg.api_key["token"] = tok
    return SlurmApi(slurmrestapi.ApiClient(cfg))

api = api_for(token)
for v in ["0041", "0042", "0043", "0044"]:
    V = lambda n: getattr(M, f"V{v}{n}")
    call = lambda n, *a, **k: getattr(api, f"slurm_v{v}_{n}")(*a, **k)
    desc = V("JobDescMsg")(name=f"api-{v}", current_working_directory=work, environment=["PATH=/usr/bin:/bin"])
    r = call("post_job_submit", V("JobSubmitReq")(script="#!/bin/sh\nsleep 300\n", job=desc))
    assert not r.errors, r.errors
    jid = r.job_id
    assert jid and jid > 0, r
    jobs = call("get_jobs")
    assert any(j.job_id == jid for j in jobs.jobs), jobs
    one = call("get_job", str(jid)).jobs[0]
    assert (one.name, one.user_name) == (f"api-{v}", user), one
    nodes = call("get_nodes").nodes
    assert nodes and all(n.name for n in nodes), nodes
    node = call("get_node", nodes[0].name).nodes
    assert [n.name for n in node] == [nodes[0].name], node
    parts = call("get_partitions").partitions
    assert parts, parts
    assert call("get_partition", parts[0].name).partitions[0].name == parts[0].name
    d = call("get_diag").statistics
    assert d.req_time.number > 0, d
    call("delete_job", str(jid))
    deadline = time.time() + 30
    while call("get_job", str(jid)).jobs[0].job_state != ["CANCELLED"]:
        assert time.time() < deadline, f"job {jid} not CANCELLED within 30 s"
        time.sleep(0.05)
    try:
        call("get_job", "9999999")
        raise AssertionError("an unknown job was found")
    except ApiException as e:
        assert e.status == 404, e
    print(f"ok v{v}: job {jid}")
# A token alone (no X-SLURM-USER-NAME) submits as the user it names.
solo = api_for(token, with_user=False)
desc = M.V0042JobDescMsg(name="api-solo", current_working_directory=work, environment=["PATH=/usr/bin:/bin"])
jid = solo.slurm_v0042_post_job_submit(M.V0042JobSubmitReq(script="#!/bin/sh\nsleep 300\n", job=desc)).job_id
assert solo.slurm_v0042_get_job(str(jid)).jobs[0].user_name == user
solo.slurm_v0042_delete_job(str(jid))
print("ok token alone")
try:
    api_for(token[:-4] + "AAAA").slurm_v0042_get_jobs()
    raise AssertionError("a forged token was taken")
except ApiException as e:
    assert e.status == 401, e
print("ok bad token refused")
"##;

#[test]
fn the_real_slurmrestapi_client_drives_jobs_over_tcp_with_a_token() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let url = c.restd_url().expect("flotilla dev up starts slurmrestd").to_string();
    let work = c.dir().join("api-work");
    std::fs::create_dir_all(&work).expect("work dir");
    let o = c.run("scontrol", &["token"], &work);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "scontrol token: {out}{}", String::from_utf8_lossy(&o.stderr));
    let token = out.trim().strip_prefix("SLURM_JWT=").unwrap_or_else(|| panic!("{out:?}")).to_string();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().expect("my user").name;
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("client.py");
    std::fs::write(&script, CLIENT_PY).expect("write the client script");
    let o = std::process::Command::new(flotilla_compat_tests::restd::python())
        .arg(&script)
        .args([url.as_str(), user.as_str(), token.as_str(), &work.display().to_string()])
        .output()
        .expect("python runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the slurmrestapi client failed:\n{text}\nslurmrestd log:\n{}", std::fs::read_to_string(c.dir().join("slurmrestd.log")).unwrap_or_default());
    assert_eq!(text.matches("ok v00").count(), 4, "{text}");
    assert!(text.contains("ok token alone") && text.contains("ok bad token refused"), "{text}");
}

/// The v0.0.38 client (`openapi-slurm-0-0-38-client`) over TCP with a token: submit, read,
/// cancel, nodes, partitions, diag.
const CLIENT_38_PY: &str = r##"
import sys, time
import openapi_client as C
from openapi_client.api.slurm_api import SlurmApi
from openapi_client.exceptions import ApiException
import openapi_client.models as M

url, user, token, work = sys.argv[1:5]
cfg = C.Configuration(host=url)
cfg.api_key["user"] = user
cfg.api_key["token"] = token
api = SlurmApi(C.ApiClient(cfg))
# open_mode: the model's default, "append", is refused (Flotilla truncates output files).
job = M.V0038JobProperties(name="api-38", current_working_directory=work, environment={"PATH": "/usr/bin:/bin"}, time_limit=7, open_mode="truncate")
r = api.slurm_v0038_submit_job(M.V0038JobSubmission(script="#!/bin/sh\nsleep 300\n", job=job))
assert not r.errors and r.job_id, r
jid = r.job_id
one = api.slurm_v0038_get_job(str(jid)).jobs[0]
assert (one.name, one.user_name, one.time_limit) == ("api-38", user, 7), one
assert any(j.job_id == jid for j in api.slurm_v0038_get_jobs().jobs)
assert api.slurm_v0038_get_nodes().nodes
parts = api.slurm_v0038_get_partitions().partitions
assert api.slurm_v0038_get_partition(parts[0].name).partitions[0].name == parts[0].name
assert api.slurm_v0038_diag().statistics.req_time > 0
api.slurm_v0038_cancel_job(str(jid))
deadline = time.time() + 30
while api.slurm_v0038_get_job(str(jid)).jobs[0].job_state != "CANCELLED":
    assert time.time() < deadline, f"job {jid} not CANCELLED within 30 s"
    time.sleep(0.05)
try:
    api.slurm_v0038_get_job("9999999")
    raise AssertionError("an unknown job was found")
except ApiException as e:
    assert e.status == 500, e
print(f"ok v0.0.38: job {jid}")
"##;

#[test]
fn v0038_answers_in_22_05s_shapes_and_its_client_drives_a_job() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let mut ck = Checker::new(&r);
    let work = c.dir().join("rest-38");
    std::fs::create_dir_all(&work).expect("work dir");
    let p = |s: &str| format!("/slurm/v0.0.38/{s}");
    let v = "v0.0.38";
    let body = json!({"script": "#!/bin/sh\nsleep 300\n", "job": {
        "name": "rest-38", "current_working_directory": work.display().to_string(),
        "environment": {"PATH": "/usr/bin:/bin"}, "time_limit": 10,
    }})
    .to_string();
    let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(&body));
    assert_eq!(a.status, 200, "{}", a.body);
    let j = ck.check_v(&a, "post", &p("job/submit"), v, "V0038JobSubmissionResponse");
    assert_eq!(j["step_id"], "BATCH");
    let id = j["job_id"].as_u64().expect("job_id");
    let last = std::cell::RefCell::new(Value::Null);
    let state_is = |want: &str| {
        *last.borrow_mut() = r.get(&p(&format!("job/{id}"))).json();
        last.borrow()["jobs"][0]["job_state"] == want
    };
    wait_until("v0.0.38 job RUNNING", Duration::from_secs(30), || state_is("RUNNING"), || format!("{:#}", last.borrow()));
    let a = r.get(&p(&format!("job/{id}")));
    let one = ck.check_v(&a, "get", &p("job/{job_id}"), v, "V0038JobsResponse")["jobs"][0].clone();
    assert_eq!((one["name"].as_str(), one["time_limit"].as_i64()), (Some("rest-38"), Some(10)), "{one:#}");
    assert!(one["start_time"].as_i64().unwrap_or(0) > 0);
    let a = r.get(&p("jobs/"));
    ck.check_v(&a, "get", &p("jobs/"), v, "V0038JobsResponse");
    let a = r.call(Via::Unix, "POST", &p(&format!("job/{id}")), &[], Some(r#"{"comment": "via 38"}"#));
    assert_eq!(a.status, 200, "{}", a.body);
    ck.check_v(&a, "post", &p("job/{job_id}"), v, "");
    let a = r.get(&p(&format!("job/{id}")));
    assert_eq!(a.json()["jobs"][0]["comment"], "via 38");
    let a = r.call(Via::Unix, "DELETE", &p(&format!("job/{id}")), &[], None);
    assert_eq!(a.status, 200, "{}", a.body);
    ck.check_v(&a, "delete", &p("job/{job_id}"), v, "");
    wait_until("v0.0.38 job CANCELLED", Duration::from_secs(30), || state_is("CANCELLED"), || format!("{:#}", last.borrow()));
    // 22.05's statuses: 500 for an unknown job, 400 for a body that does not parse.
    let a = r.get(&p("job/9999999"));
    assert_eq!(a.status, 500, "{}", a.body);
    let e = ck.check_v(&a, "get", &p("job/{job_id}"), v, "V0038JobsResponse");
    assert_eq!((e["errors"][0]["error_number"].as_i64(), e["errors"][0]["error"].as_str()), (Some(2017), Some("Invalid job id specified")));
    let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(r#"{"script": "x", "job": {"name": "x"}}"#));
    assert_eq!(a.status, 500, "{}", a.body);
    assert_eq!(ck.check_v(&a, "post", &p("job/submit"), v, "V0038JobSubmissionResponse")["errors"][0]["error_number"], 2127);
    let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some("nope"));
    assert_eq!(a.status, 400, "{}", a.body);
    // Nodes, partitions, diag.
    let a = r.get(&p("nodes/"));
    let n = ck.check_v(&a, "get", &p("nodes/"), v, "V0038NodesResponse");
    assert_eq!(n["nodes"].as_array().map(Vec::len), Some(c.nodes().len()));
    assert_eq!((n["nodes"][0]["state"].as_str(), &n["nodes"][0]["state_flags"]), (Some("idle"), &json!([])), "{n:#}");
    let a = r.get(&p(&format!("node/{}", c.nodes()[0])));
    ck.check_v(&a, "get", &p("node/{node_name}"), v, "V0038NodesResponse");
    let a = r.get(&p("node/nosuch"));
    assert_eq!(a.status, 500, "{}", a.body);
    assert_eq!(ck.check_v(&a, "get", &p("node/{node_name}"), v, "V0038NodesResponse")["errors"][0]["error_number"], 2018);
    let a = r.get(&p("partitions/"));
    let parts = ck.check_v(&a, "get", &p("partitions/"), v, "V0038PartitionsResponse");
    let part = parts["partitions"][0]["name"].as_str().expect("a partition").to_string();
    assert_eq!(parts["partitions"][0]["state"], "UP");
    let a = r.get(&p(&format!("partition/{part}")));
    ck.check_v(&a, "get", &p("partition/{partition_name}"), v, "V0038PartitionsResponse");
    let a = r.get(&p("diag/"));
    let d = ck.check_v(&a, "get", &p("diag/"), v, "V0038Diag");
    assert!(d["statistics"]["req_time"].as_i64().unwrap_or(0) > 0, "{d:#}");
    // Against what real slurmrestd 22.05.8 answered on the reference (goldens-rest): every
    // key Flotilla writes is one 22.05 writes, with a value of the same JSON type, and the
    // error answers have its numbers and statuses.
    let golden = |name: &str| -> Value {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens-rest/v0.0.38").join(format!("{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).expect("json")
    };
    let kind = |v: &Value| match v {
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    let same_keys = |what: &str, ours: &Value, theirs: &Value| {
        let bad: Vec<String> = ours
            .as_object()
            .expect("object")
            .iter()
            .filter_map(|(k, v)| match theirs.get(k) {
                None => Some(format!("{k}: 22.05 has no such key")),
                Some(t) if !t.is_null() && kind(t) != kind(v) => Some(format!("{k}: ours {v}, 22.05's {t}")),
                Some(_) => None,
            })
            .collect();
        assert!(bad.is_empty(), "{what}: {bad:#?}");
    };
    let a = r.get(&p("jobs/"));
    same_keys("job", &a.json()["jobs"][0], &golden("job_2")["response"]["jobs"][0]);
    same_keys("node", &n["nodes"][0], &golden("nodes")["response"]["nodes"][0]);
    same_keys("partition", &parts["partitions"][0], &golden("partitions")["response"]["partitions"][0]);
    same_keys("statistics", &d["statistics"], &golden("diag")["response"]["statistics"]);
    for (name, path) in [("job_missing", "job/999999"), ("node_missing", "node/nosuch"), ("partition_missing", "partition/nosuch")] {
        let g = golden(name);
        let a = r.get(&p(path));
        assert_eq!(u64::from(a.status), g["status"].as_u64().unwrap(), "{name}: {}", a.body);
        let (ours, theirs) = (&a.json()["errors"][0], &g["response"]["errors"][0]);
        let num = |e: &Value| e.get("error_number").or_else(|| e.get("errno")).and_then(Value::as_i64);
        assert_eq!(num(ours), num(theirs), "{name}: ours {ours}, 22.05's {theirs}");
    }
    let a = r.call(Via::Unix, "DELETE", &p("job/999999"), &[], None);
    let g = golden("job_cancel_missing");
    assert_eq!(u64::from(a.status), g["status"].as_u64().unwrap(), "{}", a.body);
    assert_eq!(a.json()["errors"][0]["error_number"], g["response"]["errors"][0]["error_number"]);
    ck.seen.retain(|(m, _, _)| !m.is_empty());
    flotilla_compat_tests::restd::check_models_38(&ck.seen)
        .unwrap_or_else(|e| panic!("the v0.0.38 client's models refuse answers:\n{e}"));

    // The v0.0.38 client itself, over TCP with a token.
    let url = c.restd_url().expect("flotilla dev up starts slurmrestd").to_string();
    let o = c.run("scontrol", &["token"], &work);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let token = out.trim().strip_prefix("SLURM_JWT=").unwrap_or_else(|| panic!("{out:?}")).to_string();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().expect("my user").name;
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("client38.py");
    std::fs::write(&script, CLIENT_38_PY).expect("write the client script");
    let o = std::process::Command::new(flotilla_compat_tests::restd::python38())
        .arg(&script)
        .args([url.as_str(), user.as_str(), token.as_str(), &work.display().to_string()])
        .output()
        .expect("python runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("ok v0.0.38"), "the v0.0.38 client failed:\n{text}");
}
