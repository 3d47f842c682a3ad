//! v0.0.38 (Slurm 22.05's `openapi/v0.0.38` plugin): jobs, nodes, partitions, diag and job
//! submission, in that plugin's shapes (`src/plugins/openapi/v0.0.38/*.c` and its
//! `openapi.json`): plain integers where the data_parser versions have `{set, infinite,
//! number}`, `job_state` and node `state` as strings (the node's lower-case, its flags in
//! `state_flags`), a partition's `UNLIMITED` as -1, Slurm's raw wait status as `exit_code`.
//! Slurm writes `null` for an unset number; Flotilla leaves the key out (the models read both
//! as absent). Fields Flotilla does not track are left out (every one is optional).
//!
//! A v0.0.38 job description (`v0.0.38_job_properties`, sbatch's option names) is read by
//! turning it into the data_parser form ([`to_data_parser`]) and reading that
//! ([`crate::dp::submit`]), so both agree on what is taken and what is refused.

use crate::dp::job::Ctx;
use crate::model::Model;
use crate::schema::{array, opt, req, Components, Field, IntFormat, Schema};
use crate::version::ApiVersion;
use crate::RestError;
use flotilla_proto::acct::wait_status;
use flotilla_proto::diag::{Diag, RpcTypeStat, RpcUserStat};
use flotilla_proto::{JobInfo, NodeInfo, PartitionInfo, TimeLimitWire};
use serde_json::{json, Map, Value};

const V: ApiVersion = ApiVersion::V0038;

fn int() -> Schema {
    // v0.0.38's openapi.json gives most integers no format: 64 bits, as `Schema::Int` says
    // of an unsaid one.
    Schema::Int(IntFormat::I64)
}

/// The HTTP status of an error in v0.0.38 (22.05's `operations.c` `_call_handler`): 400
/// for the REST parsing errors, 500 for every other (an unknown job id too).
pub fn http_status(code: i32) -> u16 {
    use crate::dp::{ESLURM_REST_FAIL_PARSING, ESLURM_REST_INVALID_JOBS_DESC, ESLURM_REST_INVALID_QUERY};
    match code {
        0 => 200,
        ESLURM_REST_INVALID_QUERY | ESLURM_REST_FAIL_PARSING | ESLURM_REST_INVALID_JOBS_DESC => 400,
        _ => 500,
    }
}

fn envelope(c: &mut Components) -> Vec<Field> {
    let (m, e, _) = crate::meta::add_schemas(V, c);
    vec![opt("meta", Schema::Ref(m)), opt("errors", array(Schema::Ref(e)))]
}

fn s(x: &str) -> Option<Value> {
    Some(Value::String(x.to_string()))
}

/// One job (`v0.0.38_job_response_properties`).
pub fn job_model() -> Model<JobInfo, Ctx> {
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .opt("account", Schema::Str, |j: &JobInfo, _: &Ctx| s(&j.account))
        .opt("array_job_id", int(), |j, _| Some(json!(j.array_job_id.unwrap_or(0))))
        .opt("array_task_id", int(), |j, _| j.array_task_id.map(|t| json!(t)))
        .opt("array_task_string", Schema::Str, |j, _| j.array_task_str.as_deref().and_then(s))
        .opt("batch_host", Schema::Str, |j, _| s(&j.batch_host))
        .opt("cluster", Schema::Str, |_, c| s(&c.cluster))
        .opt("command", Schema::Str, |j, _| s(j.command.as_deref().unwrap_or("")))
        .opt("comment", Schema::Str, |j, _| s(j.comment.as_deref().unwrap_or("")))
        .opt("dependency", Schema::Str, |j, _| s(j.dependency.as_deref().unwrap_or("")))
        // The highest exit code of its srun steps so far, a raw wait status as `exit_code`.
        .opt("derived_exit_code", int(), |j, _| Some(json!(wait_status(j.derived_exit.0, j.derived_exit.1))))
        .opt("eligible_time", i64_(), |j, _| j.eligible_time.map(|t| json!(t)))
        .opt("end_time", i64_(), |j, _| j.end_time.map(|t| json!(t)))
        .opt("excluded_nodes", Schema::Str, |j, _| s(&j.excluded_nodes.join(",")))
        // Slurm's raw wait status: the exit code in bits 8-15, the signal below.
        .opt("exit_code", int(), |j, _| Some(json!(wait_status(j.exit_code, j.exit_signal))))
        .opt("group_id", int(), |j, _| Some(json!(j.gid)))
        .opt("job_id", int(), |j, _| Some(json!(j.job_id)))
        .opt("job_state", Schema::Str, |j, _| j.state.map(|st| json!(st.as_str())))
        .opt("name", Schema::Str, |j, _| s(&j.name))
        .opt("nodes", Schema::Str, |j, _| s(&j.nodes))
        // 22.05 writes null for no nice value (0): left out.
        .opt("nice", int(), |j, _| (j.nice != 0).then(|| json!(j.nice)))
        .opt("cpus", int(), |j, _| Some(json!(j.num_cpus)))
        .opt("node_count", int(), |j, _| Some(json!(j.num_nodes)))
        .opt("tasks", int(), |j, _| Some(json!(j.num_tasks)))
        .opt("partition", Schema::Str, |j, _| s(&j.partition))
        .opt("memory_per_node", int(), |j, _| j.mem_per_cpu_mib.is_none().then(|| json!(j.mem_per_node_mib)))
        .opt("memory_per_cpu", int(), |j, _| j.mem_per_cpu_mib.map(|m| json!(m)))
        .opt("priority", int(), |j, _| Some(json!(j.priority)))
        .opt("qos", Schema::Str, |j, _| s(&j.qos))
        .opt("required_nodes", Schema::Str, |j, _| s(&j.required_nodes.join(",")))
        .opt("requeue", Schema::Bool, |j, _| Some(json!(j.requeue)))
        .opt("restart_cnt", int(), |j, _| Some(json!(j.restarts)))
        .opt("start_time", i64_(), |j, _| j.start_time.map(|t| json!(t)))
        .opt("state_description", Schema::Str, |j, _| s(j.reason_detail.as_deref().unwrap_or("")))
        .opt("state_reason", Schema::Str, |j, _| s(&j.reason))
        .opt("standard_error", Schema::Str, |j, _| s(j.stderr.as_deref().unwrap_or("")))
        .opt("standard_output", Schema::Str, |j, _| s(j.stdout.as_deref().unwrap_or("")))
        .opt("submit_time", i64_(), |j, _| Some(json!(j.submit_time)))
        // `UNLIMITED` is Slurm's null here: left out.
        .opt("time_limit", i64_(), |j, _| match j.time_limit {
            Some(TimeLimitWire::Minutes(m)) => Some(json!(m)),
            _ => None,
        })
        .opt("tres_per_job", Schema::Str, |j, _| s(j.tres_per_job.as_deref().unwrap_or("")))
        .opt("tres_per_task", Schema::Str, |j, _| s(j.tres_per_task.as_deref().unwrap_or("")))
        .opt("user_id", i64_(), |j, _| Some(json!(j.uid)))
        .opt("user_name", Schema::Str, |j, _| s(&j.user))
        .opt("current_working_directory", Schema::Str, |j, _| s(&j.work_dir))
}

/// One node (`v0.0.38_node`): `state` the base state in lower case, `state_flags` the rest.
pub fn node_model() -> Model<NodeInfo, Ctx> {
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .opt("cpus", int(), |n: &NodeInfo, _: &Ctx| Some(json!(n.cpus)))
        .opt("gres", Schema::Str, |n, _| Some(json!(crate::dp::node::gres(n))))
        .opt("gres_used", Schema::Str, |n, _| Some(json!(crate::dp::node::gres_used(n))))
        .opt("name", Schema::Str, |n, _| s(&n.name))
        .opt("state", Schema::Str, |n, _| Some(json!(crate::dp::node::node_state(n)[0].to_ascii_lowercase())))
        .opt("state_flags", array(Schema::Str), |n, _| Some(json!(crate::dp::node::node_state(n)[1..])))
        .opt("partitions", array(Schema::Str), |n, _| Some(json!(n.partitions)))
        .opt("real_memory", int(), |n, _| Some(json!(n.mem_mib)))
        .opt("reason", Schema::Str, |n, _| s(n.reason.as_deref().unwrap_or("")))
        .opt("tres", Schema::Str, |n, _| Some(json!(crate::dp::node::tres_of(n, false))))
        .opt("tres_used", Schema::Str, |n, _| Some(crate::dp::node::tres_of(n, true)).filter(|t| !t.is_empty()).map(|t| json!(t)))
        .opt("alloc_cpus", i64_(), |n, _| Some(json!(n.cpus_alloc)))
        .opt("idle_cpus", i64_(), |n, _| Some(json!(n.cpus.saturating_sub(n.cpus_alloc))))
        .opt("alloc_memory", i64_(), |n, _| Some(json!(n.mem_alloc_mib)))
}

/// One partition (`v0.0.38_partition`): `flags` `["default"]` for the default partition,
/// `max_time_limit` -1 for `UNLIMITED`, `default_time_limit` left out when not set.
pub fn partition_model() -> Model<PartitionInfo, Ctx> {
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .opt("flags", array(Schema::Str), |p: &PartitionInfo, _: &Ctx| {
            Some(json!(if p.default { vec!["default"] } else { vec![] }))
        })
        .opt("default_time_limit", i64_(), |p, _| p.default_time_min.map(|m| json!(m)))
        .opt("max_time_limit", i64_(), |p, _| Some(json!(p.max_time_min.map_or(-1, |m| m as i64))))
        .opt("name", Schema::Str, |p, _| s(&p.name))
        .opt("nodes", Schema::Str, |p, _| s(&p.nodes))
        .opt("state", Schema::Str, |p, c| s(p.state_word(&c.partition_states)))
        .opt("total_cpus", int(), |p, _| Some(json!(p.total_cpus)))
        .opt("total_nodes", int(), |p, _| Some(json!(p.total_nodes)))
}

fn mean(sum: u64, n: u64) -> u64 {
    sum.checked_div(n).unwrap_or(0)
}

fn rpcm_model() -> Model<RpcTypeStat> {
    Model::new()
        .opt("message_type", Schema::Str, |r: &RpcTypeStat, _| s(&r.name))
        .opt("type_id", int(), |r, _| Some(json!(r.id)))
        .opt("count", int(), |r, _| Some(json!(r.count)))
        .opt("average_time", int(), |r, _| Some(json!(mean(r.total_time, r.count))))
        .opt("total_time", int(), |r, _| Some(json!(r.total_time)))
}

fn rpcu_model() -> Model<RpcUserStat, crate::dp::diag::Ctx> {
    Model::new()
        .opt("user", Schema::Str, |r: &RpcUserStat, c: &crate::dp::diag::Ctx| {
            let n = c.user_names.iter().find(|(u, _)| *u == r.uid);
            Some(json!(n.map_or_else(|| r.uid.to_string(), |(_, n)| n.clone())))
        })
        .opt("user_id", int(), |r, _| Some(json!(r.uid)))
        .opt("count", int(), |r, _| Some(json!(r.count)))
        .opt("average_time", int(), |r, _| Some(json!(mean(r.total_time, r.count))))
        .opt("total_time", int(), |r, _| Some(json!(r.total_time)))
}

fn stats_model() -> Model<Diag, crate::dp::diag::Ctx> {
    let mut m: Model<Diag, crate::dp::diag::Ctx> = Model::new();
    macro_rules! int {
        ($key:literal, $f:ident) => {
            m = m.opt($key, int(), |d: &Diag, _| Some(json!(d.$f)));
        };
    }
    int!("req_time", req_time);
    int!("req_time_start", req_time_start);
    int!("server_thread_count", server_thread_count);
    int!("agent_queue_size", agent_queue_size);
    int!("agent_count", agent_count);
    int!("agent_thread_count", agent_thread_count);
    int!("dbd_agent_queue_size", dbd_agent_queue_size);
    int!("gettimeofday_latency", gettimeofday_latency);
    int!("schedule_cycle_max", schedule_cycle_max);
    int!("schedule_cycle_last", schedule_cycle_last);
    int!("schedule_cycle_total", schedule_cycle_counter);
    m = m
        .opt("schedule_cycle_mean", int(), |d, _| Some(json!(mean(d.schedule_cycle_sum, d.schedule_cycle_counter))))
        .opt("schedule_cycle_mean_depth", int(), |d, _| Some(json!(mean(d.schedule_cycle_depth, d.schedule_cycle_counter))))
        .opt("schedule_cycle_per_minute", int(), |d, _| {
            Some(json!(mean(d.schedule_cycle_counter, ((d.req_time - d.req_time_start) / 60).max(0) as u64)))
        });
    int!("schedule_queue_length", schedule_queue_len);
    int!("jobs_submitted", jobs_submitted);
    int!("jobs_started", jobs_started);
    int!("jobs_completed", jobs_completed);
    int!("jobs_canceled", jobs_canceled);
    int!("jobs_failed", jobs_failed);
    int!("jobs_pending", jobs_pending);
    int!("jobs_running", jobs_running);
    int!("job_states_ts", job_states_ts);
    int!("bf_backfilled_jobs", bf_backfilled_jobs);
    int!("bf_last_backfilled_jobs", bf_last_backfilled_jobs);
    int!("bf_backfilled_het_jobs", bf_backfilled_het_jobs);
    int!("bf_cycle_counter", bf_cycle_counter);
    m = m
        .opt("bf_cycle_mean", int(), |d, _| Some(json!(mean(d.bf_cycle_sum, d.bf_cycle_counter))))
        .opt("bf_depth_mean", int(), |d, _| Some(json!(mean(d.bf_depth_sum, d.bf_cycle_counter))))
        .opt("bf_depth_mean_try", int(), |d, _| Some(json!(mean(d.bf_depth_try_sum, d.bf_cycle_counter))));
    int!("bf_cycle_max", bf_cycle_max);
    // (The spec names bf_last_depth and bf_last_depth_try; 22.05's diag.c never writes them.)
    int!("bf_cycle_last", bf_cycle_last);
    int!("bf_queue_len", bf_queue_len);
    m = m.opt("bf_queue_len_mean", int(), |d, _| Some(json!(mean(d.bf_queue_len_sum, d.bf_cycle_counter))));
    int!("bf_table_size", bf_table_size);
    m = m.opt("bf_table_size_mean", int(), |d, _| Some(json!(mean(d.bf_table_size_sum, d.bf_cycle_counter))));
    int!("bf_when_last_cycle", bf_when_last_cycle);
    m = m.opt("bf_active", Schema::Bool, |d, _| Some(json!(d.bf_active)));
    let (t, u) = (rpcm_model(), rpcu_model());
    m.opt("rpcs_by_message_type", array(Schema::Ref("v0.0.38_diag_rpcm")), move |d, _| {
        Some(Value::Array(d.rpc_types.iter().map(|r| t.emit(r, &())).collect()))
    })
    .opt("rpcs_by_user", array(Schema::Ref("v0.0.38_diag_rpcu")), move |d, c| {
        Some(Value::Array(d.rpc_users.iter().map(|r| u.emit(r, c)).collect()))
    })
}

/// The jobs answer's own keys (`v0.0.38_jobs_response`: `jobs`).
pub fn jobs_response(jobs: &[JobInfo], ctx: &Ctx) -> Value {
    let m = job_model();
    json!({"jobs": jobs.iter().map(|j| m.emit(j, ctx)).collect::<Vec<_>>()})
}

/// The nodes answer's own keys.
pub fn nodes_response(nodes: &[NodeInfo], ctx: &Ctx) -> Value {
    let m = node_model();
    json!({"nodes": nodes.iter().map(|n| m.emit(n, ctx)).collect::<Vec<_>>()})
}

/// The partitions answer's own keys.
pub fn partitions_response(parts: &[PartitionInfo], ctx: &Ctx) -> Value {
    let m = partition_model();
    json!({"partitions": parts.iter().map(|p| m.emit(p, ctx)).collect::<Vec<_>>()})
}

/// The diag answer's own keys (`statistics`).
pub fn diag_response(d: &Diag, ctx: &crate::dp::diag::Ctx) -> Value {
    json!({"statistics": stats_model().emit(d, ctx)})
}

/// The submission answer's own keys: `job_id`, `step_id` (`BATCH`, 22.05's name of the batch
/// step), `job_submit_user_msg`.
pub fn submit_response(job_id: Option<u64>) -> Value {
    job_id.map_or_else(|| json!({}), |id| json!({"job_id": id, "step_id": "BATCH", "job_submit_user_msg": ""}))
}

/// Component names: (jobs, nodes, partitions, diag, submission answer, submission body, job
/// properties, the envelope-only answer of DELETE and POST `job/{job_id}`).
pub const NAMES: [&str; 8] = [
    "v0.0.38_jobs_response",
    "v0.0.38_nodes_response",
    "v0.0.38_partitions_response",
    "v0.0.38_diag",
    "v0.0.38_job_submission_response",
    "v0.0.38_job_submission",
    "v0.0.38_job_properties",
    // Slurm's spec gives these answers no schema; the name is Flotilla's.
    "v0.0.38_response",
];

/// Adds every v0.0.38 component to `c`.
pub fn add_schemas(c: &mut Components) {
    let env = envelope(c);
    let with = |mut f: Vec<Field>, extra: Field| {
        f.push(extra);
        f
    };
    c.add("v0.0.38_job_response_properties", job_model().schema());
    c.add("v0.0.38_node", node_model().schema());
    c.add("v0.0.38_partition", partition_model().schema());
    c.add("v0.0.38_diag_rpcm", rpcm_model().schema());
    c.add("v0.0.38_diag_rpcu", rpcu_model().schema());
    c.add(NAMES[0], Schema::Object(with(env.clone(), opt("jobs", array(Schema::Ref("v0.0.38_job_response_properties"))))));
    c.add(NAMES[1], Schema::Object(with(env.clone(), opt("nodes", array(Schema::Ref("v0.0.38_node"))))));
    c.add(NAMES[2], Schema::Object(with(env.clone(), opt("partitions", array(Schema::Ref("v0.0.38_partition"))))));
    c.add(NAMES[3], Schema::Object(with(env.clone(), opt("statistics", stats_model().schema()))));
    let mut sub = env.clone();
    sub.extend([opt("job_id", int()), opt("step_id", Schema::Str), opt("job_submit_user_msg", Schema::Str)]);
    c.add(NAMES[4], Schema::Object(sub));
    c.add(NAMES[6], job_properties_schema());
    c.add(
        NAMES[5],
        Schema::Object(vec![
            req("script", Schema::Str),
            opt("job", Schema::Ref(NAMES[6])),
            opt("jobs", array(Schema::Ref(NAMES[6]))),
        ]),
    );
    c.add(NAMES[7], Schema::Object(env));
}

/// The v0.0.38 job properties Flotilla takes (sbatch's names, as 22.05's
/// `v0.0.38_job_properties`).
fn job_properties_schema() -> Schema {
    let strs = || array(Schema::Str);
    Schema::Object(vec![
        opt("account", Schema::Str),
        opt("argv", strs()),
        opt("begin_time", Schema::Int(IntFormat::I64)),
        opt("comment", Schema::Str),
        opt("constraints", Schema::Str),
        opt("cpus_per_task", int()),
        opt("current_working_directory", Schema::Str),
        opt("dependency", Schema::Str),
        req("environment", crate::schema::map(Schema::Str)),
        opt("exclusive", Schema::Enum(vec!["true", "false"])),
        opt("gres", Schema::Str),
        opt("gpus", Schema::Str),
        opt("gpus_per_task", Schema::Str),
        opt("hold", Schema::Bool),
        opt("memory_per_cpu", int()),
        opt("memory_per_node", int()),
        opt("name", Schema::Str),
        opt("nice", int()),
        opt("nodes", array(int())),
        opt("open_mode", Schema::Enum(vec!["truncate"])),
        opt("oversubscribe", Schema::Bool),
        opt("partition", Schema::Str),
        opt("qos", Schema::Str),
        opt("requeue", Schema::Bool),
        opt("standard_error", Schema::Str),
        opt("standard_input", Schema::Str),
        opt("standard_output", Schema::Str),
        opt("tasks", int()),
        opt("tasks_per_node", int()),
        opt("time_limit", int()),
        opt("time_minimum", int()),
    ])
}

fn bad(key: &str, what: String) -> RestError {
    RestError {
        error_number: crate::dp::ESLURM_REST_FAIL_PARSING,
        error: crate::dp::rest_strerror(crate::dp::ESLURM_REST_FAIL_PARSING).unwrap_or_default().to_string(),
        description: what,
        source: key.to_string(),
    }
}

/// A v0.0.38 job description in the data_parser form [`crate::dp::submit`] reads:
/// `environment` `{K: V}` → `["K=V"]`, `nodes` `[min, max]` → `"min-max"`, `exclusive`
/// `"true"` → `shared: ["none"]`, `gres` `gpu:2` → `tres_per_node` `gres:gpu:2`, `gpus` →
/// `tres_per_job`, `gpus_per_task` → `tres_per_task`; the other keys keep their names.
/// `update`: an update's description (no `environment` needed). A submission without
/// `environment` is `ESLURM_ENVIRONMENT_MISSING` (22.05's `_parse_job_desc`).
pub fn to_data_parser(job: &Map<String, Value>, update: bool) -> Result<Map<String, Value>, RestError> {
    let mut out = Map::new();
    if !update && !job.contains_key("environment") {
        return Err(RestError {
            // ESLURM_ENVIRONMENT_MISSING (22.05's slurm_errno.h).
            error_number: 2127,
            error: "Environment is missing in job".into(),
            description: "environment must be set".into(),
            source: "environment".into(),
        });
    }
    for (k, v) in job {
        match k.as_str() {
            "environment" => {
                let m = v.as_object().ok_or_else(|| bad(k, "environment: expected an object".into()))?;
                let env: Vec<Value> = m
                    .iter()
                    .map(|(a, b)| json!(format!("{a}={}", b.as_str().map_or_else(|| b.to_string(), str::to_string))))
                    .collect();
                out.insert("environment".into(), Value::Array(env));
            }
            "nodes" => {
                let n: Vec<u64> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .filter(|n: &Vec<u64>| (1..=2).contains(&n.len()))
                    .ok_or_else(|| bad(k, "nodes: expected [min] or [min, max]".into()))?;
                let text = if n.len() == 2 { format!("{}-{}", n[0], n[1]) } else { n[0].to_string() };
                out.insert("nodes".into(), json!(text));
            }
            "exclusive" => match v.as_str() {
                Some("true") => {
                    out.insert("shared".into(), json!(["none"]));
                }
                Some("false") => {}
                _ => return Err(bad(k, format!("exclusive: only \"true\" or \"false\" is supported, found {v}"))),
            },
            // The v0.0.38 client sends its spec's defaults, `open_mode: "append"` and
            // `oversubscribe: false`. Flotilla truncates output files (sbatch's default) and
            // never oversubscribes: `truncate` and `false` are taken, anything else refused
            // (the client must say `open_mode="truncate"`).
            "open_mode" => {
                if v.as_str() != Some("truncate") {
                    return Err(bad(k, format!("open_mode: only \"truncate\" is supported, found {v}")));
                }
            }
            "oversubscribe" => {
                if v.as_bool() != Some(false) {
                    return Err(bad(k, format!("oversubscribe: only false is supported, found {v}")));
                }
            }
            "gres" => {
                let g = v.as_str().ok_or_else(|| bad(k, "gres: expected a string".into()))?;
                let items: Vec<String> = g.split(',').filter(|x| !x.is_empty()).map(|x| format!("gres:{x}")).collect();
                out.insert("tres_per_node".into(), json!(items.join(",")));
            }
            "gpus" => {
                out.insert("tres_per_job".into(), json!(format!("gres:gpu:{}", v.as_str().unwrap_or_default())));
            }
            "gpus_per_task" => {
                out.insert("tres_per_task".into(), json!(format!("gres:gpu:{}", v.as_str().unwrap_or_default())));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::JobStateWire;

    #[test]
    fn every_answer_validates() {
        let mut c = Components::default();
        add_schemas(&mut c);
        let mut ctx = Ctx { cluster: "c".into(), ..Ctx::default() };
        ctx.partition_states.insert("old".into(), "DRAIN".into());
        let j = JobInfo { job_id: 3, state: Some(JobStateWire::Running), exit_code: 2, exit_signal: 0, ..JobInfo::default() };
        let n = NodeInfo { name: "n1".into(), state: "DRAINED".into(), cpus: 4, ..NodeInfo::default() };
        let p = PartitionInfo { name: "batch".into(), default: true, up: true, ..PartitionInfo::default() };
        let env = |b| crate::meta::envelope(V, &crate::ClientInfo::default(), "c", b, &[], &[]);
        let d = env(jobs_response(std::slice::from_ref(&j), &ctx));
        c.validate(&d, &Schema::Ref(NAMES[0])).unwrap();
        assert_eq!((d["jobs"][0]["job_state"].as_str(), d["jobs"][0]["exit_code"].as_i64()), (Some("RUNNING"), Some(512)));
        let d = env(nodes_response(&[n], &ctx));
        c.validate(&d, &Schema::Ref(NAMES[1])).unwrap();
        assert_eq!((d["nodes"][0]["state"].as_str(), &d["nodes"][0]["state_flags"]), (Some("idle"), &json!(["DRAIN"])));
        let old = PartitionInfo { name: "old".into(), ..PartitionInfo::default() };
        let d = env(partitions_response(&[p, old], &ctx));
        c.validate(&d, &Schema::Ref(NAMES[2])).unwrap();
        assert_eq!((d["partitions"][0]["max_time_limit"].as_i64(), &d["partitions"][0]["flags"]), (Some(-1), &json!(["default"])));
        assert_eq!((d["partitions"][0]["state"].as_str(), d["partitions"][1]["state"].as_str()), (Some("UP"), Some("DRAIN")));
        let d = env(diag_response(&Diag::default(), &crate::dp::diag::Ctx::default()));
        c.validate(&d, &Schema::Ref(NAMES[3])).unwrap();
        c.validate(&env(submit_response(Some(4))), &Schema::Ref(NAMES[4])).unwrap();
        c.validate(&env(json!({})), &Schema::Ref(NAMES[7])).unwrap();
    }

    #[test]
    fn a_v38_description_reads_as_the_data_parsers() {
        let j = json!({"environment": {"PATH": "/bin"}, "nodes": [1, 2], "exclusive": "true", "gres": "gpu:2", "time_limit": 5});
        let m = to_data_parser(j.as_object().unwrap(), false).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"environment": ["PATH=/bin"], "nodes": "1-2", "shared": ["none"], "tres_per_node": "gres:gpu:2", "time_limit": 5})
        );
        assert_eq!(to_data_parser(&Map::new(), false).unwrap_err().error_number, 2127);
        assert!(to_data_parser(&Map::new(), true).unwrap().is_empty());
    }
}
