//! The controller under the accounting model (`AccountingStorageEnforce=associations,limits,
//! qos`, associations and QOS set with `Controller::set_accounting`): Slurm 22.05's
//! submission errors (`Invalid account or account/partition combination specified`,
//! `Invalid qos specification`, `Job violates accounting/QOS policy ...` after the limit's
//! reason), `DenyOnLimit`, the QOS a job gets and keeps across a restart, `scontrol update
//! job qos=`, and pending reasons of running limits.

mod harness;

use flotilla_core::assoc::{Accounting, AssocId, AssocTree, Association, Enforce, Qos};
use flotilla_proto::errno::*;
use flotilla_proto::*;
use flotilla_slurmctld::ctld::CtlOptions;
use harness::*;

fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>) -> Association {
    Association::new(AssocId(id), parent.map(AssocId), account, user)
}

/// root → research (QOS=normal,high) → alice; bob has no association. QOS normal, high
/// and gold (gold not allowed for research).
fn model(f: impl Fn(&mut Vec<Association>, &mut Vec<Qos>)) -> Accounting {
    let mut research = assoc(2, Some(1), "research", None);
    research.qos = vec!["normal".into(), "high".into()];
    let mut assocs = vec![assoc(1, None, "root", None), research, assoc(10, Some(2), "research", Some("alice"))];
    let mut qos = vec![Qos::new("normal"), Qos::new("high"), Qos::new("gold")];
    f(&mut assocs, &mut qos);
    Accounting {
        tree: AssocTree::new(assocs).unwrap(),
        qos: qos.into_iter().map(|q| (q.name.clone(), q)).collect(),
        enforce: Enforce { associations: true, limits: true, qos: true, safe: false },
    }
}

fn harness(name: &str, acct: Accounting) -> Harness {
    let mut h = Harness::new(name, TWO_NODES, CtlOptions::default());
    h.ctl_mut().set_accounting(acct);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    h
}

fn gpu_job(who: User, gpus: u64, qos: Option<&str>) -> SubmitJob {
    let mut j = job(who, None, 0);
    j.account = Some("research".into());
    j.qos = qos.map(Into::into);
    j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gpus }];
    j
}

fn refused(h: &mut Harness, who: User, j: SubmitJob) -> SlurmError {
    match h.call(who, Request::SubmitJob(Box::new(j))) {
        Response::Error(e) => e,
        other => panic!("accepted: {other:?}"),
    }
}

fn policy(reason: &str) -> SlurmError {
    SlurmError::with_message(ESLURM_ACCOUNTING_POLICY, reason)
}

#[test]
fn submissions_without_an_association_or_with_a_qos_not_allowed_are_refused() {
    let mut h = harness("acct_invalid", model(|_, _| {}));
    let e = refused(&mut h, User::Bob, gpu_job(User::Bob, 1, None));
    assert_eq!((e.code, e.text.as_str()), (ESLURM_INVALID_ACCOUNT, "Invalid account or account/partition combination specified"));
    let mut other = gpu_job(User::Alice, 1, None);
    other.account = Some("other".into());
    assert_eq!(refused(&mut h, User::Alice, other).code, ESLURM_INVALID_ACCOUNT);
    let e = refused(&mut h, User::Alice, gpu_job(User::Alice, 1, Some("gold")));
    assert_eq!((e.code, e.text.as_str()), (ESLURM_INVALID_QOS, "Invalid qos specification"));
    assert_eq!(refused(&mut h, User::Alice, gpu_job(User::Alice, 1, Some("nope"))).code, ESLURM_INVALID_QOS);
    // No job id was used by the refusals; the QOS she names is hers.
    assert_eq!(h.submit(gpu_job(User::Alice, 1, Some("high"))), 1);
    h.turn();
    assert_eq!(h.job(1).qos, "high");
    assert_eq!(h.job(1).state, Some(JobStateWire::Running));
    h.check();
}

#[test]
fn submit_limits_refuse_with_the_reason_first() {
    let acct = model(|a, q| {
        a[2].limits.max_submit_jobs = Some(2);
        q[1].max_submit_jobs_per_user = Some(1);
    });
    let mut h = harness("acct_submit_limits", acct);
    let held = |q: Option<&str>| {
        let mut j = gpu_job(User::Alice, 1, q);
        j.hold = true;
        j
    };
    h.submit(held(Some("high")));
    assert_eq!(refused(&mut h, User::Alice, held(Some("high"))), policy("QOSMaxSubmitJobPerUserLimit"));
    h.submit(held(None));
    let e = refused(&mut h, User::Alice, held(None));
    assert_eq!(e, policy("AssocMaxSubmitJobLimit"));
    assert_eq!(e.text, "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)");
    // GrpSubmit of the account counts every user's jobs below it.
    let acct = model(|a, _| a[1].limits.grp_submit = Some(1));
    let mut h = harness("acct_grp_submit", acct);
    h.submit(held(None));
    assert_eq!(refused(&mut h, User::Alice, held(None)), policy("AssocGrpSubmitJobsLimit"));
    let acct = model(|_, q| q[0].grp_submit = Some(1));
    let mut h = harness("acct_qos_grp_submit", acct);
    h.submit(held(None));
    assert_eq!(refused(&mut h, User::Alice, held(None)), policy("QOSGrpSubmitJobsLimit"));
}

#[test]
fn size_and_time_limits_refuse_only_with_deny_on_limit() {
    // Without DenyOnLimit the job is accepted and pends with the reason.
    let acct = model(|a, _| {
        a[1].limits.max_tres_per_job.gpu = Some(2);
        a[1].limits.max_wall_min = Some(30);
    });
    let mut h = harness("acct_deny_on_limit", acct.clone());
    let big = h.submit(gpu_job(User::Alice, 4, None));
    h.turn();
    assert_eq!(h.job(big).state, Some(JobStateWire::Pending));
    assert_eq!(h.job(big).reason, "AssocMaxWallDurationPerJobLimit", "DefaultTime=01:00:00 is above MaxWall=30");
    // With DenyOnLimit on the QOS the same jobs are refused at submission.
    let mut strict = acct;
    strict.qos.get_mut("normal").unwrap().flags = vec!["DenyOnLimit".into()];
    let mut h = harness("acct_deny_on_limit_strict", strict);
    let mut short = gpu_job(User::Alice, 4, None);
    short.time_limit = Some(TimeLimitWire::Minutes(10));
    assert_eq!(refused(&mut h, User::Alice, short), policy("AssocMaxGRESPerJob"));
    assert_eq!(refused(&mut h, User::Alice, gpu_job(User::Alice, 1, None)), policy("AssocMaxWallDurationPerJobLimit"));
}

#[test]
fn running_limits_hold_jobs_with_slurms_reasons() {
    let acct = model(|a, q| {
        a[1].limits.grp_tres.gpu = Some(8);
        q[1].max_jobs_per_user = Some(1);
    });
    let mut h = harness("acct_running_limits", acct);
    let first = h.submit(gpu_job(User::Alice, 8, None));
    let second = h.submit(gpu_job(User::Alice, 1, None));
    let h1 = h.submit(gpu_job(User::Alice, 0, Some("high")));
    let h2 = h.submit(gpu_job(User::Alice, 0, Some("high")));
    h.turn();
    assert_eq!(h.job(first).state, Some(JobStateWire::Running));
    assert_eq!(h.job(second).reason, "AssocGrpGRES", "GPUs are free on gpu02, the account's GrpTRES is not");
    assert_eq!(h.job(h1).state, Some(JobStateWire::Running));
    assert_eq!(h.job(h2).reason, "QOSMaxJobsPerUserLimit");
    h.check();
}

#[test]
fn the_qos_is_the_default_kept_across_a_restart_and_updated_by_scontrol() {
    let acct = model(|a, _| a[1].default_qos = Some("high".into()));
    let mut h = harness("acct_qos_update", acct.clone());
    let mut j = gpu_job(User::Alice, 1, None);
    j.hold = true;
    let id = h.submit(j);
    h.turn();
    assert_eq!(h.job(id).qos, "high", "the association's DefaultQOS");
    let upd = |q: &str| Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::Qos(q.into())] });
    assert_eq!(h.call(User::Alice, upd("gold")), Response::Error(SlurmError::new(ESLURM_INVALID_QOS)));
    match h.call(User::Alice, upd("normal")) {
        Response::JobResults(r) => assert_eq!(r[0].error, None),
        other => panic!("{other:?}"),
    }
    h.turn();
    assert_eq!(h.job(id).qos, "normal");
    h.restart();
    h.ctl_mut().set_accounting(acct);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    assert_eq!(h.job(id).qos, "normal", "kept in the store");
    h.check();
}

/// The reference's enforcement scenario (s18-ref's goldens `sbatch_MS1` … `squeue_reasons`,
/// real Slurm 22.05 with `AccountingStorageEnforce=associations,limits,qos,safe`): accounts
/// gpuq (`GrpTRES=gres/gpu=8`), mj (`MaxJobs=1`), gj (`GrpJobs=1`), ms (`MaxSubmitJobs=1`),
/// QOS qsub (`MaxSubmitJobsPerUser=1`) and qwall (`MaxWall=00:10:00`) allowed for alice; bob
/// in research only. The refusals and the squeue table are the reference's.
#[test]
fn the_reference_enforcement_scenario_gives_slurms_errors_and_reasons() {
    let mut assocs = vec![assoc(1, None, "root", None)];
    let accounts = ["research", "gpuq", "mj", "gj", "ms"];
    for (i, a) in accounts.iter().enumerate() {
        let id = 2 + i as u32;
        let mut acc = assoc(id, Some(1), a, None);
        match *a {
            "gpuq" => acc.limits.grp_tres.gpu = Some(8),
            "mj" => acc.limits.max_jobs = Some(1),
            "gj" => acc.limits.grp_jobs = Some(1),
            "ms" => acc.limits.max_submit_jobs = Some(1),
            _ => {}
        }
        assocs.push(acc);
        let mut alice = assoc(100 + id, Some(id), a, Some("alice"));
        alice.qos = vec!["normal".into(), "qsub".into(), "qwall".into()];
        assocs.push(alice);
    }
    let mut bob = assoc(200, Some(2), "research", Some("bob"));
    bob.qos = vec!["normal".into()];
    assocs.push(bob);
    let mut qsub = Qos::new("qsub");
    qsub.max_submit_jobs_per_user = Some(1);
    let mut qwall = Qos::new("qwall");
    qwall.max_wall_min = Some(10);
    let acct = Accounting {
        tree: AssocTree::new(assocs).unwrap(),
        qos: [Qos::new("normal"), qsub, qwall].into_iter().map(|q| (q.name.clone(), q)).collect(),
        enforce: Enforce { associations: true, limits: true, qos: true, safe: true },
    };
    let mut h = harness("acct_reference_scenario", acct);
    let sb = |who: User, account: Option<&str>, qos: Option<&str>, gpus: u64, minutes: u32| {
        let mut j = job(who, None, 0);
        j.account = account.map(Into::into);
        j.qos = qos.map(Into::into);
        if gpus > 0 {
            j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gpus }];
        }
        j.time_limit = Some(TimeLimitWire::Minutes(minutes));
        j
    };
    let invalid_account = SlurmError::new(ESLURM_INVALID_ACCOUNT);
    let invalid_qos = SlurmError::new(ESLURM_INVALID_QOS);
    // sbatch_bad_account, sbatch_account_not_member, sbatch_bad_qos, sbatch_qos_not_allowed.
    let research = |who, a: Option<&str>, q: Option<&str>| sb(who, Some(a.unwrap_or("research")), q, 0, 1);
    assert_eq!(refused(&mut h, User::Alice, research(User::Alice, Some("nosuchacct"), None)), invalid_account);
    assert_eq!(refused(&mut h, User::Bob, research(User::Bob, Some("gpuq"), None)), invalid_account);
    assert_eq!(refused(&mut h, User::Alice, research(User::Alice, None, Some("nosuchqos"))), invalid_qos);
    assert_eq!(refused(&mut h, User::Bob, research(User::Bob, None, Some("qsub"))), invalid_qos);
    // sbatch_MS1, sbatch_over_max_submit, sbatch_QS1, sbatch_over_qos_max_submit_per_user.
    assert_eq!(h.submit(sb(User::Alice, Some("ms"), None, 0, 30)), 1);
    assert_eq!(refused(&mut h, User::Alice, sb(User::Alice, Some("ms"), None, 0, 30)), policy("AssocMaxSubmitJobLimit"));
    assert_eq!(h.submit(sb(User::Alice, Some("research"), Some("qsub"), 0, 30)), 2);
    assert_eq!(refused(&mut h, User::Alice, sb(User::Alice, Some("research"), Some("qsub"), 0, 30)), policy("QOSMaxSubmitJobPerUserLimit"));
    // G1, G2, MJ1, MJ2, GJ1, GJ2, QW1.
    h.submit(sb(User::Alice, Some("gpuq"), None, 8, 30));
    h.submit(sb(User::Alice, Some("gpuq"), None, 1, 30));
    h.submit(sb(User::Alice, Some("mj"), None, 0, 30));
    h.turn();
    h.submit(sb(User::Alice, Some("mj"), None, 0, 30));
    h.submit(sb(User::Alice, Some("gj"), None, 0, 30));
    h.turn();
    h.submit(sb(User::Alice, Some("gj"), None, 0, 30));
    assert_eq!(h.submit(sb(User::Alice, Some("research"), Some("qwall"), 0, 20)), 9);
    h.turn();
    // squeue --sort=i -o '%.6i %.9P %.8u %.8a %.8q %.8T %r'
    let mut table = format!("{:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {}\n", "JOBID", "PARTITION", "USER", "ACCOUNT", "QOS", "STATE", "REASON");
    for j in h.jobs() {
        let state = j.state.map_or("?", |s| s.as_str());
        table += &format!("{:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {}\n", j.job_id, j.partition, j.user, j.account, j.qos, state, j.reason);
    }
    let reference = " JOBID PARTITION     USER  ACCOUNT      QOS    STATE REASON
     1     batch    alice       ms   normal  RUNNING None
     2     batch    alice research     qsub  RUNNING None
     3     batch    alice     gpuq   normal  RUNNING None
     4     batch    alice     gpuq   normal  PENDING AssocGrpGRES
     5     batch    alice       mj   normal  RUNNING None
     6     batch    alice       mj   normal  PENDING AssocMaxJobsLimit
     7     batch    alice       gj   normal  RUNNING None
     8     batch    alice       gj   normal  PENDING AssocGrpJobsLimit
     9     batch    alice research    qwall  PENDING QOSMaxWallDurationPerJobLimit
";
    assert_eq!(table, reference);
    h.check();
}

/// The jobs a submission is counted against (`MaxSubmitJobs`, `GrpSubmitJobs`,
/// `MaxSubmitJobsPerUser`) are kept per (user, account, partition, QOS) across turns
/// (`limits::SubmitCharges`), not counted from every record at each submission. After every
/// step of random histories (alice and bob in two accounts, QOS with and without limits,
/// held jobs, arrays with and without a throttle, cancels of jobs and of single array tasks,
/// account and QOS updates of pending jobs, cycles that start, split and end jobs) the kept
/// totals equal a count of every record, and each submission's verdict is the limits'
/// verdict on what `squeue` shows (accepted exactly when no limit would be passed). Seeded,
/// so a failure names its seed and step.
#[test]
fn submit_charges_match_a_count_of_every_record() {
    use rand::{Rng, SeedableRng};
    let acct = || {
        let mut research = assoc(2, Some(1), "research", None);
        research.qos = vec!["normal".into(), "high".into()];
        research.limits.grp_submit = Some(9);
        let mut other = assoc(3, Some(1), "other", None);
        other.qos = vec!["normal".into(), "high".into()];
        let mut alice = assoc(10, Some(2), "research", Some("alice"));
        alice.limits.max_submit_jobs = Some(6);
        let mut alice_other = assoc(12, Some(3), "other", Some("alice"));
        alice_other.limits.max_submit_jobs = Some(4);
        let assocs = vec![assoc(1, None, "root", None), research, other, alice, assoc(11, Some(2), "research", Some("bob")), alice_other, assoc(13, Some(3), "other", Some("bob"))];
        let mut high = Qos::new("high");
        high.max_submit_jobs_per_user = Some(3);
        let mut normal = Qos::new("normal");
        normal.grp_submit = Some(12);
        Accounting {
            tree: AssocTree::new(assocs).unwrap(),
            qos: [("normal".to_string(), normal), ("high".to_string(), high)].into(),
            enforce: Enforce { associations: true, limits: true, qos: true, safe: false },
        }
    };
    // The jobs squeue shows as held against the limits: every pending or running job, a
    // pending array remainder its tasks.
    #[derive(Debug)]
    struct Held {
        user: String,
        account: String,
        qos: String,
        jobs: u32,
    }
    let held = |h: &Harness| -> Vec<Held> {
        h.jobs()
            .filter(|j| matches!(j.state, Some(JobStateWire::Pending | JobStateWire::Running)))
            .map(|j| {
                let n = j.array_task_str.as_deref().map_or(1, |t| {
                    let t = t.trim_start_matches('[').split('%').next().unwrap_or("").trim_end_matches(']');
                    t.split(',')
                        .map(|r| match r.split_once('-') {
                            Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
                            None => 1,
                        })
                        .sum()
                });
                Held { user: j.user.clone(), account: j.account.clone(), qos: j.qos.clone(), jobs: n }
            })
            .collect()
    };
    let mut verdicts = (0, 0);
    for seed in 0..5u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut h = harness(&format!("acct_submit_charges_{seed}"), acct());
        let mut ids: Vec<u64> = Vec::new();
        for step in 0..80 {
            let pick = |rng: &mut rand_chacha::ChaCha8Rng, ids: &[u64]| ids[rng.random_range(0..ids.len())];
            let op = if ids.is_empty() { 0 } else { rng.random_range(0..10) };
            match op {
                0..=3 => {
                    let who = if rng.random_bool(0.7) { User::Alice } else { User::Bob };
                    let mut j = job(who, Some(rng.random_range(30..900)), 0);
                    j.account = Some(if rng.random_bool(0.6) { "research" } else { "other" }.into());
                    let account = j.account.clone().unwrap();
                    j.qos = rng.random_bool(0.4).then(|| "high".into());
                    j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: rng.random_range(1..=8) }];
                    j.hold = rng.random_bool(0.3);
                    let tasks = if rng.random_bool(0.25) {
                        let end = rng.random_range(1..4);
                        j.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end, step: 1 }], max_running: rng.random_bool(0.5).then_some(1) });
                        end + 1
                    } else {
                        1
                    };
                    // The limits' verdict on what squeue shows.
                    let qos = j.qos.clone().unwrap_or_else(|| "normal".into());
                    let before = held(&h);
                    let sum = |f: &dyn Fn(&Held) -> bool| before.iter().filter(|x| f(x)).map(|x| x.jobs).sum::<u32>() + tasks;
                    // alice's MaxSubmitJobs: 6 in research, 4 in other; research's
                    // GrpSubmitJobs 9; high's MaxSubmitJobsPerUser 3; normal's GrpSubmitJobs 12.
                    let own_max = match (who, account.as_str()) {
                        (User::Alice, "research") => 6,
                        (User::Alice, _) => 4,
                        _ => u32::MAX,
                    };
                    let over = sum(&|x| x.user == who.name() && x.account == account) > own_max
                        || (account == "research" && sum(&|x| x.account == "research") > 9)
                        || (qos == "high" && sum(&|x| x.qos == "high" && x.user == who.name()) > 3)
                        || (qos == "normal" && sum(&|x| x.qos == "normal") > 12);
                    match h.call(who, Request::SubmitJob(Box::new(j))) {
                        Response::Submitted(s) => {
                            assert!(!over, "seed {seed} step {step}: accepted over a limit; held before: {before:?}");
                            ids.push(s.job_id);
                            verdicts.0 += 1;
                        }
                        Response::Error(e) => {
                            assert_eq!(e.code, flotilla_proto::errno::ESLURM_ACCOUNTING_POLICY, "seed {seed} step {step}: {e:?}");
                            assert!(over, "seed {seed} step {step}: refused ({e:?}) under every limit; held before: {before:?}");
                            verdicts.1 += 1;
                        }
                        other => panic!("seed {seed} step {step}: {other:?}"),
                    }
                }
                4 => {
                    let id = pick(&mut rng, &ids);
                    let tasks = rng.random_bool(0.5).then(|| vec![rng.random_range(0..4)]);
                    h.call(User::Root, Request::CancelJob(CancelJob { jobs: vec![JobRef { job_id: id, tasks }], ..CancelJob::default() }));
                }
                5 | 6 => {
                    let change = if rng.random_bool(0.5) {
                        JobChange::Account(if rng.random_bool(0.5) { "research" } else { "other" }.into())
                    } else {
                        JobChange::Qos(if rng.random_bool(0.5) { "normal" } else { "high" }.into())
                    };
                    let upd = UpdateJob { job: JobRef::id(pick(&mut rng, &ids)), changes: vec![change] };
                    h.call(User::Root, Request::UpdateJob(upd));
                }
                7 => {
                    let op = if rng.random_bool(0.5) { HoldOp::Release } else { HoldOp::Hold };
                    h.call(User::Root, Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(pick(&mut rng, &ids))], op }));
                }
                _ => {
                    h.advance(rng.random_range(1..600));
                    h.turn();
                }
            }
            assert_eq!(h.ctl_mut().submit_charges_match_records(), Ok(true), "seed {seed} step {step}");
        }
    }
    assert!(verdicts.0 >= 40 && verdicts.1 >= 20, "(accepted, refused): {verdicts:?}");
}
