//! The fleet's own API (`/flotilla/v1`) end to end: slurmrestd beside a local cluster (4 nodes
//! × 8 GPUs in 2 pods), called on its Unix socket. The topology answers free sets (every node
//! fully free, `largest_placeable` 8/16/32), a training job submitted as JSON runs and takes
//! its GPUs out of one node's free set, a deployment is created and scaled by the autoscaler's
//! one verb (twice the same number is one state), alerts list, and bad bodies get 400 with the
//! reason. Every answer validates against the schema the spec serves.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{HttpReply, Restd, Via};
use flotilla_rest::schema::Schema;
use flotilla_compat_tests::wait::wait_until;
use serde_json::{json, Value};
use std::time::Duration;

fn valid(r: &HttpReply, schema: &'static str) -> Value {
    let v = r.json();
    let spec = flotilla_slurmrestd::api::spec();
    if let Err(e) = spec.components.validate(&v, &Schema::Ref(schema)) {
        panic!("{schema}: {e}\n{v}");
    }
    v
}

/// Waits (30 s at most, else fails) until `f` is true of a fresh answer.
fn wait_for(what: &str, f: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(30), f, String::new);
}

#[test]
fn training_jobs_deployments_topology_and_alerts_over_the_fleet_api() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    let work = c.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let wd = work.to_string_lossy().into_owned();
    let call = |method: &str, path: &str, body: Option<Value>| {
        let b = body.map(|b| b.to_string());
        r.call(Via::Unix, method, path, &[], b.as_deref())
    };
    let topology = || {
        let t = call("GET", "/flotilla/v1/cluster/topology", None);
        assert_eq!(t.status, 200, "{}", t.body);
        valid(&t, "flotilla_v1_topology")["partitions"][0].clone()
    };

    let idle = topology();
    assert_eq!(idle["name"], "batch");
    assert_eq!(idle["free_nodes_full"], 4);
    assert_eq!(idle["free_by_node"], json!({"gpu01": 8, "gpu02": 8, "gpu03": 8, "gpu04": 8}));
    assert_eq!(idle["largest_placeable"], json!({"node": 8, "pod": 16, "any": 32}));

    // A training job: 4 GPUs inside one node.
    let sub = call(
        "POST",
        "/flotilla/v1/jobs",
        Some(json!({"name": "train", "command": "sleep 300", "gpus": 4, "topology": "node", "max_runtime": "10m", "work_dir": wd})),
    );
    assert_eq!(sub.status, 202, "{}", sub.body);
    let sub = valid(&sub, "flotilla_v1_job_submitted");
    let id = sub["job_id"].as_u64().expect("job id");
    assert_eq!(sub["queue_position"], 0, "{sub}");
    let squeue = |id: u64| {
        let o = c.run("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %l %j"], &work);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    wait_for("the job to run", || squeue(id).starts_with("RUNNING"));
    assert_eq!(squeue(id), "RUNNING 10:00 train");
    let busy = topology();
    assert_eq!(busy["free_nodes_full"], 3, "{busy}");
    let mut free: Vec<u64> = busy["free_by_node"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).collect();
    free.sort_unstable();
    assert_eq!(free, vec![4, 8, 8, 8]);
    assert_eq!(busy["largest_placeable"], json!({"node": 8, "pod": 16, "any": 28}));

    // Bad bodies: refused with the reason, nothing submitted.
    for (body, why) in [
        (json!({"command": "true", "gpus": 1, "work_dir": wd, "image": "pytorch"}), "unknown field `image`"),
        (json!({"command": "true", "gpus": 1, "topology": "rack", "work_dir": wd}), "topology \"rack\""),
        (json!({"gpus": 1, "work_dir": wd}), "exactly one of script and command"),
        (json!({"command": "true", "gpus": 1, "max_runtime": "soon", "work_dir": wd}), "max_runtime"),
    ] {
        let e = call("POST", "/flotilla/v1/jobs", Some(body));
        assert_eq!(e.status, 400, "{why}: {}", e.body);
        let e = valid(&e, "flotilla_v1_errors");
        let d = e["errors"][0]["description"].as_str().unwrap();
        assert!(d.contains(why), "{d} does not say {why}");
    }
    let o = c.run("squeue", &["-h", "-o", "%i"], &work);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), id.to_string(), "only the one job");

    // A deployment, scaled by the autoscaler's one verb.
    let d = call(
        "POST",
        "/flotilla/v1/deployments",
        Some(json!({"name": "llm", "command": "sleep 300", "gpus_per_replica": 1, "min_replicas": 1, "max_replicas": 4, "work_dir": wd})),
    );
    assert_eq!(d.status, 200, "{}", d.body);
    let dep = valid(&d, "flotilla_v1_deployment")["deployment_id"].as_u64().unwrap();
    let replicas = || {
        let o = c.run("squeue", &["-h", "-t", "R", "-n", "llm", "-o", "%i"], &work);
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    wait_for("the first replica", || replicas() == 1);
    for _ in 0..2 {
        let s = call("PATCH", &format!("/flotilla/v1/deployments/{dep}"), Some(json!({"desired_replicas": 3})));
        assert_eq!(s.status, 200, "{}", s.body);
        assert_eq!(valid(&s, "flotilla_v1_deployment"), json!({"deployment_id": dep, "desired_replicas": 3}));
    }
    wait_for("three replicas", || replicas() == 3);
    let missing = call("PATCH", "/flotilla/v1/deployments/999", Some(json!({"desired_replicas": 1})));
    assert!(missing.status >= 400, "{}", missing.body);
    valid(&missing, "flotilla_v1_errors");

    let a = call("GET", "/flotilla/v1/alerts", None);
    assert_eq!(a.status, 200, "{}", a.body);
    valid(&a, "flotilla_v1_alerts");
    // The spec serves the fleet's paths.
    let spec = r.get("/openapi/v3").json();
    assert!(spec["paths"]["/flotilla/v1/deployments/{id}"]["patch"].is_object());
}
