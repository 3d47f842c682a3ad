//! Job dependencies (`sbatch -d`), parsed and evaluated by the controller; the core only sees
//! `dependency_pending`.
//!
//! Syntax (Slurm sbatch(1) `--dependency`): `type:job_id[:job_id...]` items joined by `,`
//! (all must be satisfied) or by `?` (any one suffices; the two separators do not mix).
//! Types: `after`, `afterany`, `afterok`, `afternotok`, `aftercorr` (treated as `afterany`
//! of the whole array), `singleton`. A `+time` suffix on a job id is accepted and ignored.
//! A job id the controller does not know counts as finished successfully (Slurm: a purged job
//! satisfies the dependency), so `afterok:999999` is accepted (goldens 0075).

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
    /// `singleton`: no earlier job of the same user and name is active.
    Singleton,
}

/// A job id with an optional array task index.
pub type JobTask = (u64, Option<u32>);

/// A parsed dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// `?`-separated: any item suffices.
    pub any: bool,
    /// Items: kind and job ids (with an optional array task).
    pub items: Vec<(DepKind, Vec<JobTask>)>,
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

/// Parses a dependency string. `Err(())` is Slurm's `Job dependency problem`.
#[allow(clippy::result_unit_err)]
pub fn parse(s: &str) -> Result<Dependency, ()> {
    let s = s.trim();
    if s.is_empty() {
        return Err(());
    }
    let (any, sep) = match (s.contains(','), s.contains('?')) {
        (true, true) => return Err(()),
        (_, true) => (true, '?'),
        _ => (false, ','),
    };
    let mut items = Vec::new();
    for item in s.split(sep) {
        if item == "singleton" {
            items.push((DepKind::Singleton, Vec::new()));
            continue;
        }
        let mut parts = item.split(':');
        let kind = match parts.next().unwrap_or("") {
            "after" => DepKind::After,
            "afterany" | "aftercorr" => DepKind::AfterAny,
            "afterok" => DepKind::AfterOk,
            "afternotok" => DepKind::AfterNotOk,
            _ => return Err(()),
        };
        let mut ids = Vec::new();
        for p in parts {
            let p = p.split('+').next().unwrap_or("");
            let (job, task) = match p.split_once('_') {
                Some((j, t)) => (j, Some(t.parse::<u32>().map_err(|_| ())?)),
                None => (p, None),
            };
            let job: u64 = job.parse().map_err(|_| ())?;
            if job == 0 {
                return Err(());
            }
            ids.push((job, task));
        }
        if ids.is_empty() {
            return Err(());
        }
        items.push((kind, ids));
    }
    Ok(Dependency { any, items })
}

impl Dependency {
    /// Evaluates against the current job table. `target` gives the status of a job (an array
    /// job id without a task means all of its tasks); `singleton_blocked` says whether an
    /// earlier job of the same user and name is active.
    pub fn evaluate(&self, target: &dyn Fn(u64, Option<u32>) -> DepTarget, singleton_blocked: bool) -> DepStatus {
        let mut statuses = Vec::new();
        for (kind, ids) in &self.items {
            if *kind == DepKind::Singleton {
                statuses.push(if singleton_blocked { DepStatus::Waiting } else { DepStatus::Satisfied });
                continue;
            }
            for &(job, task) in ids {
                let t = target(job, task);
                let st = match (kind, t) {
                    (_, DepTarget::Unknown) => DepStatus::Satisfied,
                    (DepKind::After, DepTarget::Pending) => DepStatus::Waiting,
                    (DepKind::After, _) => DepStatus::Satisfied,
                    (_, DepTarget::Pending | DepTarget::Running) => DepStatus::Waiting,
                    (DepKind::AfterAny, DepTarget::Ended { .. }) => DepStatus::Satisfied,
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

    /// True when the dependency names `singleton`.
    pub fn has_singleton(&self) -> bool {
        self.items.iter().any(|(k, _)| *k == DepKind::Singleton)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_forms() {
        assert!(parse("foo:1").is_err()); // goldens 0074
        assert!(parse("afterok:").is_err());
        assert!(parse("afterok:1,afterany:2?after:3").is_err());
        let d = parse("afterany:53:54,afterok:56").unwrap();
        assert!(!d.any);
        assert_eq!(d.items.len(), 2);
        assert_eq!(d.items[0].1, vec![(53, None), (54, None)]);
        let d = parse("afterok:5_2?afternotok:7+10").unwrap();
        assert!(d.any);
        assert_eq!(d.items[0].1, vec![(5, Some(2))]);
        assert!(parse("singleton").unwrap().has_singleton());
    }

    #[test]
    fn evaluates() {
        let d = parse("afterok:1,afterany:2").unwrap();
        let st = |a: DepTarget, b: DepTarget| {
            d.evaluate(&|j, _| if j == 1 { a } else { b }, false)
        };
        assert_eq!(st(DepTarget::Ended { ok: true }, DepTarget::Ended { ok: false }), DepStatus::Satisfied);
        assert_eq!(st(DepTarget::Ended { ok: false }, DepTarget::Running), DepStatus::Never);
        assert_eq!(st(DepTarget::Running, DepTarget::Ended { ok: true }), DepStatus::Waiting);
        assert_eq!(st(DepTarget::Unknown, DepTarget::Unknown), DepStatus::Satisfied);
        let or = parse("afterok:1?afterok:2").unwrap();
        let ev = |a, b| or.evaluate(&|j, _| if j == 1 { a } else { b }, false);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Ended { ok: true }), DepStatus::Satisfied);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Ended { ok: false }), DepStatus::Never);
        assert_eq!(ev(DepTarget::Ended { ok: false }, DepTarget::Pending), DepStatus::Waiting);
        let after = parse("after:1").unwrap();
        assert_eq!(after.evaluate(&|_, _| DepTarget::Running, false), DepStatus::Satisfied);
        assert_eq!(after.evaluate(&|_, _| DepTarget::Pending, false), DepStatus::Waiting);
        let s = parse("singleton").unwrap();
        assert_eq!(s.evaluate(&|_, _| DepTarget::Unknown, true), DepStatus::Waiting);
        assert_eq!(s.evaluate(&|_, _| DepTarget::Unknown, false), DepStatus::Satisfied);
    }
}
