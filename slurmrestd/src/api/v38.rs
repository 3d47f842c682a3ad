//! v0.0.38 (Slurm 22.05's `openapi/v0.0.38`): `GET /slurm/v0.0.38/jobs`, `/job/{job_id}`
//! (GET, DELETE with `signal`, POST an update), `POST /job/submit`, `GET /nodes`,
//! `/node/{node_name}`, `/partitions`, `/partition/{partition_name}`, `/diag`, with that
//! plugin's behaviour (`jobs.c`, `nodes.c`, `partitions.c`, `diag.c`): an unknown job is
//! `ESLURM_INVALID_JOB_ID` with status 500 (22.05 maps only the REST parsing errors, to 400),
//! a signal to a job already done is a success, a submission needs `environment`. Objects
//! are `flotilla_rest::v38`'s; the controller calls are the data_parser versions'.

use super::common::{answer, caller, ctl_error, error, op, path_param, query_param, query_pairs, unchanged, update_time, user_name, warning};
use crate::app::{both, Authed, Shared};
use crate::reply::Reply;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::routing::{get, post};
use axum::Router;
use flotilla_proto::errno::{ESLURM_ALREADY_DONE, ESLURM_INVALID_JOB_ID, ESLURM_INVALID_NODE_NAME, ESLURM_INVALID_PARTITION_NAME};
use flotilla_proto::{CancelJob, JobQuery, JobRef, NodeQuery, Request, Response, UpdateJob};
use flotilla_rest::dp::job::Ctx;
use flotilla_rest::dp::{signal_number, submit, ESLURM_REST_FAIL_PARSING, ESLURM_REST_INVALID_QUERY};
use flotilla_rest::schema::{IntFormat, Method, Schema};
use flotilla_rest::v38::{self, NAMES};
use flotilla_rest::{ApiVersion, Components, RestError, Spec};
use serde_json::{json, Value};

const V: ApiVersion = ApiVersion::V0038;

fn ctx(st: &Shared) -> Ctx {
    Ctx { cluster: st.cluster.clone(), ..Ctx::default() }
}

/// A path's job id: a number, 0 and non-numbers refused as 22.05's `slurm_xlate_job_id`
/// (`ESLURM_REST_INVALID_JOBS_DESC`, "Unable to find JobId").
fn job_id(s: &str) -> Result<u64, RestError> {
    let head = s.split(['_', '.']).next().unwrap_or("");
    match head.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(error(flotilla_rest::dp::ESLURM_REST_INVALID_JOBS_DESC, format!("Unable to find JobId={s}"), "_handle_job_get")),
    }
}

async fn jobs(st: &Shared, a: &Authed, jobs: Vec<JobRef>) -> Result<Vec<flotilla_proto::JobInfo>, RestError> {
    let q = JobQuery { jobs, include_finished: true, ..JobQuery::default() };
    match st.ctl.call(&a.caller, Request::QueryJobs(q)).await {
        Ok(Response::Jobs(j)) => Ok(j),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ctl_error(&e, "slurm_load_jobs")),
    }
}

async fn get_jobs(State(st): State<Shared>, a: Authed, RawQuery(raw): RawQuery) -> Reply {
    let q = query_pairs(raw.as_deref());
    if let Some((_, t)) = q.iter().find(|(k, _)| k == "update_time") {
        if t.parse::<i64>().is_err() {
            let e = error(ESLURM_REST_INVALID_QUERY, format!("update_time {t:?} is not a time"), "_op_handler_jobs");
            return answer(&st, &a, V, v38::jobs_response(&[], &ctx(&st)), &[e], &[]);
        }
    }
    // 22.05: slurm_load_jobs' SLURM_NO_CHANGE_IN_DATA becomes 304 Not Modified, no body
    // (`_op_handler_jobs`, `_call_handler`); the same for nodes, partitions, reservations.
    if unchanged(&st, &a, update_time(&q), |u| u.jobs).await {
        return Reply::not_modified();
    }
    match jobs(&st, &a, Vec::new()).await {
        Ok(j) => answer(&st, &a, V, v38::jobs_response(&j, &ctx(&st)), &[], &[]),
        Err(e) => answer(&st, &a, V, v38::jobs_response(&[], &ctx(&st)), &[e], &[]),
    }
}

async fn get_job(State(st): State<Shared>, a: Authed, Path(id): Path<String>) -> Reply {
    let none = v38::jobs_response(&[], &ctx(&st));
    let jid = match job_id(&id) {
        Ok(j) => j,
        Err(e) => return answer(&st, &a, V, none, &[e], &[]),
    };
    match jobs(&st, &a, vec![JobRef::id(jid)]).await {
        Ok(j) if !j.is_empty() => answer(&st, &a, V, v38::jobs_response(&j, &ctx(&st)), &[], &[]),
        Ok(_) => answer(&st, &a, V, none, &[error(ESLURM_INVALID_JOB_ID, format!("Unable to find JobId={id}"), "slurm_load_job")], &[]),
        Err(mut e) => {
            e.description = format!("Unable to find JobId={id}");
            answer(&st, &a, V, none, &[e], &[])
        }
    }
}

async fn delete_job(State(st): State<Shared>, a: Authed, Path(id): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    let jid = match job_id(&id) {
        Ok(j) => j,
        Err(e) => return answer(&st, &a, V, json!({}), &[e], &[]),
    };
    let q = query_pairs(raw.as_deref());
    let signal = match q.iter().find(|(k, _)| k == "signal").map(|(_, s)| s.as_str()) {
        None | Some("") => 9,
        Some(s) => match signal_number(s) {
            Some(n) => n,
            None => return answer(&st, &a, V, json!({}), &[error(ESLURM_REST_INVALID_QUERY, format!("invalid signal: {s}"), "HTTP request: signal")], &[]),
        },
    };
    // 22.05: slurm_kill_job2(id, signal, KILL_FULL_JOB); SIGKILL is the cancel.
    let req = CancelJob {
        jobs: vec![JobRef::id(jid)],
        signal: (signal != 9).then_some(signal),
        full: true,
        ..CancelJob::default()
    };
    let r = st.ctl.call(&a.caller, Request::CancelJob(req)).await;
    let failed = match r {
        Ok(Response::JobResults(rs)) => rs.into_iter().find_map(|r| r.error),
        Ok(_) => None,
        Err(e) => Some(e),
    };
    match failed {
        None => answer(&st, &a, V, json!({}), &[], &[]),
        Some(e) if e.code == ESLURM_ALREADY_DONE => answer(&st, &a, V, json!({}), &[], &[]),
        Some(e) => {
            let desc = format!("unable to kill JobId={id} with signal {signal}: {}", e.text);
            answer(&st, &a, V, json!({}), &[error(e.code, desc, "slurm_kill_job")], &[])
        }
    }
}

fn body_object(body: &Bytes, source: &str) -> Result<serde_json::Map<String, Value>, RestError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(error(ESLURM_REST_FAIL_PARSING, "the body is not a JSON object", source)),
        Err(e) => Err(error(ESLURM_REST_FAIL_PARSING, format!("body is not JSON: {e}"), source)),
    }
}

async fn post_submit(State(st): State<Shared>, a: Authed, body: Bytes) -> Reply {
    let fail = |e: RestError| answer(&st, &a, V, v38::submit_response(None), &[e], &[]);
    let b = match body_object(&body, "_op_handler_submit_job_post") {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let script = match b.get("script").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => {
            return fail(error(flotilla_proto::errno::ESLURM_JOB_SCRIPT_MISSING, "Batch job script empty or missing", "script"));
        }
    };
    let job = match (b.get("job"), b.get("jobs")) {
        (Some(Value::Object(j)), None) => j.clone(),
        (None, Some(Value::Array(js))) if js.len() == 1 && js[0].is_object() => js[0].as_object().cloned().unwrap_or_default(),
        _ => {
            return fail(error(flotilla_rest::dp::ESLURM_REST_INVALID_JOBS_DESC, "Specify only one job or a jobs list of one", "_op_handler_submit_job_post"));
        }
    };
    let who = match caller(&st, &a) {
        Ok(w) => w,
        Err(e) => return fail(e),
    };
    let sj = v38::to_data_parser(&job, false)
        .and_then(|m| submit::submit_job(&m, Some(script), &who, &super::common::user, &super::common::group));
    // v0.0.38 answers carry no warnings: ignored keys go unsaid, as in 22.05.
    let mut sj = match sj {
        Ok((s, _ignored)) => s,
        Err(e) => return fail(e),
    };
    sj.submit_host = nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    match st.ctl.call(&a.caller, Request::SubmitJob(Box::new(sj))).await {
        Ok(Response::Submitted(s)) => answer(&st, &a, V, v38::submit_response(Some(s.job_id)), &[], &[]),
        Ok(_) => fail(error(flotilla_proto::errno::SLURM_UNEXPECTED_MSG_ERROR, "unexpected answer", "slurm_submit_batch_job")),
        Err(e) => fail(ctl_error(&e, "slurm_submit_batch_job")),
    }
}

async fn post_job(State(st): State<Shared>, a: Authed, Path(id): Path<String>, body: Bytes) -> Reply {
    let fail = |e: RestError| answer(&st, &a, V, json!({}), &[e], &[]);
    let jid = match job_id(&id) {
        Ok(j) => j,
        Err(e) => return fail(e),
    };
    let changes = body_object(&body, "_handle_job_post")
        .and_then(|b| v38::to_data_parser(&b, true))
        .and_then(|m| submit::job_changes(&Value::Object(m)));
    let changes = match changes {
        Ok((c, _ignored)) => c,
        Err(e) => return fail(e),
    };
    let r = st.ctl.call(&a.caller, Request::UpdateJob(UpdateJob { job: JobRef::id(jid), changes })).await;
    let failed = match r {
        Ok(Response::JobResults(rs)) => rs.into_iter().find_map(|r| r.error),
        Ok(_) => None,
        Err(e) => Some(e),
    };
    match failed {
        None => answer(&st, &a, V, json!({}), &[], &[]),
        Some(e) => fail(ctl_error(&e, "slurm_update_job2")),
    }
}

async fn nodes(st: &Shared, a: &Authed, names: Vec<String>) -> Result<Vec<flotilla_proto::NodeInfo>, RestError> {
    match st.ctl.call(&a.caller, Request::QueryNodes(NodeQuery { names })).await {
        Ok(Response::Nodes(n)) => Ok(n),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ctl_error(&e, "slurm_load_node")),
    }
}

async fn get_nodes(State(st): State<Shared>, a: Authed, RawQuery(raw): RawQuery) -> Reply {
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.nodes).await {
        return Reply::not_modified();
    }
    match nodes(&st, &a, Vec::new()).await {
        Ok(n) => answer(&st, &a, V, v38::nodes_response(&n, &ctx(&st)), &[], &[]),
        Err(e) => answer(&st, &a, V, v38::nodes_response(&[], &ctx(&st)), &[e], &[]),
    }
}

async fn get_node(State(st): State<Shared>, a: Authed, Path(name): Path<String>) -> Reply {
    match nodes(&st, &a, vec![name.clone()]).await {
        Ok(n) if !n.is_empty() => answer(&st, &a, V, v38::nodes_response(&n, &ctx(&st)), &[], &[]),
        Ok(_) => answer(&st, &a, V, v38::nodes_response(&[], &ctx(&st)), &[error(ESLURM_INVALID_NODE_NAME, format!("unable to query node {name}"), "slurm_load_node")], &[]),
        Err(e) => answer(&st, &a, V, v38::nodes_response(&[], &ctx(&st)), &[e], &[]),
    }
}

/// The partitions, and a context that knows the state of those not up.
async fn parts(st: &Shared, a: &Authed) -> Result<(Vec<flotilla_proto::PartitionInfo>, Ctx), RestError> {
    match st.ctl.call(&a.caller, Request::QueryPartitions).await {
        Ok(Response::Partitions(p)) => {
            let partition_states = super::nodes::partition_states(st, a, &p).await;
            Ok((p, Ctx { partition_states, ..ctx(st) }))
        }
        Ok(_) => Ok((Vec::new(), ctx(st))),
        Err(e) => Err(ctl_error(&e, "slurm_load_partitions")),
    }
}

async fn get_partitions(State(st): State<Shared>, a: Authed, RawQuery(raw): RawQuery) -> Reply {
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.partitions).await {
        return Reply::not_modified();
    }
    match parts(&st, &a).await {
        Ok((p, c)) => answer(&st, &a, V, v38::partitions_response(&p, &c), &[], &[]),
        Err(e) => answer(&st, &a, V, v38::partitions_response(&[], &ctx(&st)), &[e], &[]),
    }
}

async fn get_partition(State(st): State<Shared>, a: Authed, Path(name): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.partitions).await {
        return Reply::not_modified();
    }
    let none = v38::partitions_response(&[], &ctx(&st));
    match parts(&st, &a).await {
        Ok((p, c)) => match p.into_iter().find(|p| p.name == name) {
            Some(p) => answer(&st, &a, V, v38::partitions_response(&[p], &c), &[], &[]),
            None => answer(&st, &a, V, none, &[error(ESLURM_INVALID_PARTITION_NAME, format!("Unable to find partition {name}"), "slurm_load_partitions")], &[]),
        },
        Err(e) => answer(&st, &a, V, none, &[e], &[]),
    }
}

async fn get_diag(State(st): State<Shared>, a: Authed) -> Reply {
    match st.ctl.call(&a.caller, Request::Diag).await {
        Ok(Response::Diag(d)) => {
            let user_names = d.rpc_users.iter().map(|u| (u.uid, user_name(u.uid))).collect();
            answer(&st, &a, V, v38::diag_response(&d, &flotilla_rest::dp::diag::Ctx { user_names }), &[], &[])
        }
        Ok(_) => answer(&st, &a, V, json!({}), &[], &[warning("no statistics", "slurm_get_statistics")]),
        Err(e) => answer(&st, &a, V, json!({}), &[ctl_error(&e, "slurm_get_statistics")], &[]),
    }
}

/// The routes.
pub fn routes() -> Router<Shared> {
    let p = |s: &str| format!("/slurm/v0.0.38/{s}");
    let mut r = Router::new();
    r = both(r, &p("jobs/"), get(get_jobs));
    r = both(r, &p("job/submit"), post(post_submit));
    r = both(r, &p("job/{job_id}"), get(get_job).delete(delete_job).post(post_job));
    r = both(r, &p("nodes/"), get(get_nodes));
    r = both(r, &p("node/{node_name}"), get(get_node));
    r = both(r, &p("partitions/"), get(get_partitions));
    r = both(r, &p("partition/{partition_name}"), get(get_partition));
    both(r, &p("diag/"), get(get_diag))
}

/// The spec (Slurm 22.05's operation ids: `slurmV0038GetJobs` became `slurm_v0038_get_jobs`
/// in the generated clients; Flotilla writes the latter, as its other versions).
pub fn spec() -> Spec {
    let mut c = Components::default();
    v38::add_schemas(&mut c);
    let r = |n: &'static str| Schema::Ref(n);
    let job = || path_param("job_id", "Slurm Job ID");
    let upd = || query_param("update_time", Schema::Int(IntFormat::I64), "Filter if changed since update_time. Use of this parameter can result in faster replies.");
    let ops = vec![
        op(V, Method::Get, "jobs/", "get_jobs", "get list of jobs", vec![upd()], None, r(NAMES[0])),
        op(V, Method::Get, "job/{job_id}", "get_job", "get job info", vec![job()], None, r(NAMES[0])),
        op(V, Method::Delete, "job/{job_id}", "cancel_job", "cancel or signal job", vec![job(), query_param("signal", Schema::Str, "signal to send to job")], None, r(NAMES[7])),
        op(V, Method::Post, "job/{job_id}", "update_job", "update job", vec![job()], Some(r(NAMES[6])), r(NAMES[7])),
        op(V, Method::Post, "job/submit", "submit_job", "submit new job", vec![], Some(r(NAMES[5])), r(NAMES[4])),
        op(V, Method::Get, "nodes/", "get_nodes", "get all node info", vec![upd()], None, r(NAMES[1])),
        op(V, Method::Get, "node/{node_name}", "get_node", "get node info", vec![path_param("node_name", "Slurm Node Name")], None, r(NAMES[1])),
        op(V, Method::Get, "partitions/", "get_partitions", "get all partition info", vec![upd()], None, r(NAMES[2])),
        op(V, Method::Get, "partition/{partition_name}", "get_partition", "get partition info", vec![path_param("partition_name", "Slurm Partition Name"), upd()], None, r(NAMES[2])),
        op(V, Method::Get, "diag/", "diag", "get diagnostics", vec![], None, r(NAMES[3])),
    ];
    Spec { operations: ops, components: c }
}
