//! `update_time` on slurmrestd's lists, end to end (root, cgroups on): nothing changed since
//! the time asked about is 304 Not Modified without a body (v0.0.38 for jobs, nodes,
//! partitions and reservations, as 22.05's `_call_handler`; the data_parser versions for
//! nodes, partitions and reservations), or for the data_parser versions' jobs 25.11's answer:
//! no jobs and the warning `No job changes since update_time[T]=...`. A submission after
//! that time makes the jobs list whole again, and its start the node list; the answers still
//! meet the served spec, which declares the 304.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{check_models, Checker, Restd};
use flotilla_compat_tests::wait::wait_until;
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn unchanged_lists_answer_304_and_a_change_answers_in_full() {
    if !flotilla_compat_tests::root_tests("slurmrestd update_time on a cluster with cgroups") {
        return;
    }
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);

    // Wait until the start-up's changes (the controller's start, then each node's
    // registration, in a later second on a slow machine) are in the past for every list: the
    // second asked about sees none.
    let lists = ["jobs/", "nodes/", "partitions/", "partition/batch", "reservations/", "reservation/maint"];
    let mut t = 0;
    wait_until(
        "every list to be unchanged since the current second",
        Duration::from_secs(30),
        || {
            t = now();
            lists.iter().all(|path| r.get(&format!("/slurm/v0.0.38/{path}?update_time={t}")).status == 304)
        },
        || r.log_text(),
    );
    for path in lists {
        let a = r.get(&format!("/slurm/v0.0.38/{path}?update_time={t}"));
        assert_eq!((a.status, a.body.as_str()), (304, ""), "v0.0.38 {path}");
        assert_eq!(a.header("content-type"), None, "v0.0.38 {path}");
    }
    let mut ck = Checker::new(&r);
    for v in ["v0.0.41", "v0.0.44"] {
        for path in ["nodes/", "partitions/", "reservations/"] {
            let a = r.get(&format!("/slurm/{v}/{path}?update_time={t}"));
            assert_eq!((a.status, a.body.as_str()), (304, ""), "{v} {path}");
        }
        let a = r.get(&format!("/slurm/{v}/jobs/?update_time={t}"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = ck.check_v(&a, "get", &format!("/slurm/{v}/jobs/"), v, "{}OpenapiJobInfoResp");
        assert_eq!((&j["jobs"], &j["errors"]), (&json!([]), &json!([])), "{j:#}");
        let w = j["warnings"][0]["description"].as_str().unwrap_or_default();
        assert!(w.starts_with(&format!("No job changes since update_time[{t}]=")), "{j:#}");
        // The time before is a change: the full answer.
        let a = r.get(&format!("/slurm/{v}/nodes/?update_time={}", t - 3600));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        assert_eq!(a.json()["nodes"].as_array().map(Vec::len), Some(c.nodes().len()));
    }
    check_models(&ck.seen).unwrap_or_else(|e| panic!("the slurmrestapi models refuse answers:\n{e}"));
    let spec = r.get("/openapi/v3").json();
    for p in ["/slurm/v0.0.38/jobs/", "/slurm/v0.0.42/nodes/", "/slurm/v0.0.38/reservation/{reservation_name}"] {
        assert!(spec["paths"][p]["get"]["responses"]["304"].is_object(), "{p} declares 304");
    }
    assert!(spec["paths"]["/slurm/v0.0.38/diag/"]["get"]["responses"]["304"].is_null(), "no update_time, no 304");

    // A job submitted now (at or after t) is a change of jobs; once it runs, of nodes.
    let work = c.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let o = c.run("sbatch", &["--parsable", "-N1", "--gpus=1", "--wrap", "sleep 300", "-o", "/dev/null"], &work);
    assert!(o.status.success(), "sbatch: {}", String::from_utf8_lossy(&o.stderr));
    let id: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    for v in ["v0.0.38", "v0.0.42"] {
        let a = r.get(&format!("/slurm/{v}/jobs/?update_time={t}"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let ids: Vec<u64> = a.json()["jobs"].as_array().unwrap().iter().filter_map(|j| j["job_id"].as_u64()).collect();
        assert_eq!(ids, [id], "{v}");
    }
    wait_until(
        "the job to run",
        Duration::from_secs(30),
        || r.get(&format!("/slurm/v0.0.42/job/{id}")).json()["jobs"][0]["job_state"] == json!(["RUNNING"]),
        || r.get(&format!("/slurm/v0.0.42/job/{id}")).body,
    );
    for v in ["v0.0.38", "v0.0.42"] {
        let a = r.get(&format!("/slurm/{v}/nodes/?update_time={t}"));
        assert_eq!(a.status, 200, "{v} nodes after a start: {}", a.body);
    }
    let o = c.run("scancel", &[&id.to_string()], &work);
    assert!(o.status.success(), "scancel: {}", String::from_utf8_lossy(&o.stderr));
}
