//! Job dependencies (`sbatch -d`), parsed and evaluated by the controller; the core only sees
//! `dependency_pending`.
//!
//! The grammar and the canonical display are Slurm 22.05's (`job_scheduler.c`:
//! `update_job_dependency`, `_parse_dependency_jobid_new`, `_parse_dependency_jobid_old`,
//! `_depend_list2str`): `type:job_id[:job_id...]` items joined by `,` (all must be satisfied)
//! or `?` (any one suffices; one `?` anywhere makes every separator `?`); types `after`,
//! `afterany`, `afterok`, `afternotok`, `aftercorr` (case-insensitive), `singleton`, and the
//! old form of bare job ids (`afterany`). A job id is `N`, `N_T` (one array task) or `N_*`
//! (the whole array; a bare id of an array job means the same); `+minutes` after an id
//! applies to it and to the ids after it in the same item; an `(unfulfilled)`/`(failed)`
//! suffix as Slurm prints it is accepted. `expand:` is refused as not supported. A job id the
//! controller does not know is accepted (Slurm: the job may have been purged) and counts as
//! finished successfully when the dependency is evaluated.

/// Kind of one dependency item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    /// `after`: the job has started (or ended).
    After,
    /// `afterany`: the job has ended.
    AfterAny,
    /// `afterok`: the job ended with exit 0.
    AfterOk,
    /// `afternotok`: the job ended in failure.
    AfterNotOk,
    /// `aftercorr`: evaluated as `afterany` of the whole array (Slurm pairs tasks).
    AfterCorr,
    /// `singleton`: no earlier job of the same user and name is active.
    Singleton,
    /// `afterburstbuffer`: the job has ended and its burst buffer is staged out; Flotilla has
    /// no burst buffers (Slurm without a burst buffer plugin: staged out at once), so this is
    /// `afterany`.
    AfterBurstBuffer,
}

impl DepKind {
    /// Slurm's name (`_depend_type2str`).
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterOk => "afterok",
            DepKind::AfterNotOk => "afternotok",
            DepKind::AfterCorr => "aftercorr",
            DepKind::Singleton => "singleton",
            DepKind::AfterBurstBuffer => "afterburstbuffer",
        }
    }
}

/// Which part of a job a dependency names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepTask {
    /// The job itself (`N`).
    Job,
    /// One array task (`N_T`).
    One(u32),
    /// Every task of an array (`N_*`).
    All,
}

/// One dependency on one job (Slurm's `depend_spec_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepItem {
    /// The test.
    pub kind: DepKind,
    /// The job (0 for `singleton`).
    pub job: u64,
    /// The job, one of its tasks or all of them.
    pub task: DepTask,
    /// `+minutes` (for `after`: minutes after the start).
    pub minutes: u32,
}

/// A parsed dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// `?`-separated: any item suffices.
    pub any: bool,
    /// The items in the order given, duplicates dropped.
    pub items: Vec<DepItem>,
}

/// Status of a job a dependency refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepTarget {
    /// Unknown (purged or never existed): counts as ended successfully.
    Unknown,
    /// Not started.
    Pending,
    /// Started, not ended.
    Running,
    /// Ended; `ok` = completed with exit 0.
    Ended {
        /// Success.
        ok: bool,
    },
}

/// Result of evaluating a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepStatus {
    /// Satisfied: the job may run.
    Satisfied,
    /// Not yet.
    Waiting,
    /// Can never be satisfied (`DependencyNeverSatisfied`).
    Never,
}

/// Why a dependency string is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepError {
    /// `ESLURM_DEPENDENCY`: "Job dependency problem".
    Invalid,
    /// `ESLURM_NOT_SUPPORTED` (`expand:` without job expansion).
    NotSupported,
}

/// A job id as `strtol` into Slurm's `uint32_t job_id`, then `_N`/`_*`.
fn job_and_task(s: &str) -> (u64, DepTask, &str) {
    let (id, rest) = flotilla_core::cnum::strtol(s);
    let job = u64::from(id as u32);
    match rest.strip_prefix('_') {
        Some(r) if r.starts_with('*') => (job, DepTask::All, &r[1..]),
        Some(r) => {
            let (t, r) = flotilla_core::cnum::strtol(r);
            (job, DepTask::One(t as u32), r)
        }
        None => (job, DepTask::Job, rest),
    }
}

/// Task lists in brackets written out as single tasks, as Slurm 22.05's `_xlate_array_dep`
/// does before it parses a dependency: `after:123_[4-5,7]` is `after:123_4:123_5:123_7`. The
/// job id is the run of digits just before `_[`; the list is numbers and `a-b` ranges joined
/// by `,` (tasks in ascending order, each once). `None` for a list that is not closed, is
/// empty, or does not read (the dependency is then refused).
fn xlate_array_dep(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut digits_from: Option<usize> = None;
    let mut i = 0;
    let b = s.as_bytes();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() {
            digits_from.get_or_insert(i);
            out.push(c as char);
            i += 1;
        } else if c == b'_' && b.get(i + 1) == Some(&b'[') && digits_from.is_some() {
            let job = &s[digits_from.take()?..i];
            let close = s[i + 2..].find(']')? + i + 2;
            let mut tasks = std::collections::BTreeSet::new();
            for item in s[i + 2..close].split(',') {
                let (a, z) = item.split_once('-').unwrap_or((item, item));
                let (a, z): (u32, u32) = (a.parse().ok()?, z.parse().ok()?);
                if a > z {
                    return None;
                }
                tasks.extend(a..=z);
            }
            let mut first = true;
            for t in tasks {
                if first {
                    out.push_str(&format!("_{t}"));
                    first = false;
                } else {
                    out.push_str(&format!(":{job}_{t}"));
                }
            }
            if first {
                return None;
            }
            i = close + 1;
        } else {
            digits_from = None;
            out.push(c as char);
            i += 1;
        }
    }
    Some(out)
}

/// Slurm's `_parse_depend_state`: an optional `(state)` suffix, which must be closed.
fn skip_state(s: &str) -> Result<&str, DepError> {
    match s.strip_prefix('(') {
        Some(r) => r.find(')').map(|i| &r[i + 1..]).ok_or(DepError::Invalid),
        None => Ok(s),
    }
}

/// Parses a dependency string as Slurm 22.05's `update_job_dependency` does (see the module
/// doc). An empty string or `0` clears a dependency: `Ok(None)`.
pub fn parse(s: &str) -> Result<Option<Dependency>, DepError> {
    if s.is_empty() || s == "0" {
        return Ok(None);
    }
    let expanded;
    let s = if s.contains("_[") {
        expanded = xlate_array_dep(s).ok_or(DepError::Invalid)?;
        expanded.as_str()
    } else {
        s
    };
    let mut items: Vec<DepItem> = Vec::new();
    let mut any = false;
    let push = |items: &mut Vec<DepItem>, it: DepItem| {
        if !items.iter().any(|o| o.kind == it.kind && o.job == it.job && o.task == it.task) {
            items.push(it);
        }
    };
    let mut tok = s;
    loop {
        if tok.get(..9).is_some_and(|w| w.eq_ignore_ascii_case("singleton")) {
            tok = skip_state(&tok[9..])?;
            push(&mut items, DepItem { kind: DepKind::Singleton, job: 0, task: DepTask::Job, minutes: 0 });
            match tok.as_bytes().first() {
                Some(b',') => tok = &tok[1..],
                Some(b'?') => {
                    tok = &tok[1..];
                    any = true;
                }
                None => break,
                Some(_) => return Err(DepError::Invalid),
            }
            continue;
        }
        let colon = tok.find(':');
        if colon.is_none() && tok.starts_with(|c: char| c.is_ascii_digit()) {
            // The old form: a bare job id means `afterany`.
            let (job, task, rest) = job_and_task(tok);
            if job == 0 || !(rest.is_empty() || rest.starts_with(',')) {
                return Err(DepError::Invalid);
            }
            push(&mut items, DepItem { kind: DepKind::AfterAny, job, task, minutes: 0 });
            match rest.strip_prefix(',') {
                Some(r) => {
                    tok = r;
                    continue;
                }
                None => break,
            }
        }
        let Some(colon) = colon else { return Err(DepError::Invalid) };
        let word = tok[..colon].to_ascii_lowercase();
        let kind = match word.as_str() {
            "afternotok" => DepKind::AfterNotOk,
            "aftercorr" => DepKind::AfterCorr,
            "afterany" => DepKind::AfterAny,
            "afterok" => DepKind::AfterOk,
            // Slurm compares only the first 11 characters of `afterburstbuffer:`.
            w if w.starts_with("afterburstb") => DepKind::AfterBurstBuffer,
            "after" => DepKind::After,
            "expand" => return Err(DepError::NotSupported),
            _ => return Err(DepError::Invalid),
        };
        // `_parse_dependency_jobid_new`: ids separated by `:`; the minutes carry on.
        let mut rest = &tok[colon + 1..];
        let mut minutes = 0u32;
        loop {
            let (job, task, r) = job_and_task(rest);
            let next_ok = r.is_empty() || r.starts_with([',', '?', ':', '+', '(']);
            if job == 0 || !next_ok {
                return Err(DepError::Invalid);
            }
            let mut r = r;
            if let Some(t) = r.strip_prefix('+') {
                let (m, t) = flotilla_core::cnum::strtol(t);
                if m <= 0 {
                    return Err(DepError::Invalid);
                }
                minutes = u32::try_from(m).unwrap_or(u32::MAX);
                r = t;
            }
            r = skip_state(r)?;
            push(&mut items, DepItem { kind, job, task, minutes });
            match r.strip_prefix(':') {
                Some(t) => rest = t,
                None => {
                    rest = r;
                    break;
                }
            }
        }
        match rest.as_bytes().first() {
            Some(b',') => tok = &rest[1..],
            Some(b'?') => {
                tok = &rest[1..];
                any = true;
            }
            _ => break,
        }
    }
    Ok(Some(Dependency { any, items }))
}

impl Dependency {
    /// Evaluates against the current job table. `target` gives the status of a job (an array
    /// job id without a task means all of its tasks); `singleton_blocked` says whether an
    /// earlier job of the same user and name is active.
    pub fn evaluate(&self, target: &dyn Fn(u64, Option<u32>) -> DepTarget, singleton_blocked: bool) -> DepStatus {
        let mut statuses = Vec::new();
        for it in &self.items {
            if it.kind == DepKind::Singleton {
                statuses.push(if singleton_blocked { DepStatus::Waiting } else { DepStatus::Satisfied });
                continue;
            }
            let task = match it.task {
                DepTask::One(t) => Some(t),
                DepTask::Job | DepTask::All => None,
            };
            let st = match (it.kind, target(it.job, task)) {
                (_, DepTarget::Unknown) => DepStatus::Satisfied,
                (DepKind::After, DepTarget::Pending) => DepStatus::Waiting,
                (DepKind::After, _) => DepStatus::Satisfied,
                (_, DepTarget::Pending | DepTarget::Running) => DepStatus::Waiting,
                (DepKind::AfterAny | DepKind::AfterCorr | DepKind::AfterBurstBuffer, DepTarget::Ended { .. }) => {
                    DepStatus::Satisfied
                }
                (DepKind::AfterOk, DepTarget::Ended { ok }) => {
                    if ok {
                        DepStatus::Satisfied
                    } else {
                        DepStatus::Never
                    }
                }
                (DepKind::AfterNotOk, DepTarget::Ended { ok }) => {
                    if ok {
                        DepStatus::Never
                    } else {
                        DepStatus::Satisfied
                    }
                }
                (DepKind::Singleton, _) => DepStatus::Satisfied,
            };
            statuses.push(st);
        }
        if self.any {
            if statuses.contains(&DepStatus::Satisfied) {
                DepStatus::Satisfied
            } else if statuses.iter().all(|s| *s == DepStatus::Never) {
                DepStatus::Never
            } else {
                DepStatus::Waiting
            }
        } else if statuses.contains(&DepStatus::Never) {
            DepStatus::Never
        } else if statuses.iter().all(|s| *s == DepStatus::Satisfied) {
            DepStatus::Satisfied
        } else {
            DepStatus::Waiting
        }
    }

    /// A bare job id of an array job names the whole array (Slurm's
    /// `_find_dependent_job_ptr`), shown `N_*`; `is_array(id)` says whether `id` is one.
    pub fn resolve_arrays(&mut self, is_array: impl Fn(u64) -> bool) {
        for it in &mut self.items {
            if it.task == DepTask::Job && it.kind != DepKind::Singleton && is_array(it.job) {
                it.task = DepTask::All;
            }
        }
    }

    /// Whether an item names job `id` (Slurm refuses a dependency of a job on itself).
    pub fn names(&self, id: u64) -> bool {
        self.items.iter().any(|it| it.kind != DepKind::Singleton && it.job == id)
    }

    /// Slurm's canonical form without states (`_depend_list2str`): one item per job id,
    /// `afterok:53_*+5`, joined by `?` when any item was, else by `,`. The commands add each
    /// item's state (`(unfulfilled)`).
    pub fn to_slurm_string(&self) -> String {
        let sep = if self.any { "?" } else { "," };
        self.items
            .iter()
            .map(|it| {
                if it.kind == DepKind::Singleton {
                    return "singleton".to_string();
                }
                let mut s = format!("{}:{}", it.kind.as_str(), it.job);
                match it.task {
                    DepTask::Job => {}
                    DepTask::One(t) => s.push_str(&format!("_{t}")),
                    DepTask::All => s.push_str("_*"),
                }
                if it.minutes > 0 {
                    s.push_str(&format!("+{}", it.minutes));
                }
                s
            })
            .collect::<Vec<_>>()
            .join(sep)
    }

    /// True when the dependency names `singleton`.
    pub fn has_singleton(&self) -> bool {
        self.items.iter().any(|it| it.kind == DepKind::Singleton)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Dependency {
        parse(s).unwrap().unwrap()
    }

    /// The forms recorded from Slurm 22.05 in goldens-extra (area a05) and goldens 0074/0075.
    #[test]
    fn parses_slurm_forms() {
        assert_eq!(parse("foo:1"), Err(DepError::Invalid)); // goldens 0074
        assert_eq!(parse("afterok:"), Err(DepError::Invalid));
        assert_eq!(parse("1:2"), Err(DepError::Invalid), "bare ids are joined by commas");
        assert_eq!(parse("afterok:1,,afterany:2"), Err(DepError::Invalid));
        assert_eq!(parse("afterok:1+0"), Err(DepError::Invalid));
        assert_eq!(parse("afterok:1x"), Err(DepError::Invalid));
        assert_eq!(parse("expand:5"), Err(DepError::NotSupported));
        assert_eq!(parse("ésingleton"), Err(DepError::Invalid), "no panic off a char boundary");
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("0"), Ok(None));
        let d = p("afterany:53:54,afterok:56");
        assert!(!d.any);
        assert_eq!(d.to_slurm_string(), "afterany:53,afterany:54,afterok:56");
        assert_eq!(p("afterok:1,afterany:2?after:3").to_slurm_string(), "afterok:1?afterany:2?after:3");
        assert_eq!(p("after:7+5:8").to_slurm_string(), "after:7+5,after:8+5", "minutes carry to the next id");
        assert_eq!(p("AfterOK:5_2?afternotok:7+10").to_slurm_string(), "afterok:5_2?afternotok:7+10");
        assert_eq!(p("afterany:9_*").to_slurm_string(), "afterany:9_*");
        // Task lists in brackets (goldens-extra 0519) and afterburstbuffer (0524).
        assert_eq!(p("afterok:9_[1-2]").to_slurm_string(), "afterok:9_1,afterok:9_2");
        assert_eq!(p("after:9_[3,1-2]+5").to_slurm_string(), "after:9_1,after:9_2,after:9_3+5");
        assert_eq!(parse("afterok:9_[1-"), Err(DepError::Invalid));
        assert_eq!(parse("afterok:9_[2-1]"), Err(DepError::Invalid));
        assert_eq!(parse("afterok:9_[]"), Err(DepError::Invalid));
        assert_eq!(p("afterburstbuffer:9").to_slurm_string(), "afterburstbuffer:9");
        assert_eq!(p("AfterBurstBxyz:9").to_slurm_string(), "afterburstbuffer:9");
        assert_eq!(p("12,13").to_slurm_string(), "afterany:12,afterany:13");
        assert_eq!(p("afterok:3(unfulfilled),afterok:3").to_slurm_string(), "afterok:3", "duplicates dropped");
        assert_eq!(p("singleton,afterok:4").to_slurm_string(), "singleton,afterok:4");
        assert!(p("singleton").has_singleton());
        let mut a = p("aftercorr:9,afterok:10");
        a.resolve_arrays(|j| j == 9);
        assert_eq!(a.to_slurm_string(), "aftercorr:9_*,afterok:10");
        assert!(a.names(10) && !a.names(11));
    }

    #[test]
    fn evaluates() {
        let d = p("afterok:1,afterany:2");
        let st = |a: DepTarget, b: DepTarget| {
            d.evaluate(&|j, _| if j == 1 { a } else { b }, false)
        };
        assert_eq!(st(DepTarget::Ended { ok: true }, DepTarget::Ended { ok: false }), DepStatus::Satisfied);
        assert_eq!(st(DepTarget::Ended { ok: false }, DepTarget::Running), DepStatus::Never);
        assert_eq!(st(DepTarget::Running, DepTarget::Ended { ok: true }), DepStatus::Waiting);
        assert_eq!(st(DepTarget::Unknown, DepTarget::Unknown), DepStatus::Satisfied);
        let or = p("afterok:1?afterok:2");
        let ev = |a, b| or.evaluate(&|j, _| if j == 1 { a } else { b }, false);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Ended { ok: true }), DepStatus::Satisfied);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Ended { ok: false }), DepStatus::Never);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Pending), DepStatus::Waiting);
        let after = p("after:1");
        assert_eq!(after.evaluate(&|_, _| DepTarget::Running, false), DepStatus::Satisfied);
        assert_eq!(after.evaluate(&|_, _| DepTarget::Pending, false), DepStatus::Waiting);
        let s = p("singleton");
        assert_eq!(s.evaluate(&|_, _| DepTarget::Unknown, true), DepStatus::Waiting);
        assert_eq!(s.evaluate(&|_, _| DepTarget::Unknown, false), DepStatus::Satisfied);
    }
}
