//! The accounting objects of `slurmrestd`'s `/slurmdb/vX/` endpoints (Slurm 25.11's
//! `openapi/slurmdbd` plugin, `data_parser/v0.0.4x`): jobs as accounted (`v0.0.4x_job`, from
//! the controller's [`AcctJob`], what `sacct` reads), accounts, users, associations and QOS
//! (from [`AcctData`], what `sacctmgr show` reads), the TRES, the database's configuration
//! (`config`: all of those at once) and its statistics (`diag`).
//!
//! v0.0.41 names none of its nested objects (inline, as the `slurmrestapi` client's
//! `V0041OpenapiSlurmdbdJobsRespJobsInner...` models are); from v0.0.42 the objects of the
//! lists are named (`v0.0.42_job`, `v0.0.42_step`, `v0.0.42_account`, `v0.0.42_user`,
//! `v0.0.42_assoc`, `v0.0.42_assoc_short`, `v0.0.42_qos`, `v0.0.42_tres`,
//! `v0.0.42_stats_rec`); their own nested objects (`time`, `state`, `tres`, ...) stay inline
//! here, the same shapes Slurm names.
//!
//! Fields follow Slurm's `PARSER_ARRAY(SLURMDB_JOB)`, `(STEP)`, `(ACCOUNT)`, `(USER)`,
//! `(ASSOC)`, `(QOS)`, `(TRES)`, `(STATS_REC)` (`data_parser/v0.0.42/parsers.c`); a field
//! Flotilla's accounting does not keep (the job's priority, flags, wckey, the QOS' limits, the
//! associations' limits, the coordinators) is left out: every one is optional in the models.

use super::{add_common, exit_code, exit_code_value, maybe, name, no_val, set, Width};
use crate::model::Model;
use crate::schema::{array, opt, req, Components, Field, IntFormat, Schema};
use crate::version::ApiVersion;
use flotilla_proto::acct::{AcctJob, AcctStep};
use flotilla_proto::acctmgr::{AccountRow, AcctData, AssocRow, QosRow, UserRow};
use flotilla_proto::diag::Diag;
use serde_json::{json, Value};

/// What the objects of one answer share.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ctx {
    /// `ClusterName`.
    pub cluster: String,
    /// The time of the answer (s since the epoch): a running job's elapsed time.
    pub now: i64,
    /// (gid, name) of the jobs' groups (a gid without one shows as its number).
    pub groups: Vec<(u32, String)>,
    /// (uid, name) of the users who cancelled jobs (`kill_request_user`).
    pub users: Vec<(u32, String)>,
    /// The accounting rows (accounts, users, associations, QOS) the objects refer to.
    pub data: AcctData,
}

fn s(x: &str) -> Value {
    Value::String(x.to_string())
}

fn i32_() -> Schema {
    Schema::Int(IntFormat::I32)
}

fn i64_() -> Schema {
    Schema::Int(IntFormat::I64)
}

/// One TRES of a list (`v0.0.4x_tres`): `type`, `name` (`gpu` of `gres/gpu`), `id`, `count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tres {
    /// `cpu`, `mem`, `node`, `gres`, ...
    pub kind: &'static str,
    /// `gpu` for `gres/gpu`, empty otherwise.
    pub name: &'static str,
    /// The database's id (Slurm's static ids: cpu 1, mem 2, energy 3, node 4, billing 5,
    /// fs/disk 6, vmem 7, pages 8; the first dynamic one, 1001, for `gres/gpu`).
    pub id: u32,
    /// How many (0 when listed generically).
    pub count: i64,
}

/// The TRES every Slurm database has (`TRES_ARRAY_*`, created by slurmdbd), and `gres/gpu`
/// (Flotilla's one `AccountingStorageTRES` beyond them), as `GET /tres` lists them: count 0.
pub const TRES: [Tres; 9] = [
    Tres { kind: "cpu", name: "", id: 1, count: 0 },
    Tres { kind: "mem", name: "", id: 2, count: 0 },
    Tres { kind: "energy", name: "", id: 3, count: 0 },
    Tres { kind: "node", name: "", id: 4, count: 0 },
    Tres { kind: "billing", name: "", id: 5, count: 0 },
    Tres { kind: "fs", name: "disk", id: 6, count: 0 },
    Tres { kind: "vmem", name: "", id: 7, count: 0 },
    Tres { kind: "pages", name: "", id: 8, count: 0 },
    Tres { kind: "gres", name: "gpu", id: 1001, count: 0 },
];

fn tres_model() -> Model<Tres> {
    Model::new()
        .req("type", Schema::Str, |t: &Tres, _| s(t.kind))
        .opt("name", Schema::Str, |t, _| Some(s(t.name)))
        .opt("id", i32_(), |t, _| Some(json!(t.id)))
        .opt("count", i64_(), |t, _| Some(json!(t.count)))
}

/// cpu, mem (MiB), node and gres/gpu counts as a TRES list, the zero ones left out (as Slurm's
/// `tres_str` holds only what was counted).
fn tres_list(cpus: u32, mem_mib: u64, nodes: u32, gpus: u32) -> Vec<Tres> {
    let mut out = Vec::new();
    for (i, n) in [(0usize, i64::from(cpus)), (1, mem_mib as i64), (3, i64::from(nodes)), (8, i64::from(gpus))] {
        if n > 0 {
            out.push(Tres { count: n, ..TRES[i].clone() });
        }
    }
    out
}

/// An association as named by others (`v0.0.4x_assoc_short`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssocShort {
    /// Account.
    pub account: String,
    /// Cluster.
    pub cluster: String,
    /// Partition (empty: any).
    pub partition: String,
    /// User (empty: the account's own association).
    pub user: String,
    /// Its id, when known.
    pub id: Option<u32>,
}

fn assoc_short_model() -> Model<AssocShort> {
    Model::new()
        .opt("account", Schema::Str, |a: &AssocShort, _| Some(s(&a.account)))
        .opt("cluster", Schema::Str, |a, _| Some(s(&a.cluster)))
        .opt("partition", Schema::Str, |a, _| Some(s(&a.partition)))
        .req("user", Schema::Str, |a, _| s(&a.user))
        .opt("id", i32_(), |a, _| a.id.map(|i| json!(i)))
}

fn short_of(a: &AssocRow, cluster: &str) -> AssocShort {
    AssocShort {
        account: a.account.clone(),
        cluster: cluster.to_string(),
        partition: a.partition.clone(),
        user: a.user.clone(),
        id: Some(a.id),
    }
}

/// The schemas of the named parts in `v` (inline in v0.0.41), added to `c`.
struct Parts {
    tres: Schema,
    assoc_short: Schema,
}

fn named(v: ApiVersion, c: &mut Components, base: &str, s: Schema) -> Schema {
    if v == ApiVersion::V0041 {
        return s;
    }
    let n = name(v, base);
    c.add(n, s);
    Schema::Ref(n)
}

fn parts(v: ApiVersion, c: &mut Components) -> Parts {
    add_common(v, c);
    Parts {
        tres: named(v, c, "tres", tres_model().schema()),
        assoc_short: named(v, c, "assoc_short", assoc_short_model().schema()),
    }
}

fn name_of(ids: &[(u32, String)], id: u32) -> String {
    ids.iter().find(|(i, _)| *i == id).map_or_else(|| id.to_string(), |(_, n)| n.clone())
}

/// Slurm's `sacct`/`slurmdb` `nodes` of a job that never ran: `None assigned`.
fn nodes_of(n: &str) -> String {
    if n.is_empty() { "None assigned".to_string() } else { n.to_string() }
}

/// A step with its job's id (`step.id` is `JOB.STEP`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOf {
    /// The job.
    pub job_id: u64,
    /// The step.
    pub step: AcctStep,
}

fn elapsed(start: Option<i64>, end: Option<i64>, now: i64) -> i64 {
    start.map_or(0, |st| (end.unwrap_or(now) - st).max(0))
}

fn step_model(v: ApiVersion, p: &Parts) -> Model<StepOf, Ctx> {
    let tres = p.tres.clone();
    let tres_m = tres_model();
    let nv64 = move || no_val(v, Width::U64);
    Model::new()
        .opt(
            "time",
            Schema::Object(vec![
                opt("elapsed", i32_()),
                opt("end", nv64()),
                opt("start", nv64()),
                opt("suspended", i32_()),
            ]),
            |t: &StepOf, c: &Ctx| {
                let st = &t.step;
                Some(json!({
                    "elapsed": elapsed(st.start_time, st.end_time, c.now),
                    "end": maybe(st.end_time),
                    "start": maybe(st.start_time),
                    "suspended": 0,
                }))
            },
        )
        .opt("exit_code", exit_code(v), |t, _| Some(exit_code_value(Some((t.step.exit_code, t.step.signal)))))
        .opt(
            "nodes",
            Schema::Object(vec![opt("count", i32_()), opt("range", Schema::Str)]),
            |t, _| Some(json!({"count": t.step.nnodes, "range": t.step.nodes})),
        )
        .opt("state", array(Schema::Str), |t, _| Some(json!([t.step.state])))
        .opt(
            "step",
            Schema::Object(vec![opt("id", Schema::Str), opt("name", Schema::Str)]),
            |t, _| Some(json!({"id": format!("{}.{}", t.job_id, t.step.step), "name": t.step.step})),
        )
        .opt("tres", Schema::Object(vec![opt("allocated", array(tres))]), move |t, _| {
            let st = &t.step;
            let l = tres_list(st.cpus, st.mem_mib, st.nnodes, st.gpus);
            Some(json!({"allocated": l.iter().map(|x| tres_m.emit(x, &())).collect::<Vec<_>>()}))
        })
}

/// The description of one accounted job in `v` (`v0.0.4x_job`); `step` is its steps'
/// schema.
fn job_model(v: ApiVersion, p: &Parts, step: Schema) -> Model<AcctJob, Ctx> {
    let nv32 = || no_val(v, Width::U32);
    let steps = step_model(v, p);
    let (tres_a, tres_m) = (tres_model(), tres_model());
    let short = assoc_short_model();
    let mut m = Model::new()
        .opt("account", Schema::Str, |j: &AcctJob, _: &Ctx| Some(s(&j.account)))
        .opt(
            "comment",
            Schema::Object(vec![opt("administrator", Schema::Str), opt("job", Schema::Str), opt("system", Schema::Str)]),
            |j, _| Some(json!({"administrator": "", "job": j.comment, "system": ""})),
        )
        .opt("allocation_nodes", i32_(), |j, _| Some(json!(j.alloc_nodes)))
        .opt(
            "array",
            Schema::Object(vec![opt("job_id", i32_()), opt("task_id", nv32()), opt("task", Schema::Str)]),
            |j, _| {
                Some(json!({
                    "job_id": j.array_job_id.unwrap_or(0),
                    "task_id": maybe(j.array_task_id.map(i64::from)),
                    "task": j.array_task_str.as_deref().unwrap_or(""),
                }))
            },
        )
        .opt("association", p.assoc_short.clone(), move |j, c| {
            let a = AssocShort {
                account: j.account.clone(),
                cluster: c.cluster.clone(),
                partition: String::new(),
                user: j.user.clone(),
                id: None,
            };
            Some(short.emit(&a, &()))
        })
        .opt("cluster", Schema::Str, |_, c| Some(s(&c.cluster)))
        // The highest exit code of the job's srun steps when it ended (`AcctJob::derived_exit`).
        .opt("derived_exit_code", exit_code(v), |j, _| Some(exit_code_value(Some(j.derived_exit))))
        .opt(
            "time",
            Schema::Object(vec![
                opt("elapsed", i32_()),
                opt("eligible", i64_()),
                opt("end", i64_()),
                opt("start", i64_()),
                opt("submission", i64_()),
                opt("suspended", i32_()),
                opt("limit", nv32()),
            ]),
            |j, c| {
                Some(json!({
                    "elapsed": elapsed(j.start_time, j.end_time, c.now),
                    "eligible": j.eligible_time.unwrap_or(0),
                    "end": j.end_time.unwrap_or(0),
                    "start": j.start_time.unwrap_or(0),
                    "submission": j.submit_time,
                    "suspended": 0,
                    "limit": j.time_limit_min.map_or_else(super::infinite, set),
                }))
            },
        )
        .opt("exit_code", exit_code(v), |j, _| Some(exit_code_value(Some((j.exit_code, j.signal)))))
        .opt("group", Schema::Str, |j, c| Some(s(&name_of(&c.groups, j.gid))))
        .opt("job_id", i32_(), |j, _| Some(json!(j.job_id)))
        .opt("name", Schema::Str, |j, _| Some(s(&j.name)))
        .opt("nodes", Schema::Str, |j, _| Some(s(&nodes_of(&j.nodes))))
        .opt("partition", Schema::Str, |j, _| Some(s(&j.partition)))
        .opt("qos", Schema::Str, |j, _| Some(s(&j.qos)))
        .opt("required", Schema::Object(vec![opt("CPUs", i32_())]), |j, _| Some(json!({"CPUs": j.req_cpus})))
        .opt("kill_request_user", Schema::Str, |j, c| j.cancelled_by.map(|u| s(&name_of(&c.users, u))));
    // `restart_cnt` is v0.0.42's.
    if v != ApiVersion::V0041 {
        m = m.opt("restart_cnt", i32_(), |j, _| Some(json!(j.restarts)));
    }
    m.opt("state", Schema::Object(vec![opt("current", array(Schema::Str))]), |j, _| {
            Some(json!({"current": [j.state]}))
        })
        .opt("steps", array(step), move |j, c| {
            let all = j.steps.iter().map(|st| steps.emit(&StepOf { job_id: j.job_id, step: st.clone() }, c));
            Some(Value::Array(all.collect()))
        })
        .opt(
            "tres",
            Schema::Object(vec![opt("allocated", array(p.tres.clone())), opt("requested", array(p.tres.clone()))]),
            move |j, _| {
                let a = tres_list(j.alloc_cpus, j.alloc_mem_mib, j.alloc_nodes, j.alloc_gpus);
                let r = tres_list(j.req_cpus, j.req_mem_mib, j.req_nodes, j.req_gpus);
                Some(json!({
                    "allocated": a.iter().map(|x| tres_a.emit(x, &())).collect::<Vec<_>>(),
                    "requested": r.iter().map(|x| tres_m.emit(x, &())).collect::<Vec<_>>(),
                }))
            },
        )
        .opt("user", Schema::Str, |j, _| Some(s(&j.user)))
        .opt("working_directory", Schema::Str, |j, _| Some(s(&j.work_dir)))
}

fn account_model(p: &Parts) -> Model<AccountRow, Ctx> {
    let short = assoc_short_model();
    Model::new()
        .opt("associations", array(p.assoc_short.clone()), move |a: &AccountRow, c: &Ctx| {
            let mine = c.data.assocs.iter().filter(|x| x.account == a.name && x.user.is_empty());
            Some(Value::Array(mine.map(|x| short.emit(&short_of(x, &c.cluster), &())).collect()))
        })
        .req("description", Schema::Str, |a, _| s(&a.description))
        .req("name", Schema::Str, |a, _| s(&a.name))
        .req("organization", Schema::Str, |a, _| s(&a.organization))
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
}

fn user_model(p: &Parts) -> Model<UserRow, Ctx> {
    let short = assoc_short_model();
    Model::new()
        .opt("administrator_level", array(Schema::Str), |u: &UserRow, _: &Ctx| Some(json!([u.admin_level.as_str()])))
        .opt("associations", array(p.assoc_short.clone()), move |u, c| {
            let mine = c.data.assocs.iter().filter(|x| x.user == u.name);
            Some(Value::Array(mine.map(|x| short.emit(&short_of(x, &c.cluster), &())).collect()))
        })
        .opt(
            "default",
            Schema::Object(vec![opt("account", Schema::Str), opt("wckey", Schema::Str)]),
            |u, _| Some(json!({"account": u.default_account, "wckey": ""})),
        )
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
        .req("name", Schema::Str, |u, _| s(&u.name))
}

fn assoc_model(v: ApiVersion) -> Model<AssocRow, Ctx> {
    Model::new()
        .opt("account", Schema::Str, |a: &AssocRow, _: &Ctx| Some(s(&a.account)))
        .opt("cluster", Schema::Str, |_, c| Some(s(&c.cluster)))
        .opt("default", Schema::Object(vec![opt("qos", Schema::Str)]), |a, _| Some(json!({"qos": a.default_qos})))
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
        .opt("id", i32_(), |a, _| Some(json!(a.id)))
        .opt("is_default", Schema::Bool, |a, c| {
            let u = c.data.users.iter().find(|u| !a.user.is_empty() && u.name == a.user);
            Some(json!(u.is_some_and(|u| u.default_account == a.account)))
        })
        .opt("parent_account", Schema::Str, |a, c| {
            let p = a.parent.and_then(|p| c.data.assocs.iter().find(|x| x.id == p));
            Some(s(p.map_or("", |p| p.account.as_str())))
        })
        .opt("partition", Schema::Str, |a, _| Some(s(&a.partition)))
        .opt("priority", no_val(v, Width::U32), |a, _| Some(maybe(a.priority.map(i64::from))))
        .opt("qos", array(Schema::Str), |a, _| Some(json!(a.qos)))
        .opt("shares_raw", i32_(), |a, _| Some(json!(a.shares)))
        .req("user", Schema::Str, |a, _| s(&a.user))
}

fn float_no_val(v: ApiVersion, c: &mut Components) -> Schema {
    let f = Schema::Object(vec![opt("set", Schema::Bool), opt("infinite", Schema::Bool), opt("number", Schema::Num)]);
    named(v, c, "float64_no_val_struct", f)
}

/// The preemption modes Slurm's `QOS_PREEMPT_MODES` flags name (`GANG` and `SUSPEND` among
/// them); Flotilla's `PreemptMode` words, upper-cased. `OFF` and sacctmgr's `cluster` (the
/// QOS' mode unset: `PREEMPT_MODE_OFF`, 0) are Slurm's `DISABLED`, the flag equal to 0.
fn preempt_modes(m: &str) -> Vec<String> {
    m.split(',')
        .map(|w| w.trim().to_ascii_uppercase())
        .filter(|w| !w.is_empty())
        .map(|w| if w == "OFF" || w == "CLUSTER" { "DISABLED".to_string() } else { w })
        .collect()
}

fn qos_model(v: ApiVersion, f64nv: Schema) -> Model<QosRow, Ctx> {
    Model::new()
        .opt("description", Schema::Str, |q: &QosRow, _: &Ctx| Some(s(&q.description)))
        .opt("flags", array(Schema::Str), |q, _| Some(json!(q.flags)))
        .opt("id", i32_(), |q, c| {
            // The QOS' ids are their order of creation (`normal` is 1), as Slurm numbers them.
            c.data.qos.iter().position(|x| x.name == q.name).map(|i| json!(i + 1))
        })
        .opt("name", Schema::Str, |q, _| Some(s(&q.name)))
        .opt(
            "preempt",
            Schema::Object(vec![opt("list", array(Schema::Str)), opt("mode", array(Schema::Str)), opt("exempt_time", no_val(v, Width::U32))]),
            |q, _| {
                Some(json!({
                    "list": q.preempt,
                    "mode": preempt_modes(&q.preempt_mode),
                    "exempt_time": maybe(q.preempt_exempt_s.map(|x| x as i64)),
                }))
            },
        )
        .opt("priority", no_val(v, Width::U32), |q, _| Some(set(q.priority)))
        .opt("usage_factor", f64nv, |q, _| Some(json!({"set": true, "infinite": false, "number": q.usage_factor})))
}

/// Which list an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `GET /jobs`, `/job/{job_id}`: `jobs`.
    Jobs,
    /// `GET /accounts`, `/account/{name}`: `accounts`.
    Accounts,
    /// `GET /associations`: `associations`.
    Assocs,
    /// `GET /qos`, `/qos/{name}`: `qos`.
    Qos,
    /// `GET /users`, `/user/{name}`: `users`.
    Users,
    /// `GET /tres`: `TRES`.
    Tres,
    /// `GET /config`: every list.
    Config,
    /// `GET /diag`: `statistics`.
    Stats,
}

impl Kind {
    /// The name of the answer's component (`openapi_slurmdbd_jobs_resp`, ...), without the
    /// version.
    pub fn base(self) -> &'static str {
        match self {
            Kind::Jobs => "openapi_slurmdbd_jobs_resp",
            Kind::Accounts => "openapi_accounts_resp",
            Kind::Assocs => "openapi_assocs_resp",
            Kind::Qos => "openapi_slurmdbd_qos_resp",
            Kind::Users => "openapi_users_resp",
            Kind::Tres => "openapi_tres_resp",
            Kind::Config => "openapi_slurmdbd_config_resp",
            Kind::Stats => "openapi_slurmdbd_stats_resp",
        }
    }
}

/// Every model of `v`, with the list schemas (named from v0.0.42) added to `c`.
struct All {
    job: Model<AcctJob, Ctx>,
    account: Model<AccountRow, Ctx>,
    user: Model<UserRow, Ctx>,
    assoc: Model<AssocRow, Ctx>,
    qos: Model<QosRow, Ctx>,
    tres: Model<Tres>,
    schemas: [Schema; 7],
}

fn all(v: ApiVersion, c: &mut Components) -> All {
    let p = parts(v, c);
    let step = named(v, c, "step", step_model(v, &p).schema());
    let job = job_model(v, &p, step);
    let account = account_model(&p);
    let user = user_model(&p);
    let assoc = assoc_model(v);
    let f = float_no_val(v, c);
    let qos = qos_model(v, f);
    let stats = named(v, c, "stats_rec", stats_schema());
    let schemas = [
        named(v, c, "job", job.schema()),
        named(v, c, "account", account.schema()),
        named(v, c, "user", user.schema()),
        named(v, c, "assoc", assoc.schema()),
        named(v, c, "qos", qos.schema()),
        p.tres,
        stats,
    ];
    All { job, account, user, assoc, qos, tres: tres_model(), schemas }
}

fn time_pair() -> Schema {
    Schema::Object(vec![opt("average", i64_()), opt("total", i64_())])
}

/// `v0.0.4x_stats_rec`: `time_start`, `RPCs[]` (`rpc`, `count`, `time {average, total}`),
/// `users[]` (`user`, `count`, `time`). The rollups are slurmdbd's and left out.
fn stats_schema() -> Schema {
    Schema::Object(vec![
        opt("time_start", i64_()),
        opt("RPCs", array(Schema::Object(vec![opt("rpc", Schema::Str), opt("count", i32_()), opt("time", time_pair())]))),
        opt("users", array(Schema::Object(vec![opt("user", Schema::Str), opt("count", i32_()), opt("time", time_pair())]))),
    ])
}

/// Adds the schema of answer `k` in `v` (and every component it uses) to `c`; answers its
/// `$ref`.
pub fn add_response(v: ApiVersion, k: Kind, c: &mut Components) -> Schema {
    let a = all(v, c);
    let [job, account, user, assoc, qos, tres, stats] = a.schemas;
    let mut f: Vec<Field> = match k {
        Kind::Jobs => vec![req("jobs", array(job))],
        Kind::Accounts => vec![req("accounts", array(account))],
        Kind::Assocs => vec![req("associations", array(assoc))],
        Kind::Qos => vec![req("qos", array(qos))],
        Kind::Users => vec![req("users", array(user))],
        Kind::Tres => vec![req("TRES", array(tres))],
        Kind::Stats => vec![req("statistics", stats)],
        Kind::Config => vec![
            opt("tres", array(tres)),
            opt("accounts", array(account)),
            opt("users", array(user)),
            opt("qos", array(qos)),
            opt("associations", array(assoc)),
        ],
    };
    f.extend(super::envelope_fields(v, c));
    let n = name(v, k.base());
    c.add(n, Schema::Object(f));
    Schema::Ref(n)
}

/// The answer's own keys for `k` in `v`: `jobs` from `jobs`; the accounting lists from
/// `ctx.data` (already filtered by the caller); `TRES` the static list.
pub fn response(v: ApiVersion, k: Kind, jobs: &[AcctJob], ctx: &Ctx) -> Value {
    let a = all(v, &mut Components::default());
    let d = &ctx.data;
    let list = |k: Kind| -> Value {
        match k {
            Kind::Jobs => Value::Array(jobs.iter().map(|j| a.job.emit(j, ctx)).collect()),
            Kind::Accounts => Value::Array(d.accounts.iter().map(|x| a.account.emit(x, ctx)).collect()),
            Kind::Users => Value::Array(d.users.iter().map(|x| a.user.emit(x, ctx)).collect()),
            Kind::Assocs => Value::Array(d.assocs.iter().map(|x| a.assoc.emit(x, ctx)).collect()),
            Kind::Qos => Value::Array(d.qos.iter().map(|x| a.qos.emit(x, ctx)).collect()),
            Kind::Tres => Value::Array(TRES.iter().map(|t| a.tres.emit(t, &())).collect()),
            Kind::Config | Kind::Stats => Value::Null,
        }
    };
    match k {
        Kind::Jobs => json!({"jobs": list(k)}),
        Kind::Accounts => json!({"accounts": list(k)}),
        Kind::Assocs => json!({"associations": list(k)}),
        Kind::Qos => json!({"qos": list(k)}),
        Kind::Users => json!({"users": list(k)}),
        Kind::Tres => json!({"TRES": list(k)}),
        Kind::Config => json!({
            "tres": list(Kind::Tres),
            "accounts": list(Kind::Accounts),
            "users": list(Kind::Users),
            "qos": list(Kind::Qos),
            "associations": list(Kind::Assocs),
        }),
        Kind::Stats => json!({"statistics": {}}),
    }
}

/// `GET /diag`'s `statistics` from the controller's [`Diag`]: `time_start` its
/// `req_time_start`, one `RPCs` entry per RPC type, one `users` entry per user (`names`:
/// (uid, name)); times in microseconds, the average the total over the count.
pub fn stats_response(d: &Diag, names: &[(u32, String)]) -> Value {
    let avg = |t: u64, n: u64| t.checked_div(n).unwrap_or(0);
    let rpcs: Vec<Value> = d
        .rpc_types
        .iter()
        .map(|r| json!({"rpc": r.name, "count": r.count.min(i32::MAX as u64), "time": {"average": avg(r.total_time, r.count), "total": r.total_time}}))
        .collect();
    let users: Vec<Value> = d
        .rpc_users
        .iter()
        .map(|u| json!({"user": name_of(names, u.uid), "count": u.count.min(i32::MAX as u64), "time": {"average": avg(u.total_time, u.count), "total": u.total_time}}))
        .collect();
    json!({"statistics": {"time_start": d.req_time_start, "RPCs": rpcs, "users": users}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::acctmgr::AdminLevel;

    fn data() -> AcctData {
        let mut root = AssocRow::new(1, None, "root", "", "");
        root.qos = vec!["normal".into()];
        let acct = AssocRow::new(2, Some(1), "research", "", "");
        let alice = AssocRow::new(3, Some(2), "research", "alice", "");
        AcctData {
            clusters: vec![],
            accounts: vec![AccountRow { name: "research".into(), description: "r".into(), organization: "o".into() }],
            users: vec![UserRow { name: "alice".into(), default_account: "research".into(), admin_level: AdminLevel::None }],
            assocs: vec![root, acct, alice],
            qos: vec![],
        }
    }

    fn job() -> AcctJob {
        AcctJob {
            job_id: 4,
            name: "j".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            account: "research".into(),
            qos: "normal".into(),
            partition: "batch".into(),
            state: "COMPLETED".into(),
            submit_time: 10,
            eligible_time: Some(10),
            start_time: Some(11),
            end_time: Some(15),
            nodes: "n1".into(),
            alloc_nodes: 1,
            alloc_cpus: 2,
            alloc_mem_mib: 100,
            req_nodes: 1,
            req_cpus: 2,
            req_mem_mib: 100,
            work_dir: "/tmp".into(),
            steps: vec![AcctStep {
                step: "batch".into(),
                state: "COMPLETED".into(),
                start_time: Some(11),
                end_time: Some(15),
                nodes: "n1".into(),
                cpus: 2,
                mem_mib: 100,
                nnodes: 1,
                ..AcctStep::default()
            }],
            show_job: true,
            constraints: String::new(),
            ..AcctJob::default()
        }
    }

    #[test]
    fn every_answer_validates_in_every_version() {
        let ctx = Ctx { cluster: "c".into(), now: 20, data: data(), ..Ctx::default() };
        for v in super::super::VERSIONS {
            for k in [Kind::Jobs, Kind::Accounts, Kind::Assocs, Kind::Qos, Kind::Users, Kind::Tres, Kind::Config, Kind::Stats] {
                let mut c = Components::default();
                let r = add_response(v, k, &mut c);
                let body = if k == Kind::Stats { stats_response(&Diag::default(), &[]) } else { response(v, k, &[job()], &ctx) };
                let doc = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", body, &[], &[]);
                c.validate(&doc, &r).unwrap_or_else(|e| panic!("{v:?} {k:?}: {e}"));
            }
            let j = response(v, Kind::Jobs, &[job()], &ctx);
            assert_eq!(j["jobs"][0]["time"]["elapsed"], 4);
            assert_eq!(j["jobs"][0]["time"]["limit"]["infinite"], true);
            assert_eq!(j["jobs"][0]["steps"][0]["step"]["id"], "4.batch");
            assert_eq!(j["jobs"][0]["tres"]["allocated"][0], json!({"type": "cpu", "name": "", "id": 1, "count": 2}));
            let a = response(v, Kind::Accounts, &[], &ctx);
            assert_eq!(a["accounts"][0]["associations"][0]["account"], "research");
            let s = response(v, Kind::Assocs, &[], &ctx);
            assert_eq!(s["associations"][2]["parent_account"], "research");
            assert_eq!(s["associations"][2]["is_default"], true);
        }
    }
}
