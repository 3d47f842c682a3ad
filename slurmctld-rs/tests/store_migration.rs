//! An old-format database: `tests/fixtures/store_v4.sql` was written by the store as it was at
//! schema version 4 (job records as the serde JSON of the controller's and the core's types)
//! from the records of `store_data`.

mod store_data;

use flotilla_core::sched::Decision;
use flotilla_slurmctld::store::{AllocOp, NodeRow, StepRow, Store, SyncMode, WriteBatch};
use flotilla_slurmctld::svcstore::{AlertRow, RunRow, ServiceOp};
use std::collections::BTreeMap;
use store_data::*;

/// Writes the fixture's database into `$STORE_FIXTURE_DIR` with the store of the commit it is
/// run at (it made `tests/fixtures/store_v4.sql` at schema version 4; dump it with
/// `sqlite3 $STORE_FIXTURE_DIR/flotilla.db .dump`).
#[test]
#[ignore = "writes the fixture database; run by hand"]
fn write_v4_fixture() {
    let dir = std::path::PathBuf::from(std::env::var("STORE_FIXTURE_DIR").expect("STORE_FIXTURE_DIR"));
    let mut store = Store::open(&dir, SyncMode::Full).unwrap();
    let jobs: BTreeMap<u64, _> = jobs().into_iter().map(|j| (j.id, j)).collect();
    let mut b = WriteBatch {
        next_job_id: Some(11),
        ..WriteBatch::default()
    };
    for (&id, j) in &jobs {
        b.jobs.insert(id);
        b.acct.insert(id);
        b.steps.insert(id);
        let env = serde_json::to_string(&vec![("PATH".to_string(), "/usr/bin".to_string())]).unwrap();
        b.scripts.push((id, format!("#!/bin/sh\necho {id}\n"), env));
        if matches!(j.state, flotilla_slurmctld::job::JobState::Running | flotilla_slurmctld::job::JobState::Completing) {
            for (a, node) in j.allocs.iter().zip(&j.nodes) {
                b.allocs.push(AllocOp::Insert {
                    job_id: id,
                    node: node.clone(),
                    alloc: a.clone(),
                });
            }
        }
    }
    for (name, boot_epoch, avail) in nodes() {
        b.nodes.push(NodeRow {
            name,
            boot_epoch,
            avail: serde_json::to_string(&avail).unwrap(),
        });
    }
    b.step_rows.push(StepRow {
        job_id: 3,
        step: "0".into(),
        state: "RUNNING".into(),
        exit_code: 0,
        signal: 0,
        start_time: Some(T0 - 450),
        end_time: None,
        nodes: "gpu[01-02]".into(),
    });
    let svc = service();
    b.svc.services.push(ServiceOp::Upsert {
        id: svc.id,
        name: svc.create.name.clone(),
        record: serde_json::to_string(&svc).unwrap(),
    });
    b.svc.next_service_id = Some(2);
    b.svc.next_replica_id = Some(REPLICA + 1);
    let d = Decision::Alert {
        kind: flotilla_core::sched::AlertKind::ReservationCannotFill,
        job: Some(flotilla_core::job::JobId(4)),
        message: "reservation of job 4 cannot fill within 4 h".into(),
    };
    b.svc.alerts.push(AlertRow {
        id: 1,
        time: T0 - 50,
        kind: "ReservationCannotFill".into(),
        job_id: Some(4),
        service: None,
        message: "reservation of job 4 cannot fill within 4 h".into(),
        decision: serde_json::to_value(&d).unwrap().to_string(),
    });
    b.svc.runs.push(RunRow {
        job_id: 10,
        step: 2,
        state: "REQUEUED".into(),
        exit_code: 0,
        signal: 15,
        start_time: Some(T0 - 2000),
        end_time: Some(T0 - 1500),
        nodes: "gpu[01-02]".into(),
    });
    store.commit(&b, &|id| jobs.get(&id)).unwrap();
}

/// A state directory holding the fixture's database.
fn restore() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("flotilla.db")).unwrap();
    conn.execute_batch(include_str!("fixtures/store_v4.sql")).unwrap();
    dir
}

/// The fixture's jobs as `Store::load(CUTOFF)` must return them: not finished, or finished at
/// or after the cutoff, by id.
fn expected_loaded() -> Vec<flotilla_slurmctld::job::JobRecord> {
    jobs()
        .into_iter()
        .filter(|j| !j.state.is_finished() || j.end_time.is_some_and(|t| t >= CUTOFF))
        .collect()
}

#[test]
fn old_database_loads_every_job_identically() {
    let dir = restore();
    let store = Store::open(dir.path(), SyncMode::Full).unwrap();
    let l = store.load(CUTOFF).unwrap();
    assert_eq!(l.next_job_id, 11);
    let want = expected_loaded();
    assert_eq!(l.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), want.iter().map(|j| j.id).collect::<Vec<_>>());
    for (got, want) in l.jobs.iter().zip(&want) {
        assert_eq!(got, want, "job {}", want.id);
    }
    let nodes: Vec<(String, u64)> = l.nodes.iter().map(|n| (n.name.clone(), n.boot_epoch)).collect();
    assert_eq!(nodes, store_data::nodes().into_iter().map(|(n, e, _)| (n, e)).collect::<Vec<_>>());
}
