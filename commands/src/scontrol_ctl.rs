//! The parts of `scontrol` that talk to the controller: `show job|node|partition|topology`,
//! `hold`, `uhold`, `release`, `requeue`, `requeuehold`, `update job|node`, `top`, `ping`,
//! `takeover`. Texts and exit codes as Slurm 22.05's `scontrol` (e.g. `Invalid job id
//! specified for job 999999`, `slurm_suspend error: ...` after a failed hold/release).
//!
//! `show job` prints Slurm's record. Flotilla's own job fields (`Topology=`, `Preemptible=`,
//! `PreemptCount=`, `LastCheckpointAck=`, `Borrowed=`, and `ServiceId=` for a replica) are
//! added as one extra line only for jobs where one of them says something (a topology other
//! than the partition's default `any`, `--preemptible`, a preemption, a checkpoint
//! acknowledgement, borrowed capacity, a service replica), so Slurm-only jobs print exactly
//! as Slurm prints them. `show alerts` (Flotilla) prints the scheduler's alerts and pages.

use std::collections::BTreeMap;
use crate::common::{self, Ctl, CtlError, Io};
use crate::jobfmt;
use crate::squeue::parse_job_ref;
use flotilla_core::time::{fmt_time, mins2time_str, parse_time_spec, secs2time_str};
use flotilla_proto::errno::{strerror, ESLURM_ACCESS_DENIED, ESLURM_INVALID_JOB_ID, SLURM_UNEXPECTED_MSG_ERROR};
use flotilla_proto::{
    HoldOp, HoldRelease, JobChange, JobInfo, JobQuery, JobRef, JobStateWire, NodeInfo, NodeQuery, PartitionInfo,
    Request, RequeueJob, Response, TimeLimitWire, UpdateJob, UpdateNode,
};

/// Flags of `scontrol` that shape `show`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShowFlags {
    /// `-o`.
    pub one_liner: bool,
    /// `-d`.
    pub details: bool,
}

fn ctl(io: &mut Io<'_>, what: &str) -> Option<Ctl> {
    match Ctl::new(io.env) {
        Ok(c) => Some(c),
        Err(e) => {
            io.err(&format!("{what} error: {}\n", e.slurm().text));
            None
        }
    }
}

/// Job references of scontrol's job list (Slurm's `_is_job_id`/`_next_job_id`): separated by
/// commas or blanks outside brackets ([`list_refs`]), so `12_[0,2,5]` is one reference and
/// `[12-14]` three jobs. Err: the argument holding one that is no job reference
/// ([`is_job_ref`]), whole (scontrol names it so).
fn ids_of(args: &[String]) -> Result<Vec<JobRef>, String> {
    let mut out = Vec::new();
    for a in args {
        if !is_job_list(a) {
            return Err(a.to_string());
        }
        for id in list_refs(a) {
            // `_next_job_id`: a job id written as a range (`[12-14]`, `[12,14]`; a bracket
            // before any `_`) is every id of it, each with the reference's task part.
            let under = id.find('_');
            match id.find('[').filter(|&b| under.is_none_or(|u| b < u)) {
                Some(_) => {
                    let (ids, tasks) = id.split_at(under.unwrap_or(id.len()));
                    let expanded = flotilla_core::hostlist::expand(ids).map_err(|_| a.to_string())?;
                    for n in expanded {
                        out.push(parse_job_ref(&format!("{n}{tasks}")).ok_or_else(|| a.to_string())?);
                    }
                }
                None => out.push(parse_job_ref(id).ok_or_else(|| a.to_string())?),
            }
        }
    }
    Ok(out)
}

/// The references of job list `s`: its pieces between commas or blanks outside brackets,
/// empty ones left out.
fn list_refs(s: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    s.split(move |c: char| {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        (c == ',' || c == ' ') && depth == 0
    })
    .filter(|r| !r.is_empty())
}

/// Whether `s` is a list of job ids as Slurm 22.05's `_is_job_id` (`update_job.c`) accepts
/// it: every reference of it ([`list_refs`]) one [`is_job_ref`] accepts.
fn is_job_list(s: &str) -> bool {
    list_refs(s).all(is_job_ref)
}

/// Whether `r` is one job reference as `_is_job_id` accepts it: digits, one `_` and one `+`,
/// brackets balanced (commas and blanks only inside them), `-` only inside brackets or after
/// the `_`.
fn is_job_ref(r: &str) -> bool {
    let (mut plus, mut under, mut depth) = (false, false, 0i32);
    for c in r.chars() {
        match c {
            '+' if plus => return false,
            '+' => plus = true,
            '_' if under => return false,
            '_' => under = true,
            '[' => depth += 1,
            ']' => depth -= 1,
            '-' if depth == 0 && !under => return false,
            '-' => {}
            ',' | ' ' if depth == 0 => return false,
            ',' | ' ' => {}
            c if c.is_ascii_digit() => {}
            _ => return false,
        }
    }
    depth == 0
}

fn ref_str(r: &JobRef) -> String {
    match &r.tasks {
        Some(t) if t.len() == 1 => format!("{}_{}", r.job_id, t[0]),
        Some(_) => format!("{}_[...]", r.job_id),
        None => r.job_id.to_string(),
    }
}

/// Task indices as Slurm's `bit_fmt` writes a task bitmap: sorted ranges, `0-2,5`.
fn task_ranges(tasks: &[u32]) -> String {
    let mut ts = tasks.to_vec();
    ts.sort_unstable();
    ts.dedup();
    common::ranges(&ts)
}

/// `hold`, `uhold`, `release`: exit status.
pub fn hold_release(op: HoldOp, args: &[String], io: &mut Io<'_>) -> i32 {
    let jobs = match ids_of(args) {
        Ok(j) => j,
        Err(bad) => {
            io.err(&format!("Invalid job id specified for job {bad}\n"));
            return 1;
        }
    };
    if jobs.is_empty() {
        io.err("too few arguments for keyword\n");
        return 1;
    }
    let Some(c) = ctl(io, "slurm_suspend") else { return 1 };
    // `scontrol_hold`: one request per job id, in turn; an array's outcomes as
    // [`job_results`] prints them; a job's error `<error> for job <id>`, and the last of those
    // once more after all (`slurm_perror("slurm_suspend error")` in scontrol.c).
    let (mut code, mut last) = (0, None);
    for job in jobs {
        match c.call(Request::HoldRelease(HoldRelease { jobs: vec![job], op })) {
            Ok(Response::JobResults(rs)) => {
                if let Some(e) = rs.iter().filter(|r| r.job.tasks.is_none()).filter_map(|r| r.error.as_ref()).next_back() {
                    last = Some(e.text.clone());
                }
                code |= job_results(rs, io);
            }
            Ok(_) => {}
            Err(e) => {
                io.err(&format!("slurm_suspend error: {}\n", e.slurm().text));
                return 1;
            }
        }
    }
    if let Some(t) = last {
        io.err(&format!("slurm_suspend error: {t}\n"));
    }
    code
}

/// `requeue`, `requeuehold` (Slurm's `scontrol_requeue`): one request per job id named, as
/// scontrol asks for each in turn. An answer for an array (results naming tasks, Slurm's
/// `RESPONSE_JOB_ARRAY_ERRORS`) prints every outcome as `A_<tasks>: <error>` (a success as
/// `No error`), unless it is one success; any other failure prints `<error> for job <id>`.
/// Exit status 1 when anything was printed or failed. `requeuehold` takes leading
/// `State=SpecialExit` (or `State=SE`, any case, a name that starts so: scontrol's
/// `parse_requeue_flags`) before the job ids: each is requeued held in the `SPECIAL_EXIT`
/// state ([`Request::RequeueSpecialExit`]).
pub fn requeue(hold: bool, args: &[String], io: &mut Io<'_>) -> i32 {
    let flags = if hold { args.iter().take_while(|a| is_special_exit_flag(a)).count() } else { 0 };
    let (special, args) = (flags > 0, &args[flags..]);
    let mut conn: Option<Ctl> = None;
    let mut code = 0;
    // Each argument on its own (scontrol calls `scontrol_requeue[_hold]` per argument): one
    // that is not a job id is reported and the others are still requeued (goldens-extra 0639).
    for arg in args {
        let jobs = match ids_of(std::slice::from_ref(arg)) {
            Ok(j) => j,
            Err(bad) => {
                io.err(&format!("Invalid job id specified for job {bad}\n"));
                code = 1;
                continue;
            }
        };
        if conn.is_none() {
            conn = ctl(io, "slurm_requeue");
        }
        let Some(c) = conn.as_ref() else { return 1 };
        code |= requeue_jobs(c, jobs, hold, special, io);
    }
    code
}

/// Prints the answer of a request on jobs as scontrol does (`scontrol_requeue`,
/// `scontrol_update_job`): an answer for an array (results naming tasks, Slurm's
/// `RESPONSE_JOB_ARRAY_ERRORS`) prints every outcome as `A_<tasks>: <error>` (a success as
/// `No error`) unless it is one success; a job's error prints `<error> for job <id>`. 1 when
/// anything was printed.
fn job_results(rs: Vec<flotilla_proto::JobResult>, io: &mut Io<'_>) -> i32 {
    let count = rs.len();
    let mut code = 0;
    for r in rs {
        match (&r.job.tasks, r.error) {
            (Some(_), None) if count == 1 => {}
            (Some(ts), e) => {
                let text = e.map_or_else(|| strerror(0).to_string(), |e| e.text);
                io.err(&format!("{}_{}: {}\n", r.job.job_id, task_ranges(ts), text));
                code = 1;
            }
            (None, Some(e)) => {
                io.err(&format!("{} for job {}\n", e.text, ref_str(&r.job)));
                code = 1;
            }
            (None, None) => {}
        }
    }
    code
}

/// The requests of one `requeue` argument; 1 when anything failed.
fn requeue_jobs(c: &Ctl, jobs: Vec<JobRef>, hold: bool, special: bool, io: &mut Io<'_>) -> i32 {
    let mut code = 0;
    for job in jobs {
        let req = RequeueJob { jobs: vec![job], hold };
        let req = if special { Request::RequeueSpecialExit(req) } else { Request::Requeue(req) };
        match c.call(req) {
            Ok(Response::JobResults(rs)) => code |= job_results(rs, io),
            Ok(_) => {}
            Err(e) => {
                io.err(&format!("slurm_requeue error: {}\n", e.slurm().text));
                code = 1;
            }
        }
    }
    code
}

/// `State=SpecialExit` / `State=SE` (scontrol's `parse_requeue_flags`: `state=` in any case,
/// then a value starting with `specialexit` or `se`).
fn is_special_exit_flag(a: &str) -> bool {
    let Some(v) = a.get(..6).filter(|k| k.eq_ignore_ascii_case("state=")).map(|_| &a[6..]) else { return false };
    let starts = |p: &str| v.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
    starts("specialexit") || starts("se")
}

/// `top`: Flotilla has no queue reordering by users (Slurm's default, without
/// `enable_user_top`, refuses users too).
pub fn top(args: &[String], io: &mut Io<'_>) -> i32 {
    for a in args {
        for id in a.split(',') {
            io.err(&format!("{} for job {id}\n", strerror(ESLURM_ACCESS_DENIED)));
        }
    }
    1
}

/// `token [lifespan=SECONDS] [username=NAME]` (Slurm's `_fetch_token` and
/// `slurm_fetch_token`): prints `SLURM_JWT=TOKEN`; exit status 1 on an unknown option
/// (``Invalid option: `ARG` ``) or when no token comes back (`Error fetching token`, after
/// the controller's reason). Options match case-insensitively; `lifespan=` reads as `atoi`
/// does (0: the controller's default).
pub fn token(args: &[String], io: &mut Io<'_>) -> i32 {
    let (mut username, mut lifespan) = (None, 0);
    for a in args {
        let opt = |name: &str| a.get(..name.len()).is_some_and(|p| p.eq_ignore_ascii_case(name)).then(|| &a[name.len()..]);
        if let Some(v) = opt("lifespan=") {
            lifespan = i64::from(common::atoi(v));
        } else if let Some(v) = opt("username=") {
            username = Some(v.to_string());
        } else {
            io.err(&format!("Invalid option: `{a}`\n"));
            return 1;
        }
    }
    let answer = Ctl::new(io.env).and_then(|c| c.call(Request::IssueToken { username, lifespan }));
    match answer {
        Ok(Response::Token(Some(t))) => {
            io.out(&format!("SLURM_JWT={t}\n"));
            return 0;
        }
        Ok(Response::Token(None)) => {}
        Err(CtlError::Slurm(e)) => io.err(&format!("scontrol: error: slurm_fetch_token: error with request: {}\n", e.text)),
        Err(e) => io.err(&format!("scontrol: error: slurm_fetch_token: error receiving response: {}\n", e.slurm().text)),
        Ok(_) => io.err(&format!("scontrol: error: slurm_fetch_token: error with request: {}\n", strerror(SLURM_UNEXPECTED_MSG_ERROR))),
    }
    io.err("Error fetching token\n");
    1
}

/// `ping` (Slurm 22.05 `scontrol.c`, `_ping_slurmctld`): one line per `SlurmctldHost=` in
/// slurm.conf's order, `Slurmctld(primary) at HOST is UP` for the first, `(backup)` for the
/// second when there are two, `(backupN)` for the N-th otherwise, `DOWN` for one that does not
/// answer; when one is down and the caller is root, Slurm's `RESTORE SLURMCTLD DAEMON TO
/// SERVICE` banner. The roles are slurm.conf's order, as Slurm prints them, not which
/// controller leads now. Exit status 0 when one answered, else 1.
pub fn ping(io: &mut Io<'_>) -> i32 {
    let Some(ctl) = ctl(io, "slurm_load_ctl_conf") else { return 1 };
    let hosts = ctl.controllers();
    let up: Vec<bool> = hosts.iter().map(|(_, addr)| ctl.ping(addr)).collect();
    let (text, code) = ping_report(&hosts, &up, common::my_uid() == 0);
    io.out(&text);
    code
}

/// The text and exit status of `ping` for controllers `hosts` of which `up` answered.
fn ping_report(hosts: &[(String, String)], up: &[bool], root: bool) -> (String, i32) {
    let mut out = String::new();
    for (i, ((host, _), &up)) in hosts.iter().zip(up).enumerate() {
        let mode = match i {
            0 => "primary".to_string(),
            1 if hosts.len() == 2 => "backup".to_string(),
            _ => format!("backup{i}"),
        };
        out.push_str(&format!("Slurmctld({mode}) at {host} is {}\n", if up { "UP" } else { "DOWN" }));
    }
    if root && up.iter().any(|u| !u) {
        out.push_str("*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n");
    }
    (out, if up.iter().any(|&u| u) { 0 } else { 1 })
}

/// `takeover [INDEX]` (Slurm 22.05 `scontrol.c` and `slurm_takeover`): asks backup controller
/// INDEX (default 1: the second `SlurmctldHost=`) to take the leader lease now; the controller
/// that led finds it lost at its next write and steps down. Root and `SlurmUser` only.
/// Errors as Slurm's: `takeover: too many arguments`, `takeover: invalid backup controller
/// index (N)`, `slurm_takeover error: <reason>` (exit status 1).
pub fn takeover(args: &[String], io: &mut Io<'_>) -> i32 {
    let Some(ctl) = ctl(io, "slurm_load_ctl_conf") else { return 1 };
    let count = ctl.controllers().len();
    let inx = match args {
        [] if count < 1 => {
            io.err("takeover: no backup controller defined\n");
            return 1;
        }
        [] => 1,
        [a] => {
            let i = common::atoi(a);
            if i < 1 || i as usize >= count {
                io.err(&format!("takeover: invalid backup controller index ({i})\n"));
                return 1;
            }
            i as usize
        }
        _ => {
            io.err("takeover: too many arguments\n");
            return 1;
        }
    };
    match ctl.call_at(inx, Request::Takeover) {
        Ok(Response::Done) => 0,
        Ok(_) => {
            io.err(&format!("slurm_takeover error: {}\n", strerror(SLURM_UNEXPECTED_MSG_ERROR)));
            1
        }
        Err(e) => {
            io.err(&format!("slurm_takeover error: {}\n", e.slurm().text));
            1
        }
    }
}

/// Whether `scontrol update NodeName=... State=WORD` names a state, as `scontrol_update_node`
/// compares it (`xstrncasecmp(NAME, WORD, MAX(len, 3))`: WORD of 3 letters or more that
/// begins NAME, or NAME itself): its own words, then the base state names.
fn node_state_word_ok(word: &str) -> bool {
    let names = [
        ("NoResp", 3), ("CANCEL_REBOOT", 3), ("DRAIN", 3), ("FAIL", 3), ("FUTURE", 3), ("RESUME", 3),
        ("POWER_DOWN_ASAP", 12), ("POWER_DOWN_FORCE", 12), ("POWER_DOWN", 7), ("POWER_UP", 7), ("UNDRAIN", 3),
        ("UNKNOWN", 3), ("DOWN", 3), ("IDLE", 3), ("ALLOCATED", 3), ("?", 3), ("MIXED", 3),
    ];
    // `strncasecmp` on C strings: past its end a string reads as NUL, and equal NULs end it.
    let at = |s: &str, i: usize| s.as_bytes().get(i).map_or(0, u8::to_ascii_lowercase);
    names.iter().any(|(name, n)| {
        for i in 0..word.len().max(*n) {
            let (a, b) = (at(name, i), at(word, i));
            if a != b {
                return false;
            }
            if a == 0 {
                return true;
            }
        }
        true
    })
}

/// The keys of `scontrol update job`, in the order Slurm 22.05's `update_job.c`
/// (`scontrol_update_job`) tries them, each with the fewest leading characters that name it
/// (`xstrncasecmp(tag, KEY, MAX(taglen, N))`).
const UPDATE_JOB_KEYS: &[(&str, usize)] = &[
    ("JobId", 3), ("AdminComment", 6), ("SiteFactor", 5), ("ArrayTaskThrottle", 10),
    ("Comment", 3), ("Clusters", 8), ("ClusterFeatures", 8), ("DelayBoot", 5), ("TimeLimit", 5),
    ("TimeMin", 5), ("Priority", 2), ("Nice", 2), ("CPUsPerTask", 9), ("CpusPerTres", 9),
    ("NumCPUs", 6), ("NumTasks", 8), ("ReqProcs", 8), ("Requeue", 4), ("ReqNodes", 8),
    ("NumNodes", 8), ("ReqSockets", 4), ("ReqCores", 4), ("TasksPerNode", 2), ("ReqThreads", 4),
    ("MinCPUsNode", 4), ("MinMemoryNode", 10), ("MinMemoryCPU", 10), ("MinTmpDiskNode", 5),
    ("Partition", 2), ("QOS", 2), ("ReservationName", 3), ("Name", 2), ("JobName", 4),
    ("WCKey", 1), ("StdOut", 6), ("Switches", 5), ("wait-for-switch", 5), ("OverSubscribe", 2),
    ("Shared", 2), ("Contiguous", 3), ("CoreSpec", 4), ("MemPerTres", 5), ("ThreadSpec", 4),
    ("TresBind", 5), ("TresFreq", 5), ("TresPerJob", 8), ("TresPerNode", 8),
    ("TresPerSocket", 8), ("TresPerTask", 8), ("ExcNodeList", 3), ("NodeList", 8),
    ("ReqNodeList", 8), ("Features", 1), ("Prefer", 3), ("Gres", 2), ("Account", 1),
    ("BurstBuffer", 1), ("Dependency", 1), ("Licenses", 1), ("EligibleTime", 2),
    ("StartTime", 2), ("EndTime", 2), ("Reboot", 3), ("UserID", 3), ("Deadline", 3),
    ("WorkDir", 2), ("MailType", 5), ("MailUser", 5),
];

/// Slurm's `CORE_SPEC_THREAD`: a `core_spec` counting threads (`ThreadSpec=`).
const CORE_SPEC_THREAD: u16 = 0x8000;

/// A value Slurm 22.05's `update_job.c` reads as `YES` (1) or `NO` (0) when it is a prefix
/// of either, one letter or more, case-insensitively, else through `parse_uint16`
/// (`OverSubscribe=`, `Contiguous=`, `Reboot=`); `None` for anything else.
fn yes_no_uint16(v: &str) -> Option<u16> {
    if abbrev(v, "YES", 1) {
        Some(1)
    } else if abbrev(v, "NO", 1) {
        Some(0)
    } else {
        common::parse_uint16(v)
    }
}

/// The largest `SiteFactor=` or `Nice=` scontrol sends, either way (Slurm's
/// `NICE_OFFSET - 3`).
const NICE_OFFSET_MAX: u64 = 0x8000_0000 - 3;

/// The `scontrol update job` key `tag` names ([`UPDATE_JOB_KEYS`]): the first key of which
/// it is a case-insensitive prefix at least that key's minimum long; `None` for none.
fn update_key(tag: &str) -> Option<&'static str> {
    UPDATE_JOB_KEYS
        .iter()
        .find(|(k, n)| abbrev(tag, k, *n))
        .map(|(k, _)| *k)
}

/// `NumNodes=` as Slurm 22.05's `get_resource_arg_range` (`proc_args.c`) reads a requested
/// node count: `MIN` (the maximum unchanged: `None`), `MIN-MAX`, each a decimal number with an
/// optional `k`/`m` (x1024, x1048576) suffix; empty or `*` is 1 to `INT_MAX`. A value with
/// other characters, a negative minimum or a maximum below 1 is refused, as is one above
/// `INT_MAX`, with Slurm's message.
fn node_count_arg(v: &str) -> Result<(u32, Option<u32>), String> {
    resource_range_arg(v, "requested node count")
}

/// Slurm 22.05's `get_resource_arg_range` (`proc_args.c`) for the count `what` names in its
/// messages (`requested node count`, `NumCPUs`): see [`node_count_arg`].
fn resource_range_arg(v: &str, what: &str) -> Result<(u32, Option<u32>), String> {
    if v.is_empty() || v.starts_with('*') {
        return Ok((1, Some(i32::MAX as u32)));
    }
    let invalid = || format!("scontrol: error: Invalid numeric value \"{v}\" for {what}.\n");
    // One number with its suffix: (value, the rest).
    let number = |s: &str| -> (i64, usize) {
        let n = common::strtol_prefix_len(s);
        let mut val = common::strtol_prefix(&s[..n]);
        let mut used = n;
        match s.as_bytes().get(n) {
            Some(b'k' | b'K') => (val, used) = (val.saturating_mul(1024), n + 1),
            Some(b'm' | b'M') => (val, used) = (val.saturating_mul(1_048_576), n + 1),
            _ => {}
        }
        (val, used)
    };
    let check = |val: i64, rest: &str, least: i64| -> Result<u32, String> {
        if !(rest.is_empty() || rest.starts_with('-')) || val < least {
            Err(invalid())
        } else if val > i64::from(i32::MAX) {
            Err(format!("scontrol: error: Numeric argument ({val}) to big for {what}.\n"))
        } else {
            Ok(val as u32)
        }
    };
    let (val, used) = number(v);
    let min = check(val, &v[used..], 0)?;
    let rest = &v[used..];
    if rest.is_empty() {
        return Ok((min, None));
    }
    let tail = &rest[1..];
    let (val, used) = number(tail);
    let max = check(val, &tail[used..], 1)?;
    Ok((min, Some(max)))
}

/// A time of `scontrol update job` (`StartTime=`, `Deadline=`) as Slurm 22.05's
/// `update_job.c` reads it with `parse_time`: `None` (no change counted) for one it refuses,
/// after printing its `Invalid time specification (pos=N)` line, and for one naming none.
fn update_time(io: &mut Io<'_>, v: &str) -> Option<i64> {
    match parse_time_spec(v, common::now(), false) {
        Ok(0) => None,
        Ok(t) => Some(t),
        Err(pos) => {
            io.err(&format!("Invalid time specification (pos={pos}): {v}\n"));
            None
        }
    }
}

/// Whether `JobId=` names one job a `NumNodes=` update may resize (Slurm 22.05
/// `update_job.c` `_is_single_job`): `N` or `N_T` and nothing else, a job that exists, and
/// not an array of several records named by its id; otherwise its error is printed.
fn single_job(io: &mut Io<'_>, v: &str) -> bool {
    let n = common::strtol_prefix_len(v);
    let id = common::strtol_prefix(&v[..n]);
    let mut rest = &v[n..];
    let mut task = None;
    if let Some(r) = rest.strip_prefix('_') {
        let m = common::strtol_prefix_len(r);
        task = Some(common::strtol_prefix(&r[..m]));
        rest = &r[m..];
    }
    if !rest.is_empty() {
        io.err(&format!("scontrol: error: Invalid job ID {v}\n"));
        return false;
    }
    let Some(c) = ctl(io, "slurm_load_jobs") else { return false };
    // `slurm_load_job` of the job id (`(uint32_t)strtol`): every record of an array.
    let q = JobQuery { jobs: vec![JobRef::id(u64::from(id as u32))], include_finished: true, ..JobQuery::default() };
    let refused = match c.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) if j.is_empty() => Some(strerror(ESLURM_INVALID_JOB_ID).to_string()),
        Ok(Response::Jobs(j)) if j.len() > 1 && task.is_none() => {
            io.err("scontrol: error: Job resizing not supported for job arrays\n");
            return false;
        }
        Ok(_) => None,
        Err(e) => Some(e.slurm().text),
    };
    if let Some(text) = refused {
        io.err(&format!("scontrol: error: Could not load state information for job {v}: {text}\n"));
        return false;
    }
    true
}

/// Whether `tag` names `key`: a case-insensitive prefix of it, `min` letters or more (Slurm's
/// `xstrncasecmp(tag, key, MAX(len, min))`).
fn abbrev(tag: &str, key: &str, min: usize) -> bool {
    tag.len() >= min && tag.len() <= key.len() && key[..tag.len()].eq_ignore_ascii_case(tag)
}

/// A partition's `MaxTime=`/`DefaultTime=` as update_part.c reads it with `time_str2mins`:
/// minutes, `UNLIMITED`/`INFINITE`; `None` for a negative or unreadable one.
fn partition_minutes(v: &str) -> Option<TimeLimitWire> {
    match flotilla_core::time::time_str2mins(v) {
        Ok(flotilla_core::time::SlurmDuration::Infinite) => Some(TimeLimitWire::Unlimited),
        Ok(flotilla_core::time::SlurmDuration::Finite(m)) => u32::try_from(m).ok().map(TimeLimitWire::Minutes),
        Err(_) => None,
    }
}

/// `update PartitionName=NAME State=STATE MaxTime=T DefaultTime=T`, as Slurm 22.05's
/// scontrol reads it (update_part.c `scontrol_parse_part_options`, `scontrol_update_part`):
/// tags and `State=` values are case-insensitive prefixes (`st=d` is `State=DOWN`, `MaxT=`
/// `MaxTime=`, `DefaultT=` `DefaultTime=`); a time is read by `time_str2mins` (`UNLIMITED`
/// and `INFINITE` too) and a negative or unreadable one is `Invalid input MaxTime=...`; a
/// word without `=`, a bad state or value, or a key Flotilla does not update (Slurm's other
/// partition keys among them: they change through slurm.conf here) aborts with Slurm's
/// messages and `slurm_update error: No error`; no name, or no change, is refused without
/// it. Exit 1 on any error.
fn update_partition(args: &[String], io: &mut Io<'_>) -> i32 {
    let mut u = flotilla_proto::UpdatePartition::default();
    let (mut named, mut changes) = (false, 0);
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            io.err(&format!("scontrol: error: Invalid input: {a}  Request aborted\nslurm_update error: No error\n"));
            return 1;
        };
        let time_slot = if abbrev(k, "MaxTime", 4) {
            Some(&mut u.max_time)
        } else if abbrev(k, "DefaultTime", 8) {
            Some(&mut u.default_time)
        } else {
            None
        };
        if abbrev(k, "PartitionName", 2) {
            u.name = v.to_string();
            named = true;
        } else if let Some(slot) = time_slot {
            let Some(t) = partition_minutes(v) else {
                io.err(&format!("scontrol: error: Invalid input {a}\nslurm_update error: No error\n"));
                return 1;
            };
            *slot = Some(t);
        } else if abbrev(k, "State", 2) {
            let word = ["INACTIVE", "DOWN", "UP", "DRAIN"].into_iter().find(|w| !v.is_empty() && abbrev(v, w, 1));
            let Some(word) = word else {
                io.err(&format!(
                    "scontrol: error: Invalid input: {a}\nscontrol: error: Acceptable State values are UP, DOWN, DRAIN and INACTIVE\nslurm_update error: No error\n"
                ));
                return 1;
            };
            u.state = Some(word.to_string());
        } else {
            io.err(&format!("scontrol: error: Update of this parameter is not supported: {a}\n\nscontrol: error: Request aborted\nslurm_update error: No error\n"));
            return 1;
        }
        changes += 1;
    }
    if !named {
        io.err("scontrol: error: PartitionName must be given.\n");
        return 1;
    }
    if changes <= 1 {
        io.err("scontrol: error: No changes specified\n");
        return 1;
    }
    let Some(c) = ctl(io, "slurm_update") else { return 1 };
    match c.call(Request::UpdatePartition(u)) {
        Ok(_) => 0,
        Err(e) => {
            io.err(&format!("slurm_update error: {}\n", e.slurm().text));
            1
        }
    }
}

/// `update ...`: a job (`JobId=`), nodes (`NodeName=`) or a partition (`PartitionName=`).
pub fn update(args: &[String], io: &mut Io<'_>) -> i32 {
    let pairs: Vec<(String, String)> = args
        .iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (a.clone(), String::new()),
        })
        .collect();
    let Some((k0, v0)) = pairs.first().cloned() else {
        io.err("too few arguments for keyword:update\n");
        return 1;
    };
    if k0.eq_ignore_ascii_case("nodename") {
        let mut u = UpdateNode {
            names: flotilla_core::hostlist::expand(&v0).unwrap_or_else(|_| vec![v0.clone()]),
            state: None,
            reason: None,
            features: None,
            features_act: None,
        };
        // Slurm 22.05 `update_node.c` `scontrol_update_node`: `ActiveFeatures` from 3
        // letters, `Features` from 1 or `AvailableFeatures` from 3 (case-insensitive).
        for (k, v) in &pairs[1..] {
            match k.to_ascii_lowercase().as_str() {
                "state" => u.state = Some(v.clone()),
                "reason" => u.reason = Some(v.clone()),
                _ if abbrev(k, "ActiveFeatures", 3) => u.features_act = Some(v.clone()),
                _ if abbrev(k, "Features", 1) || abbrev(k, "AvailableFeatures", 3) => u.features = Some(v.clone()),
                _ => {
                    io.err(&format!("Update of this parameter is not supported: {k}={v}\nRequest aborted\n"));
                    return 1;
                }
            }
        }
        // Slurm 22.05 `update_node.c` `scontrol_update_node`: a state must be one of its
        // words, else the update is aborted before anything is sent (goldens-extra 0728).
        if let Some(st) = u.state.as_deref().filter(|st| !node_state_word_ok(st)) {
            io.err(&format!(
                "Invalid input: state={st}\nRequest aborted\nValid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN \
                 POWER_UP UNDRAIN\nNot all states are valid given a node's prior state\n"
            ));
            return 1;
        }
        // Slurm 22.05 `update_node.c` `scontrol_update_node`: DOWN, DRAIN and FAIL need a
        // reason (states match as prefixes of three letters or more, case-insensitively).
        let needs_reason = u.state.as_deref().is_some_and(|st| {
            st.len() >= 3 && ["down", "drain", "fail"].iter().any(|w| w.len() >= st.len() && w[..st.len()].eq_ignore_ascii_case(st))
        });
        if needs_reason && u.reason.as_deref().is_none_or(str::is_empty) {
            io.err("You must specify a reason when DOWNING or DRAINING a node. Request denied\n");
            return 1;
        }
        let Some(c) = ctl(io, "slurm_update") else { return 1 };
        return match c.call(Request::UpdateNode(u)) {
            Ok(_) => 0,
            Err(e) => {
                io.err(&format!("slurm_update error: {}\n", e.slurm().text));
                1
            }
        };
    }
    // Slurm 22.05 `_update_it`: a `PartitionName` tag anywhere (3 letters or more) names a
    // partition update, unless a job is named.
    if update_key(&k0) != Some("JobId") && pairs.iter().any(|(k, _)| abbrev(k, "PartitionName", 3)) {
        return update_partition(args, io);
    }
    if update_key(&k0) != Some("JobId") {
        io.err(&format!("Update of this parameter is not supported: {k0}={v0}\nRequest aborted\n"));
        return 1;
    }
    // Several jobs (`JobId=12,13`) are updated in turn, one request each (Slurm's
    // `scontrol_update_job` over `_next_job_id`); a relative `TimeLimit=` is taken from the
    // first (`_get_job_time` reads the first id of the list).
    let jobs = match ids_of(std::slice::from_ref(&v0)) {
        Ok(j) if !j.is_empty() => j,
        _ => {
            io.err(&format!("Invalid job id specified for job {v0}\n"));
            return 1;
        }
    };
    let job = jobs[0].clone();
    let mut changes = Vec::new();
    // Slurm 22.05 `scontrol_update_job`: a word without `=` is `Nice` (nice 100), else the key
    // of the word after it (`TimeLimit 30`); a last word alone is refused.
    let mut rest: Vec<(String, String)> = Vec::new();
    let mut words = args[1..].iter();
    while let Some(a) = words.next() {
        match (a.split_once('='), words.as_slice().first()) {
            (Some((k, v)), _) => rest.push((k.to_string(), v.to_string())),
            (None, _) if abbrev(a, "Nice", 2) => rest.push(("Nice".into(), "100".into())),
            (None, Some(v)) => {
                rest.push((a.clone(), v.clone()));
                words.next();
            }
            (None, None) => {
                io.err(&format!("Invalid input: {a}\nRequest aborted\n"));
                return 1;
            }
        }
    }
    // `NumNodes=` resizes one job ([`single_job`]); its `ALL` is an update without a change.
    let resize = rest.iter().any(|(k, _)| matches!(update_key(k), Some("NumNodes" | "ReqNodes")));
    for (written, v) in &rest {
        // Each key gives a change, nothing (a time naming none), or aborts the request with
        // Slurm's message and exit 1 (`update_job.c`: `exit_code = 1; return 0`).
        let bad = |msg: String| Err::<JobChange, String>(msg);
        let parsed = |o: Option<JobChange>, msg: String| o.ok_or(msg);
        // Slurm 22.05 `scontrol_update_job`: a sign just before `=` (`Tag+=V`, `Tag-=V`) is not
        // part of the key; TimeLimit and AdminComment take it, any other key refuses it once
        // its value is read (goldens-extra 0936).
        let (k, sign) = match written.as_bytes().last() {
            Some(&c @ (b'+' | b'-')) if written.len() > 1 => (&written[..written.len() - 1], Some(c as char)),
            _ => (written.as_str(), None),
        };
        // Flotilla's own key, not in Slurm's table, is matched whole.
        let key = update_key(k).or_else(|| k.eq_ignore_ascii_case("topology").then_some("Topology"));
        let takes_sign = matches!(key, Some("TimeLimit" | "AdminComment"));
        let ch = match key.unwrap_or_default() {
            "TimeLimit" if sign.is_some() && v.starts_with(['+', '-']) => {
                bad("scontrol: error: Invalid syntax, variations of +=- are not accepted.\n".into())
            }
            // The helper has printed its own message.
            "TimeLimit" => match time_limit_change(io, &job, &format!("{}{v}", sign.map(String::from).unwrap_or_default())) {
                Ok(t) => Ok(JobChange::TimeLimit(t)),
                Err(code) => return code,
            },
            // `+=V` is sent whole (the controller keeps it so); `-=` is refused.
            "AdminComment" if sign == Some('-') => bad("scontrol: error: Invalid syntax, AdminComment can not be subtracted from.\n".into()),
            "AdminComment" if sign == Some('+') => Ok(JobChange::AdminComment(format!("+={v}"))),
            "AdminComment" => Ok(JobChange::AdminComment(v.clone())),
            // `strtoll`, within ±(NICE_OFFSET − 3).
            "SiteFactor" => match flotilla_core::cnum::strtol(v).0 {
                f if f.unsigned_abs() > NICE_OFFSET_MAX => {
                    bad(format!("scontrol: error: SiteFactor value out of range (+/- {NICE_OFFSET_MAX}). Value ignored\n"))
                }
                f => Ok(JobChange::SiteFactor(f as i32)),
            },
            // `get_resource_arg_range` (its own message first), then a minimum below 1 or a
            // maximum below it; the maximum is not kept.
            "NumCPUs" => match resource_range_arg(v, "NumCPUs") {
                Ok((min, max)) if min >= 1 && max.is_none_or(|m| m >= min) => Ok(JobChange::NumCpus(min)),
                Ok(_) => bad(format!("scontrol: error: Invalid NumCPUs value: {v}\n")),
                Err(msg) => bad(format!("{msg}scontrol: error: Invalid NumCPUs value: {v}\n")),
            },
            "NumTasks" | "ReqProcs" => parsed(common::parse_uint32(v).map(JobChange::NumTasks), format!("scontrol: error: Invalid NumTasks value: {v}\n")),
            "ReqCores" => parsed(common::parse_uint16(v).map(JobChange::CoresPerSocket), format!("scontrol: error: Invalid ReqCores value: {v}\n")),
            "ReqSockets" => parsed(common::parse_uint16(v).map(JobChange::SocketsPerNode), format!("scontrol: error: Invalid ReqSockets value: {v}\n")),
            "ReqThreads" => parsed(common::parse_uint16(v).map(JobChange::ThreadsPerCore), format!("scontrol: error: Invalid ReqThreads value: {v}\n")),
            "TasksPerNode" => parsed(common::parse_uint16(v).map(JobChange::TasksPerNode), format!("scontrol: error: Invalid TasksPerNode value: {v}\n")),
            "CPUsPerTask" => parsed(common::parse_uint16(v).map(JobChange::CpusPerTask), format!("scontrol: error: Invalid CPUsPerTask value: {v}\n")),
            // `YES`/`NO` (any prefix, one letter or more), else `parse_uint16`.
            "OverSubscribe" | "Shared" => parsed(yes_no_uint16(v).map(JobChange::Shared), format!("scontrol: error: Invalid OverSubscribe value: {v}\n")),
            "Contiguous" => parsed(yes_no_uint16(v).map(JobChange::Contiguous), format!("scontrol: error: Invalid Contiguous value: {v}\n")),
            "Reboot" => parsed(yes_no_uint16(v).map(JobChange::Reboot), format!("scontrol: error: Invalid reboot value: {v}\n")),
            // `time_str2secs` (a bare number is minutes); INFINITE is kept as such.
            "DelayBoot" => match flotilla_core::time::time_str2secs(v) {
                Ok(flotilla_core::time::SlurmDuration::Infinite) => Ok(JobChange::DelayBoot(u32::MAX)),
                Ok(flotilla_core::time::SlurmDuration::Finite(s)) if s >= 0 => Ok(JobChange::DelayBoot(s as u32)),
                _ => bad("scontrol: error: Invalid DelayBoot value\n".into()),
            },
            // `-1` or `*` clears it; threads are marked with `CORE_SPEC_THREAD`.
            "CoreSpec" | "ThreadSpec" => {
                let thread = if key == Some("ThreadSpec") { CORE_SPEC_THREAD } else { 0 };
                match v.as_str() {
                    "-1" | "*" => Ok(JobChange::CoreSpec(u16::MAX)),
                    _ => parsed(
                        common::parse_uint16(v).map(|n| JobChange::CoreSpec(n | thread)),
                        format!("scontrol: error: Invalid {} value: {v}\n", key.unwrap_or_default()),
                    ),
                }
            }
            "WCKey" => Ok(JobChange::WcKey(v.clone())),
            "Licenses" => Ok(JobChange::Licenses(v.clone())),
            "ReservationName" => Ok(JobChange::Reservation(v.clone())),
            "BurstBuffer" => Ok(JobChange::BurstBuffer(v.clone())),
            // Names whose jobs a `JobName=` update selects in Slurm; here only checked, no
            // change counted (`update_cnt` is not raised).
            "UserID" if common::uid_from_string(v).is_none() => bad(format!("Invalid UserID: {v}\nRequest aborted\n")),
            "UserID" => continue,
            // `time_str2mins`: a negative count other than INFINITE (-1) is refused; 0 clears.
            "TimeMin" => match flotilla_core::time::time_str2mins(v) {
                Ok(flotilla_core::time::SlurmDuration::Infinite) => Ok(JobChange::TimeMin(TimeLimitWire::Unlimited)),
                Ok(flotilla_core::time::SlurmDuration::Finite(m)) if m >= 0 => Ok(JobChange::TimeMin(TimeLimitWire::Minutes(m as u32))),
                _ => bad("scontrol: error: Invalid TimeMin value\n".into()),
            },
            // The controller checks the rest.
            "Deadline" => match update_time(io, v) {
                Some(t) => Ok(JobChange::Deadline(t)),
                None => continue,
            },
            // Slurm 22.05 `update_job.c`: `parse_time`, sent as it is (the controller
            // refuses one already past).
            "EndTime" => match update_time(io, v) {
                Some(t) => Ok(JobChange::EndTime(t)),
                None => continue,
            },
            // One already past is now.
            "StartTime" | "EligibleTime" => match update_time(io, v) {
                Some(t) => Ok(JobChange::Begin(Some(t.max(common::now())))),
                None => continue,
            },
            "Name" | "JobName" => Ok(JobChange::Name(v.clone())),
            "Partition" => Ok(JobChange::Partition(v.clone())),
            "Priority" => parsed(v.parse().ok().map(JobChange::Priority), "scontrol: error: Invalid Priority value\n".into()),
            // `strtoll` (digits as far as they go), within ±(NICE_OFFSET − 3).
            "Nice" => match flotilla_core::cnum::strtol(v).0 {
                n if n.unsigned_abs() > NICE_OFFSET_MAX => {
                    bad(format!("scontrol: error: Nice value out of range (+/- {NICE_OFFSET_MAX}). Value ignored\n"))
                }
                n => Ok(JobChange::Nice(n as i32)),
            },
            "Gres" | "TresPerNode" => parsed(crate::sbatch::parse_gres(v).map(JobChange::Gres), "scontrol: error: Invalid Gres value\n".into()),
            // A value `get_resource_arg_range` refuses ends the command, with nothing sent and
            // exit status 0 (Slurm 22.05 `update_job.c` returns its result).
            // `ALL` asks for no change (Slurm sends `min_nodes` INFINITE, which `_update_job`
            // takes as none) but is an update all the same.
            "NumNodes" | "ReqNodes" if v.eq_ignore_ascii_case("ALL") => continue,
            "NumNodes" | "ReqNodes" => match node_count_arg(v) {
                Ok((min, None)) => Ok(JobChange::NumNodes(min)),
                Ok((min, Some(max))) => Ok(JobChange::NodeRange { min, max }),
                Err(msg) => {
                    io.err(&msg);
                    return 0;
                }
            },
            "Dependency" => Ok(JobChange::Dependency(v.clone())),
            "Account" => Ok(JobChange::Account(v.clone())),
            "QOS" => Ok(JobChange::Qos(v.clone())),
            "Comment" => Ok(JobChange::Comment(v.clone())),
            // Slurm 22.05 `update_job.c`: `parse_mail_type`; `Requeue=` through `parse_uint16`,
            // `MinTmpDiskNode=` through `parse_uint32`.
            "MailType" => parsed(flotilla_proto::mail_type::parse(v).map(JobChange::MailType), format!("Invalid MailType: {v}\n")),
            "MailUser" => Ok(JobChange::MailUser(v.clone())),
            "Requeue" => parsed(common::parse_uint16(v).map(JobChange::Requeue), format!("scontrol: error: Invalid Requeue value: {v}\n")),
            "MinTmpDiskNode" => parsed(
                common::parse_uint32(v).map(JobChange::MinTmpDiskNode),
                format!("scontrol: error: Invalid MinTmpDiskNode value: {v}\n"),
            ),
            "Topology" => Ok(JobChange::Topology(v.clone())),
            "ReqNodeList" | "NodeList" => Ok(JobChange::ReqNodeList(v.clone())),
            "ExcNodeList" => Ok(JobChange::ExcNodeList(v.clone())),
            "WorkDir" => Ok(JobChange::WorkDir(v.clone())),
            "StdOut" => Ok(JobChange::StdOut(v.clone())),
            "Features" => Ok(JobChange::Features(v.clone())),
            // `parse_uint64`, `parse_uint16`: a bad value aborts the request.
            "MinMemoryNode" => parsed(common::parse_uint64(v).map(JobChange::MinMemoryNode), format!("scontrol: error: Invalid MinMemoryNode value: {v}\n")),
            "MinMemoryCPU" => parsed(common::parse_uint64(v).map(JobChange::MinMemoryCpu), format!("scontrol: error: Invalid MinMemoryCPU value: {v}\n")),
            "MinCPUsNode" => parsed(common::parse_uint16(v).map(JobChange::MinCpusNode), format!("scontrol: error: Invalid MinCPUsNode value: {v}\n")),
            // `update_job.c`: `strtoll` into an `int` (a wrapped value, anything after the
            // digits ignored, none is 0: no throttle); a negative one aborts the request.
            "ArrayTaskThrottle" => match flotilla_core::cnum::strtol(v).0 as i32 {
                t if t < 0 => bad("scontrol: error: Invalid ArrayTaskThrottle value\n".into()),
                t => Ok(JobChange::ArrayThrottle(t as u32)),
            },
            _ => bad(format!("Update of this parameter is not supported: {written}={v}\nRequest aborted\n")),
        };
        let ch = match ch {
            Ok(_) if sign.is_some() && !takes_sign => bad(format!("scontrol: error: Option {written}={v} does not accept [+|-]= syntax\n")),
            ch => ch,
        };
        match ch {
            Ok(c) => changes.push(c),
            Err(msg) => {
                io.err(&msg);
                return 1;
            }
        }
    }
    if changes.is_empty() && !resize {
        io.err("No changes specified\n");
        return 1;
    }
    if resize && !single_job(io, &v0) {
        return 1;
    }
    let Some(c) = ctl(io, "slurm_update") else { return 1 };
    let mut code = 0;
    for job in jobs {
        let r = job.clone();
        code |= match c.call(Request::UpdateJob(UpdateJob { job, changes: changes.clone() })) {
            Ok(Response::JobResults(rs)) => job_results(rs, io),
            Ok(_) => 0,
            Err(e) => {
                io.err(&format!("{} for job {}\n", e.slurm().text, ref_str(&r)));
                1
            }
        };
    }
    code
}

fn t_or(t: Option<i64>, none: &str) -> String {
    t.filter(|&v| v > 0).map_or_else(|| none.to_string(), fmt_time)
}

fn limit_str(j: &JobInfo) -> String {
    match j.time_limit {
        Some(TimeLimitWire::Minutes(m)) => mins2time_str(m),
        Some(TimeLimitWire::Unlimited) => "UNLIMITED".into(),
        None => "Partition_Limit".into(),
    }
}

fn out_path(j: &JobInfo, p: Option<&str>) -> String {
    let pat = p.map_or_else(
        || if j.array_job_id.is_some() { "slurm-%A_%a.out".to_string() } else { "slurm-%j.out".to_string() },
        str::to_string,
    );
    let id = j.job_id.to_string();
    let aid = j.array_job_id.unwrap_or(j.job_id).to_string();
    let task = j.array_task_id.map_or_else(|| "4294967294".to_string(), |t| t.to_string());
    let e = pat.replace("%j", &id).replace("%A", &aid).replace("%a", &task).replace("%x", &j.name).replace("%u", &j.user);
    if e.starts_with('/') {
        e
    } else {
        format!("{}/{e}", j.work_dir)
    }
}

/// One `scontrol show job` record (lines, each without the final newline). `gpu_types`: each
/// node's GPU model (for `-d`'s `JOB_GRES=gpu:h100:N`).
pub fn job_record(j: &JobInfo, flags: ShowFlags, now: i64, gpu_types: &BTreeMap<String, String>) -> Vec<String> {
    let v = flotilla_proto::JobView::from(j);
    let st = jobfmt::state(&v);
    let pending = st.is_pending();
    let mut l = Vec::new();
    let mut head = format!("JobId={} ", j.job_id);
    if let Some(a) = j.array_job_id {
        head.push_str(&format!("ArrayJobId={a} "));
        match (j.array_task_id, &j.array_task_str) {
            (Some(t), _) => head.push_str(&format!("ArrayTaskId={t} ")),
            (None, Some(s)) => head.push_str(&format!("ArrayTaskId={s} ")),
            _ => {}
        }
        // `slurm_sprint_job_info`: the array's `%N` throttle (its `array_max_tasks`), on
        // every record of the array while its first record is kept.
        if j.array_throttle > 0 {
            head.push_str(&format!("ArrayTaskThrottle={} ", j.array_throttle));
        }
    }
    head.push_str(&format!("JobName={}", j.name));
    l.push(head);
    l.push(format!(
        "   UserId={}({}) GroupId={}({}) MCS_label=N/A",
        j.user,
        j.uid,
        common::group_name(j.gid),
        j.gid
    ));
    let acct = if j.account.is_empty() { "(null)" } else { j.account.as_str() };
    l.push(format!("   Priority={} Nice={} Account={acct} QOS={}", j.priority, j.nice, j.qos));
    // Slurm's scontrol prints a free-text reason with its blanks as underscores
    // (`job_requeued_in_held_state`).
    l.push(format!("   JobState={} Reason={} Dependency={}", st.as_str(), j.reason.replace(' ', "_"), jobfmt::dependency_str(&v)));
    l.push(format!(
        "   Requeue={} Restarts={} BatchFlag=1 Reboot=0 ExitCode={}:{}",
        u8::from(j.requeue),
        j.restarts,
        j.exit_code,
        j.exit_signal
    ));
    if flags.details {
        l.push(format!("   DerivedExitCode={}:{}", j.derived_exit.0, j.derived_exit.1));
    }
    l.push(format!(
        "   RunTime={} TimeLimit={} TimeMin={}",
        secs2time_str(jobfmt::run_secs(&v, now)),
        limit_str(j),
        j.time_min.map_or_else(|| "N/A".into(), mins2time_str)
    ));
    // Not eligible yet: held without a begin time, or waiting on a dependency (golden 0211).
    // A job requeued with a hold keeps the begin time of its requeue (requeue + hold-off) as
    // both times, as Slurm 22.05 shows it (checked live).
    let held_until = j.eligible_time.filter(|_| pending && j.held);
    let not_eligible = pending && ((j.held && held_until.is_none()) || matches!(j.reason.as_str(), "Dependency" | "DependencyNeverSatisfied"));
    l.push(format!(
        "   SubmitTime={} EligibleTime={}",
        fmt_time(j.submit_time),
        if not_eligible { "Unknown".into() } else { t_or(j.eligible_time.or(Some(j.submit_time)), "Unknown") }
    ));
    l.push(format!(
        "   AccrueTime={}",
        if not_eligible { "Unknown".into() } else { fmt_time(held_until.unwrap_or(j.submit_time)) }
    ));
    l.push(format!(
        "   StartTime={} EndTime={} Deadline={}",
        t_or(j.start_time, "Unknown"),
        t_or(j.end_time, "Unknown"),
        t_or(j.deadline, "N/A")
    ));
    l.push(format!(
        "   SuspendTime=None SecsPreSuspend=0 LastSchedEval={} Scheduler=Main",
        fmt_time(j.start_time.unwrap_or(j.submit_time))
    ));
    l.push(format!("   Partition={} AllocNode:Sid={}:0", j.partition, common::hostname()));
    let (req, exc) = (jobfmt::node_list_shown(&j.required_nodes), jobfmt::node_list_shown(&j.excluded_nodes));
    l.push(format!("   ReqNodeList={req} ExcNodeList={exc}"));
    if pending && !j.sched_nodes.is_empty() {
        // Slurm prints the planned nodes on the NodeList line (goldens 0208-0210).
        l.push(format!("   NodeList={} SchedNodeList={}", j.nodes, j.sched_nodes));
    } else {
        l.push(format!("   NodeList={}", j.nodes));
    }
    if !pending && !j.batch_host.is_empty() {
        l.push(format!("   BatchHost={}", j.batch_host));
    }
    // Slurm 22.05 `job_info.c` (`_sprint_range`): a pending job with a node maximum shows
    // `MIN-MAX` (`-N 2` is `2-2`, goldens-extra 0405), the minimum capped at the maximum.
    let num_nodes = if pending && j.max_nodes > 0 {
        format!("{}-{}", j.num_nodes.min(j.max_nodes), j.max_nodes)
    } else {
        j.num_nodes.to_string()
    };
    // `ReqB:S:C:T=` and `NtasksPerN:B:S:C=` (job_info.c): boards and sockets-per-board are
    // always 0 and `*` (Flotilla has no boards); a count not given is `*`.
    let star = |n: u32| if n == 0 { "*".to_string() } else { n.to_string() };
    let shape = &j.node_shape;
    l.push(format!(
        "   NumNodes={num_nodes} NumCPUs={} NumTasks={} CPUs/Task={} ReqB:S:C:T=0:0:{}:{}",
        j.num_cpus,
        // Without -n, one task per allocated node (golden 0124: --gpus=12 on 2 nodes); 0 is
        // Slurm's `NO_VAL` (a job that ended without starting and was given no count).
        if j.num_tasks == 0 { "N/A".to_string() } else { j.num_tasks.max(j.num_nodes).max(1).to_string() },
        // As the job keeps it: `CPUsPerTask=0` shows 0 (goldens-extra 0937).
        j.cpus_per_task,
        star(shape.cores_per_socket),
        star(shape.threads_per_core)
    ));
    l.push(format!("   TRES={}", jobfmt::tres_str(&v)));
    // `Socks/Node=` is `--sockets-per-node` (job_info.c: `*` when not given).
    let socks = if j.sockets_per_node == 0 { "*".to_string() } else { j.sockets_per_node.to_string() };
    l.push(format!(
        "   Socks/Node={socks} NtasksPerN:B:S:C={}:0:*:{} CoreSpec=*",
        shape.ntasks_per_node,
        star(shape.ntasks_per_core)
    ));
    if flags.details && !pending && !j.gpu_alloc.is_empty() {
        let cpus = (j.num_cpus / j.num_nodes.max(1)).max(1);
        let nodes: Vec<crate::job_gres::NodeGres> = j
            .gpu_alloc
            .iter()
            .enumerate()
            .map(|(k, (node, mask))| crate::job_gres::NodeGres {
                node: node.clone(),
                cpus,
                cpu_ids: j.cpu_ids.get(k).filter(|c| !c.is_empty()).cloned(),
                mem_mib: j.mem_per_node_mib,
                gpu_mask: *mask,
                gpu_type: gpu_types.get(node).cloned(),
            })
            .collect();
        l.extend(crate::job_gres::lines(&nodes));
    }
    // Memory as asked: per CPU (`--mem-per-cpu`, `DefMemPerCPU`) or per node (`--mem`, 0127).
    let min_mem = match j.mem_per_cpu_mib {
        Some(m) => format!("MinMemoryCPU={}", jobfmt::mem_str(m)),
        // `--mem=0` shows as asked (goldens-extra 1020), not the node memory it stands for.
        None if j.mem_whole_node => "MinMemoryNode=0".to_string(),
        None => format!("MinMemoryNode={}", jobfmt::mem_str(j.mem_per_node_mib)),
    };
    l.push(format!("   MinCPUsNode={} {min_mem} MinTmpDiskNode={}", jobfmt::min_cpus(shape, j.cpus_per_task), jobfmt::mem_str(shape.tmp_disk_mib)));
    l.push(format!(
        "   Features={} DelayBoot={}",
        j.features.as_deref().unwrap_or("(null)"),
        flotilla_core::time::secs2time_str(i64::from(j.delay_boot_s))
    ));
    l.push(format!(
        "   OverSubscribe={} Contiguous=0 Licenses=(null) Network=(null)",
        jobfmt::oversubscribe(&v)
    ));
    l.push(format!("   Command={}", j.command.as_deref().unwrap_or("(null)")));
    l.push(format!("   WorkDir={}", j.work_dir));
    // Slurm 22.05 `slurm_sprint_job_info`: AdminComment, then Comment, each with a blank.
    if let Some(c) = &j.admin_comment {
        l.push(format!("   AdminComment={c} "));
    }
    if let Some(c) = &j.comment {
        l.push(format!("   Comment={c} "));
    }
    l.push(format!("   StdErr={}", out_path(j, j.stderr.as_deref().or(j.stdout.as_deref()))));
    l.push("   StdIn=/dev/null".into());
    l.push(format!("   StdOut={}", out_path(j, j.stdout.as_deref())));
    l.push("   Power=".into());
    if let Some(f) = flotilla_proto::job_flags::line(j.job_flags) {
        l.push(format!("   {f}"));
    }
    // Slurm's order (`job_info.c` `slurm_sprint_job_info`): TresPerJob, TresPerNode,
    // TresPerSocket, TresPerTask (goldens 0112, 0115, 0121, goldens-extra 0409).
    if let Some(t) = &j.tres_per_job {
        l.push(format!("   TresPerJob={t}"));
    }
    let tpn = jobfmt::tres_per_node(&v);
    if tpn != "N/A" {
        l.push(format!("   TresPerNode={tpn}"));
    }
    if let Some(t) = &j.tres_per_socket {
        l.push(format!("   TresPerSocket={t}"));
    }
    if let Some(t) = &j.tres_per_task {
        l.push(format!("   TresPerTask={t}"));
    }
    // job_info.c: only with a mail type and a user to mail.
    if let (t @ 1.., Some(u)) = (j.mail_type, &j.mail_user) {
        l.push(format!("   MailUser={u} MailType={}", flotilla_proto::mail_type::names(t)));
    }
    if let Some(f) = flotilla_line(j) {
        l.push(f);
    }
    l.push("   ".into());
    l
}

/// The extra line of Flotilla's own job fields, when one of them says something (see the
/// module docs).
pub fn flotilla_line(j: &JobInfo) -> Option<String> {
    let flotilla = (j.topology != "any" && !j.topology.is_empty())
        || j.preemptible
        || j.preempt_count > 0
        || j.last_checkpoint_ack.is_some()
        || j.borrowed
        || j.service_id.is_some();
    if !flotilla {
        return None;
    }
    let yes = |b: bool| if b { "YES" } else { "NO" };
    let mut s = format!(
        "   Topology={} Preemptible={} PreemptCount={} LastCheckpointAck={} Borrowed={}",
        j.topology,
        yes(j.preemptible),
        j.preempt_count,
        j.last_checkpoint_ack.map_or_else(|| "None".to_string(), fmt_time),
        yes(j.borrowed)
    );
    if let Some(id) = j.service_id {
        s.push_str(&format!(" ServiceId={id}"));
    }
    Some(s)
}

/// Flotilla's lines of an elastic (or `NumNodes=`-resized) job in `scontrol show job`:
/// `   Elastic=nodes MinSize=2 MaxSize=8 Step=1 Signal=10 GrownNodes=gpu[03-04]` and
/// `   ResizeHistory=<time>:grow:gpu[03-04]:4,...` (`(null)` without changes).
pub fn elastic_lines(e: &flotilla_proto::ElasticInfo) -> Vec<String> {
    let mut l = Vec::new();
    if !e.unit.is_empty() {
        l.push(format!(
            "   Elastic={} MinSize={} MaxSize={} Step={} Signal={} GrownNodes={}",
            e.unit,
            e.min,
            e.max,
            e.step,
            e.signal.map_or_else(|| "None".to_string(), |s| s.to_string()),
            if e.grown_nodes.is_empty() { "(null)" } else { e.grown_nodes.as_str() }
        ));
    }
    let hist: Vec<String> = e.resizes.iter().map(|r| format!("{}:{}:{}:{}", fmt_time(r.time), r.change, r.nodes, r.num_nodes)).collect();
    l.push(format!("   ResizeHistory={}", if hist.is_empty() { "(null)".to_string() } else { hist.join(",") }));
    l
}

/// A pending elastic job's `NumNodes=MIN-MAX` in its record's `lines` (a running one keeps
/// its current count), as Slurm 22.05's `slurm_sprint_job_info` (src/api/job_info.c) prints
/// a pending job's node range. Only a node-granular range: a GPU-granular job's is on its
/// `Elastic=` line.
pub fn elastic_node_range(lines: &mut [String], j: &JobInfo, e: &flotilla_proto::ElasticInfo) {
    if j.state != Some(JobStateWire::Pending) || e.unit != "nodes" || e.max == 0 {
        return;
    }
    let min = j.num_nodes.min(e.max);
    for l in lines.iter_mut() {
        if let Some(rest) = l.strip_prefix("   NumNodes=") {
            let after = rest.split_once(' ').map_or("", |(_, a)| a);
            *l = format!("   NumNodes={min}-{} {after}", e.max);
        }
    }
}

/// `scontrol show alerts`' record of one alert: `AlertId= Time= Kind= JobId= ServiceId=`,
/// then `Message=` on its own line, a blank line after (`one_liner`: one line).
pub fn alert_record(a: &flotilla_proto::AlertInfo, one_liner: bool) -> String {
    let head = format!(
        "AlertId={} Time={} Kind={} JobId={} ServiceId={}",
        a.id,
        fmt_time(a.time),
        a.kind,
        a.job_id.map_or_else(|| "(null)".to_string(), |j| j.to_string()),
        a.service_id.map_or_else(|| "(null)".to_string(), |s| s.to_string())
    );
    if one_liner {
        format!("{head} Message={}\n", a.message)
    } else {
        format!("{head}\n   Message={}\n\n", a.message)
    }
}

/// `scontrol show alerts` (Flotilla): the scheduler's alerts and pages, oldest first.
pub fn show_alerts(flags: ShowFlags, io: &mut Io<'_>) -> i32 {
    let Some(c) = ctl(io, "slurm_load_alerts") else { return 1 };
    match c.call(Request::QueryAlerts) {
        Ok(Response::Alerts(a)) if a.is_empty() => {
            io.out("No alerts in the system\n");
            0
        }
        Ok(Response::Alerts(a)) => {
            for x in &a {
                io.out(&alert_record(x, flags.one_liner));
            }
            0
        }
        Ok(_) => 1,
        Err(e) => {
            io.err(&format!("slurm_load_alerts error: {}\n", e.slurm().text));
            1
        }
    }
}

/// `show job [ID]`.
pub fn show_job(id: Option<&str>, flags: ShowFlags, io: &mut Io<'_>) -> i32 {
    let jobs = match id {
        Some(s) => match parse_job_ref(s) {
            Some(r) => vec![r],
            None => {
                io.err(&format!("slurm_load_jobs error: {}\n", strerror(ESLURM_INVALID_JOB_ID)));
                return 1;
            }
        },
        None => Vec::new(),
    };
    let Some(c) = ctl(io, "slurm_load_jobs") else { return 1 };
    let q = JobQuery {
        jobs: jobs.clone(),
        include_finished: true,
        ..JobQuery::default()
    };
    let mut list = match c.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("slurm_load_jobs error: {}\n", e.slurm().text));
            return 1;
        }
    };
    if list.is_empty() {
        if id.is_some() {
            io.err(&format!("slurm_load_jobs error: {}\n", strerror(ESLURM_INVALID_JOB_ID)));
            return 1;
        }
        io.out("No jobs in the system\n");
        return 0;
    }
    list.sort_by_key(|j| (j.array_job_id.unwrap_or(j.job_id), j.array_task_id, j.job_id));
    let now = common::now();
    let mut gpu_types = BTreeMap::new();
    if flags.details {
        if let Ok(Response::Nodes(nodes)) = c.call(Request::QueryNodes(Default::default())) {
            gpu_types = nodes.into_iter().filter_map(|n| Some((n.name, n.gpu_type?))).collect();
        }
    }
    // Flotilla's elastic lines (a controller that does not know the request answers with an
    // error: no lines).
    let ids: Vec<u64> = list.iter().map(|j| j.job_id).collect();
    let elastic: BTreeMap<u64, flotilla_proto::ElasticInfo> = match c.call(Request::QueryElastic { job_ids: ids }) {
        Ok(Response::Elastic(e)) => e.into_iter().map(|e| (e.job_id, e)).collect(),
        _ => BTreeMap::new(),
    };
    for j in &list {
        let mut lines = job_record(j, flags, now, &gpu_types);
        if let Some(e) = elastic.get(&j.job_id) {
            elastic_node_range(&mut lines, j, e);
            // Before the record's closing blank line.
            let at = lines.len().saturating_sub(1);
            lines.splice(at..at, elastic_lines(e));
        }
        if flags.one_liner {
            // Slurm joins the lines with one space, keeping their trailing blanks (golden
            // 0210 ends in `TresPerNode=gres:gpu:1 `: the record's last, empty line).
            let body: Vec<&str> = lines.iter().map(|l| l.trim_start()).collect();
            io.out(&format!("{}\n", body.join(" ")));
        } else {
            io.out(&format!("{}\n\n", lines.join("\n")));
        }
    }
    0
}

/// The node state as `scontrol show node` prints it (Slurm's `node_state_string_complete`):
/// the base state and its flags, `MIXED+DRAIN` where `sinfo` says `draining` (golden 0213),
/// `IDLE+DRAIN` where it says `drained`, `IDLE+FAIL` where it says `fail`.
pub fn node_state_complete(n: &NodeInfo) -> String {
    match n.state.as_str() {
        "DRAINING" => {
            let base = if n.cpus > 0 && n.cpus_alloc >= n.cpus { "ALLOCATED" } else { "MIXED" };
            format!("{base}+DRAIN")
        }
        "DRAINED" => "IDLE+DRAIN".into(),
        // The FAIL flag on the base state the allocations give (`IDLE+FAIL`, 0703).
        "FAIL" | "FAILING" => {
            let base = if n.cpus > 0 && n.cpus_alloc >= n.cpus {
                "ALLOCATED"
            } else if n.cpus_alloc > 0 || n.gpu_alloc_mask != 0 {
                "MIXED"
            } else {
                "IDLE"
            };
            format!("{base}+FAIL")
        }
        s => s.to_string(),
    }
}

/// `show partition [NAME]`.
pub fn show_partition(name: Option<&str>, flags: ShowFlags, io: &mut Io<'_>) -> i32 {
    let Some(c) = ctl(io, "slurm_load_partitions") else { return 1 };
    let parts: Vec<PartitionInfo> = match c.call(Request::QueryPartitions) {
        Ok(Response::Partitions(p)) => p,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("slurm_load_partitions error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let sel: Vec<&PartitionInfo> = parts.iter().filter(|p| name.is_none_or(|n| p.name == n)).collect();
    let states = common::partition_states(&c, &parts);
    if sel.is_empty() {
        match name {
            Some(n) => {
                io.out(&format!("Partition {n} not found\n"));
                return 1;
            }
            None => {
                io.out("No partitions in the system\n");
                return 0;
            }
        }
    }
    for p in sel {
        let mem: u64 = c
            .conf
            .nodes
            .iter()
            .filter(|n| flotilla_core::hostlist::expand(&p.nodes).unwrap_or_default().contains(&n.name))
            .map(|n| n.real_memory_mib)
            .sum();
        let lines = vec![
            format!("PartitionName={}", p.name),
            "   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL".into(),
            format!("   AllocNodes=ALL Default={} QoS=N/A", if p.default { "YES" } else { "NO" }),
            format!(
                "   DefaultTime={} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
                p.default_time_min.map_or_else(|| "NONE".into(), |m| mins2time_str(m as u32))
            ),
            format!(
                "   MaxNodes=UNLIMITED MaxTime={} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED",
                p.max_time_min.map_or_else(|| "UNLIMITED".into(), |m| mins2time_str(m as u32))
            ),
            format!("   Nodes={}", p.nodes),
            "   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO".into(),
            "   OverTimeLimit=NONE PreemptMode=OFF".into(),
            format!(
                "   State={} TotalCPUs={} TotalNodes={} SelectTypeParameters=NONE",
                p.state_word(&states),
                p.total_cpus,
                p.total_nodes
            ),
            "   JobDefaults=(null)".into(),
            "   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED".into(),
            format!(
                "   TRES=cpu={},mem={},node={},billing={}{}",
                p.total_cpus,
                jobfmt::mem_str(mem),
                p.total_nodes,
                p.total_cpus,
                if p.total_gpus > 0 { format!(",gres/gpu={}", p.total_gpus) } else { String::new() }
            ),
        ];
        if flags.one_liner {
            let body: Vec<String> = lines.iter().map(|l| l.trim().to_string()).collect();
            io.out(&format!("{}\n", body.join(" ")));
        } else {
            io.out(&format!("{}\n\n", lines.join("\n")));
        }
    }
    0
}

/// `show node [NAME]`.
pub fn show_node(name: Option<&str>, flags: ShowFlags, io: &mut Io<'_>) -> i32 {
    let Some(c) = ctl(io, "slurm_load_node") else { return 1 };
    let names = name.map(|n| flotilla_core::hostlist::expand(n).unwrap_or_else(|_| vec![n.to_string()])).unwrap_or_default();
    let nodes: Vec<NodeInfo> = match c.call(Request::QueryNodes(NodeQuery { names: names.clone() })) {
        Ok(Response::Nodes(n)) => n,
        // PrivateData=nodes refuses a user's node query (Access/permission denied).
        Ok(Response::Error(e)) => {
            io.err(&format!("slurm_load_node error: {}\n", e.text));
            return 1;
        }
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("slurm_load_node error: {}\n", e.slurm().text));
            return 1;
        }
    };
    if nodes.is_empty() {
        if let Some(n) = name {
            io.out(&format!("Node {n} not found\n"));
            return 1;
        }
    }
    let now = common::now();
    for n in &nodes {
        let conf = c.conf.nodes.iter().find(|x| x.name == n.name);
        let (cores, sockets, threads, boards, addr, port, weight, tmp_disk) = conf.map_or((0, 0, 1, 1, n.name.clone(), 0, 1, 0), |x| {
            (x.cores_per_socket, x.sockets, x.threads_per_core, x.boards, x.addr.clone(), x.port, x.weight, x.tmp_disk_mib)
        });
        let gres = conf.map_or_else(String::new, |x| x.gres.clone());
        let mut state = node_state_complete(n);
        if n.not_responding {
            state.push('*');
        }
        let gpus_used = n.gpu_alloc_mask.count_ones();
        let mut alloc_tres = Vec::new();
        if n.cpus_alloc > 0 {
            alloc_tres.push(format!("cpu={}", n.cpus_alloc));
        }
        if n.mem_alloc_mib > 0 {
            alloc_tres.push(format!("mem={}", jobfmt::mem_str(n.mem_alloc_mib)));
        }
        if gpus_used > 0 {
            alloc_tres.push(format!("gres/gpu={gpus_used}"));
        }
        let mut lines = vec![
            format!("NodeName={} Arch=x86_64 CoresPerSocket={cores} ", n.name),
            format!("   CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad=0.00", n.cpus_alloc, n.cpus, n.cpus),
            format!("   AvailableFeatures={}", crate::sinfo::features(n)),
            format!("   ActiveFeatures={}", crate::sinfo::shown(&n.features_act)),
            format!("   Gres={gres}"),
            format!("   NodeAddr={addr} NodeHostName={} Port={port} Version=22.05.8", n.name),
            // `OS=<sysname release version> `: Flotilla's nodes do not report their kernel.
            "   OS=Linux ".into(),
            format!(
                "   RealMemory={} AllocMem={} FreeMem=0 Sockets={sockets} Boards={boards}",
                n.mem_mib, n.mem_alloc_mib
            ),
            format!("   State={state} ThreadsPerCore={threads} TmpDisk={tmp_disk} Weight={weight} Owner=N/A MCS_label=N/A"),
            format!("   Partitions={} ", n.partitions.join(",")),
            format!("   BootTime={} SlurmdStartTime={}", fmt_time(now), fmt_time(now)),
            format!("   LastBusyTime={}", fmt_time(now)),
            format!(
                "   CfgTRES=cpu={},mem={},billing={}{}",
                n.cpus,
                jobfmt::mem_str(n.mem_mib),
                n.cpus,
                if n.gpus > 0 { format!(",gres/gpu={}", n.gpus) } else { String::new() }
            ),
            format!("   AllocTRES={}", alloc_tres.join(",")),
            "   CapWatts=n/a".into(),
            "   CurrentWatts=0 AveWatts=0".into(),
            "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s".into(),
        ];
        if let Some(r) = &n.reason {
            // Slurm's `slurm_sprint_node_table`: `Reason=TEXT [USER@TIME]` from the node's
            // `reason_uid` and `reason_time` (`Unknown` where not known).
            let who = n.reason_uid.map_or_else(|| "Unknown".into(), crate::common::user_name);
            let when = n.reason_time.map_or_else(|| "Unknown".into(), fmt_time);
            lines.push(format!("   Reason={r} [{who}@{when}]"));
        }
        if flags.one_liner {
            // Joined with one space, trailing blanks kept (golden 0036: `CoresPerSocket=32  CPUAlloc`).
            let body: Vec<&str> = lines.iter().map(|l| l.trim_start()).collect();
            io.out(&format!("{}\n", body.join(" ")));
        } else {
            io.out(&format!("{}\n\n", lines.join("\n")));
        }
    }
    0
}

/// `show topology`: from topology.conf, as Slurm's `topology/tree` prints it.
pub fn show_topology(io: &mut Io<'_>) -> i32 {
    let conf = match flotilla_conf::load(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("slurm_load_topo error: {e}\n"));
            return 1;
        }
    };
    let host = |names: &[String]| -> String { flotilla_core::hostlist::compress(names) };
    for p in &conf.pods {
        io.out(&format!("SwitchName={} Level=0 LinkSpeed=1 Nodes={}\n", p.name, host(&p.nodes)));
    }
    for s in &conf.switches {
        let mut nodes = Vec::new();
        for child in &s.switches {
            if let Some(p) = conf.pods.iter().find(|p| &p.name == child) {
                nodes.extend(p.nodes.iter().cloned());
            }
        }
        io.out(&format!(
            "SwitchName={} Level=1 LinkSpeed=1 Nodes={} Switches={}\n",
            s.name,
            host(&nodes),
            s.switches_expr
        ));
    }
    0
}

/// `scontrol show step[s] [ID]`'s operand as Slurm 22.05's `scontrol_print_step` reads it:
/// the job id with `strtol` (no digits: 0, every job), then `_TASK` (an array task) or `.STEP`
/// (`strtol` again, so `.batch` is step 0); `(job, task, step)`.
pub fn step_operand(s: &str) -> (u32, Option<u32>, Option<u32>) {
    fn strtol(s: &str) -> (u32, &str) {
        let t = s.trim_start();
        let (neg, digits) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return (0, s);
        }
        let v = digits[..n].parse::<i64>().unwrap_or(i64::MAX);
        // `(uint32_t)strtol(...)`: a long cut to its low 32 bits.
        let v = if neg { v.wrapping_neg() } else { v };
        (v as u32, &digits[n..])
    }
    let (job, rest) = strtol(s);
    if let Some(t) = rest.strip_prefix('_') {
        (job, Some(strtol(t).0), None)
    } else if let Some(st) = rest.strip_prefix('.') {
        (job, None, Some(strtol(st).0))
    } else {
        (job, None, None)
    }
}

/// One step as `scontrol show step` prints it (Slurm 22.05 `job_step_info.c`
/// `slurm_sprint_job_step_info`): `id` its `StepId=` (`J.S`, `A_T.S`, `J.batch`).
struct StepShown<'a> {
    id: String,
    uid: u32,
    start: i64,
    partition: &'a str,
    nodes: &'a str,
    cpus: u32,
    ntasks: u32,
    name: &'a str,
    /// `None`: the batch step (`TRES=(null)`, no `Dist=`, no srun).
    srun: Option<&'a flotilla_proto::step::StepInfo>,
}

fn sprint_step(s: &StepShown<'_>, one_liner: bool) -> String {
    let end = if one_liner { " " } else { "\n   " };
    let nnodes = flotilla_core::hostlist::expand(s.nodes).map_or(0, |v| v.len());
    let mut out = format!("StepId={} UserId={} StartTime={} TimeLimit=UNLIMITED", s.id, s.uid, fmt_time(s.start));
    out.push_str(&format!("{end}State=RUNNING Partition={} NodeList={}", s.partition, s.nodes));
    out.push_str(&format!("{end}Nodes={nnodes} CPUs={} Tasks={} Name={} Network=(null)", s.cpus, s.ntasks, s.name));
    match s.srun {
        Some(st) => {
            let mut tres = format!("cpu={},mem={},node={nnodes}", st.cpus, jobfmt::mem_str(st.mem_mib));
            if st.gpus > 0 {
                tres.push_str(&format!(",gres/gpu={}", st.gpus));
            }
            // srun's default distribution (22.05 `opt.c`/`step_launch`): cyclic when there are no
            // more tasks than nodes, block otherwise.
            let dist = if st.ntasks as usize <= nnodes { "Cyclic" } else { "Block" };
            out.push_str(&format!("{end}TRES={tres}{end}ResvPorts=(null){end}CPUFreqReq=Default Dist={dist}"));
            out.push_str(&format!("{end}SrunHost:Pid={}:{}", st.srun_host, st.srun_pid));
        }
        None => out.push_str(&format!("{end}TRES=(null){end}ResvPorts=(null){end}CPUFreqReq=Default{end}SrunHost:Pid=(null):0")),
    }
    out.push_str(if one_liner { "\n" } else { "\n\n" });
    out
}

/// `scontrol show step[s] [ID]` (Slurm 22.05 `info_job.c` `scontrol_print_step`): the running
/// steps of the jobs `ID` names ([`step_operand`]; none or a job id of 0: every job), each
/// job's batch step first, then its srun steps; `Job step J.S not found` (stdout, exit 1)
/// when a job named has none that match, `slurm_get_job_steps error: Invalid job id
/// specified` when it is not known, `No job steps in the system` when nothing runs.
pub fn show_step(id: Option<&str>, one_liner: bool, io: &mut Io<'_>) -> i32 {
    let (job, task, step) = id.map_or((0, None, None), step_operand);
    let Some(c) = ctl(io, "slurm_get_job_steps") else { return 1 };
    let refs = if job == 0 { Vec::new() } else { vec![JobRef::id(u64::from(job))] };
    let q = JobQuery { jobs: refs.clone(), include_finished: true, ..JobQuery::default() };
    let fail = |io: &mut Io<'_>, e: CtlError| {
        io.err(&format!("slurm_get_job_steps error: {}\n", e.slurm().text));
        1
    };
    let mut jobs = match c.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => return fail(io, e),
    };
    if job != 0 {
        // The record of that id (an array's tasks have their own).
        jobs.retain(|j| j.job_id == u64::from(job));
        if jobs.is_empty() {
            io.err(&format!("slurm_get_job_steps error: {}\n", strerror(ESLURM_INVALID_JOB_ID)));
            return 1;
        }
    }
    let steps = match c.call(Request::QuerySteps(JobQuery { jobs: refs, ..JobQuery::default() })) {
        Ok(Response::Steps(s)) => s,
        Ok(_) => Vec::new(),
        Err(e) => return fail(io, e),
    };
    jobs.retain(|j| j.state == Some(JobStateWire::Running) && task.is_none_or(|t| j.array_task_id == Some(t)));
    jobs.sort_by_key(|j| j.job_id);
    let mut out = String::new();
    for j in &jobs {
        let prefix = match (j.array_job_id, j.array_task_id) {
            (Some(a), Some(t)) => format!("{a}_{t}"),
            _ => j.job_id.to_string(),
        };
        // `.batch` reads as step 0 (strtol), so the batch step shows only without a step.
        if step.is_none() && !j.batch_host.is_empty() {
            let b = StepShown {
                id: format!("{prefix}.batch"),
                uid: j.uid,
                start: j.start_time.unwrap_or(0),
                partition: &j.partition,
                nodes: &j.batch_host,
                cpus: 0,
                ntasks: 1,
                name: "batch",
                srun: None,
            };
            out.push_str(&sprint_step(&b, one_liner));
        }
        let mut mine: Vec<&flotilla_proto::step::StepInfo> =
            steps.iter().filter(|s| s.job_id == j.job_id && step.is_none_or(|n| s.step_id == n)).collect();
        mine.sort_by_key(|s| s.step_id);
        for st in mine {
            let s = StepShown {
                id: format!("{prefix}.{}", st.step_id),
                uid: st.uid,
                start: st.start_time,
                partition: &st.partition,
                nodes: &st.nodes,
                cpus: st.cpus,
                ntasks: st.ntasks,
                name: &st.name,
                srun: Some(st),
            };
            out.push_str(&sprint_step(&s, one_liner));
        }
    }
    if out.is_empty() {
        if id.is_some() {
            // `log_build_step_id_str` without the job: nothing for no step, `Invalid` for job 0.
            let step = if job == 0 { "Invalid".to_string() } else { step.map_or(String::new(), |s| s.to_string()) };
            match task {
                Some(t) => io.out(&format!("Job step {job}_{t}.{step} not found\n")),
                None => io.out(&format!("Job step {job}.{step} not found\n")),
            }
            return 1;
        }
        io.out("No job steps in the system\n");
        return 0;
    }
    io.out(&out);
    0
}

#[cfg(test)]
mod flotilla_field_tests {
    use super::*;

    /// A step's record as goldens-extra 0343 shows it (one node count for `Nodes=`, `node=`
    /// and the distribution), and the batch step's.
    #[test]
    fn step_records_print_as_slurm_s() {
        let st = flotilla_proto::step::StepInfo {
            job_id: 7,
            step_id: 0,
            name: "stp".into(),
            partition: "batch".into(),
            start_time: 0,
            nodes: "gpu[01-02]".into(),
            ntasks: 3,
            uid: 2001,
            cpus: 3,
            mem_mib: 3072,
            srun_host: "vm".into(),
            srun_pid: 42,
            ..Default::default()
        };
        let shown = |st: &flotilla_proto::step::StepInfo, srun: bool| StepShown {
            id: "7.0".into(),
            uid: 2001,
            start: 0,
            partition: "batch",
            nodes: if srun { "gpu[01-02]" } else { "gpu01" },
            cpus: if srun { st.cpus } else { 0 },
            ntasks: if srun { st.ntasks } else { 1 },
            name: if srun { "stp" } else { "batch" },
            srun: None,
        };
        let mut s = shown(&st, true);
        s.srun = Some(&st);
        let out = sprint_step(&s, true);
        assert!(out.contains(" Nodes=2 CPUs=3 Tasks=3 Name=stp Network=(null) TRES=cpu=3,mem=3G,node=2 "), "{out}");
        assert!(out.ends_with(" CPUFreqReq=Default Dist=Block SrunHost:Pid=vm:42\n"), "{out}");
        let one = flotilla_proto::step::StepInfo { nodes: "gpu01".into(), ntasks: 1, ..st.clone() };
        let mut s = shown(&one, true);
        s.nodes = "gpu01";
        s.srun = Some(&one);
        assert!(sprint_step(&s, true).contains("node=1 ResvPorts=(null) CPUFreqReq=Default Dist=Cyclic "));
        let batch = sprint_step(&shown(&st, false), false);
        assert!(batch.ends_with("\n   TRES=(null)\n   ResvPorts=(null)\n   CPUFreqReq=Default\n   SrunHost:Pid=(null):0\n\n"), "{batch}");
    }

    /// `scontrol_print_step`'s `strtol` reading: `.batch` is step 0, no digits job 0.
    #[test]
    fn step_operands_read_as_strtol_does() {
        assert_eq!(step_operand("12.3"), (12, None, Some(3)));
        assert_eq!(step_operand("12.batch"), (12, None, Some(0)));
        assert_eq!(step_operand("12"), (12, None, None));
        assert_eq!(step_operand("12_4"), (12, Some(4), None));
        assert_eq!(step_operand("abc"), (0, None, None));
        assert_eq!(step_operand("-1"), (u32::MAX, None, None));
        assert_eq!(step_operand("12x.3"), (12, None, None));
    }

    /// scontrol's `parse_requeue_flags`: `State=` any case, the value a prefix match of
    /// `specialexit` or `se`; anything else is a job id.
    #[test]
    fn special_exit_flag_forms() {
        for a in ["State=SpecialExit", "state=se", "STATE=SE", "State=SEx", "State=specialexitnow"] {
            assert!(is_special_exit_flag(a), "{a}");
        }
        for a in ["State=S", "State=Special", "State=", "SpecialExit", "12", "Stat=SE", "St\u{e9}te=SE"] {
            assert!(!is_special_exit_flag(a), "{a}");
        }
    }
    use flotilla_core::time::days_from_civil;

    /// Array-errors answers name tasks as Slurm's `bit_fmt` does.
    #[test]
    fn task_ranges_as_bit_fmt() {
        assert_eq!(task_ranges(&[2, 0, 1]), "0-2");
        assert_eq!(task_ranges(&[5, 1, 3, 2]), "1-3,5");
        assert_eq!(task_ranges(&[7]), "7");
    }

    /// scontrol's job list: commas outside brackets separate (`_is_job_id`), so the array
    /// tasks `12_[0,2,5]` are one reference (goldens-extra 0627).
    #[test]
    fn job_list_commas_inside_brackets() {
        let refs = ids_of(&["12_[0,2,5],13".to_string(), "14_1".to_string()]).expect("valid");
        assert_eq!(
            refs,
            vec![
                JobRef { job_id: 12, tasks: Some(vec![0, 2, 5]) },
                JobRef::id(13),
                JobRef { job_id: 14, tasks: Some(vec![1]) },
            ]
        );
    }

    #[test]
    fn flotilla_line_only_when_it_says_something() {
        let mut j = JobInfo {
            topology: "any".into(),
            ..JobInfo::default()
        };
        assert_eq!(flotilla_line(&j), None, "a Slurm-only job prints as Slurm prints it");
        j.preempt_count = 2;
        j.last_checkpoint_ack = Some(days_from_civil(2026, 11, 29) * 86_400 + 3600);
        assert_eq!(
            flotilla_line(&j).as_deref(),
            Some("   Topology=any Preemptible=NO PreemptCount=2 LastCheckpointAck=2026-11-29T01:00:00 Borrowed=NO")
        );
        let r = JobInfo {
            topology: "node".into(),
            service_id: Some(3),
            borrowed: true,
            preemptible: true,
            ..JobInfo::default()
        };
        assert_eq!(
            flotilla_line(&r).as_deref(),
            Some("   Topology=node Preemptible=YES PreemptCount=0 LastCheckpointAck=None Borrowed=YES ServiceId=3")
        );
    }

    #[test]
    fn elastic_lines_show_range_grown_nodes_and_history() {
        let mut e = flotilla_proto::ElasticInfo { job_id: 3, unit: "nodes".into(), min: 2, max: 8, step: 2, ..Default::default() };
        assert_eq!(
            elastic_lines(&e),
            vec!["   Elastic=nodes MinSize=2 MaxSize=8 Step=2 Signal=None GrownNodes=(null)".to_string(), "   ResizeHistory=(null)".into()]
        );
        e.signal = Some(10);
        e.grown_nodes = "gpu[03-04]".into();
        e.resizes = vec![
            flotilla_proto::ResizeInfo { time: 0, change: "grow".into(), nodes: "gpu[03-04]".into(), num_nodes: 4 },
            flotilla_proto::ResizeInfo { time: 60, change: "lost".into(), nodes: "gpu04".into(), num_nodes: 3 },
        ];
        let l = elastic_lines(&e);
        assert!(l[0].ends_with("Signal=10 GrownNodes=gpu[03-04]"), "{l:?}");
        assert_eq!(l[1], format!("   ResizeHistory={}:grow:gpu[03-04]:4,{}:lost:gpu04:3", fmt_time(0), fmt_time(60)));
        // A rigid job shrunk by NumNodes=: only its history.
        let r = flotilla_proto::ElasticInfo { job_id: 4, resizes: e.resizes.clone(), ..Default::default() };
        assert_eq!(elastic_lines(&r).len(), 1);
    }

    /// A pending node-granular elastic job shows `NumNodes=MIN-MAX` (Slurm's pending range);
    /// running, its current count; a GPU-granular one its node count either way.
    #[test]
    fn num_nodes_shows_a_pending_elastic_range() {
        let mut j = JobInfo { job_id: 3, num_nodes: 2, num_tasks: 1, cpus_per_task: 1, state: Some(JobStateWire::Pending), ..JobInfo::default() };
        let e = flotilla_proto::ElasticInfo { job_id: 3, unit: "nodes".into(), min: 2, max: 8, step: 1, ..Default::default() };
        let num_nodes = |j: &JobInfo, e: &flotilla_proto::ElasticInfo| {
            let mut lines = job_record(j, ShowFlags::default(), 0, &BTreeMap::new());
            elastic_node_range(&mut lines, j, e);
            lines.into_iter().find(|l| l.starts_with("   NumNodes=")).unwrap()
        };
        assert_eq!(num_nodes(&j, &e), "   NumNodes=2-8 NumCPUs=0 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*");
        j.state = Some(JobStateWire::Running);
        j.num_nodes = 5;
        assert_eq!(num_nodes(&j, &e), "   NumNodes=5 NumCPUs=0 NumTasks=5 CPUs/Task=1 ReqB:S:C:T=0:0:*:*");
        j.state = Some(JobStateWire::Pending);
        j.num_nodes = 1;
        let g = flotilla_proto::ElasticInfo { unit: "gpus".into(), min: 4, max: 16, ..e };
        assert!(num_nodes(&j, &g).starts_with("   NumNodes=1 NumCPUs=0 "));
    }

    #[test]
    fn alert_records() {
        let a = flotilla_proto::AlertInfo {
            id: 4,
            time: days_from_civil(2026, 11, 29) * 86_400,
            kind: "Page".into(),
            job_id: None,
            service_id: Some(2),
            message: "service 2 (llm) wants 3 replicas".into(),
        };
        assert_eq!(
            alert_record(&a, false),
            "AlertId=4 Time=2026-11-29T00:00:00 Kind=Page JobId=(null) ServiceId=2\n   Message=service 2 (llm) wants 3 replicas\n\n"
        );
        assert_eq!(
            alert_record(&a, true),
            "AlertId=4 Time=2026-11-29T00:00:00 Kind=Page JobId=(null) ServiceId=2 Message=service 2 (llm) wants 3 replicas\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scontrol's job lists as `_is_job_id` reads them: a word, a stray `-`, a second `_` or
    /// `+` in one reference, or unbalanced brackets make the whole list invalid; ranges of ids
    /// are every id (goldens-extra 0927, 0929).
    /// `State=` words as `scontrol_update_node` takes them (goldens-extra 0728).
    #[test]
    fn node_state_words() {
        for w in ["resume", "RES", "drain", "undrain", "idle", "down", "noresp", "power_down", "POWER_DOWN_ASAP", "fut", "?", "mixed"] {
            assert!(node_state_word_ok(w), "{w}");
        }
        for w in ["sideways", "re", "dr", "power", "resumed", "", "idl3"] {
            assert!(!node_state_word_ok(w), "{w}");
        }
    }

    #[test]
    fn job_lists_as_slurm_reads_them() {
        for ok in ["12", "12_[0,2,5]", "12,13", "12 13", "[12-14]", "12_3-5", "[12,14]_1", "12+1"] {
            assert!(is_job_list(ok), "{ok}");
        }
        for bad in ["12x", "1-3", "12__3", "[12", "12+1+2", "12;13", "[12-14] 1x"] {
            assert!(!is_job_list(bad), "{bad}");
        }
        let ids = |s: &str| ids_of(&[s.to_string()]).map(|v| v.iter().map(|r| (r.job_id, r.tasks.clone())).collect::<Vec<_>>());
        assert_eq!(ids("[12-14]"), Ok(vec![(12, None), (13, None), (14, None)]));
        assert_eq!(ids("[12,14]_1 15"), Ok(vec![(12, Some(vec![1])), (14, Some(vec![1])), (15, None)]));
        assert_eq!(ids("12,x"), Err("12,x".to_string()), "named whole");
    }

    #[test]
    fn node_counts_as_get_resource_arg_range_reads_them() {
        assert_eq!(node_count_arg("3"), Ok((3, None)));
        assert_eq!(node_count_arg("2-4"), Ok((2, Some(4))));
        assert_eq!(node_count_arg("2-5k"), Ok((2, Some(5120))));
        assert_eq!(node_count_arg("1m"), Ok((1_048_576, None)));
        assert_eq!(node_count_arg("0"), Ok((0, None)));
        assert_eq!(node_count_arg("4-2"), Ok((4, Some(2))), "the controller refuses it");
        assert_eq!(node_count_arg(""), Ok((1, Some(i32::MAX as u32))));
        assert_eq!(node_count_arg("*"), Ok((1, Some(i32::MAX as u32))));
        for bad in ["abc", "2-", "2-0", "-1", "3x", "2-4x", "1-abc"] {
            assert_eq!(
                node_count_arg(bad),
                Err(format!("scontrol: error: Invalid numeric value \"{bad}\" for requested node count.\n")),
                "{bad}"
            );
        }
        assert_eq!(node_count_arg("3m"), Ok((3_145_728, None)));
        assert!(node_count_arg("4096m").unwrap_err().contains("Numeric argument (4294967296) to big"));
    }

    #[test]
    fn node_states_with_flags() {
        let n = |state: &str, alloc: u32| NodeInfo {
            state: state.into(),
            cpus: 64,
            cpus_alloc: alloc,
            ..NodeInfo::default()
        };
        // Golden 0213: draining with 1 of 64 CPUs in use.
        assert_eq!(node_state_complete(&n("DRAINING", 1)), "MIXED+DRAIN");
        assert_eq!(node_state_complete(&n("DRAINING", 64)), "ALLOCATED+DRAIN");
        // Goldens-extra 0703: a failed idle node; FAILING only with every CPU allocated.
        assert_eq!(node_state_complete(&n("FAIL", 0)), "IDLE+FAIL");
        assert_eq!(node_state_complete(&n("FAIL", 2)), "MIXED+FAIL");
        assert_eq!(node_state_complete(&n("FAILING", 64)), "ALLOCATED+FAIL");
        assert_eq!(node_state_complete(&n("DRAINED", 0)), "IDLE+DRAIN");
        assert_eq!(node_state_complete(&n("MIXED", 2)), "MIXED");
    }

    #[test]
    fn pending_job_lists_planned_nodes_on_the_nodelist_line() {
        let j = JobInfo {
            job_id: 57,
            state: Some(JobStateWire::Pending),
            sched_nodes: "gpu02".into(),
            tres_per_job: Some("gres:gpu:4".into()),
            ..JobInfo::default()
        };
        let lines = job_record(&j, ShowFlags::default(), 0, &BTreeMap::new());
        assert!(lines.contains(&"   NodeList= SchedNodeList=gpu02".to_string()), "{lines:#?}");
        assert!(lines.contains(&"   TresPerJob=gres:gpu:4".to_string()), "{lines:#?}");
        assert!(!lines.iter().any(|l| l.starts_with("   SchedNodeList")));
    }

    /// A free-text reason is printed with underscores for blanks, as Slurm 22.05's scontrol
    /// prints `Reason=job_requeued_in_held_state`.
    #[test]
    fn free_text_reason_has_underscores() {
        let j = JobInfo {
            job_id: 58,
            state: Some(JobStateWire::Pending),
            reason: "job requeued in held state".into(),
            ..JobInfo::default()
        };
        let lines = job_record(&j, ShowFlags::default(), 0, &BTreeMap::new());
        assert!(lines.iter().any(|l| l.contains(" Reason=job_requeued_in_held_state ")), "{lines:#?}");
    }

    #[test]
    fn memory_tasks_and_eligibility_as_asked() {
        let mut j = JobInfo {
            job_id: 39,
            state: Some(JobStateWire::Running),
            submit_time: 1_795_945_358,
            num_nodes: 1,
            cpus_per_task: 2,
            mem_per_node_mib: 4096,
            ..JobInfo::default()
        };
        let has = |j: &JobInfo, want: &str| job_record(j, ShowFlags::default(), 0, &BTreeMap::new()).iter().any(|l| l.contains(want));
        // 0127 --mem=4G -c 2: per node.
        assert!(has(&j, "MinCPUsNode=2 MinMemoryNode=4G MinTmpDiskNode=0"));
        j.mem_per_cpu_mib = Some(1024);
        assert!(has(&j, "MinCPUsNode=2 MinMemoryCPU=1G MinTmpDiskNode=0"));
        // 0124: no -n, two nodes: two tasks.
        j.num_nodes = 2;
        j.num_tasks = 1;
        assert!(has(&j, "NumNodes=2 NumCPUs=0 NumTasks=2 "));
        // 0211: waiting on a dependency: not eligible yet.
        j.state = Some(JobStateWire::Pending);
        j.reason = "Dependency".into();
        assert!(has(&j, "EligibleTime=Unknown") && has(&j, "AccrueTime=Unknown"));
        j.reason = "Priority".into();
        assert!(!has(&j, "EligibleTime=Unknown"));
        // Held: Unknown; held after a requeue (a begin time): that time, twice.
        j.held = true;
        assert!(has(&j, "EligibleTime=Unknown") && has(&j, "AccrueTime=Unknown"));
        j.eligible_time = Some(j.submit_time + 121);
        let when = fmt_time(j.submit_time + 121);
        assert!(has(&j, &format!("EligibleTime={when}")) && has(&j, &format!("AccrueTime={when}")));
    }
}

/// `scontrol update jobid=N TimeLimit=V` as Slurm 22.05's scontrol reads it
/// (`src/scontrol/update_job.c` `scontrol_update_job`): `+V`/`-V` add to or take from the
/// job's current limit, which scontrol looks up first (`_get_job_time`); a decrement larger
/// than the limit is refused there. Errors: Slurm's messages, exit status 1.
fn time_limit_change(io: &mut Io<'_>, job: &JobRef, v: &str) -> Result<TimeLimitWire, i32> {
    use flotilla_core::time::{parse_time_limit, TimeLimit};
    let (sign, rest) = match v.as_bytes().first() {
        Some(b'+') => (Some('+'), &v[1..]),
        Some(b'-') => (Some('-'), &v[1..]),
        _ => (None, v),
    };
    if sign.is_some() && rest.starts_with(['+', '-', '=']) {
        io.err("scontrol: error: Invalid syntax, variations of +=- are not accepted.\n");
        return Err(1);
    }
    let m = match parse_time_limit(rest) {
        Ok(TimeLimit::Minutes(m)) => m,
        Ok(TimeLimit::Unlimited) if sign.is_none() => return Ok(TimeLimitWire::Unlimited),
        _ => {
            io.err("scontrol: error: Invalid TimeLimit value\n");
            return Err(1);
        }
    };
    let Some(sign) = sign else { return Ok(TimeLimitWire::Minutes(m)) };
    let Some(c) = ctl(io, "slurm_load_jobs") else { return Err(1) };
    let q = JobQuery { jobs: vec![job.clone()], include_finished: true, ..JobQuery::default() };
    let cur = match c.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) if j.len() == 1 => match j[0].time_limit {
            Some(TimeLimitWire::Minutes(c)) => c,
            _ => u32::MAX - 1,
        },
        Ok(Response::Jobs(j)) if j.len() > 1 => {
            io.err("scontrol: error: TimeLimit increment/decrement not supported for job arrays\n");
            return Err(1);
        }
        _ => {
            io.err(&format!("scontrol: error: Job ID {} not found\n", job.job_id));
            return Err(1);
        }
    };
    if sign == '+' {
        return Ok(TimeLimitWire::Minutes(cur.saturating_add(m)));
    }
    if m > cur {
        io.err(&format!("scontrol: error: TimeLimit decrement larger than current time limit ({m} > {cur})\n"));
        return Err(1);
    }
    Ok(TimeLimitWire::Minutes(cur - m))
}
