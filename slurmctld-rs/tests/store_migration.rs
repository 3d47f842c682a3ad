//! An old-format database: `tests/fixtures/store_v4.sql` was written by the store as it was at
//! schema version 4 (job records as the serde JSON of the controller's and the core's types,
//! "format 0") from the records of `store_data`; the store's row types read it, and everything
//! must load as before.

mod common;
mod store_data;

use flotilla_proto::JobStateWire;
use flotilla_slurmctld::job::JobRecord;
use flotilla_slurmctld::store::{rows, Store, SyncMode};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;
use store_data::*;

/// Creates `<dir>/flotilla.db` from the fixture (the version 4 database, untouched).
fn restore_into(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let conn = Connection::open(dir.join("flotilla.db")).unwrap();
    conn.execute_batch(include_str!("fixtures/store_v4.sql")).unwrap();
}

fn restore() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    restore_into(dir.path());
    dir
}

/// The fixture's jobs as `Store::load(CUTOFF)` must return them: not finished, or finished at
/// or after the cutoff, by id.
fn expected_loaded() -> Vec<JobRecord> {
    jobs()
        .into_iter()
        .filter(|j| !j.state.is_finished() || j.end_time.is_some_and(|t| t >= CUTOFF))
        .collect()
}

#[test]
fn old_database_loads_every_job_identically() {
    let dir = restore();
    let store = Store::open(dir.path(), SyncMode::Full).unwrap();
    assert_eq!(store.schema_version().unwrap(), 4);
    let l = store.load(CUTOFF).unwrap();
    assert_eq!(l.next_job_id, 11);
    let want = expected_loaded();
    assert_eq!(l.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), want.iter().map(|j| j.id).collect::<Vec<_>>());
    for (got, want) in l.jobs.iter().zip(&want) {
        assert_eq!(got, want, "job {}", want.id);
    }
    // Every pending and running job is there (the controller restores exactly these).
    let live: Vec<u64> = l.jobs.iter().filter(|j| !j.state.is_finished()).map(|j| j.id).collect();
    assert_eq!(live, vec![3, 4, 5, 6, 7, 8, REPLICA]);

    let nodes: Vec<_> = l
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.boot_epoch, rows::avail_from_json(&n.avail).unwrap()))
        .collect();
    assert_eq!(nodes, store_data::nodes());

    assert_eq!(l.svc.services.len(), 1);
    assert_eq!(l.svc.services[0].0, 1);
    assert_eq!(rows::service_from_json(&l.svc.services[0].1).unwrap(), service());
    assert_eq!(l.svc.next_service_id, 2);
    assert_eq!(l.svc.next_replica_id, REPLICA + 1);
    assert_eq!(l.svc.alerts.len(), 1);
    assert_eq!(l.svc.alerts[0].job_id, Some(4));

    // The tables without JSON are as the version 4 store wrote them.
    let runs = flotilla_slurmctld::svcstore::runs(store.conn(), 10, 3).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].step, runs[0].state.as_str(), runs[0].signal), (2, "REQUEUED", 15));
    assert_eq!(store.next_step_id(3).unwrap(), 1);
    assert_eq!(store.script(3).unwrap().unwrap().0, "#!/bin/sh\necho 3\n");
}

/// The real controller on the migrated fixture: its running and pending jobs are there,
/// running on their nodes, right after the start (no node daemon has registered yet).
#[test]
fn controller_restarted_on_an_old_database_keeps_its_running_and_pending_jobs() {
    let env = common::Env::new(5);
    restore_into(&env.path("state"));
    let ctl = common::Ctl::start(&env, 0, &[]);
    let jobs: BTreeMap<u64, flotilla_proto::JobInfo> =
        common::all_jobs(&env, ctl.addr).into_iter().map(|j| (j.job_id, j)).collect();
    let state = |id: u64| jobs.get(&id).and_then(|j| j.state);
    assert_eq!(state(3), Some(JobStateWire::Running), "{jobs:?}");
    assert_eq!(jobs[&3].nodes, "gpu[01-02]");
    assert_eq!(state(6), Some(JobStateWire::Running));
    assert_eq!(jobs[&6].nodes, "gpu03");
    assert_eq!(state(4), Some(JobStateWire::Pending));
    assert_eq!(jobs[&4].reason, "JobHeldUser");
    let array = jobs.values().find(|j| j.array_task_str.is_some()).expect("the array's pending tasks");
    assert_eq!((array.job_id, array.state), (5, Some(JobStateWire::Pending)));
    assert_eq!(array.array_task_str.as_deref(), Some("1-3%2"));
    let db = Connection::open(common::state_dir_db(&env)).unwrap();
    let version: u32 = db.query_row("SELECT MAX(version) FROM schema_migrations", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 4);
}
