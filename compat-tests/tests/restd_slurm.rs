//! slurmrestd's `/slurm/vX/` endpoints of the data_parser versions (v0.0.41–v0.0.44) end to
//! end: a local cluster, slurmrestd on its Unix socket (`rest_auth/local`), a job submitted,
//! listed, updated and cancelled over REST; nodes, partitions, diag and the error answers.
//!
//! Every answer is checked twice: against the schema slurmrestd serves (`/openapi/v3`, read
//! back and applied strictly: no key it does not name), and against the real `slurmrestapi`
//! 25.11.4 client's models in Python (no unknown key, no required key missing, `from_dict`
//! accepts it). Without that client's venv the test fails (`restd::python`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{answer_schema, check_models, served_components, HttpReply, Restd, Via};
use flotilla_compat_tests::wait::wait_until;
use serde_json::{json, Value};
use std::time::Duration;

const VERSIONS: [&str; 4] = ["v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"];

/// Answers seen, each validated against the served spec and kept for the Python models.
struct Checker {
    spec: Value,
    comps: flotilla_rest::Components,
    seen: Vec<(String, Value, String)>,
}

impl Checker {
    fn new(r: &Restd) -> Checker {
        let spec = r.get("/openapi/v3").json();
        let comps = served_components(&spec);
        Checker { spec, comps, seen: Vec::new() }
    }

    /// Validates `a` (answer of `method` on the spec's `path`) against the served schema and
    /// records it for the model `model` (`V0042OpenapiJobInfoResp`, `{}` for the version).
    fn check(&mut self, a: &HttpReply, method: &str, path: &str, v: &str, model: &str) -> Value {
        let j = a.json();
        let schema = answer_schema(&self.spec, method, path);
        if let Err(e) = self.comps.validate(&j, &schema) {
            panic!("{method} {path}: not as the served spec says: {e}\n{j:#}");
        }
        let class = model.replace("{}", &format!("V00{}", &v[5..]));
        self.seen.push((class, j.clone(), format!("{method} {path} ({})", a.status)));
        j
    }
}

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
        let j = ck.check(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(j["errors"], json!([]), "{v}: {j}");
        assert_eq!(j["step_id"], "batch");
        let id = j["job_id"].as_u64().expect("job_id");
        assert!(id > 0);
        // It runs; the list and the single answer show it.
        let job = |ck: &mut Checker| {
            let a = r.get(&p(&format!("job/{id}")));
            assert_eq!(a.status, 200, "{v} job/{id}: {}", a.body);
            let j = ck.check(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
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
        let all = ck.check(&a, "get", &p("jobs/"), v, "{}OpenapiJobInfoResp");
        assert!(all["jobs"].as_array().unwrap().iter().any(|j| j["job_id"] == id), "{all:#}");
        assert_eq!(all["last_update"]["set"], true);
        let a = r.get(&p("jobs/?update_time=0"));
        assert_eq!(a.status, 200, "{}", a.body);
        // Update (scontrol update job Comment= Name=).
        let upd = json!({"comment": format!("via {v}"), "name": format!("{name}-2")}).to_string();
        let a = r.call(Via::Unix, "POST", &p(&format!("job/{id}")), &[], Some(&upd));
        assert_eq!(a.status, 200, "{v} update: {}", a.body);
        let u = ck.check(&a, "post", &p("job/{job_id}"), v, "{}OpenapiJobPostResponse");
        assert_eq!(u["results"][0]["error_code"], 0, "{u:#}");
        let one = job(&mut ck);
        assert_eq!(one["comment"], format!("via {v}"));
        assert_eq!(one["name"], format!("{name}-2"));
        // Cancel (DELETE: SIGKILL to the whole job).
        let a = r.call(Via::Unix, "DELETE", &p(&format!("job/{id}")), &[], None);
        assert_eq!(a.status, 200, "{v} delete: {}", a.body);
        let k = ck.check(&a, "delete", &p("job/{job_id}"), v, if v == "v0.0.41" { "{}OpenapiResp" } else { "{}OpenapiKillJobResp" });
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
        let n = ck.check(&a, "get", &p("nodes/"), v, "{}OpenapiNodesResp");
        let names: Vec<&str> = n["nodes"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
        assert_eq!(names, c.nodes().iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(n["nodes"][0]["state"], json!(["IDLE"]), "{n:#}");
        assert!(n["nodes"][0]["cpus"].as_u64().unwrap() > 0);
        let a = r.get(&p(&format!("node/{first}")));
        assert_eq!(a.status, 200, "{}", a.body);
        let one = ck.check(&a, "get", &p("node/{node_name}"), v, "{}OpenapiNodesResp");
        assert_eq!(one["nodes"].as_array().map(Vec::len), Some(1));
        let a = r.get(&p("partitions/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let parts = ck.check(&a, "get", &p("partitions/"), v, "{}OpenapiPartitionResp");
        let part = parts["partitions"][0]["name"].as_str().expect("a partition").to_string();
        assert_eq!(parts["partitions"][0]["partition"]["state"], json!(["UP"]));
        let a = r.get(&p(&format!("partition/{}", part.to_uppercase())));
        assert_eq!(a.status, 200, "{}", a.body);
        let one = ck.check(&a, "get", &p("partition/{partition_name}"), v, "{}OpenapiPartitionResp");
        assert_eq!(one["partitions"][0]["name"], part.as_str());
        let a = r.get(&p("diag/"));
        assert_eq!(a.status, 200, "{}", a.body);
        let d = ck.check(&a, "get", &p("diag/"), v, "{}OpenapiDiagResp");
        assert!(d["statistics"]["req_time"]["number"].as_i64().unwrap() > 0, "{d:#}");
        let types = d["statistics"]["rpcs_by_message_type"].as_array().unwrap();
        assert!(types.iter().any(|t| t["message_type"] == "REQUEST_NODE_INFO"), "{d:#}");
        // Errors, each with Slurm's number and HTTP status, still in the answer's shape.
        let a = r.get(&p("job/9999999"));
        assert_eq!(a.status, 404, "{}", a.body);
        let e = ck.check(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
        assert_eq!(e["errors"][0]["error_number"], 2017, "{e:#}");
        assert_eq!(e["errors"][0]["error"], "Invalid job id specified");
        assert_eq!(e["jobs"], json!([]));
        let a = r.get(&p("job/notanumber"));
        assert_eq!(a.status, 422, "{}", a.body);
        ck.check(&a, "get", &p("job/{job_id}"), v, "{}OpenapiJobInfoResp");
        let a = r.get(&p("partition/nosuch"));
        assert_eq!(a.status, 422, "{}", a.body);
        let e = ck.check(&a, "get", &p("partition/{partition_name}"), v, "{}OpenapiPartitionResp");
        assert_eq!(e["errors"][0]["error_number"], 9000);
        let a = r.get(&p("node/nosuch"));
        assert_eq!(a.status, 500, "{}", a.body);
        let e = ck.check(&a, "get", &p("node/{node_name}"), v, "{}OpenapiNodesResp");
        assert_eq!(e["errors"][0]["error_number"], 2018);
        let a = r.call(Via::Unix, "DELETE", &p("job/9999999?signal=NOPE"), &[], None);
        assert_eq!(a.status, 422, "{}", a.body);
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(r#"{"job": {"name": "x"}}"#));
        assert_eq!(a.status, 500, "{}", a.body);
        let e = ck.check(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(e["errors"][0]["error_number"], 2009, "{e:#}");
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some(r#"{"script": "x", "job": {"licenses": "a"}}"#));
        assert_eq!(a.status, 400, "{}", a.body);
        let e = ck.check(&a, "post", &p("job/submit"), v, "{}OpenapiJobSubmitResponse");
        assert_eq!(e["errors"][0]["source"], "licenses", "{e:#}");
        let a = r.call(Via::Unix, "POST", &p("job/submit"), &[], Some("not json"));
        assert_eq!(a.status, 400, "{}", a.body);
        // Cancelling a job that does not exist: per-job error in status[] (v0.0.42+), as
        // Slurm's kill_jobs results; v0.0.41's answer is the error.
        let a = r.call(Via::Unix, "DELETE", &p("job/9999999"), &[], None);
        let model = if v == "v0.0.41" { "{}OpenapiResp" } else { "{}OpenapiKillJobResp" };
        let k = ck.check(&a, "delete", &p("job/{job_id}"), v, model);
        if v == "v0.0.41" {
            assert_eq!(a.status, 404, "{}", a.body);
            assert_eq!(k["errors"][0]["error_number"], 2017);
        } else {
            assert_eq!(a.status, 200, "{}", a.body);
            assert_eq!(k["status"][0]["error"]["code"], 2017, "{k:#}");
        }
    }
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
