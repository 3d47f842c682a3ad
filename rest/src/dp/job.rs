//! Jobs: `v0.0.4x_job_info` (inline in v0.0.41) and the answer of `GET /slurm/vX/jobs` and
//! `GET /slurm/vX/job/{job_id}` (`v0.0.4x_openapi_job_info_resp`: `jobs[]`, `last_backfill`,
//! `last_update`), from the controller's [`JobInfo`].
//!
//! Fields are Slurm 25.11's `PARSER_ARRAY(JOB_INFO)` (`data_parser/v0.0.42/parsers.c`); the
//! ones Flotilla does not track (burst buffers, federation, licenses, cron, ...) are left out,
//! which every model allows (no property of `job_info` is required). Times are seconds since
//! the epoch (a time the controller does not give is left out); memory is MiB; `time_limit` minutes.

use super::{add_common, exit_code, exit_code_value, maybe, name, no_val, set, unset, Width};
use crate::model::Model;
use crate::schema::{array, req, Components, IntFormat, Schema};
use crate::version::ApiVersion;
use flotilla_proto::{JobInfo, JobStateWire, TimeLimitWire};
use serde_json::{json, Value};

/// What every job of one answer shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ctx {
    /// `ClusterName` (`cluster`).
    pub cluster: String,
    /// `State=` of each partition that is not up, by name (`DOWN`, `DRAIN`, `INACTIVE`: the
    /// controller's `QueryPartitionStates`); a partition not up and not here is `DOWN`.
    pub partition_states: std::collections::BTreeMap<String, String>,
}

/// The job states Flotilla reports (each is a word of every version's `job_state` enum).
const STATES: [&str; 14] = [
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "REQUEUED",
    "COMPLETING",
];

fn s(x: &str) -> Value {
    Value::String(x.to_string())
}

/// A time the controller gave, or the key left out (a time it did not give is not claimed
/// to be Slurm's zero, "not yet").
fn time(t: Option<i64>) -> Option<Value> {
    t.map(set)
}

/// A time limit as Slurm's `UINT32_NO_VAL` dumps it: `UNLIMITED` is infinite, none unset.
pub fn time_limit(t: Option<TimeLimitWire>) -> Value {
    match t {
        Some(TimeLimitWire::Unlimited) => super::infinite(),
        Some(TimeLimitWire::Minutes(m)) => set(m),
        None => unset(),
    }
}

/// `gres:gpu:h100:4` per request, comma-separated (the controller's `TresPerNode`): the text
/// as submitted when the job has it (`gres:gpu` for `--gres=gpu`), else written from its GRES.
fn tres_per_node(j: &JobInfo) -> String {
    if let Some(t) = &j.tres_per_node {
        return t.clone();
    }
    j.gres
        .iter()
        .map(|g| match &g.gpu_type {
            Some(t) => format!("gres:{}:{t}:{}", g.name, g.count),
            None => format!("gres:{}:{}", g.name, g.count),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The description of one job in `v`.
pub fn model(v: ApiVersion) -> Model<JobInfo, Ctx> {
    let nv16 = || no_val(v, Width::U16);
    let nv32 = || no_val(v, Width::U32);
    let nv64 = || no_val(v, Width::U64);
    let i32_ = || Schema::Int(IntFormat::I32);
    Model::new()
        .opt("account", Schema::Str, |j: &JobInfo, _| Some(s(&j.account)))
        .opt("array_job_id", nv32(), |j, _| Some(set(j.array_job_id.unwrap_or(0) as i64)))
        .opt("array_task_id", nv32(), |j, _| Some(maybe(j.array_task_id.map(i64::from))))
        .opt("array_task_string", Schema::Str, |j, _| j.array_task_str.as_deref().map(s))
        .opt("batch_host", Schema::Str, |j, _| Some(s(&j.batch_host)))
        .opt("cluster", Schema::Str, |_, c: &Ctx| Some(s(&c.cluster)))
        .opt("command", Schema::Str, |j, _| Some(s(j.command.as_deref().unwrap_or(""))))
        .opt("comment", Schema::Str, |j, _| Some(s(j.comment.as_deref().unwrap_or(""))))
        .opt("cpus_per_task", nv16(), |j, _| Some(set(j.cpus_per_task)))
        .opt("dependency", Schema::Str, |j, _| Some(s(j.dependency.as_deref().unwrap_or(""))))
        .opt("eligible_time", nv64(), |j, _| time(j.eligible_time))
        .opt("end_time", nv64(), |j, _| time(j.end_time))
        .opt("excluded_nodes", Schema::Str, |j, _| Some(s(&j.excluded_nodes.join(","))))
        .opt("exit_code", exit_code(v), |j, _| {
            let ended = j.state.is_some_and(JobStateWire::is_finished);
            Some(exit_code_value(ended.then_some((j.exit_code, j.exit_signal))))
        })
        .opt("group_id", i32_(), |j, _| Some(json!(j.gid)))
        .opt("hold", Schema::Bool, |j, _| Some(json!(j.held)))
        .opt("job_id", i32_(), |j, _| Some(json!(j.job_id)))
        .opt("job_state", array(Schema::Enum(STATES.to_vec())), |j, _| {
            Some(json!(j.state.map(JobStateWire::as_str).into_iter().collect::<Vec<_>>()))
        })
        .opt("name", Schema::Str, |j, _| Some(s(&j.name)))
        .opt("nodes", Schema::Str, |j, _| Some(s(&j.nodes)))
        .opt("nice", i32_(), |j, _| Some(json!(j.nice)))
        .opt("cpus", nv32(), |j, _| Some(set(j.num_cpus)))
        .opt("node_count", nv32(), |j, _| Some(set(j.num_nodes)))
        .opt("tasks", nv32(), |j, _| Some(set(j.num_tasks)))
        .opt("partition", Schema::Str, |j, _| Some(s(&j.partition)))
        .opt("memory_per_cpu", nv64(), |j, _| Some(maybe(j.mem_per_cpu_mib.map(|m| m as i64))))
        .opt("memory_per_node", nv64(), |j, _| {
            Some(if j.mem_per_cpu_mib.is_some() { unset() } else { set(j.mem_per_node_mib as i64) })
        })
        .opt("priority", nv32(), |j, _| Some(set(j.priority.min(u32::MAX as u64) as i64)))
        .opt("qos", Schema::Str, |j, _| Some(s(&j.qos)))
        .opt("required_nodes", Schema::Str, |j, _| Some(s(&j.required_nodes.join(","))))
        .opt("requeue", Schema::Bool, |j, _| Some(json!(j.requeue)))
        .opt("restart_cnt", i32_(), |j, _| Some(json!(j.restarts)))
        .opt("scheduled_nodes", Schema::Str, |j, _| Some(s(&j.sched_nodes)))
        .opt("start_time", nv64(), |j, _| time(j.start_time))
        .opt("state_description", Schema::Str, |j, _| Some(s(j.reason_detail.as_deref().unwrap_or(""))))
        .opt("state_reason", Schema::Str, |j, _| Some(s(&j.reason)))
        .opt("standard_error", Schema::Str, |j, _| Some(s(j.stderr.as_deref().unwrap_or(""))))
        .opt("standard_output", Schema::Str, |j, _| Some(s(j.stdout.as_deref().unwrap_or(""))))
        .opt("submit_time", nv64(), |j, _| Some(set(j.submit_time)))
        .opt("time_limit", nv32(), |j, _| Some(time_limit(j.time_limit)))
        .opt("tres_per_job", Schema::Str, |j, _| Some(s(j.tres_per_job.as_deref().unwrap_or(""))))
        .opt("tres_per_node", Schema::Str, |j, _| Some(s(&tres_per_node(j))))
        .opt("tres_per_task", Schema::Str, |j, _| Some(s(j.tres_per_task.as_deref().unwrap_or(""))))
        .opt("user_id", i32_(), |j, _| Some(json!(j.uid)))
        .opt("user_name", Schema::Str, |j, _| Some(s(&j.user)))
        .opt("current_working_directory", Schema::Str, |j, _| Some(s(&j.work_dir)))
}

/// The schema of one job in `v` (`$ref` to `v0.0.4x_job_info` from v0.0.42, inline before),
/// its components added to `c`.
pub fn job_schema(v: ApiVersion, c: &mut Components) -> Schema {
    add_common(v, c);
    let m = model(v).schema();
    if v == ApiVersion::V0041 {
        return m;
    }
    let n = name(v, "job_info");
    c.add(n, m);
    Schema::Ref(n)
}

/// The name of the answer's component: `v0.0.42_openapi_job_info_resp`.
pub fn response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_job_info_resp")
}

/// Adds the answer's schema (and every component it uses) to `c`; answers its `$ref`.
pub fn add_response(v: ApiVersion, c: &mut Components) -> Schema {
    let job = job_schema(v, c);
    let mut f = vec![
        req("jobs", array(job)),
        req("last_backfill", no_val(v, Width::U64)).about("Time of last backfill scheduler run (UNIX timestamp)"),
        req("last_update", no_val(v, Width::U64)).about("Time of last job change (UNIX timestamp)"),
    ];
    f.extend(super::envelope_fields(v, c));
    c.add(response_name(v), Schema::Object(f));
    Schema::Ref(response_name(v))
}

/// The answer's own keys (the envelope goes around them): `jobs` in `v`'s shape,
/// `last_backfill` (`None`: no backfill cycle yet, unset) and `last_update`.
pub fn response(v: ApiVersion, jobs: &[JobInfo], ctx: &Ctx, last_backfill: Option<i64>, last_update: i64) -> Value {
    let m = model(v);
    json!({
        "jobs": jobs.iter().map(|j| m.emit(j, ctx)).collect::<Vec<_>>(),
        "last_backfill": maybe(last_backfill),
        "last_update": set(last_update),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_validates_in_every_version() {
        let j = JobInfo {
            job_id: 7,
            name: "x".into(),
            state: Some(JobStateWire::Completed),
            time_limit: Some(TimeLimitWire::Unlimited),
            exit_code: 3,
            gres: vec![flotilla_proto::GresSpec { name: "gpu".into(), gpu_type: Some("h100".into()), count: 2 }],
            ..JobInfo::default()
        };
        for v in super::super::VERSIONS {
            let mut c = Components::default();
            let r = add_response(v, &mut c);
            let body = response(v, std::slice::from_ref(&j), &Ctx { cluster: "c".into(), ..Ctx::default() }, None, 5);
            let doc = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", body, &[], &[]);
            c.validate(&doc, &r).unwrap();
            assert_eq!(doc["jobs"][0]["job_state"], json!(["COMPLETED"]));
            assert_eq!(doc["jobs"][0]["exit_code"]["return_code"]["number"], 3);
            assert_eq!(doc["jobs"][0]["time_limit"]["infinite"], true);
            assert_eq!(doc["jobs"][0]["tres_per_node"], "gres:gpu:h100:2");
            // The text as submitted wins (`--gres=gpu` is `gres:gpu`).
            let k = JobInfo { tres_per_node: Some("gres:gpu".into()), ..j.clone() };
            let body = response(v, std::slice::from_ref(&k), &Ctx { cluster: "c".into(), ..Ctx::default() }, None, 5);
            let doc = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", body, &[], &[]);
            assert_eq!(doc["jobs"][0]["tres_per_node"], "gres:gpu");
        }
    }
}
