//! Submitting, signalling and updating jobs: `POST /slurm/vX/job/submit` (body
//! `v0.0.4x_job_submit_req` `{script, job}`, answer `v0.0.4x_openapi_job_submit_response`),
//! `DELETE /slurm/vX/job/{job_id}` (answer `v0.0.4x_openapi_kill_job_resp`; v0.0.41's is the
//! bare envelope `v0.0.41_openapi_resp`) and `POST /slurm/vX/job/{job_id}` (body
//! `v0.0.4x_job_desc_msg`, answer `v0.0.4x_openapi_job_post_response`).
//!
//! A job description's keys are Slurm's `PARSER_ARRAY(JOB_DESC_MSG)`. Flotilla takes the ones
//! it can honour ([`SUBMIT_KEYS`], [`UPDATE_KEYS`]) and refuses a description naming another
//! of Slurm's keys ([`SLURM_JOB_DESC_KEYS`]) with `ESLURM_REST_FAIL_PARSING`, naming the key:
//! a job must not run without a limit or a placement its author asked for. A key Slurm does
//! not know either is ignored with a warning, as Slurm's parser does. Numbers given as
//! Slurm's `{set, infinite, number}` structs or as plain numbers are both taken, as Slurm's
//! parsers take them.

use super::{name, no_val, set, Width, ESLURM_REST_FAIL_PARSING, ESLURM_REST_INVALID_JOBS_DESC};
use crate::meta::{RestError, RestWarning};
use crate::model::Model;
use crate::schema::{array, opt, req, Components, IntFormat, Schema};
use crate::version::ApiVersion;
use flotilla_proto::{GpuCount, GresSpec, JobChange, SubmitJob, TimeLimitWire};
use serde_json::{json, Map, Value};

/// Who submits: the caller as slurmrestd knows them (its own user for `rest_auth/local`, the
/// token's user name for `rest_auth/jwt`, looked up in the password database).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Who {
    /// Uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Name.
    pub user: String,
    /// Home directory (the working directory of a job that names none).
    pub home: String,
}

/// The job description keys a submission may use.
pub const SUBMIT_KEYS: &[&str] = &[
    "account",
    "argv",
    "begin_time",
    "comment",
    "constraints",
    "cpus_per_task",
    "current_working_directory",
    "dependency",
    "environment",
    "excluded_nodes",
    "group_id",
    "hold",
    "maximum_nodes",
    "memory_per_cpu",
    "memory_per_node",
    "minimum_nodes",
    "name",
    "nice",
    "nodes",
    "partition",
    "qos",
    "required_nodes",
    "requeue",
    "script",
    "shared",
    "standard_error",
    "standard_input",
    "standard_output",
    "tasks",
    "tasks_per_node",
    "time_limit",
    "time_minimum",
    "tres_per_job",
    "tres_per_node",
    "tres_per_task",
    "user_id",
];

/// Every key of Slurm's job description in v0.0.41–v0.0.44 (the `slurmrestapi` models'
/// `job_desc_msg`): one of these that Flotilla cannot honour is refused; any other key is
/// ignored with a warning, as Slurm's parser does (`parsing.c`: "Ignoring unknown field").
pub const SLURM_JOB_DESC_KEYS: &[&str] = &[
    "account", "account_gather_frequency", "admin_comment", "allocation_node_list",
    "allocation_node_port", "argv", "array", "batch_features", "begin_time", "burst_buffer",
    "cluster_constraint", "clusters", "comment", "constraints", "container", "container_id",
    "contiguous", "core_specification", "cpu_binding", "cpu_binding_flags", "cpu_frequency",
    "cpus_per_task", "cpus_per_tres", "crontab", "current_working_directory", "deadline",
    "delay_boot", "dependency", "distribution", "distribution_plane_size", "end_time",
    "environment", "excluded_nodes", "exclusive", "extra", "flags", "group_id", "hetjob_group",
    "hold", "immediate", "job_id", "kill_on_node_fail", "kill_warning_delay", "kill_warning_flags",
    "kill_warning_signal", "licenses", "mail_type", "mail_user", "maximum_cpus", "maximum_nodes",
    "mcs_label", "memory_binding", "memory_binding_type", "memory_per_cpu", "memory_per_node",
    "memory_per_tres", "minimum_boards_per_node", "minimum_cpus", "minimum_cpus_per_node",
    "minimum_nodes", "minimum_sockets_per_board", "name", "network", "nice", "nodes",
    "ntasks_per_tres", "oom_kill_step", "open_mode", "overcommit", "oversubscribe", "partition",
    "power_flags", "prefer", "priority", "profile", "qos", "reboot", "requeue", "required_nodes",
    "required_switches", "reservation", "reserve_ports", "resv_mpi_ports", "rlimits", "script",
    "segment_size", "selinux_context", "shared", "site_factor", "sockets_per_node",
    "spank_environment", "standard_error", "standard_input", "standard_output", "step_id", "tasks",
    "tasks_per_board", "tasks_per_core", "tasks_per_node", "tasks_per_socket",
    "temporary_disk_per_node", "thread_specification", "threads_per_core", "time_limit",
    "time_minimum", "tres_bind", "tres_freq", "tres_per_job", "tres_per_node", "tres_per_socket",
    "tres_per_task", "user_id", "wait_all_nodes", "wait_for_switch", "wckey", "x11",
    "x11_magic_cookie", "x11_target_host", "x11_target_port",
];

/// The job description keys an update may use (`scontrol update job` fields).
pub const UPDATE_KEYS: &[&str] = &[
    "account",
    "begin_time",
    "comment",
    "dependency",
    "minimum_nodes",
    "name",
    "nice",
    "partition",
    "priority",
    "qos",
    "time_limit",
    "tres_per_node",
];

/// A key no Slurm version knows: ignored, with Slurm's warning.
fn unknown(key: &str) -> RestWarning {
    RestWarning {
        description: format!("Ignoring unknown field \"{key}\" in job_desc_msg"),
        source: key.to_string(),
    }
}

fn bad(source: &str, what: String) -> RestError {
    RestError {
        error_number: ESLURM_REST_FAIL_PARSING,
        error: super::rest_strerror(ESLURM_REST_FAIL_PARSING).unwrap_or_default().to_string(),
        description: what,
        source: source.to_string(),
    }
}

/// A number as Slurm's `*_NO_VAL` parsers take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVal {
    /// Not set.
    Unset,
    /// `infinite`.
    Infinite,
    /// A number.
    Num(i64),
}

/// Reads a `*_NO_VAL` number: a plain integer, or `{set, infinite, number}`.
pub fn no_val_of(v: &Value, key: &str) -> Result<NoVal, RestError> {
    if let Some(n) = v.as_i64() {
        return Ok(NoVal::Num(n));
    }
    if let Some(o) = v.as_object() {
        if o.get("infinite").and_then(Value::as_bool) == Some(true) {
            return Ok(NoVal::Infinite);
        }
        let is_set = o.get("set").and_then(Value::as_bool).unwrap_or(o.contains_key("number"));
        if !is_set {
            return Ok(NoVal::Unset);
        }
        if let Some(n) = o.get("number").and_then(Value::as_i64) {
            return Ok(NoVal::Num(n));
        }
    }
    Err(bad(key, format!("{key}: expected a number or {{set, infinite, number}}, found {v}")))
}

fn text(v: &Value, key: &str) -> Result<String, RestError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| bad(key, format!("{key}: expected a string, found {v}")))
}

fn uint(v: &Value, key: &str) -> Result<u32, RestError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| bad(key, format!("{key}: expected a non-negative integer, found {v}")))
}

fn int(v: &Value, key: &str) -> Result<i32, RestError> {
    v.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| bad(key, format!("{key}: expected an integer, found {v}")))
}

fn boolean(v: &Value, key: &str) -> Result<bool, RestError> {
    v.as_bool().ok_or_else(|| bad(key, format!("{key}: expected true or false, found {v}")))
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>, RestError> {
    match v {
        // Slurm's CSV_STRING_LIST takes "a,b" as well as ["a", "b"].
        Value::String(s) => Ok(s.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect()),
        Value::Array(a) => a.iter().map(|x| text(x, key)).collect(),
        _ => Err(bad(key, format!("{key}: expected a list of strings, found {v}"))),
    }
}

fn hosts(v: &Value, key: &str) -> Result<Vec<String>, RestError> {
    let mut out = Vec::new();
    for expr in strings(v, key)? {
        let names = flotilla_core::hostlist::expand(&expr).map_err(|e| bad(key, format!("{key}: {expr}: {e}")))?;
        out.extend(names);
    }
    Ok(out)
}

fn minutes(v: &Value, key: &str) -> Result<Option<TimeLimitWire>, RestError> {
    Ok(match no_val_of(v, key)? {
        NoVal::Unset => None,
        NoVal::Infinite => Some(TimeLimitWire::Unlimited),
        NoVal::Num(n) => Some(TimeLimitWire::Minutes(
            u32::try_from(n).map_err(|_| bad(key, format!("{key}: {n} is not a number of minutes")))?,
        )),
    })
}

fn mib(v: &Value, key: &str) -> Result<Option<u64>, RestError> {
    Ok(match no_val_of(v, key)? {
        NoVal::Num(n) if n >= 0 => Some(n as u64),
        NoVal::Unset => None,
        _ => return Err(bad(key, format!("{key}: expected a number of MiB, found {v}"))),
    })
}

/// One TRES request, `gres/gpu:h100:2`, `gres:gpu:2` or `gpu:2` (the count defaults to 1).
fn tres_item(s: &str, key: &str) -> Result<GresSpec, RestError> {
    let body = s.strip_prefix("gres/").or_else(|| s.strip_prefix("gres:")).unwrap_or(s);
    let parts: Vec<&str> = body.split(':').collect();
    let (name, ty, count) = match parts.as_slice() {
        [n] => (*n, None, "1"),
        [n, c] if c.parse::<u64>().is_ok() => (*n, None, *c),
        [n, t] => (*n, Some(*t), "1"),
        [n, t, c] => (*n, Some(*t), *c),
        _ => return Err(bad(key, format!("{key}: cannot read {s:?}"))),
    };
    let count = count.parse::<u64>().map_err(|_| bad(key, format!("{key}: bad count in {s:?}")))?;
    if name.is_empty() {
        return Err(bad(key, format!("{key}: cannot read {s:?}")));
    }
    Ok(GresSpec { name: name.to_string(), gpu_type: ty.map(str::to_string), count })
}

fn tres_list(v: &Value, key: &str) -> Result<Vec<GresSpec>, RestError> {
    strings(v, key)?.iter().map(|s| tres_item(s, key)).collect()
}

fn gpu_count(v: &Value, key: &str) -> Result<Option<GpuCount>, RestError> {
    let items = tres_list(v, key)?;
    match items.as_slice() {
        [] => Ok(None),
        [g] if g.name == "gpu" => Ok(Some(GpuCount {
            gpu_type: g.gpu_type.clone(),
            count: u32::try_from(g.count).map_err(|_| bad(key, format!("{key}: count too large")))?,
        })),
        _ => Err(bad(key, format!("{key}: only one gres/gpu request is supported"))),
    }
}

/// The job description of a submission body: `job`, or the one element of `jobs`
/// (several are a heterogeneous job, which Flotilla does not run: `ESLURM_NOT_SUPPORTED`),
/// and its script (`script` beside it wins over `job.script`, as Slurm's `_job_post_submit`).
pub fn submission(body: &Value) -> Result<(&Map<String, Value>, Option<String>), RestError> {
    let Some(o) = body.as_object() else {
        return Err(bad("job_submit_req", "the body is not a JSON object".into()));
    };
    for k in o.keys() {
        if !["script", "job", "jobs"].contains(&k.as_str()) {
            return Err(bad(k, format!("{k}: not a key of job_submit_req")));
        }
    }
    let job = match (o.get("job"), o.get("jobs")) {
        (Some(Value::Object(j)), None) => j,
        (None, Some(Value::Array(js))) if js.len() == 1 && js[0].is_object() => js[0].as_object().expect("object"),
        (None, Some(Value::Array(js))) if js.len() > 1 => {
            return Err(RestError {
                error_number: flotilla_proto::errno::ESLURM_NOT_SUPPORTED,
                error: flotilla_proto::errno::strerror(flotilla_proto::errno::ESLURM_NOT_SUPPORTED).to_string(),
                description: "heterogeneous jobs (several entries in jobs) are not supported".into(),
                source: "jobs".into(),
            })
        }
        _ => {
            return Err(RestError {
                error_number: ESLURM_REST_INVALID_JOBS_DESC,
                error: super::rest_strerror(ESLURM_REST_INVALID_JOBS_DESC).unwrap_or_default().to_string(),
                description: "Specify only one \"job\" or \"jobs\" fields but never both".into(),
                source: "job_submit_req".into(),
            })
        }
    };
    let script = match o.get("script") {
        Some(s) => Some(text(s, "script")?),
        None => None,
    };
    Ok((job, script))
}

/// Builds the [`SubmitJob`] of a job description `job` (with `script`, which wins over
/// `job.script`) for `who`. `user_id`/`group_id` in the description, by name or number, are
/// resolved with `user`/`group`; the controller decides whether `who` may submit as them.
/// A description without `current_working_directory` runs in the user's home directory.
/// Answers the submission and the warnings for keys no Slurm version knows.
pub fn submit_job(
    job: &Map<String, Value>,
    script: Option<String>,
    who: &Who,
    user: &dyn Fn(&str) -> Option<Who>,
    group: &dyn Fn(&str) -> Option<u32>,
) -> Result<(SubmitJob, Vec<RestWarning>), RestError> {
    let mut warns = Vec::new();
    let mut me = who.clone();
    let mut sj = SubmitJob::default();
    let mut gid = None;
    for (k, v) in job {
        let k = k.as_str();
        match k {
            "account" => sj.account = Some(text(v, k)?),
            "argv" => sj.argv = strings(v, k)?,
            "begin_time" => {
                sj.begin = match no_val_of(v, k)? {
                    NoVal::Num(t) => Some(t),
                    _ => None,
                }
            }
            "comment" => sj.comment = Some(text(v, k)?),
            "constraints" => sj.constraint = Some(text(v, k)?),
            "cpus_per_task" => sj.cpus_per_task = Some(uint(v, k)?),
            "current_working_directory" => sj.work_dir = text(v, k)?,
            "dependency" => sj.dependency = Some(text(v, k)?).filter(|d| !d.is_empty()),
            "environment" => {
                for e in strings_exact(v, k)? {
                    let (a, b) = e.split_once('=').unwrap_or((e.as_str(), ""));
                    sj.environment.push((a.to_string(), b.to_string()));
                }
            }
            "excluded_nodes" => sj.excluded_nodes = hosts(v, k)?,
            "group_id" => {
                let g = text(v, k)?;
                gid = Some(g.parse::<u32>().ok().or_else(|| group(&g)).ok_or_else(|| bad(k, format!("{k}: unknown group {g}")))?);
            }
            "hold" => sj.hold = boolean(v, k)?,
            "maximum_nodes" => sj.nodes_max = Some(uint(v, k)?),
            "memory_per_cpu" => sj.mem_per_cpu_mib = mib(v, k)?,
            "memory_per_node" => sj.mem_per_node_mib = mib(v, k)?,
            "minimum_nodes" => sj.nodes_min = Some(uint(v, k)?),
            "name" => sj.name = Some(text(v, k)?),
            "nice" => sj.nice = Some(int(v, k)?),
            "nodes" => {
                let s = text(v, k)?;
                let (a, b) = s.split_once('-').unwrap_or((s.as_str(), s.as_str()));
                let n = |x: &str| x.trim().parse::<u32>().map_err(|_| bad(k, format!("{k}: cannot read {s:?}")));
                sj.nodes_min = Some(n(a)?);
                if s.contains('-') {
                    sj.nodes_max = Some(n(b)?);
                }
            }
            "partition" => sj.partition = Some(text(v, k)?),
            "qos" => sj.qos = Some(text(v, k)?),
            "required_nodes" => sj.required_nodes = hosts(v, k)?,
            "requeue" => sj.requeue = Some(boolean(v, k)?),
            "script" => {
                if script.is_none() {
                    sj.script = text(v, k)?;
                }
            }
            "shared" => {
                let s = strings(v, k)?;
                if s.iter().any(|x| x != "none") {
                    return Err(bad(k, format!("{k}: only [\"none\"] (exclusive) is supported")));
                }
                sj.exclusive = !s.is_empty();
            }
            "standard_error" => sj.stderr = Some(text(v, k)?),
            "standard_input" => sj.stdin = Some(text(v, k)?),
            "standard_output" => sj.stdout = Some(text(v, k)?),
            "tasks" => sj.ntasks = Some(uint(v, k)?),
            "tasks_per_node" => sj.ntasks_per_node = Some(uint(v, k)?),
            "time_limit" => sj.time_limit = minutes(v, k)?,
            "time_minimum" => sj.time_min = minutes(v, k)?,
            "tres_per_job" => sj.gpus = gpu_count(v, k)?,
            "tres_per_node" => sj.gres = tres_list(v, k)?,
            "tres_per_task" => sj.gpus_per_task = gpu_count(v, k)?,
            "user_id" => {
                let u = text(v, k)?;
                me = user(&u).ok_or_else(|| bad(k, format!("{k}: unknown user {u}")))?;
            }
            other if !SLURM_JOB_DESC_KEYS.contains(&other) => warns.push(unknown(other)),
            other => {
                return Err(bad(other, format!("{other}: not supported by Flotilla's slurmrestd (supported: {})", SUBMIT_KEYS.join(", "))))
            }
        }
    }
    if let Some(s) = script {
        sj.script = s;
    }
    if sj.script.is_empty() {
        return Err(RestError {
            error_number: flotilla_proto::errno::ESLURM_JOB_SCRIPT_MISSING,
            error: flotilla_proto::errno::strerror(flotilla_proto::errno::ESLURM_JOB_SCRIPT_MISSING).to_string(),
            description: "Batch job script empty or missing".into(),
            source: "script".into(),
        });
    }
    if sj.work_dir.is_empty() {
        sj.work_dir = me.home.clone();
    }
    sj.uid = me.uid;
    sj.gid = gid.unwrap_or(me.gid);
    sj.user = me.user;
    Ok((sj, warns))
}

fn strings_exact(v: &Value, key: &str) -> Result<Vec<String>, RestError> {
    match v {
        Value::Array(a) => a.iter().map(|x| text(x, key)).collect(),
        _ => Err(bad(key, format!("{key}: expected a list of strings, found {v}"))),
    }
}

/// The changes of `POST /slurm/vX/job/{job_id}` (an update), in the description's order,
/// and the warnings for keys no Slurm version knows.
pub fn job_changes(job: &Value) -> Result<(Vec<JobChange>, Vec<RestWarning>), RestError> {
    let Some(o) = job.as_object() else {
        return Err(bad("job_desc_msg", "the body is not a JSON object".into()));
    };
    let mut out = Vec::new();
    let mut warns = Vec::new();
    for (k, v) in o {
        let k = k.as_str();
        if !SLURM_JOB_DESC_KEYS.contains(&k) {
            warns.push(unknown(k));
            continue;
        }
        out.push(match k {
            "account" => JobChange::Account(text(v, k)?),
            "begin_time" => JobChange::Begin(match no_val_of(v, k)? {
                NoVal::Num(t) => Some(t),
                _ => None,
            }),
            "comment" => JobChange::Comment(text(v, k)?),
            "dependency" => JobChange::Dependency(text(v, k)?),
            "minimum_nodes" => JobChange::NumNodes(uint(v, k)?),
            "name" => JobChange::Name(text(v, k)?),
            "nice" => JobChange::Nice(int(v, k)?),
            "partition" => JobChange::Partition(text(v, k)?),
            "priority" => match no_val_of(v, k)? {
                NoVal::Num(p) if (0..=u32::MAX as i64).contains(&p) => JobChange::Priority(p as u32),
                _ => return Err(bad(k, format!("{k}: expected a priority, found {v}"))),
            },
            "qos" => JobChange::Qos(text(v, k)?),
            "time_limit" => match minutes(v, k)? {
                Some(t) => JobChange::TimeLimit(t),
                None => return Err(bad(k, format!("{k}: expected minutes or infinite, found {v}"))),
            },
            "tres_per_node" => JobChange::Gres(tres_list(v, k)?),
            other => {
                return Err(bad(other, format!("{other}: cannot be updated by Flotilla's slurmrestd (supported: {})", UPDATE_KEYS.join(", "))))
            }
        });
    }
    if out.is_empty() {
        return Err(bad("job_desc_msg", "nothing to update".into()));
    }
    Ok((out, warns))
}

/// The schema of the job description Flotilla takes (`v0.0.4x_job_desc_msg`: Slurm's keys
/// that [`SUBMIT_KEYS`] and [`UPDATE_KEYS`] name, with Slurm's shapes).
pub fn job_desc_schema(v: ApiVersion) -> Schema {
    let i32_ = || Schema::Int(IntFormat::I32);
    let strs = || array(Schema::Str);
    Schema::Object(vec![
        opt("account", Schema::Str),
        opt("argv", strs()),
        opt("begin_time", no_val(v, Width::U64)),
        opt("comment", Schema::Str),
        opt("constraints", Schema::Str),
        opt("cpus_per_task", i32_()),
        opt("current_working_directory", Schema::Str),
        opt("dependency", Schema::Str),
        opt("environment", strs()),
        opt("excluded_nodes", strs()),
        opt("group_id", Schema::Str),
        opt("hold", Schema::Bool),
        opt("maximum_nodes", i32_()),
        opt("memory_per_cpu", no_val(v, Width::U64)),
        opt("memory_per_node", no_val(v, Width::U64)),
        opt("minimum_nodes", i32_()),
        opt("name", Schema::Str),
        opt("nice", i32_()),
        opt("nodes", Schema::Str),
        opt("partition", Schema::Str),
        opt("priority", no_val(v, Width::U32)),
        opt("qos", Schema::Str),
        opt("required_nodes", strs()),
        opt("requeue", Schema::Bool),
        opt("script", Schema::Str),
        opt("shared", array(Schema::Enum(vec!["none"]))),
        opt("standard_error", Schema::Str),
        opt("standard_input", Schema::Str),
        opt("standard_output", Schema::Str),
        opt("tasks", i32_()),
        opt("tasks_per_node", i32_()),
        opt("time_limit", no_val(v, Width::U32)),
        opt("time_minimum", no_val(v, Width::U32)),
        opt("tres_per_job", Schema::Str),
        opt("tres_per_node", Schema::Str),
        opt("tres_per_task", Schema::Str),
        opt("user_id", Schema::Str),
    ])
}

/// Adds the submission body's schema (`v0.0.4x_job_submit_req`, `v0.0.4x_job_desc_msg`);
/// answers the body's `$ref`.
pub fn add_submit_request(v: ApiVersion, c: &mut Components) -> Schema {
    super::add_common(v, c);
    let d = name(v, "job_desc_msg");
    c.add(d, job_desc_schema(v));
    let r = name(v, "job_submit_req");
    c.add(
        r,
        Schema::Object(vec![
            opt("script", Schema::Str),
            opt("jobs", array(Schema::Ref(d))),
            opt("job", Schema::Ref(d)),
        ]),
    );
    Schema::Ref(r)
}

/// The update body's schema (`v0.0.4x_job_desc_msg`).
pub fn add_update_request(v: ApiVersion, c: &mut Components) -> Schema {
    super::add_common(v, c);
    let d = name(v, "job_desc_msg");
    c.add(d, job_desc_schema(v));
    Schema::Ref(d)
}

/// A submitted job: its id; its step is the batch script (`batch`, Slurm's
/// `SLURM_BATCH_SCRIPT` named by `STEP_ID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// Job id.
    pub job_id: u64,
}

fn submit_model(v: ApiVersion) -> Model<Submitted> {
    let mut m = Model::new();
    if v == ApiVersion::V0041 {
        m = m.opt(
            "result",
            Schema::Object(vec![
                opt("job_id", Schema::Int(IntFormat::I32)),
                opt("step_id", Schema::Str),
                opt("error_code", Schema::Int(IntFormat::I32)),
                opt("error", Schema::Str),
                opt("job_submit_user_msg", Schema::Str),
            ]),
            |s: &Submitted, _| {
                Some(json!({"job_id": s.job_id, "step_id": "batch", "error_code": 0, "error": "No error", "job_submit_user_msg": ""}))
            },
        );
    }
    m.opt("job_id", Schema::Int(IntFormat::I32), |s: &Submitted, _| Some(json!(s.job_id)))
        .opt("step_id", Schema::Str, |_, _| Some(json!("batch")))
        .opt("job_submit_user_msg", Schema::Str, |_, _| Some(json!("")))
}

/// The submission answer's component name.
pub fn submit_response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_job_submit_response")
}

/// Adds the submission answer's schema; answers its `$ref`.
pub fn add_submit_response(v: ApiVersion, c: &mut Components) -> Schema {
    let Schema::Object(mut f) = submit_model(v).schema() else { unreachable!("an object") };
    f.extend(super::envelope_fields(v, c));
    c.add(submit_response_name(v), Schema::Object(f));
    Schema::Ref(submit_response_name(v))
}

/// The submission answer's own keys (none for a failed submission).
pub fn submit_response(v: ApiVersion, s: Option<Submitted>) -> Value {
    s.map_or_else(|| json!({}), |s| submit_model(v).emit(&s, &()))
}

/// One job's outcome of a signal (`DELETE /slurm/vX/job/{job_id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signalled {
    /// The job as named in the path (`123`, `123_4`).
    pub step_id: String,
    /// Its job id.
    pub job_id: u64,
    /// Slurm's error number (0: signalled), its text and the controller's message.
    pub error: (i32, String, String),
}

fn kill_model(v: ApiVersion) -> Model<Signalled> {
    Model::new()
        .req(
            "error",
            Schema::Object(vec![
                opt("string", Schema::Str),
                opt("code", Schema::Int(IntFormat::I32)),
                opt("message", Schema::Str),
            ]),
            |s: &Signalled, _| json!({"string": s.error.1, "code": s.error.0, "message": s.error.2}),
        )
        .req("step_id", Schema::Str, |s, _| json!(s.step_id))
        .req("job_id", no_val(v, Width::U32), |s, _| set(s.job_id as i64))
        .req("federation", Schema::Object(vec![opt("sibling", Schema::Str)]), |_, _| json!({"sibling": ""}))
}

/// The signal answer's component name: `v0.0.41_openapi_resp` (the bare envelope) in
/// v0.0.41, `v0.0.4x_openapi_kill_job_resp` from v0.0.42.
pub fn kill_response_name(v: ApiVersion) -> &'static str {
    if v == ApiVersion::V0041 {
        name(v, "openapi_resp")
    } else {
        name(v, "openapi_kill_job_resp")
    }
}

/// Adds the signal answer's schema; answers its `$ref`.
pub fn add_kill_response(v: ApiVersion, c: &mut Components) -> Schema {
    super::add_common(v, c);
    let mut f = Vec::new();
    if v != ApiVersion::V0041 {
        let j = name(v, "kill_jobs_resp_job");
        c.add(j, kill_model(v).schema());
        f.push(req("status", array(Schema::Ref(j))));
    }
    f.extend(super::envelope_fields(v, c));
    c.add(kill_response_name(v), Schema::Object(f));
    Schema::Ref(kill_response_name(v))
}

/// The signal answer's own keys (`status[]` from v0.0.42; nothing in v0.0.41).
pub fn kill_response(v: ApiVersion, jobs: &[Signalled]) -> Value {
    if v == ApiVersion::V0041 {
        return json!({});
    }
    let m = kill_model(v);
    json!({"status": jobs.iter().map(|s| m.emit(s, &())).collect::<Vec<_>>()})
}

/// One job's outcome of an update (`job_array_response_msg_entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// Job id.
    pub job_id: u64,
    /// The job as named (`123`).
    pub step_id: String,
    /// Slurm's error number (0: updated) and its text.
    pub error: (i32, String),
    /// The controller's message, if any.
    pub why: String,
}

fn update_entry(v: ApiVersion) -> Model<Updated> {
    let _ = v;
    Model::new()
        .opt("job_id", Schema::Int(IntFormat::I32), |u: &Updated, _| Some(json!(u.job_id)))
        .opt("step_id", Schema::Str, |u, _| Some(json!(u.step_id)))
        .opt("error", Schema::Str, |u, _| Some(json!(u.error.1)))
        .opt("error_code", Schema::Int(IntFormat::I32), |u, _| Some(json!(u.error.0)))
        .opt("why", Schema::Str, |u, _| Some(json!(u.why)))
}

/// The update answer's component name (`v0.0.42_openapi_job_post_response`).
pub fn update_response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_job_post_response")
}

/// Adds the update answer's schema; answers its `$ref`. v0.0.41 carries the first result's
/// `job_id` (a string there), `step_id` and `job_submit_user_msg` beside `results`.
pub fn add_update_response(v: ApiVersion, c: &mut Components) -> Schema {
    let entry = update_entry(v).schema();
    let entry = if v == ApiVersion::V0041 {
        entry
    } else {
        let n = name(v, "job_array_response_msg_entry");
        c.add(n, entry);
        Schema::Ref(n)
    };
    let mut f = vec![opt("results", array(entry))];
    if v == ApiVersion::V0041 {
        f.extend([opt("job_id", Schema::Str), opt("step_id", Schema::Str), opt("job_submit_user_msg", Schema::Str)]);
    }
    f.extend(super::envelope_fields(v, c));
    c.add(update_response_name(v), Schema::Object(f));
    Schema::Ref(update_response_name(v))
}

/// The update answer's own keys.
pub fn update_response(v: ApiVersion, results: &[Updated]) -> Value {
    let m = update_entry(v);
    let mut out = json!({"results": results.iter().map(|u| m.emit(u, &())).collect::<Vec<_>>()});
    if v == ApiVersion::V0041 {
        if let Some(u) = results.first() {
            out["job_id"] = json!(u.job_id.to_string());
            out["step_id"] = json!(u.step_id);
            out["job_submit_user_msg"] = json!(u.why);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who() -> Who {
        Who { uid: 1000, gid: 100, user: "alice".into(), home: "/home/alice".into() }
    }

    fn no_user(_: &str) -> Option<Who> {
        None
    }

    fn no_group(_: &str) -> Option<u32> {
        None
    }

    #[test]
    fn a_description_becomes_a_submission() {
        let body = json!({"script": "#!/bin/sh\ntrue\n", "job": {
            "name": "x", "partition": "batch", "time_limit": {"set": true, "infinite": false, "number": 5},
            "environment": ["A=1", "B=x=y"], "tres_per_node": "gres/gpu:h100:2", "nodes": "1-2",
            "memory_per_node": 100, "required_nodes": ["n[1-2]"], "shared": ["none"],
        }});
        let (job, script) = submission(&body).unwrap();
        let (sj, warns) = submit_job(job, script, &who(), &no_user, &no_group).unwrap();
        assert!(warns.is_empty());
        assert_eq!(sj.name.as_deref(), Some("x"));
        assert_eq!(sj.time_limit, Some(TimeLimitWire::Minutes(5)));
        assert_eq!(sj.environment[1], ("B".to_string(), "x=y".to_string()));
        assert_eq!(sj.gres[0].gpu_type.as_deref(), Some("h100"));
        assert_eq!((sj.nodes_min, sj.nodes_max), (Some(1), Some(2)));
        assert_eq!(sj.mem_per_node_mib, Some(100));
        assert_eq!(sj.required_nodes, ["n1", "n2"]);
        assert!(sj.exclusive);
        assert_eq!((sj.uid, sj.gid, sj.work_dir.as_str()), (1000, 100, "/home/alice"));
    }

    #[test]
    fn unsupported_or_missing_parts_are_refused() {
        let b1 = json!({"job": {"script": "x", "licenses": "a"}});
        let (job, s) = submission(&b1).unwrap();
        let e = submit_job(job, s, &who(), &no_user, &no_group).unwrap_err();
        assert_eq!((e.error_number, e.source.as_str()), (ESLURM_REST_FAIL_PARSING, "licenses"));
        let b2 = json!({"job": {"name": "x"}});
        let (job, s) = submission(&b2).unwrap();
        let e = submit_job(job, s, &who(), &no_user, &no_group).unwrap_err();
        assert_eq!(e.error_number, flotilla_proto::errno::ESLURM_JOB_SCRIPT_MISSING);
        assert_eq!(submission(&json!({})).unwrap_err().error_number, ESLURM_REST_INVALID_JOBS_DESC);
        assert!(job_changes(&json!({"licenses": "a"})).is_err());
        assert_eq!(
            job_changes(&json!({"time_limit": {"set": false, "infinite": true}})).unwrap().0,
            [JobChange::TimeLimit(TimeLimitWire::Unlimited)]
        );
        // A key no Slurm knows is ignored with Slurm's warning.
        let b3 = json!({"job": {"script": "x", "nmae": "a"}});
        let (job, s) = submission(&b3).unwrap();
        let (_, w) = submit_job(job, s, &who(), &no_user, &no_group).unwrap();
        assert_eq!(w[0].source, "nmae");
        let (c, w) = job_changes(&json!({"name": "x", "nmae": "y"})).unwrap();
        assert_eq!((c.len(), w.len()), (1, 1));
    }

    #[test]
    fn answers_validate_in_every_version() {
        for v in super::super::VERSIONS {
            let mut c = Components::default();
            let r = add_submit_response(v, &mut c);
            let d = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", submit_response(v, Some(Submitted { job_id: 3 })), &[], &[]);
            c.validate(&d, &r).unwrap();
            let r = add_kill_response(v, &mut c);
            let k = Signalled { step_id: "3".into(), job_id: 3, error: (0, "No error".into(), String::new()) };
            let d = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", kill_response(v, &[k]), &[], &[]);
            c.validate(&d, &r).unwrap();
            let r = add_update_response(v, &mut c);
            let u = Updated { job_id: 3, step_id: "3".into(), error: (0, "No error".into()), why: String::new() };
            let d = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", update_response(v, &[u]), &[], &[]);
            c.validate(&d, &r).unwrap();
            let b = add_submit_request(v, &mut c);
            c.validate(&json!({"script": "x", "job": {"name": "y", "time_limit": {"set": true, "number": 1}}}), &b).unwrap();
        }
    }
}
