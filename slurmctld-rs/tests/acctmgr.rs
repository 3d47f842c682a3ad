//! The accounting database through `sacctmgr`'s requests, in process ([`harness::Harness`]):
//! a change commits in its turn, takes effect in the next scheduling cycle, survives a
//! restart, is refused to non-admins, is only described without `commit`, and is never lost
//! when the state disk is full.

mod harness;

use flotilla_proto::acctmgr::{parse_clauses, Action, AcctData, AcctMgrChange, AcctMgrOutcome, Entity};
use flotilla_proto::errno::*;
use flotilla_proto::*;
use harness::*;
use flotilla_slurmctld::ctld::CtlOptions;

fn change(action: Action, entity: Entity, words: &str, commit: bool) -> Request {
    let words: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    Request::AcctMgrChange(AcctMgrChange { action, entity, clauses: parse_clauses(&words, action == Action::Add), commit })
}

fn outcome(r: Response) -> AcctMgrOutcome {
    match r {
        Response::AcctMgrOutcome(o) => o,
        other => panic!("not an outcome: {other:?}"),
    }
}

fn data(h: &mut Harness) -> AcctData {
    match h.call(User::Root, Request::AcctMgrShow) {
        Response::AcctMgrData(d) => d,
        other => panic!("not data: {other:?}"),
    }
}

fn gpu_job(who: User) -> SubmitJob {
    let mut j = job(who, Some(60), 0);
    j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 1 }];
    j
}

/// Root adds an account and alice's association and sets `MaxJobs=1` on it; after a restart
/// the rows are there and the limit holds her second job with `AssocMaxJobsLimit` while GPUs
/// are free.
#[test]
fn max_jobs_set_by_sacctmgr_survives_a_restart_and_holds_the_second_job() {
    let mut h = Harness::two_nodes("acctmgr_max_jobs");
    let d = data(&mut h);
    assert_eq!(d.accounts.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), vec!["root"], "Slurm's defaults");
    assert_eq!(d.users.len(), 1);
    assert_eq!(d.qos[0].name, "normal");
    assert_eq!(d.clusters[0].name, "harness");
    let o = outcome(h.call(User::Root, change(Action::Add, Entity::Account, "research Description=r Organization=o", true)));
    assert_eq!(o.exit_code, 0, "{o:?}");
    assert!(o.stdout.starts_with(" Adding Account(s)\n  research\n Settings\n  Description     = r\n"), "{}", o.stdout);
    let o = outcome(h.call(User::Root, change(Action::Add, Entity::User, "alice Account=research", true)));
    assert_eq!(o.stdout, " Adding User(s)\n  alice\n Associations =\n  U = alice     A = research   C = harness   \n Non Default Settings\n");
    let o = outcome(h.call(User::Root, change(Action::Modify, Entity::User, "alice set MaxJobs=1 where account=research", true)));
    assert_eq!(o.stdout, " Modified user associations...\n  C = harness    A = research             U = alice    \n");
    h.restart();
    let d = data(&mut h);
    let alice = d.assocs.iter().find(|a| a.user == "alice").expect("kept");
    assert_eq!((alice.account.as_str(), alice.max_jobs), ("research", Some(1)));
    assert_eq!(d.users.iter().find(|u| u.name == "alice").unwrap().default_account, "research");
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let first = h.submit(gpu_job(User::Alice));
    let second = h.submit(gpu_job(User::Alice));
    h.turn();
    assert_eq!(h.job(first).state, Some(JobStateWire::Running));
    assert_eq!(h.job(second).state, Some(JobStateWire::Pending));
    assert_eq!(h.job(second).reason, "AssocMaxJobsLimit");
    // Cleared with -1: the next cycle starts it.
    let o = outcome(h.call(User::Root, change(Action::Modify, Entity::User, "alice set MaxJobs=-1", true)));
    assert_eq!(o.exit_code, 0);
    h.turn_until(3, 1, |h| h.job(second).state == Some(JobStateWire::Running));
}

/// A user who is not an admin may show but not change (slurmdbd's texts, nothing changed);
/// a change without `commit` is described and not made; Slurm's errors for a bad value and
/// an unknown key.
#[test]
fn non_admins_and_dry_runs_change_nothing() {
    let mut h = Harness::two_nodes("acctmgr_denied");
    let before = data(&mut h);
    let o = outcome(h.call(User::Alice, change(Action::Modify, Entity::Account, "root set GrpJobs=1", true)));
    assert_eq!(o.exit_code, 1);
    assert_eq!(o.stderr, "sacctmgr: error: Your user doesn't have privilege to perform this action\n Error with request: Access/permission denied\n");
    let o = outcome(h.call(User::Alice, change(Action::Add, Entity::Account, "mine", true)));
    assert!(o.stdout.starts_with(" Adding Account(s)\n  mine\n"), "{o:?}");
    assert_eq!(o.stderr, " Problem adding accounts: Access/permission denied\n");
    assert!(!o.changed);
    let o = outcome(h.call(User::Root, change(Action::Add, Entity::Account, "physics", false)));
    assert!(o.changed && o.exit_code == 0, "{o:?}");
    assert_eq!(data(&mut h), before, "neither the refusals nor the dry run changed anything");
    let o = outcome(h.call(User::Root, change(Action::Modify, Entity::Account, "root set GrpJobs=abc", true)));
    assert_eq!(o.stderr, "sacctmgr: error: Invalid value for GrpJobs (abc)\n Unknown option: GrpJobs=abc\n Use keyword 'where' to modify condition\n");
    let o = outcome(h.call(User::Root, change(Action::Modify, Entity::Account, "root set NoSuchLimit=3", true)));
    assert_eq!(o.stderr, " Unknown option: NoSuchLimit=3\n Use keyword 'where' to modify condition\n");
    let o = outcome(h.call(User::Root, change(Action::Delete, Entity::Account, "nosuch", true)));
    assert_eq!((o.stdout.as_str(), o.exit_code), (" Nothing deleted\n", 1));
    assert_eq!(data(&mut h), before);
}

/// With the state disk full, a change whose commit fails waits with its reply until the disk
/// has room (then it is committed and answered); new changes meanwhile are refused with
/// `ESLURM_WRITING_TO_FILE`; after a restart the change is there.
#[test]
fn a_change_is_never_lost_on_a_full_disk() {
    let mut h = Harness::two_nodes("acctmgr_full_disk");
    h.ctl().store().set_commit_fault(true);
    h.replies_may_wait = true;
    h.rpc(User::Root, change(Action::Add, Entity::Account, "research", true));
    h.turn();
    assert!(h.replies().is_empty(), "no answer before the commit");
    let r = h.call(User::Root, change(Action::Add, Entity::Account, "other", true));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_WRITING_TO_FILE)));
    h.ctl().store().set_commit_fault(false);
    h.turn();
    h.replies_may_wait = false;
    let o = outcome(h.replies().last().cloned().expect("the held reply"));
    assert!(o.stdout.starts_with(" Adding Account(s)\n  research\n"), "{o:?}");
    h.restart();
    let names: Vec<String> = data(&mut h).accounts.into_iter().map(|a| a.name).collect();
    assert_eq!(names, vec!["research", "root"]);
}

/// Deleting an association a running job charges is refused as slurmdbd refuses it (the job
/// listed, exit 1, nothing deleted, goldens 0169/0170); a pending job of the same association
/// does not block (the reference lists started jobs only); once the job is gone the delete
/// goes through.
#[test]
fn deleting_an_association_with_a_running_job_is_refused() {
    let mut h = Harness::two_nodes("acctmgr_delete_running");
    h.register("gpu01");
    h.register("gpu02");
    for words in ["research Description=r Organization=o", "chem Description=c Organization=o"] {
        assert_eq!(outcome(h.call(User::Root, change(Action::Add, Entity::Account, words, true))).exit_code, 0);
    }
    assert_eq!(outcome(h.call(User::Root, change(Action::Add, Entity::User, "alice Account=research", true))).exit_code, 0);
    assert_eq!(outcome(h.call(User::Root, change(Action::Add, Entity::User, "alice Account=chem", true))).exit_code, 0);
    h.turn();
    let mut j = gpu_job(User::Alice);
    j.account = Some("research".into());
    let running = h.submit(j);
    h.turn();
    assert_eq!(h.job(running).state, Some(JobStateWire::Running));
    let want = format!(
        " Error with request: Job(s) active, cancel job(s) before remove\n  JobID = {running:<10} C = harness    A = research   U = alice    \n"
    );
    for (entity, words) in [(Entity::Account, "research"), (Entity::User, "alice where account=research")] {
        for commit in [false, true] {
            let o = outcome(h.call(User::Root, change(Action::Delete, entity, words, commit)));
            assert_eq!((o.exit_code, o.stdout.as_str(), o.stderr.as_str(), o.changed), (1, "", want.as_str(), false), "{words}");
        }
    }
    assert!(data(&mut h).assocs.iter().any(|a| a.user == "alice" && a.account == "research"), "nothing deleted");
    // Only a pending job in chem: the delete goes through.
    let mut p = gpu_job(User::Alice);
    p.account = Some("chem".into());
    p.hold = true;
    let pending = h.submit(p);
    h.turn();
    assert_eq!(h.job(pending).state, Some(JobStateWire::Pending));
    let o = outcome(h.call(User::Root, change(Action::Delete, Entity::User, "alice where account=chem", true)));
    assert_eq!(o.exit_code, 0, "{o:?}");
    // The running job gone, research's association may go too.
    let _ = h.call(User::Root, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(running)], ..CancelJob::default() }));
    h.turn_until(5, 1, |h| h.job(running).state != Some(JobStateWire::Running));
    let o = outcome(h.call(User::Root, change(Action::Delete, Entity::Account, "research", true)));
    assert_eq!((o.exit_code, o.stdout.as_str()), (0, " Deleting accounts...\n  research\n"), "{o:?}");
}

/// quota.conf is an import format: once imported, a broken edit of it cannot keep the
/// controller down (a warning; the associations come from the database), while a first start
/// with a broken file still refuses to start (there is nothing else to import), naming the
/// file's error.
#[test]
fn a_broken_quota_conf_stops_only_the_first_start() {
    let quota = flotilla_core::quota::parse_quota_conf("Account=research Users=alice\n", "quota.conf").unwrap();
    let state = tempfile::tempdir().unwrap();
    let opts = CtlOptions { quotas: quota, ..CtlOptions::default() };
    let mut h = Harness::new_in("acctmgr_quota_broken", TWO_NODES, opts, Some(state.path().to_path_buf()));
    assert!(data(&mut h).assocs.iter().any(|a| a.user == "alice" && a.account == "research"), "imported");
    drop(h);
    let broken = "quota.conf:1: unknown key `bogus`".to_string();
    let opts = CtlOptions { quota_error: Some(broken.clone()), ..CtlOptions::default() };
    let mut h = Harness::new_in("acctmgr_quota_broken", TWO_NODES, opts, Some(state.path().to_path_buf()));
    assert!(data(&mut h).assocs.iter().any(|a| a.user == "alice" && a.account == "research"), "kept from the database");
    drop(h);
    // A first start: refused with the file's error.
    let fresh = tempfile::tempdir().unwrap();
    let cluster = flotilla_core::config::parse_cluster(("slurm.conf", TWO_NODES), None, None, &mut flotilla_core::config::no_includes).unwrap();
    let store = flotilla_slurmctld::store::Store::open(fresh.path(), flotilla_slurmctld::store::SyncMode::Normal).unwrap();
    let opts = CtlOptions { quota_error: Some(broken.clone()), ..CtlOptions::default() };
    let r = flotilla_slurmctld::daemon::controller(&cluster, store, opts, std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)), 0);
    assert_eq!(r.err().map(|e| e.to_string()), Some(broken));
}
