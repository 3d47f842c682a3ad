//! The fleet's own API, `/flotilla/v1` (DESIGN.md §3, the seed design's "API surface"): what a
//! training launcher and the inference autoscaler need, in their words rather than Slurm's.
//!
//! - `POST /flotilla/v1/jobs` `{script | command, gpus, topology, max_runtime, priority,
//!   preemptible, checkpoint_bytes, ...}` → 202 `{job_id, queue_position, eta}`: a batch job
//!   (`sbatch`'s submission, `Request::SubmitJob`); `queue_position` counts the pending jobs of
//!   its partition that would start first (higher priority, then lower id), `eta` is the
//!   scheduler's expected start (s since the epoch; `null` until it has one).
//! - `POST /flotilla/v1/deployments` `{name, command, gpus_per_replica, min_replicas,
//!   max_replicas, ...}` → 200 `{deployment_id}` (`sdeploy create`).
//! - `PATCH /flotilla/v1/deployments/{id}` `{desired_replicas}` → 200 `{deployment_id,
//!   desired_replicas}`: the autoscaler's only verb, level-triggered and idempotent (the same
//!   number twice is one state; `sdeploy scale`).
//! - `GET /flotilla/v1/cluster/topology` → per partition `free_nodes_full` (nodes up with every
//!   GPU free: a whole node for a gang), `free_by_node` (free GPUs of each usable node) and `largest_placeable {node,
//!   pod, any}` (the largest GPU request that could start now: free sets, not free counts).
//! - `GET /flotilla/v1/alerts` → the alerts and pages (`scontrol show alerts`): kind, job or
//!   service, and the text with the decision and its costs.
//!
//! Errors: 400 for a body that is not the operation's (unknown keys included: a typo is not
//! silently ignored), 401 for a refused caller, 4xx/500 from the controller, each as
//! `{errors: [{error, error_number, description}]}`. The submitter is the authenticated
//! caller: submissions carry `NO_VAL` as uid and gid, which the controller replaces by the
//! caller's (as slurmctld does for an unset `user_id`).

use crate::app::{Authed, Shared};
use crate::reply::Reply;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use axum::Router;
// Slurm's `NO_VAL` ("unset"): here "the authenticated caller's uid/gid".
use flotilla_core::time::NO_VAL;
use flotilla_proto::errno::SLURM_ERROR;
use flotilla_proto::{
    GpuCount, JobChange, JobFilter, JobInfo, JobQuery, JobRef, JobStateWire, NodeInfo, PartitionInfo, Request, Response,
    ServiceCreate, SlurmError, SubmitJob, TimeLimitWire, UpdateJob,
};
use flotilla_rest::schema::{array, map, opt, req, IntFormat, Method, Operation, Param, Schema};
use flotilla_rest::{Components, Spec};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;


/// `POST /flotilla/v1/jobs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobReq {
    name: Option<String>,
    /// A batch script (`#!...`); or `command`, run by `/bin/sh -c`.
    script: Option<String>,
    command: Option<String>,
    gpus: u32,
    gpu_type: Option<String>,
    /// `node`, `pod` or `any`.
    topology: Option<String>,
    /// Minutes, or a Slurm time string (`72:00:00`, `3-00:00:00`), or `72h`/`90m`/`2d`.
    max_runtime: Option<Value>,
    /// Slurm's job priority (admins only, as `scontrol update Priority=`).
    priority: Option<u32>,
    preemptible: Option<bool>,
    /// Bytes a checkpoint writes (the preemption cost the scheduler weighs).
    checkpoint_bytes: Option<u64>,
    partition: Option<String>,
    account: Option<String>,
    cpus_per_gpu: Option<u32>,
    work_dir: String,
    environment: Option<BTreeMap<String, String>>,
}

/// `POST /flotilla/v1/deployments`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeploymentReq {
    name: String,
    command: String,
    gpus_per_replica: u32,
    gpu_type: Option<String>,
    topology: Option<String>,
    cpus_per_replica: Option<u32>,
    mem_per_replica_mib: Option<u64>,
    min_replicas: u32,
    max_replicas: u32,
    desired_replicas: Option<u32>,
    priority: Option<u32>,
    partition: Option<String>,
    account: Option<String>,
    work_dir: String,
    environment: Option<BTreeMap<String, String>>,
}

/// `PATCH /flotilla/v1/deployments/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScaleReq {
    desired_replicas: u32,
}

/// A refusal in the fleet API's error shape (authentication, from [`crate::app::Authed`]):
/// the number, Slurm's text and the controller's messages as `reply::rest_error` gives them.
pub fn refused(status: StatusCode, e: &SlurmError) -> Reply {
    let r = crate::reply::rest_error(e, "");
    error_reply(status, r.error_number, &r.error, &r.description)
}

fn error_reply(status: StatusCode, number: i32, error: &str, description: &str) -> Reply {
    Reply {
        status,
        body: json!({"errors": [{"error": error, "error_number": number, "description": description}]}),
    }
}

/// 400: the body is not the operation's.
fn bad_request(description: impl std::fmt::Display) -> Reply {
    error_reply(StatusCode::BAD_REQUEST, SLURM_ERROR, "Invalid request", &description.to_string())
}

/// A controller error with the status the data_parser versions give it
/// ([`super::common::status_for`]: 401 authentication, 404 an unknown job, node or
/// partition, 403 access, 400 other request errors, 502 the controller unreachable, 500
/// otherwise).
fn ctl_error(e: &SlurmError) -> Reply {
    refused(super::common::status_for(flotilla_rest::ApiVersion::V0044, e.code), e)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Reply> {
    serde_json::from_slice(body).map_err(bad_request)
}

/// `max_runtime` as minutes: an integer, a Slurm time string, or a number with `s`/`m`/`h`/`d`.
fn runtime_minutes(v: &Value) -> Result<TimeLimitWire, String> {
    let bad = || format!("max_runtime {v}: minutes, a Slurm time string ([D-]HH:MM:SS) or N{{s,m,h,d}}");
    let mins: u64 = match v {
        Value::Number(n) => n.as_u64().ok_or_else(bad)?,
        Value::String(s) => {
            let t = s.trim();
            let unit = t.chars().last().filter(|c| "smhd".contains(*c));
            match unit {
                Some(u) => {
                    let n: u64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
                    match u {
                        's' => n.div_ceil(60),
                        'm' => n,
                        'h' => n.saturating_mul(60),
                        _ => n.saturating_mul(1440),
                    }
                }
                None => match flotilla_core::time::parse_time_limit(t).map_err(|_| bad())? {
                    flotilla_core::time::TimeLimit::Unlimited => return Ok(TimeLimitWire::Unlimited),
                    flotilla_core::time::TimeLimit::Minutes(m) => u64::from(m),
                },
            }
        }
        _ => return Err(bad()),
    };
    match u32::try_from(mins) {
        Ok(0) => Ok(TimeLimitWire::Unlimited),
        Ok(m) if m < NO_VAL => Ok(TimeLimitWire::Minutes(m)),
        _ => Err(bad()),
    }
}

fn topology_ok(t: &Option<String>) -> Result<(), String> {
    match t.as_deref() {
        None | Some("node" | "pod" | "any") => Ok(()),
        Some(o) => Err(format!("topology {o:?}: node, pod or any")),
    }
}

fn job_submission(r: JobReq) -> Result<SubmitJob, String> {
    topology_ok(&r.topology)?;
    if r.gpus == 0 {
        return Err("gpus: at least 1".into());
    }
    if !r.work_dir.starts_with('/') {
        return Err(format!("work_dir {:?}: an absolute path", r.work_dir));
    }
    let script = match (r.script, r.command) {
        (Some(s), None) => s,
        (None, Some(c)) => format!("#!/bin/sh\n{c}\n"),
        _ => return Err("exactly one of script and command".into()),
    };
    let time_limit = r.max_runtime.as_ref().map(runtime_minutes).transpose()?;
    Ok(SubmitJob {
        name: r.name,
        script,
        work_dir: r.work_dir,
        environment: r.environment.unwrap_or_default().into_iter().collect(),
        uid: NO_VAL,
        gid: NO_VAL,
        partition: r.partition,
        account: r.account,
        gpus: Some(GpuCount { gpu_type: r.gpu_type, count: r.gpus }),
        cpus_per_task: r.cpus_per_gpu.map(|c| c.saturating_mul(r.gpus)),
        time_limit,
        topology: r.topology,
        preemptible: r.preemptible.unwrap_or(true),
        checkpoint_bytes: r.checkpoint_bytes,
        ..SubmitJob::default()
    })
}

/// Pending jobs of `job`'s partition that would start before it (higher priority, then lower
/// id), as the scheduler orders them.
fn queue_position(job: &JobInfo, all: &[JobInfo]) -> usize {
    all.iter()
        .filter(|o| o.job_id != job.job_id && o.partition == job.partition && o.state == Some(JobStateWire::Pending))
        .filter(|o| (o.priority, std::cmp::Reverse(o.job_id)) > (job.priority, std::cmp::Reverse(job.job_id)))
        .count()
}

async fn post_job(State(st): State<Shared>, a: Authed, body: Bytes) -> Reply {
    let r: JobReq = match parse(&body) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let priority = r.priority;
    let sub = match job_submission(r) {
        Ok(s) => s,
        Err(e) => return bad_request(e),
    };
    let job_id = match st.ctl.call(&a.caller, Request::SubmitJob(Box::new(sub))).await {
        Ok(Response::Submitted(s)) => s.job_id,
        Ok(Response::Error(e)) | Err(e) => return ctl_error(&e),
        Ok(_) => return ctl_error(&SlurmError::new(SLURM_ERROR)),
    };
    let mut warnings = Vec::new();
    if let Some(p) = priority {
        let u = UpdateJob { job: JobRef { job_id, tasks: None }, changes: vec![JobChange::Priority(p)] };
        match st.ctl.call(&a.caller, Request::UpdateJob(u)).await {
            Ok(Response::Error(e)) | Err(e) => warnings.push(format!("priority not set: {}", e.text)),
            Ok(_) => {}
        }
    }
    let q = JobQuery { jobs: Vec::new(), filter: JobFilter::default(), include_finished: false };
    let (position, eta) = match st.ctl.call(&a.caller, Request::QueryJobs(q)).await {
        Ok(Response::Jobs(all)) => match all.iter().find(|j| j.job_id == job_id) {
            Some(j) if j.state == Some(JobStateWire::Pending) => (queue_position(j, &all), j.start_time.filter(|t| *t > 0)),
            Some(j) => (0, j.start_time),
            None => (0, None),
        },
        _ => (0, None),
    };
    let mut body = json!({"job_id": job_id, "queue_position": position, "eta": eta});
    if !warnings.is_empty() {
        body["warnings"] = json!(warnings);
    }
    Reply { status: StatusCode::ACCEPTED, body }
}

async fn post_deployment(State(st): State<Shared>, a: Authed, body: Bytes) -> Reply {
    let r: DeploymentReq = match parse(&body) {
        Ok(r) => r,
        Err(e) => return e,
    };
    if let Err(e) = topology_ok(&r.topology) {
        return bad_request(e);
    }
    if !r.work_dir.starts_with('/') {
        return bad_request(format!("work_dir {:?}: an absolute path", r.work_dir));
    }
    let c = ServiceCreate {
        name: r.name,
        command: r.command,
        gpus_per_replica: r.gpus_per_replica,
        gpu_type: r.gpu_type,
        topology: r.topology,
        cpus_per_replica: r.cpus_per_replica,
        mem_per_replica_mib: r.mem_per_replica_mib,
        min_replicas: r.min_replicas,
        max_replicas: r.max_replicas,
        desired_replicas: r.desired_replicas.unwrap_or(r.min_replicas),
        priority: r.priority.unwrap_or(0),
        partition: r.partition,
        account: r.account,
        work_dir: r.work_dir,
        environment: r.environment.unwrap_or_default().into_iter().collect(),
        uid: NO_VAL,
        gid: NO_VAL,
        user: String::new(),
    };
    match st.ctl.call(&a.caller, Request::ServiceCreate(Box::new(c))).await {
        Ok(Response::ServiceCreated { id }) => Reply::ok(json!({"deployment_id": id})),
        Ok(Response::Error(e)) | Err(e) => ctl_error(&e),
        Ok(_) => ctl_error(&SlurmError::new(SLURM_ERROR)),
    }
}

async fn patch_deployment(State(st): State<Shared>, a: Authed, Path(id): Path<String>, body: Bytes) -> Reply {
    let Ok(id) = id.parse::<u32>() else {
        return bad_request(format!("deployment id {id:?}: a number"));
    };
    let r: ScaleReq = match parse(&body) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match st.ctl.call(&a.caller, Request::ServiceScale { id, replicas: r.desired_replicas }).await {
        Ok(Response::Error(e)) | Err(e) => ctl_error(&e),
        Ok(_) => Reply::ok(json!({"deployment_id": id, "desired_replicas": r.desired_replicas})),
    }
}

/// A node whose GPUs the scheduler may place on now: responding, not down, drained or
/// failing (Slurm's state words, a suffix such as `*` aside).
fn usable(n: &NodeInfo) -> bool {
    let s = n.state.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']).to_ascii_uppercase();
    !n.not_responding && matches!(s.as_str(), "IDLE" | "MIXED" | "ALLOCATED" | "COMPLETING")
}

/// The topology answer from the controller's nodes and partitions.
fn topology(nodes: &[NodeInfo], parts: &[PartitionInfo]) -> Value {
    let rows: Vec<Value> = parts
        .iter()
        .map(|p| {
            let mine: Vec<&NodeInfo> = nodes.iter().filter(|n| n.partitions.iter().any(|q| q == &p.name)).collect();
            let mut free_by_node = serde_json::Map::new();
            let mut full = 0u32;
            for n in mine.iter().filter(|n| usable(n)) {
                let free = n.gpus.saturating_sub(n.gpu_alloc_mask.count_ones());
                if free == n.gpus && n.gpus > 0 {
                    full += 1;
                }
                free_by_node.insert(n.name.clone(), json!(free));
            }
            let lp = p.largest_placeable.unwrap_or_default();
            json!({
                "name": p.name,
                "default": p.default,
                "free_nodes_full": full,
                "free_by_node": free_by_node,
                "largest_placeable": {"node": lp.node, "pod": lp.pod, "any": lp.any},
            })
        })
        .collect();
    json!({"partitions": rows})
}

async fn get_topology(State(st): State<Shared>, a: Authed) -> Reply {
    let nodes = match st.ctl.call(&a.caller, Request::QueryNodes(flotilla_proto::NodeQuery::default())).await {
        Ok(Response::Nodes(n)) => n,
        Ok(Response::Error(e)) | Err(e) => return ctl_error(&e),
        Ok(_) => return ctl_error(&SlurmError::new(SLURM_ERROR)),
    };
    match st.ctl.call(&a.caller, Request::QueryPartitions).await {
        Ok(Response::Partitions(p)) => Reply::ok(topology(&nodes, &p)),
        Ok(Response::Error(e)) | Err(e) => ctl_error(&e),
        Ok(_) => ctl_error(&SlurmError::new(SLURM_ERROR)),
    }
}

async fn get_alerts(State(st): State<Shared>, a: Authed) -> Reply {
    match st.ctl.call(&a.caller, Request::QueryAlerts).await {
        Ok(Response::Alerts(v)) => Reply::ok(json!({"alerts": v.iter().map(|x| json!({
            "id": x.id,
            "time": x.time,
            "kind": x.kind,
            "job_id": x.job_id,
            "deployment_id": x.service_id,
            "message": x.message,
        })).collect::<Vec<_>>()})),
        Ok(Response::Error(e)) | Err(e) => ctl_error(&e),
        Ok(_) => ctl_error(&SlurmError::new(SLURM_ERROR)),
    }
}

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/flotilla/v1/jobs", post(post_job))
        .route("/flotilla/v1/deployments", post(post_deployment))
        .route("/flotilla/v1/deployments/{id}", patch(patch_deployment))
        .route("/flotilla/v1/cluster/topology", get(get_topology))
        .route("/flotilla/v1/alerts", get(get_alerts))
}

const ERRORS: &str = "flotilla_v1_errors";

/// The spec (tag `flotilla`).
pub fn spec() -> Spec {
    let mut c = Components::default();
    let s = || Schema::Str;
    let u32_ = || Schema::Int(IntFormat::I64);
    c.add(
        ERRORS,
        Schema::Object(vec![req(
            "errors",
            array(Schema::Object(vec![req("error", s()), req("error_number", Schema::Int(IntFormat::I32)), req("description", s())])),
        )]),
    );
    let env = || map(s());
    c.add(
        "flotilla_v1_job_request",
        Schema::Object(vec![
            opt("name", s()),
            opt("script", s()),
            opt("command", s()),
            req("gpus", u32_()),
            opt("gpu_type", s()),
            opt("topology", Schema::Enum(vec!["node", "pod", "any"])),
            opt("max_runtime", Schema::Any),
            opt("priority", u32_()),
            opt("preemptible", Schema::Bool),
            opt("checkpoint_bytes", u32_()),
            opt("partition", s()),
            opt("account", s()),
            opt("cpus_per_gpu", u32_()),
            req("work_dir", s()),
            opt("environment", env()),
        ]),
    );
    c.add(
        "flotilla_v1_job_submitted",
        Schema::Object(vec![
            req("job_id", u32_()),
            req("queue_position", u32_()),
            req("eta", Schema::Any),
            opt("warnings", array(s())),
        ]),
    );
    c.add(
        "flotilla_v1_deployment_request",
        Schema::Object(vec![
            req("name", s()),
            req("command", s()),
            req("gpus_per_replica", u32_()),
            opt("gpu_type", s()),
            opt("topology", Schema::Enum(vec!["node", "pod", "any"])),
            opt("cpus_per_replica", u32_()),
            opt("mem_per_replica_mib", u32_()),
            req("min_replicas", u32_()),
            req("max_replicas", u32_()),
            opt("desired_replicas", u32_()),
            opt("priority", u32_()),
            opt("partition", s()),
            opt("account", s()),
            req("work_dir", s()),
            opt("environment", env()),
        ]),
    );
    c.add("flotilla_v1_deployment", Schema::Object(vec![req("deployment_id", u32_()), opt("desired_replicas", u32_())]));
    c.add("flotilla_v1_scale_request", Schema::Object(vec![req("desired_replicas", u32_())]));
    c.add(
        "flotilla_v1_topology",
        Schema::Object(vec![req(
            "partitions",
            array(Schema::Object(vec![
                req("name", s()),
                req("default", Schema::Bool),
                req("free_nodes_full", u32_()),
                req("free_by_node", map(u32_())),
                req(
                    "largest_placeable",
                    Schema::Object(vec![req("node", u32_()), req("pod", u32_()), req("any", u32_())]),
                ),
            ])),
        )]),
    );
    c.add(
        "flotilla_v1_alerts",
        Schema::Object(vec![req(
            "alerts",
            array(Schema::Object(vec![
                req("id", u32_()),
                req("time", u32_()),
                req("kind", s()),
                req("job_id", Schema::Any),
                req("deployment_id", Schema::Any),
                req("message", s()),
            ])),
        )]),
    );
    let op = |method, path: &str, id: &str, summary, params, body: Option<&'static str>, response: &'static str| Operation {
        method,
        path: path.to_string(),
        operation_id: id.to_string(),
        summary,
        tag: "flotilla",
        params,
        body: body.map(Schema::Ref),
        response: Schema::Ref(response),
    };
    let id_param = || vec![Param { name: "id", in_path: true, schema: Schema::Int(IntFormat::I64), description: "deployment id" }];
    Spec {
        operations: vec![
            op(Method::Post, "/flotilla/v1/jobs", "flotilla_v1_post_job", "submit a training job", vec![], Some("flotilla_v1_job_request"), "flotilla_v1_job_submitted"),
            op(Method::Post, "/flotilla/v1/deployments", "flotilla_v1_post_deployment", "create an inference deployment", vec![], Some("flotilla_v1_deployment_request"), "flotilla_v1_deployment"),
            op(Method::Patch, "/flotilla/v1/deployments/{id}", "flotilla_v1_patch_deployment", "set a deployment's desired replicas", id_param(), Some("flotilla_v1_scale_request"), "flotilla_v1_deployment"),
            op(Method::Get, "/flotilla/v1/cluster/topology", "flotilla_v1_get_topology", "free sets per partition", vec![], None, "flotilla_v1_topology"),
            op(Method::Get, "/flotilla/v1/alerts", "flotilla_v1_get_alerts", "alerts and pages", vec![], None, "flotilla_v1_alerts"),
        ],
        components: c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_runtime_forms() {
        let m = |v: Value| runtime_minutes(&v);
        assert_eq!(m(json!(90)), Ok(TimeLimitWire::Minutes(90)));
        assert_eq!(m(json!("72h")), Ok(TimeLimitWire::Minutes(4320)));
        assert_eq!(m(json!("2d")), Ok(TimeLimitWire::Minutes(2880)));
        assert_eq!(m(json!("61s")), Ok(TimeLimitWire::Minutes(2)));
        assert_eq!(m(json!("1-00:00:00")), Ok(TimeLimitWire::Minutes(1440)));
        assert_eq!(m(json!("UNLIMITED")), Ok(TimeLimitWire::Unlimited));
        assert!(m(json!("soon")).is_err());
        assert!(m(json!(-1)).is_err());
        assert!(m(json!(true)).is_err());
    }

    #[test]
    fn submissions_are_checked_before_the_controller_sees_them() {
        let r = |v: Value| job_submission(serde_json::from_value(v).unwrap());
        let ok = r(json!({"command": "true", "gpus": 4, "topology": "pod", "work_dir": "/tmp"})).unwrap();
        assert_eq!((ok.uid, ok.gid, ok.script.as_str()), (NO_VAL, NO_VAL, "#!/bin/sh\ntrue\n"));
        assert_eq!(ok.gpus, Some(GpuCount { gpu_type: None, count: 4 }));
        assert!(ok.preemptible, "training is preemptible unless it says not");
        assert!(r(json!({"command": "true", "gpus": 4, "topology": "rack", "work_dir": "/tmp"})).is_err());
        assert!(r(json!({"command": "true", "script": "#!/bin/sh\n", "gpus": 1, "work_dir": "/tmp"})).is_err());
        assert!(r(json!({"command": "true", "gpus": 0, "work_dir": "/tmp"})).is_err());
        assert!(r(json!({"command": "true", "gpus": 1, "work_dir": "tmp"})).is_err());
        assert!(serde_json::from_value::<JobReq>(json!({"command": "true", "gpus": 1, "work_dir": "/", "image": "x"})).is_err(), "unknown keys refused");
    }

    #[test]
    fn the_queue_position_counts_who_starts_first() {
        let j = |id, prio, part: &str, st| JobInfo { job_id: id, priority: prio, partition: part.into(), state: Some(st), ..JobInfo::default() };
        let all = vec![
            j(1, 10, "a", JobStateWire::Pending),
            j(2, 5, "a", JobStateWire::Pending),
            j(3, 5, "a", JobStateWire::Pending),
            j(4, 50, "b", JobStateWire::Pending),
            j(5, 50, "a", JobStateWire::Running),
        ];
        assert_eq!(queue_position(&all[2], &all), 2, "job 1 (higher) and job 2 (same, older)");
        assert_eq!(queue_position(&all[0], &all), 0);
    }
}
