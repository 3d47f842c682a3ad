//! Submission limits that keep one submission or one user from filling the controller: the
//! size of a batch script (`SchedulerParameters=max_script_size`), and the association limits
//! on a user's jobs, `MaxSubmitJobs` ([`check_submit`] for quota.conf, [`check_accounting`]
//! for the accounting model's associations and QOS; `MaxJobCount`, all users' jobs, is
//! checked by the controller before these).
//!
//! Pure checks over what admission already holds; no I/O. Slurm 22.05 checks the script's
//! length in `job_mgr.c` `_test_job_desc_fields` before a job record exists (no job id is
//! consumed) and answers `ESLURM_PATHNAME_TOO_LONG`; `read_config.c` refuses to start with a
//! `max_script_size` above 512 MB. Slurm 22.05 has no limit on the environment's size or
//! count other than its RPC decoder's (1 GiB per string); Flotilla's is the frame's
//! (`proto::frame::DEFAULT_MAX_FRAME`, 16 MiB), and the environment is purged with the script.

use crate::job::JobRecord;
use flotilla_core::assoc::{Accounting, AssocId};
use flotilla_core::sched::SubmitCounts;
use flotilla_proto::errno::{ESLURM_ACCOUNTING_POLICY, ESLURM_INVALID_ACCOUNT, ESLURM_INVALID_QOS, ESLURM_PATHNAME_TOO_LONG};
use flotilla_proto::SlurmError;

/// Slurm 22.05's default `max_script_size`: 4 MiB (bytes).
pub const DEFAULT_MAX_SCRIPT_SIZE: usize = 4 * 1024 * 1024;

/// The largest `max_script_size` Slurm accepts: 512 MiB (bytes).
pub const MAX_MAX_SCRIPT_SIZE: usize = 512 * 1024 * 1024;

/// The `max_script_size=N` of a `SchedulerParameters=` value (bytes), the default 4 MiB when
/// unset or absent.
///
/// # Errors
/// A value that is not a whole number of bytes, or one above 512 MiB (Slurm: "SchedulerParameters
/// option max_script_size cannot exceed 512 MB", fatal at start).
pub fn max_script_size(scheduler_parameters: Option<&str>) -> Result<usize, String> {
    let Some(params) = scheduler_parameters else { return Ok(DEFAULT_MAX_SCRIPT_SIZE) };
    let mut size = DEFAULT_MAX_SCRIPT_SIZE;
    for opt in params.split(',') {
        let Some((k, v)) = opt.trim().split_once('=') else { continue };
        if !k.trim().eq_ignore_ascii_case("max_script_size") {
            continue;
        }
        size = v
            .trim()
            .parse()
            .map_err(|_| format!("SchedulerParameters option max_script_size={v} is not a number of bytes"))?;
        if size > MAX_MAX_SCRIPT_SIZE {
            return Err("SchedulerParameters option max_script_size cannot exceed 512 MB".into());
        }
    }
    Ok(size)
}

/// Whether a comma-separated `...Parameters=` value holds the option `name` (a word without
/// a value, any case: `DependencyParameters=kill_invalid_depend`).
pub fn has_option(parameters: Option<&str>, name: &str) -> bool {
    parameters.is_some_and(|p| p.split(',').any(|o| o.trim().eq_ignore_ascii_case(name)))
}

/// The exit codes of a `RequeueExit=`/`RequeueExitHold=` value, as Slurm 22.05's
/// `_make_requeue_array` (`job_mgr.c`) reads it: the value as a hostlist range
/// (`3,5-6`, read as `[3,5-6]`), each item a whole decimal number from 0 to 255; the others
/// are left out, each with a warning (for the log), as is the whole value when it is not a
/// range list.
pub fn exit_codes(value: Option<&str>) -> (Box<[bool; 256]>, Vec<String>) {
    let mut set = Box::new([false; 256]);
    let mut warnings = Vec::new();
    let Some(v) = value else { return (set, warnings) };
    match flotilla_core::hostlist::expand(&format!("[{v}]")) {
        Ok(items) => {
            for t in items {
                match t.parse::<u32>() {
                    Ok(n) if n <= 255 && t.bytes().all(|b| b.is_ascii_digit()) => set[n as usize] = true,
                    _ => warnings.push(format!("exit values: {v} ({t})")),
                }
            }
        }
        Err(_) => warnings.push(format!("exit values: {v}")),
    }
    (set, warnings)
}

/// Slurm 22.05's default `batch_sched_delay` (s).
pub const DEFAULT_BATCH_SCHED_DELAY_S: u64 = 3;

/// The `batch_sched_delay=N` of a `SchedulerParameters=` value (s), read as Slurm 22.05's
/// `schedule()` (`job_scheduler.c`) reads it: the option found anywhere in the value, case
/// aside, its number taken as `atoi` takes it (leading digits, `0` when there are none), and
/// a negative number refused with `Invalid batch_sched_delay: N` (the warning returned,
/// for the log) and the default 3 s used, as when the option is absent. How long after a
/// scheduling cycle a cycle asked for by anything but a job's end may run
/// ([`crate::ctld::CtlOptions::batch_sched_delay`]). A bad value never stops the daemon.
pub fn batch_sched_delay(scheduler_parameters: Option<&str>) -> (u64, Option<String>) {
    const KEY: &str = "batch_sched_delay=";
    let params = scheduler_parameters.unwrap_or_default().to_ascii_lowercase();
    let Some(at) = params.find(KEY) else { return (DEFAULT_BATCH_SCHED_DELAY_S, None) };
    let n = atoi(&params[at + KEY.len()..]);
    if n < 0 {
        return (DEFAULT_BATCH_SCHED_DELAY_S, Some(format!("Invalid batch_sched_delay: {n}")));
    }
    (n as u64, None)
}

/// The `bf_max_job_test=N` of a `SchedulerParameters=` value, as Slurm 22.05's backfill
/// plugin reads it (`backfill.c` `_load_config`): found anywhere in the value, case aside,
/// read with `atoi`; a number below 1 or above 1,000,000 is refused with `Invalid
/// SchedulerParameters bf_max_job_test: N` (the warning returned, for the log) and the
/// default 500 used, as when the option is absent. How many jobs the backfill plan that
/// queries show tests ([`flotilla_core::sched::Scheduler::backfill_plan`]).
pub fn bf_max_job_test(scheduler_parameters: Option<&str>) -> (u32, Option<String>) {
    const KEY: &str = "bf_max_job_test=";
    const MAX: i64 = 1_000_000;
    let default = flotilla_core::sched::BF_MAX_JOB_TEST;
    let params = scheduler_parameters.unwrap_or_default().to_ascii_lowercase();
    let Some(at) = params.find(KEY) else { return (default, None) };
    // `atoi` stores into an `int`: a number past it wraps as C's conversion does.
    let n = i64::from(atoi(&params[at + KEY.len()..]) as i32);
    if !(1..=MAX).contains(&n) {
        return (default, Some(format!("Invalid SchedulerParameters bf_max_job_test: {n}")));
    }
    (n as u32, None)
}

/// C's `atoi` on `s`: leading white space, an optional sign, then the digits up to the
/// first other character (0 when there are none; saturating instead of overflowing).
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits.bytes().take_while(u8::is_ascii_digit).fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if neg { -n } else { n }
}

/// Refuses a batch script longer than `max` bytes with Slurm's `ESLURM_PATHNAME_TOO_LONG`
/// ("Pathname of a file, directory or other parameter too long"; `sbatch` prints it after
/// "Batch job submission failed: " and exits 1).
///
/// # Errors
/// The error above.
pub fn check_script(script: &str, max: usize) -> Result<(), SlurmError> {
    if script.len() > max {
        tracing::info!(len = script.len(), max, "job_create_request: strlen(script) too big");
        return Err(SlurmError::new(ESLURM_PATHNAME_TOO_LONG));
    }
    Ok(())
}

/// Where per-user job limits come from: today `quota.conf` ([`flotilla_core::quota::QuotaTree`]),
/// later Slurm's associations and QOS (`sacctmgr`). Answers for one (user, account) pair.
pub trait JobLimitSource: std::fmt::Debug + Send + Sync {
    /// `MaxSubmitJobs`: most jobs, pending and running (each array task one), the user may
    /// have charged to the account at once; `None`: no limit.
    fn max_submit_jobs(&self, user: &str, account: &str) -> Option<u32>;
}

impl JobLimitSource for flotilla_core::quota::QuotaTree {
    fn max_submit_jobs(&self, user: &str, account: &str) -> Option<u32> {
        self.job_limits(user, account).0
    }
}

/// Jobs a record counts for `MaxSubmitJobs`: a pending array remainder its tasks, a finished
/// job none, any other job one (Slurm counts each array task as a job).
fn submit_count(r: &JobRecord) -> u32 {
    if r.state.is_finished() {
        0
    } else if r.is_array_meta() {
        r.array_pending.len() as u32
    } else {
        1
    }
}

/// What one charge key holds: the jobs of a (user, account, partition, QOS) that count for
/// the submit limits ([`submit_count`]), pending and running.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChargeKey {
    /// The job's user name.
    pub user: String,
    /// Its account.
    pub account: String,
    /// Its partition (the association is found per user, account and partition).
    pub partition: String,
    /// Its QOS.
    pub qos: String,
}

impl ChargeKey {
    fn of(r: &JobRecord) -> ChargeKey {
        ChargeKey { user: r.user.clone(), account: r.account.clone(), partition: r.partition.clone(), qos: r.qos.clone() }
    }

    fn matches(&self, r: &JobRecord) -> bool {
        self.user == r.user && self.account == r.account && self.partition == r.partition && self.qos == r.qos
    }
}

/// The jobs each [`ChargeKey`] holds, kept across turns so that a submission under a
/// job-count limit (`MaxSubmitJobs`, `GrpSubmitJobs`, `MaxSubmitJobsPerUser`) reads the
/// distinct keys, not every job record in memory (finished ones included): a flood of
/// submissions under such a limit stays linear (issue #21).
///
/// Built from the records at its first use ([`SubmitCharges::totals`]), not before: a
/// controller with no such limit never builds it. Then each record the controller changes is
/// marked ([`SubmitCharges::mark`], from `Controller::dirty` and wherever a record is
/// removed) and recounted from the record as it is at the next [`SubmitCharges::settle`] (at
/// the next use, and when the turn's batch is written): what a record was counted as is kept
/// per job, so a recount moves exactly its jobs from the old key to the new one. Equal to a
/// scan of the records ([`SubmitCharges::scan`]) after every settle; checked by the
/// controller's property test.
#[derive(Debug, Default)]
pub struct SubmitCharges {
    built: bool,
    keys: Vec<ChargeKey>,
    key_of: std::collections::HashMap<ChargeKey, u32>,
    totals: Vec<u64>,
    /// How many of `totals` are above zero.
    live: usize,
    /// Per job id with jobs counted: (key index, jobs).
    by_job: std::collections::HashMap<u64, (u32, u32)>,
    /// Job ids changed since the last settle.
    stale: Vec<u64>,
}

impl SubmitCharges {
    /// Whether the charges were built (a submission needed them since the controller started).
    #[must_use]
    pub fn is_built(&self) -> bool {
        self.built
    }

    /// How many keys hold jobs (kept as records are recounted; it decides when to forget).
    #[must_use]
    pub fn live(&self) -> usize {
        self.live
    }

    /// Record `id` changed (or was removed): recounted at the next settle. Nothing is kept
    /// before the charges are built.
    pub fn mark(&mut self, id: u64) {
        if self.built {
            self.stale.push(id);
        }
    }

    /// Forgets everything; built again at the next use.
    fn forget(&mut self) {
        *self = SubmitCharges::default();
    }

    /// Recounts the records marked since the last settle (nothing when not built). When the
    /// keys that hold no job outnumber those that do (and a floor), the charges are
    /// forgotten and built again at their next use, so keys of users gone cost nothing.
    pub fn settle(&mut self, jobs: &std::collections::BTreeMap<u64, JobRecord>) {
        if !self.built {
            return;
        }
        let stale = std::mem::take(&mut self.stale);
        for id in stale {
            self.recount(id, jobs.get(&id));
        }
        if self.keys.len() > 4096 && 2 * self.live < self.keys.len() {
            self.forget();
        }
    }

    fn recount(&mut self, id: u64, rec: Option<&JobRecord>) {
        let n = rec.map_or(0, submit_count);
        let old = self.by_job.get(&id).copied();
        if let (Some((k, m)), Some(r)) = (old, rec) {
            if m == n && self.keys[k as usize].matches(r) {
                return;
            }
        }
        if let Some((k, m)) = old {
            self.totals[k as usize] -= u64::from(m);
            self.live -= usize::from(self.totals[k as usize] == 0);
            self.by_job.remove(&id);
        }
        if let (Some(r), true) = (rec, n > 0) {
            let key = ChargeKey::of(r);
            let k = match self.key_of.get(&key) {
                Some(k) => *k,
                None => {
                    let k = self.keys.len() as u32;
                    self.keys.push(key.clone());
                    self.key_of.insert(key, k);
                    self.totals.push(0);
                    k
                }
            };
            self.live += usize::from(self.totals[k as usize] == 0);
            self.totals[k as usize] += u64::from(n);
            self.by_job.insert(id, (k, n));
        }
    }

    /// The keys holding jobs and their jobs, after building (first use) or settling.
    pub fn totals(&mut self, jobs: &std::collections::BTreeMap<u64, JobRecord>) -> impl Iterator<Item = (&ChargeKey, u64)> {
        // Settling may forget everything (keys of users gone): built again then.
        self.settle(jobs);
        if !self.built {
            self.built = true;
            for (id, r) in jobs {
                self.recount(*id, Some(r));
            }
        }
        self.keys.iter().zip(self.totals.iter().copied()).filter(|(_, n)| *n > 0)
    }

    /// The same totals made by reading every record: what [`SubmitCharges::totals`] must
    /// equal (for tests).
    #[must_use]
    pub fn scan<'a>(jobs: impl Iterator<Item = &'a JobRecord>) -> std::collections::BTreeMap<ChargeKey, u64> {
        let mut m = std::collections::BTreeMap::new();
        for r in jobs {
            let n = submit_count(r);
            if n > 0 {
                *m.entry(ChargeKey::of(r)).or_insert(0) += u64::from(n);
            }
        }
        m
    }
}

/// Refuses a submission of `new` (not yet in `jobs`; `tasks` jobs: an array's task count,
/// else 1) that would take its user past `MaxSubmitJobs` in its account, with Slurm's
/// `ESLURM_ACCOUNTING_POLICY` ("Job violates accounting/QOS policy (job submit limit,
/// user's size and/or time limits)") after the reason `AssocMaxSubmitJobLimit`, which `sbatch`
/// prints first (Slurm 22.05 `acct_policy_validate`, from `job_mgr.c` `_job_create`, before a
/// job id is used). The jobs held come from `charges` (built at the first submission under
/// such a limit).
///
/// # Errors
/// The error above.
pub fn check_submit(
    limits: Option<&dyn JobLimitSource>,
    charges: &mut SubmitCharges,
    jobs: &std::collections::BTreeMap<u64, JobRecord>,
    new: &JobRecord,
    tasks: u32,
) -> Result<(), SlurmError> {
    let Some(max) = limits.and_then(|l| l.max_submit_jobs(&new.user, &new.account)) else { return Ok(()) };
    let used: u64 = charges
        .totals(jobs)
        .filter(|(k, _)| k.user == new.user && k.account == new.account)
        .map(|(_, n)| n)
        .sum();
    if used.saturating_add(u64::from(tasks)) > u64::from(max) {
        tracing::info!(user = %new.user, account = %new.account, used, max, "exceeded association limit: AssocMaxSubmitJobLimit");
        return Err(SlurmError::with_message(ESLURM_ACCOUNTING_POLICY, "AssocMaxSubmitJobLimit"));
    }
    Ok(())
}

/// Submission under the accounting model (`sacctmgr`'s associations and QOS, handed to the
/// core with `Scheduler::set_accounting`; empty: nothing is checked here and quota.conf's
/// checks apply), before a job id is used, as Slurm 22.05's `job_mgr.c` `_job_create`:
///
/// - with `associations`: the user must have an association for the account (and partition,
///   [`flotilla_core::assoc::AssocTree::find`]), else `ESLURM_INVALID_ACCOUNT` ("Invalid
///   account or account/partition combination specified");
/// - the QOS: one the user did not name (`qos_given` false) becomes the association's
///   `DefaultQOS` (else `normal`); with `qos` it must exist and be in the association's
///   `QOS=` list, else `ESLURM_INVALID_QOS` ("Invalid qos specification");
/// - a job without a time limit gets the smallest `MaxWall` of its QOS and association;
/// - with `limits` (or `safe`): [`flotilla_core::sched::submit_violation`] against the jobs
///   already charged there (pending and running, each array task one): job counts always
///   refuse, size and time only with the QOS's `Flags=DenyOnLimit`; the error is
///   `ESLURM_ACCOUNTING_POLICY` ("Job violates accounting/QOS policy (job submit limit,
///   user's size and/or time limits)") after the reason, which `sbatch` prints first.
///
/// `new` is updated in place (QOS, time limit). `tasks`: the jobs it adds.
///
/// # Errors
/// The errors above.
pub fn check_accounting(
    acct: &Accounting,
    charges: &mut SubmitCharges,
    jobs: &std::collections::BTreeMap<u64, JobRecord>,
    new: &mut JobRecord,
    qos_given: bool,
    tasks: u32,
) -> Result<(), SlurmError> {
    let tree = &acct.tree;
    if tree.is_empty() {
        return Ok(());
    }
    let e = acct.enforce;
    let Some(assoc) = tree.find(&new.user, &new.account, Some(&new.partition)).map(|a| a.id) else {
        if e.associations || e.limits || e.qos || e.safe {
            tracing::info!(user = %new.user, account = %new.account, partition = %new.partition, "job submit: no association");
            return Err(SlurmError::new(ESLURM_INVALID_ACCOUNT));
        }
        return Ok(());
    };
    if !qos_given {
        new.qos = tree.default_qos(assoc).to_string();
        new.spec.qos = new.qos.clone();
    }
    let qos = acct.qos.get(&new.qos);
    if e.qos && (qos.is_none() || !tree.allows_qos(assoc, &new.qos)) {
        tracing::info!(user = %new.user, qos = %new.qos, "job submit: QOS not allowed for the association");
        return Err(SlurmError::new(ESLURM_INVALID_QOS));
    }
    if new.spec.time_limit_s.is_none() {
        if let Some(m) = flotilla_core::sched::default_wall_min(acct, assoc, qos) {
            new.set_time_limit(Some(m));
        }
    }
    if !(e.limits || e.safe) {
        return Ok(());
    }
    let counts = submit_counts(acct, assoc, charges, jobs, new, tasks);
    if let Some(r) = flotilla_core::sched::submit_violation(acct, &new.spec, assoc, qos, &counts) {
        tracing::info!(user = %new.user, account = %new.account, qos = %new.qos, "job submit: exceeded limit: {r}");
        return Err(SlurmError::with_message(ESLURM_ACCOUNTING_POLICY, r.as_str()));
    }
    Ok(())
}

/// `scontrol update job` of a pending job's account, partition or QOS under the accounting
/// model: the new combination needs an association (with `associations`,
/// `ESLURM_INVALID_ACCOUNT`) and an existing QOS its association allows (with `qos`,
/// `ESLURM_INVALID_QOS`), as at submission ([`check_accounting`]).
///
/// # Errors
/// The errors above.
pub fn check_access_update(acct: &Accounting, rec: &JobRecord) -> Result<(), SlurmError> {
    let e = acct.enforce;
    let Some(assoc) = acct.tree.find(&rec.user, &rec.account, Some(&rec.partition)) else {
        return if e.associations { Err(SlurmError::new(ESLURM_INVALID_ACCOUNT)) } else { Ok(()) };
    };
    if e.qos && (!acct.qos.contains_key(&rec.qos) || !acct.tree.allows_qos(assoc.id, &rec.qos)) {
        return Err(SlurmError::new(ESLURM_INVALID_QOS));
    }
    Ok(())
}

/// The jobs charged to `new`'s QOS, user and association chain, from the totals per
/// [`ChargeKey`]; the association of each key is looked up only when a chain limit on job
/// counts needs it.
///
/// Only the counts a limit reads are made: with no job-count limit on the job's QOS
/// (`GrpSubmitJobs`, `MaxSubmitJobsPerUser`) nor on its association chain (`GrpSubmitJobs`,
/// `MaxSubmitJobs`) the charges are not even built, so a submission under
/// `AccountingStorageEnforce=limits` without such limits costs nothing per job held.
fn submit_counts(
    acct: &Accounting,
    assoc: AssocId,
    charges: &mut SubmitCharges,
    jobs: &std::collections::BTreeMap<u64, JobRecord>,
    new: &JobRecord,
    tasks: u32,
) -> SubmitCounts {
    let tree = &acct.tree;
    let chain: Vec<AssocId> = tree.ancestry(assoc).map(|a| a.id).collect();
    let need_chain = tree.ancestry(assoc).any(|a| a.limits.grp_submit.is_some() || a.limits.max_submit_jobs.is_some());
    let need_qos = acct.qos.get(&new.qos).is_some_and(|q| q.grp_submit.is_some() || q.max_submit_jobs_per_user.is_some());
    let mut c = SubmitCounts { chain: vec![0; chain.len()], new: tasks, ..SubmitCounts::default() };
    if !need_qos && !need_chain {
        return c;
    }
    let add = |x: &mut u32, n: u64| *x = x.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    for (k, n) in charges.totals(jobs) {
        if need_qos && k.qos == new.qos {
            add(&mut c.qos, n);
            if k.user == new.user {
                add(&mut c.qos_user, n);
            }
        }
        if !need_chain {
            continue;
        }
        let Some(a) = tree.find(&k.user, &k.account, Some(&k.partition)) else { continue };
        if a.id == assoc {
            add(&mut c.own, n);
        }
        for anc in tree.ancestry(a.id) {
            if let Some(i) = chain.iter().position(|x| *x == anc.id) {
                // Every ancestor from here up is in the chain too.
                for x in &mut c.chain[i..] {
                    add(x, n);
                }
                break;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    /// `RequeueExit=` values as `_make_requeue_array` reads them: ranges, 0-255, bad items
    /// left out with a warning.
    #[test]
    fn requeue_exit_codes_read_as_slurm() {
        let (set, w) = exit_codes(Some("3,5-6,255"));
        let on: Vec<usize> = (0..256).filter(|&c| set[c]).collect();
        assert_eq!((on, w.len()), (vec![3, 5, 6, 255], 0));
        let (set, w) = exit_codes(Some("1,256"));
        assert_eq!(((0..256).filter(|&c| set[c]).count(), w), (1, vec!["exit values: 1,256 (256)".to_string()]));
        // Not a range list at all (Slurm's hostlist refuses `[1,256,x]`): nothing.
        let (set, w) = exit_codes(Some("1,256,x"));
        assert_eq!(((0..256).filter(|&c| set[c]).count(), w), (0, vec!["exit values: 1,256,x".to_string()]));
        let (set, w) = exit_codes(None);
        assert!(set.iter().all(|&b| !b) && w.is_empty());
    }

    #[test]
    fn batch_sched_delay_reads_its_option_as_slurm_and_defaults_to_3_s() {
        assert_eq!(super::batch_sched_delay(None), (3, None));
        assert_eq!(super::batch_sched_delay(Some("bf_interval=30,batch_sched_delay=0")), (0, None));
        assert_eq!(super::batch_sched_delay(Some("Batch_Sched_Delay=7,bf_continue")), (7, None));
        assert_eq!(super::batch_sched_delay(Some("max_script_size=10")), (3, None));
        // atoi: no digits is 0, trailing text is ignored; a negative number is refused.
        assert_eq!(super::batch_sched_delay(Some("batch_sched_delay=x")), (0, None));
        assert_eq!(super::batch_sched_delay(Some("batch_sched_delay=5s")), (5, None));
        assert_eq!(super::batch_sched_delay(Some("batch_sched_delay=-2")), (3, Some("Invalid batch_sched_delay: -2".into())));
    }

    use super::*;

    /// A submission under `AccountingStorageEnforce=limits` counts the jobs held only for the
    /// job-count limits that need them (`submit_counts`): with none on its QOS or
    /// association chain the charges are not built; with the
    /// association's `MaxSubmitJobs=1` or the QOS's `MaxSubmitJobsPerUser=1` and one job of
    /// the user pending, the submission is refused with the limit's reason.
    #[test]
    fn submission_counts_jobs_only_for_job_count_limits() {
        use flotilla_core::assoc::{Association, AssocTree, Enforce, Qos};
        let cluster = flotilla_core::cluster::Cluster::uniform(1, 8, 1, 64, 512_000);
        let conf = crate::admission::AdmissionConf {
            def_mem_per_cpu_mib: Some(1024),
            max_array_size: 1001,
            default_accounts: [("alice".to_string(), "research".to_string())].into(),
            max_script_size: DEFAULT_MAX_SCRIPT_SIZE,
            node_kinds: Vec::new(),
        };
        let req = flotilla_proto::SubmitJob {
            script: "#!/bin/sh\ntrue\n".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            work_dir: "/tmp".into(),
            ..flotilla_proto::SubmitJob::default()
        };
        let Ok(admitted) = crate::admission::admit(&req, &cluster, &conf, 0) else { panic!("admitted") };
        let new = admitted.record;
        let tree = |max_submit: Option<u32>| {
            let mut alice = Association::new(AssocId(3), Some(AssocId(2)), "research", Some("alice"));
            alice.limits.max_submit_jobs = max_submit;
            AssocTree::new(vec![
                Association::new(AssocId(1), None, "root", None),
                Association::new(AssocId(2), Some(AssocId(1)), "research", None),
                alice,
            ])
            .unwrap()
        };
        let enforce = Enforce { associations: true, limits: true, qos: false, safe: false };
        let acct = |max_submit: Option<u32>, qos: Qos| Accounting { tree: tree(max_submit), qos: [("normal".to_string(), qos)].into(), enforce };
        let mut held = new.clone();
        held.id = 1;
        held.qos = "normal".into();
        held.spec.qos = "normal".into();
        let jobs: std::collections::BTreeMap<u64, JobRecord> = [(1, held)].into();
        let mut charges = SubmitCharges::default();
        assert_eq!(check_accounting(&acct(None, Qos::new("normal")), &mut charges, &jobs, &mut new.clone(), false, 1), Ok(()));
        assert!(!charges.is_built(), "the jobs were counted without a job-count limit");
        let refused = |a: &Accounting| {
            let mut charges = SubmitCharges::default();
            check_accounting(a, &mut charges, &jobs, &mut new.clone(), false, 1).map_err(|e| e.messages.join(" "))
        };
        assert!(refused(&acct(Some(1), Qos::new("normal"))).unwrap_err().contains("AssocMaxSubmitJobLimit"));
        let mut per_user = Qos::new("normal");
        per_user.max_submit_jobs_per_user = Some(1);
        assert!(refused(&acct(None, per_user)).unwrap_err().contains("QOSMaxSubmitJobPerUserLimit"));
        assert_eq!(refused(&acct(Some(2), Qos::new("normal"))), Ok(()));
    }

    /// `bf_max_job_test=`: Slurm's default 500 when absent, the number when 1 to 1,000,000
    /// (anywhere in the value, any case, `atoi`'s digits), the default and Slurm's message
    /// otherwise.
    #[test]
    fn bf_max_job_test_from_scheduler_parameters() {
        assert_eq!(bf_max_job_test(None), (500, None));
        assert_eq!(bf_max_job_test(Some("batch_sched_delay=5")), (500, None));
        assert_eq!(bf_max_job_test(Some("bf_max_job_test=2000")), (2000, None));
        assert_eq!(bf_max_job_test(Some("max_script_size=9,BF_Max_Job_Test=7x,bf_window=60")), (7, None));
        assert_eq!(bf_max_job_test(Some("bf_max_job_test=1000000")), (1_000_000, None));
        for (v, n) in [("0", 0), ("-3", -3), ("1000001", 1_000_001), ("x", 0)] {
            assert_eq!(
                bf_max_job_test(Some(&format!("bf_max_job_test={v}"))),
                (500, Some(format!("Invalid SchedulerParameters bf_max_job_test: {n}")))
            );
        }
    }

    #[test]
    fn max_script_size_from_scheduler_parameters() {
        assert_eq!(max_script_size(None), Ok(4 << 20));
        assert_eq!(max_script_size(Some("bf_continue,default_queue_depth=100")), Ok(4 << 20));
        assert_eq!(max_script_size(Some("bf_continue,max_script_size=1000")), Ok(1000));
        assert_eq!(max_script_size(Some("MAX_SCRIPT_SIZE=536870912")), Ok(512 << 20));
        assert!(max_script_size(Some("max_script_size=536870913")).unwrap_err().contains("512 MB"));
        assert!(max_script_size(Some("max_script_size=4M")).is_err());
    }

    #[test]
    fn script_over_the_limit_is_refused_with_slurms_error() {
        assert!(check_script("#!/bin/sh\n", 10).is_ok());
        let e = check_script("#!/bin/sh\ntrue\n", 10).unwrap_err();
        assert_eq!(e.code, ESLURM_PATHNAME_TOO_LONG);
        assert_eq!(e.text, "Pathname of a file, directory or other parameter too long");
    }
}
