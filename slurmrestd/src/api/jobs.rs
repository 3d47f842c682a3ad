//! Jobs, for the data_parser versions (v0.0.41–v0.0.44), as Slurm 25.11's
//! `openapi/slurmctld` `jobs.c`:
//!
//! - `GET /slurm/vX/jobs` (query `update_time`, `flags`): every job the controller holds,
//!   finished ones included (Slurm's `SHOW_ALL|SHOW_DETAIL`). When nothing changed since
//!   `update_time` (the controller's [`flotilla_proto::UpdateTimes`]), 25.11's answer: no
//!   jobs and the warning `No job changes since update_time[T]=TIME`, status 200.
//! - `GET /slurm/vX/job/{job_id}`: one job; an unknown id is `ESLURM_INVALID_JOB_ID` (404).
//!   `123_4` names the array `123` whole, with Slurm's warning.
//! - `DELETE /slurm/vX/job/{job_id}` (query `signal`, default `KILL`; `flags`, default
//!   `FULL_JOB`): `KILL` to the whole job cancels it (`scancel`), another signal is
//!   `scancel -s`. From v0.0.42 each job's outcome is in `status[]` (an unknown job there,
//!   with 200, as Slurm's per-job results); v0.0.41 answers an error with its status.
//! - `POST /slurm/vX/job/submit` (body `{script, job}` or `{script, jobs: [job]}`): a batch
//!   job; answers `job_id`, `step_id` (`batch`), `job_submit_user_msg`.
//! - `POST /slurm/vX/job/{job_id}` (body a job description): `scontrol update job`.

use super::common::{answer, caller, ctl_error, error, now, only_keys, op, path_param, query_param, query_pairs, unchanged, update_time, warning};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::Router;
use flotilla_proto::errno::{ESLURM_ALREADY_DONE, ESLURM_INVALID_JOB_ID};
use flotilla_proto::{CancelJob, JobInfo, JobQuery, JobRef, Request, Response, UpdateJob};
use flotilla_rest::dp::job::{self, Ctx};
use flotilla_rest::dp::submit::{self, Signalled, Submitted, Updated};
use flotilla_rest::dp::{signal_number, ESLURM_REST_FAIL_PARSING, ESLURM_REST_INVALID_QUERY, VERSIONS};
use flotilla_rest::schema::{IntFormat, Method, Schema};
use flotilla_rest::{ApiVersion, Components, RestError, RestWarning, Spec};
use serde_json::Value;

/// Slurm's `MAX_JOB_ID` (`slurm.h`): ids are below it.
const MAX_JOB_ID: u64 = 0x03FF_FFFF;

/// A job id of a path (`123`, `123_4`, `123.batch`): the job, whether an array task was
/// named, whether a step was. Not a number: `ESLURM_REST_INVALID_QUERY`; 0 or too large:
/// `ESLURM_INVALID_JOB_ID` (`op_handler_job`'s "Invalid JobID=%u rejected").
fn parse_job_id(s: &str) -> Result<(u64, Option<u32>, bool), RestError> {
    let (head, step) = match s.split_once('.') {
        Some((h, _)) => (h, true),
        None => (s, false),
    };
    let (id, task) = match head.split_once('_') {
        Some((j, t)) => (j, Some(t)),
        None => (head, None),
    };
    let bad = || error(ESLURM_REST_INVALID_QUERY, format!("Rejecting request. Failure parsing parameters: job_id {s:?}"), "op_handler_job");
    let id: u64 = id.parse().map_err(|_| bad())?;
    let task = match task {
        Some(t) => Some(t.parse::<u32>().map_err(|_| bad())?),
        None => None,
    };
    if id == 0 || id >= MAX_JOB_ID {
        return Err(error(ESLURM_INVALID_JOB_ID, format!("Invalid JobID={id} rejected"), "op_handler_job"));
    }
    Ok((id, task, step))
}

fn ctx(st: &Shared) -> Ctx {
    Ctx { cluster: st.cluster.clone(), ..Ctx::default() }
}

/// `last_backfill`: when the last backfill cycle ran (the controller's statistics), `None`
/// when none has or the statistics are not given to this caller.
async fn last_backfill(st: &Shared, a: &Authed) -> Option<i64> {
    match st.ctl.call(&a.caller, Request::Diag).await {
        Ok(Response::Diag(d)) if d.bf_when_last_cycle > 0 => Some(d.bf_when_last_cycle),
        _ => None,
    }
}

fn jobs_answer(st: &Shared, a: &Authed, v: ApiVersion, jobs: &[JobInfo], bf: Option<i64>, errs: &[RestError], warns: &[RestWarning]) -> Reply {
    let body = job::response(v, jobs, &ctx(st), bf, now());
    answer(st, a, v, body, errs, warns)
}

async fn query(st: &Shared, a: &Authed, q: JobQuery) -> Result<Vec<JobInfo>, RestError> {
    match st.ctl.call(&a.caller, Request::QueryJobs(q)).await {
        Ok(Response::Jobs(j)) => Ok(j),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ctl_error(&e, "slurm_load_jobs()")),
    }
}

/// From this many jobs a list is written by [`spliced_jobs`]: in chunks on every core, off the
/// async workers.
const SPLICE_FROM: usize = 2048;

/// A job list answer with the jobs' JSON made in parallel: `chunks` threads each turn a slice
/// of `jobs` into JSON text; the answer is `{"jobs":[...],` followed by the rest of the
/// envelope (`head`, the answer with no jobs, whose `jobs` key is dropped). The same
/// document as [`Reply`]'s (JSON objects are unordered; `jobs` simply comes first).
pub fn spliced_jobs(v: ApiVersion, jobs: &[JobInfo], ctx: &Ctx, head: Reply, chunks: usize) -> axum::response::Response {
    use axum::response::IntoResponse;
    let size = jobs.len().div_ceil(chunks.max(1)).max(1);
    let parts: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(size)
            .map(|c| {
                s.spawn(move || {
                    let m = job::model(v);
                    let values: Vec<Value> = c.iter().map(|j| m.emit(j, ctx)).collect();
                    serde_json::to_vec(&values).unwrap_or_else(|_| b"[]".to_vec())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| b"[]".to_vec())).collect()
    });
    let mut body = head.body;
    if let Some(m) = body.as_object_mut() {
        m.remove("jobs");
    }
    let rest = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum::<usize>() + rest.len() + 16);
    out.extend_from_slice(b"{\"jobs\":[");
    let mut first = true;
    for p in &parts {
        // Each part is `[...]`: its inside, comma-separated from the previous one's.
        let inner = &p[1..p.len() - 1];
        if inner.is_empty() {
            continue;
        }
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(inner);
        first = false;
    }
    out.push(b']');
    if rest.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&rest[1..]);
    } else {
        out.push(b'}');
    }
    out.push(b'\n');
    let mut r = (head.status, out).into_response();
    r.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    r
}

async fn get_jobs(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> axum::response::Response {
    use axum::response::IntoResponse;
    let v = version_of(uri.path());
    let q = query_pairs(raw.as_deref());
    let warns = only_keys(&q, &["update_time", "flags"], "op_handler_jobs");
    if let Some((_, t)) = q.iter().find(|(k, _)| k == "update_time") {
        if t.parse::<i64>().is_err() {
            let e = error(ESLURM_REST_INVALID_QUERY, format!("Rejecting request. Failure parsing query: update_time {t:?}"), "op_handler_jobs");
            return jobs_answer(&st, &a, v, &[], None, &[e], &warns).into_response();
        }
    }
    // 25.11's op_handler_jobs: no change since update_time is a success with a warning and
    // no jobs (v0.0.38 answers 304 instead).
    let ut = update_time(&q);
    if unchanged(&st, &a, ut, |u| u.jobs).await {
        let t = ut.unwrap_or_default();
        let mut warns = warns;
        let when = flotilla_core::time::fmt_time(t);
        warns.push(warning(format!("No job changes since update_time[{t}]={when}"), "op_handler_jobs"));
        return jobs_answer(&st, &a, v, &[], None, &[], &warns).into_response();
    }
    let (jobs, bf) = tokio::join!(query(&st, &a, JobQuery { include_finished: true, ..JobQuery::default() }), last_backfill(&st, &a));
    match jobs {
        Ok(j) if j.len() >= SPLICE_FROM => {
            let head = jobs_answer(&st, &a, v, &[], bf, &[], &warns);
            let ctx = ctx(&st);
            let chunks = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
            tokio::task::spawn_blocking(move || spliced_jobs(v, &j, &ctx, head, chunks))
                .await
                .unwrap_or_else(|_| axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Ok(j) => jobs_answer(&st, &a, v, &j, bf, &[], &warns).into_response(),
        Err(e) => jobs_answer(&st, &a, v, &[], None, &[e], &warns).into_response(),
    }
}

async fn get_job(State(st): State<Shared>, a: Authed, uri: Uri, Path(id): Path<String>) -> Reply {
    let v = version_of(uri.path());
    let (job_id, task, step) = match parse_job_id(&id) {
        Ok(x) => x,
        Err(e) => return jobs_answer(&st, &a, v, &[], None, &[e], &[]),
    };
    let mut warns = Vec::new();
    if task.is_some() {
        warns.push(warning("Job array Ids are not currently supported for job searches. Showing all jobs in array instead.", "_handle_job_get"));
    }
    if step {
        warns.push(warning("Job steps are not supported for job searches. Showing whole job instead.", "_handle_job_get"));
    }
    let q = JobQuery { jobs: vec![JobRef::id(job_id)], include_finished: true, ..JobQuery::default() };
    let (jobs, bf) = tokio::join!(query(&st, &a, q), last_backfill(&st, &a));
    match jobs {
        Ok(j) if !j.is_empty() => jobs_answer(&st, &a, v, &j, bf, &[], &warns),
        Ok(_) => {
            let e = error(ESLURM_INVALID_JOB_ID, format!("Unable to query JobId={id}"), "_handle_job_get");
            jobs_answer(&st, &a, v, &[], None, &[e], &warns)
        }
        Err(mut e) => {
            e.description = format!("Unable to query JobId={id}");
            jobs_answer(&st, &a, v, &[], None, &[e], &warns)
        }
    }
}

/// `flags` of a signal (Slurm's `WARN_FLAGS`): (batch shell only, whole job); flags that
/// change nothing here are warned about.
fn kill_flags(s: &str, warns: &mut Vec<RestWarning>) -> Result<(bool, bool), RestError> {
    const KNOWN: [&str; 13] = [
        "BATCH_JOB", "ARRAY_TASK", "FULL_STEPS_ONLY", "FULL_JOB", "FEDERATION_REQUEUE", "HURRY", "OUT_OF_MEMORY",
        "NO_SIBLING_JOBS", "RESERVATION_JOB", "VERBOSE", "CRON_JOBS", "WARNING_SENT", "FORWARD_ALL_NODES",
    ];
    let words: Vec<String> = s.split(',').map(|w| w.trim().to_ascii_uppercase()).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return Ok((false, true));
    }
    let (mut batch, mut full) = (false, false);
    for w in &words {
        match w.as_str() {
            "BATCH_JOB" => batch = true,
            "FULL_JOB" => full = true,
            "FULL_STEPS_ONLY" | "VERBOSE" => {}
            w if KNOWN.contains(&w) => warns.push(warning(format!("signal flag {w} is not supported by Flotilla; ignored"), "_parse_job_delete")),
            w => {
                return Err(error(ESLURM_REST_INVALID_QUERY, format!("Rejecting request. Unknown signal flag {w}"), "_parse_job_delete"))
            }
        }
    }
    Ok((batch, full))
}

fn kill_answer(st: &Shared, a: &Authed, v: ApiVersion, done: &[Signalled], errs: &[RestError], warns: &[RestWarning]) -> Reply {
    answer(st, a, v, submit::kill_response(v, done), errs, warns)
}

async fn delete_job(State(st): State<Shared>, a: Authed, uri: Uri, Path(id): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let (job_id, task, _) = match parse_job_id(&id) {
        Ok(x) => x,
        Err(e) => return kill_answer(&st, &a, v, &[], &[e], &[]),
    };
    let q = query_pairs(raw.as_deref());
    let mut warns = only_keys(&q, &["signal", "flags"], "_parse_job_delete");
    let signal = match q.iter().find(|(k, _)| k == "signal").map(|(_, s)| s.as_str()).filter(|s| !s.is_empty()) {
        None => 9,
        Some(s) => match signal_number(s) {
            Some(n) => n,
            None => {
                let e = error(ESLURM_REST_INVALID_QUERY, format!("Unknown signal {s}"), "_parse_job_delete");
                return kill_answer(&st, &a, v, &[], &[e], &warns);
            }
        },
    };
    let flags = q.iter().find(|(k, _)| k == "flags").map_or("", |(_, s)| s.as_str());
    let (batch_only, full) = match kill_flags(flags, &mut warns) {
        Ok(f) => f,
        Err(e) => return kill_answer(&st, &a, v, &[], &[e], &warns),
    };
    // SIGKILL to the whole job is Slurm's cancel (the job ends CANCELLED).
    let cancel = signal == 9 && full && !batch_only;
    let req = CancelJob {
        jobs: vec![JobRef { job_id, tasks: task.map(|t| vec![t]) }],
        signal: (!cancel).then_some(signal),
        batch_only,
        full,
        ..CancelJob::default()
    };
    let results = match st.ctl.call(&a.caller, Request::CancelJob(req)).await {
        Ok(Response::JobResults(r)) => r,
        Ok(_) => Vec::new(),
        Err(e) => return kill_answer(&st, &a, v, &[], &[ctl_error(&e, "slurm_kill_jobs()")], &warns),
    };
    let mut errs = Vec::new();
    let mut done = Vec::new();
    for r in results {
        let step_id = match &r.job.tasks {
            Some(t) if t.len() == 1 => format!("{}_{}", r.job.job_id, t[0]),
            _ => r.job.job_id.to_string(),
        };
        let (code, text, msg) = match &r.error {
            None => (0, "No error".to_string(), String::new()),
            Some(e) => (e.code, e.text.clone(), e.messages.join("; ")),
        };
        if code == ESLURM_ALREADY_DONE {
            warns.push(warning(format!("Job was already sent signal {}", flotilla_rest::dp::signal_name(signal)), "_signal_job"));
        } else if code != 0 && v == ApiVersion::V0041 {
            // v0.0.41 has no per-job results: the error is the answer's.
            errs.push(error(code, if msg.is_empty() { "Signal request failed".to_string() } else { msg.clone() }, "slurm_kill_jobs()"));
        }
        done.push(Signalled { step_id, job_id: r.job.job_id, error: (code, text, msg) });
    }
    kill_answer(&st, &a, v, &done, &errs, &warns)
}

fn submit_answer(st: &Shared, a: &Authed, v: ApiVersion, s: Option<Submitted>, errs: &[RestError]) -> Reply {
    submit_answer_w(st, a, v, s, errs, &[])
}

fn submit_answer_w(st: &Shared, a: &Authed, v: ApiVersion, s: Option<Submitted>, errs: &[RestError], warns: &[RestWarning]) -> Reply {
    answer(st, a, v, submit::submit_response(v, s), errs, warns)
}

async fn post_submit(State(st): State<Shared>, a: Authed, uri: Uri, body: Bytes) -> Reply {
    let v = version_of(uri.path());
    let body: Value = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return submit_answer(&st, &a, v, None, &[error(ESLURM_REST_FAIL_PARSING, format!("body is not JSON: {e}"), "_job_post")]),
    };
    let who = match caller(&st, &a) {
        Ok(w) => w,
        Err(e) => return submit_answer(&st, &a, v, None, &[e]),
    };
    let sj = submit::submission(&body).and_then(|(job, script)| {
        submit::submit_job(job, script, &who, &super::common::user, &super::common::group)
    });
    let (mut sj, warns) = match sj {
        Ok(s) => s,
        Err(e) => return submit_answer(&st, &a, v, None, &[e]),
    };
    sj.submit_host = nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    match st.ctl.call(&a.caller, Request::SubmitJob(Box::new(sj))).await {
        Ok(Response::Submitted(s)) => submit_answer_w(&st, &a, v, Some(Submitted { job_id: s.job_id }), &[], &warns),
        Ok(_) => {
            let e = error(flotilla_proto::errno::SLURM_UNEXPECTED_MSG_ERROR, "unexpected answer", "slurm_submit_batch_job()");
            submit_answer_w(&st, &a, v, None, &[e], &warns)
        }
        Err(e) => {
            let mut r = ctl_error(&e, "slurm_submit_batch_job()");
            if e.messages.is_empty() {
                r.description = "Batch job submission failed".into();
            }
            submit_answer_w(&st, &a, v, None, &[r], &warns)
        }
    }
}

fn update_answer(st: &Shared, a: &Authed, v: ApiVersion, res: &[Updated], errs: &[RestError], warns: &[RestWarning]) -> Reply {
    answer(st, a, v, submit::update_response(v, res), errs, warns)
}

async fn post_job(State(st): State<Shared>, a: Authed, uri: Uri, Path(id): Path<String>, body: Bytes) -> Reply {
    let v = version_of(uri.path());
    let (job_id, task, step) = match parse_job_id(&id) {
        Ok(x) => x,
        Err(e) => return update_answer(&st, &a, v, &[], &[e], &[]),
    };
    if task.is_some() {
        let e = error(ESLURM_REST_INVALID_QUERY, "Rejecting request. Submit job update against Array Job's JobID instead of array task id.", "_job_post_update");
        return update_answer(&st, &a, v, &[], &[e], &[]);
    }
    let mut warns = Vec::new();
    if step {
        warns.push(warning("Job step information ignored. Job update requests apply to whole job and can not be targeted to specific steps.", "_job_post_update"));
    }
    let changes = serde_json::from_slice::<Value>(&body)
        .map_err(|e| error(ESLURM_REST_FAIL_PARSING, format!("Rejecting request. Failure parsing job update request: {e}"), "_job_post_update"))
        .and_then(|b| submit::job_changes(&b));
    let changes = match changes {
        Ok((c, w)) => {
            warns.extend(w);
            c
        }
        Err(e) => return update_answer(&st, &a, v, &[], &[e], &warns),
    };
    let req = UpdateJob { job: JobRef::id(job_id), changes };
    let r = st.ctl.call(&a.caller, Request::UpdateJob(req)).await;
    let outcome = match r {
        Ok(Response::JobResults(rs)) => rs.into_iter().find_map(|r| r.error).map_or(Ok(()), Err),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => {
            let u = Updated { job_id, step_id: job_id.to_string(), error: (0, "No error".into()), why: String::new() };
            update_answer(&st, &a, v, &[u], &[], &warns)
        }
        Err(e) => {
            let mut r = ctl_error(&e, "slurm_update_job2()");
            if e.messages.is_empty() {
                r.description = "Job update requested failed".into();
            }
            update_answer(&st, &a, v, &[], &[r], &warns)
        }
    }
}

/// The routes, every data_parser version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in VERSIONS {
        let p = |s: &str| format!("/slurm/{}/{s}", v.as_str());
        r = both(r, &p("jobs/"), get(get_jobs));
        r = both(r, &p("job/submit"), post(post_submit));
        r = both(r, &p("job/{job_id}"), get(get_job).delete(delete_job).post(post_job));
    }
    r
}

/// The spec, every data_parser version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in VERSIONS {
        let mut c = Components::default();
        let jobs = job::add_response(v, &mut c);
        let kill = submit::add_kill_response(v, &mut c);
        let submit_body = submit::add_submit_request(v, &mut c);
        let submitted = submit::add_submit_response(v, &mut c);
        let update_body = submit::add_update_request(v, &mut c);
        let updated = submit::add_update_response(v, &mut c);
        let job_id = || path_param("job_id", "Job ID");
        let upd = query_param("update_time", Schema::Int(IntFormat::I64), "Query jobs updated more recently than this time (UNIX timestamp)");
        let flags = || query_param("flags", Schema::Str, "Query flags");
        let ops = vec![
            op(v, Method::Get, "jobs/", "get_jobs", "get list of jobs", vec![upd.clone(), flags()], None, jobs.clone()),
            op(v, Method::Get, "job/{job_id}", "get_job", "get job info", vec![job_id(), upd, flags()], None, jobs),
            op(
                v,
                Method::Delete,
                "job/{job_id}",
                "delete_job",
                "cancel or signal job",
                vec![job_id(), query_param("signal", Schema::Str, "Signal to send to Job"), query_param("flags", Schema::Str, "Signalling flags")],
                None,
                kill,
            ),
            op(v, Method::Post, "job/{job_id}", "post_job", "update job", vec![job_id()], Some(update_body), updated),
            op(v, Method::Post, "job/submit", "post_job_submit", "submit new job", vec![], Some(submit_body), submitted),
        ];
        s.merge(Spec { operations: ops, components: c });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spliced list is the same document as the plain one, in every version, whatever
    /// the number of chunks (one job per chunk, more chunks than jobs, none).
    #[tokio::test]
    async fn a_spliced_job_list_is_the_plain_one() {
        use axum::http::StatusCode;
        let ctx = Ctx { cluster: "c".into(), ..Ctx::default() };
        let jobs: Vec<JobInfo> = (1..=7).map(|i| JobInfo { job_id: i, name: format!("j{i}"), ..JobInfo::default() }).collect();
        let client = flotilla_rest::ClientInfo::default();
        let warns = [warning("w", "t")];
        for v in VERSIONS {
            for n in [0, 1, 3, 7] {
                let plain = Reply::enveloped(StatusCode::OK, v, &client, "c", job::response(v, &jobs[..n], &ctx, Some(9), 5), &[], &warns).body;
                for chunks in [1, 2, 3, 16] {
                    let head = Reply::enveloped(StatusCode::OK, v, &client, "c", job::response(v, &[], &ctx, Some(9), 5), &[], &warns);
                    let r = spliced_jobs(v, &jobs[..n], &ctx, head, chunks);
                    assert_eq!(r.status(), StatusCode::OK);
                    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX).await.unwrap();
                    let got: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
                    assert_eq!(got, plain, "{v:?} {n} jobs in {chunks} chunks");
                }
            }
        }
    }

    #[test]
    fn job_ids_parse_as_slurms() {
        assert_eq!(parse_job_id("12").unwrap(), (12, None, false));
        assert_eq!(parse_job_id("12_3").unwrap(), (12, Some(3), false));
        assert_eq!(parse_job_id("12.batch").unwrap(), (12, None, true));
        assert_eq!(parse_job_id("0").unwrap_err().error_number, ESLURM_INVALID_JOB_ID);
        assert_eq!(parse_job_id("x").unwrap_err().error_number, ESLURM_REST_INVALID_QUERY);
    }

    #[test]
    fn signal_flags_map_to_scancels() {
        let mut w = Vec::new();
        assert_eq!(kill_flags("", &mut w).unwrap(), (false, true));
        assert_eq!(kill_flags("BATCH_JOB", &mut w).unwrap(), (true, false));
        assert_eq!(kill_flags("FULL_STEPS_ONLY", &mut w).unwrap(), (false, false));
        assert!(w.is_empty());
        assert_eq!(kill_flags("HURRY,FULL_JOB", &mut w).unwrap(), (false, true));
        assert_eq!(w.len(), 1);
        assert!(kill_flags("NOPE", &mut w).is_err());
    }
}
