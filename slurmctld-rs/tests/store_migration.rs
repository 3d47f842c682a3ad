//! An old-format database: `tests/fixtures/store_v4.sql` was written by the store as it was at
//! schema version 4 (job records as the serde JSON of the controller's and the core's types,
//! "format 0") from the records of `store_data`. Opening it applies migration 5, which rewrites
//! every JSON row through the store's row types ("format 1"); everything must load as before.

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

/// `(key, text, format)` of every row of `table`'s JSON `column`, by key (`format` is `None`
/// before migration 5 added the column).
fn texts(conn: &Connection, table: &str, key: &str, column: &str) -> BTreeMap<String, (String, Option<u32>)> {
    let has_format = conn
        .prepare(&format!("SELECT * FROM {table} LIMIT 0"))
        .unwrap()
        .column_names()
        .contains(&"format");
    let format = if has_format { "format" } else { "NULL" };
    conn.prepare(&format!("SELECT CAST({key} AS TEXT), {column}, {format} FROM {table}"))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Job 1 of the fixture as the migration reads it: the record a controller wrote before the
/// fields with defaults existed, so those fields have their defaults.
fn job1_as_read() -> JobRecord {
    let mut j = jobs().into_iter().find(|j| j.id == 1).unwrap();
    let b = base(1);
    j.submit_host = String::new();
    j.mem_per_cpu_mib = None;
    j.array_tasks = None;
    j.signal = None;
    j.warn_sent = false;
    j.interactive = false;
    j.last_checkpoint_ack = None;
    j.service = None;
    j.acct = Default::default();
    j.command = None;
    j.tres_per_job = None;
    j.tres_per_task = None;
    assert_eq!(b.mem_per_cpu_mib, None);
    j
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
    assert_eq!(store.schema_version().unwrap(), flotilla_slurmctld::store::SCHEMA_VERSION);
    let l = store.load(CUTOFF).unwrap();
    assert_eq!(l.next_job_id, 11);
    let want = expected_loaded();
    assert_eq!(
        l.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        want.iter().map(|j| j.id).collect::<Vec<_>>()
    );
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
    let runs = flotilla_slurmctld::svcstore::runs(store.db(), 10, 3).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].step, runs[0].state.as_str(), runs[0].signal),
        (2, "REQUEUED", 15)
    );
    assert_eq!(store.next_step_id(3).unwrap(), 1);
    assert_eq!(store.script(3).unwrap().unwrap().0, "#!/bin/sh\necho 3\n");
}

#[test]
fn migration_rewrites_every_row_in_the_row_format_and_keeps_the_text() {
    let before_dir = restore();
    let before = Connection::open(before_dir.path().join("flotilla.db")).unwrap();
    let dir = restore();
    let store = Store::open(dir.path(), SyncMode::Full).unwrap();
    let conn = Connection::open(dir.path().join("flotilla.db")).unwrap();
    let versions: Vec<u32> = conn
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, vec![1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);

    for (table, key, column) in [
        ("jobs", "id", "record"),
        ("services", "id", "record"),
        ("nodes", "name", "avail"),
    ] {
        let old = texts(&before, table, key, column);
        let new = texts(&conn, table, key, column);
        assert_eq!(
            old.keys().collect::<Vec<_>>(),
            new.keys().collect::<Vec<_>>(),
            "{table}"
        );
        for (k, (text, format)) in &new {
            assert_eq!(*format, Some(rows::FORMAT), "{table} {k}: format");
            if (table, k.as_str()) == ("jobs", "1") {
                continue;
            }
            // The row types write format 0's text for every record format 0 could hold.
            assert_eq!(text, &old[k].0, "{table} {k}: text changed");
        }
    }
    // Job 1 lacked the defaulted fields: rewritten with them, and read as before.
    let (text, _) = &texts(&conn, "jobs", "id", "record")["1"];
    assert_eq!(text, &rows::job_to_json(&job1_as_read()));
    assert_eq!(rows::job_from_json(text).unwrap(), job1_as_read());
    let (old_text, _) = &texts(&before, "jobs", "id", "record")["1"];
    assert!(!old_text.contains("submit_host"));
    assert_eq!(rows::job_from_json(old_text).unwrap(), job1_as_read());
    // Job 1 ended before the cutoff; loading everything reads it too.
    let all = store.load(0).unwrap();
    assert_eq!(all.jobs.iter().find(|j| j.id == 1).unwrap(), &job1_as_read());
    drop(store);

    // Opening again applies nothing and changes nothing.
    let again = Store::open(dir.path(), SyncMode::Full).unwrap();
    assert_eq!(again.schema_version().unwrap(), flotilla_slurmctld::store::SCHEMA_VERSION);
    assert_eq!(again.load(0).unwrap().jobs, all.jobs);
}

#[test]
fn a_row_the_legacy_decoder_cannot_read_stays_in_format_0_and_fails_as_before() {
    let dir = restore();
    let conn = Connection::open(dir.path().join("flotilla.db")).unwrap();
    conn.execute("UPDATE jobs SET record = '{\"id\":4,\"broken\":' WHERE id = 4", [])
        .unwrap();
    drop(conn);
    let store = Store::open(dir.path(), SyncMode::Full).unwrap();
    let conn = Connection::open(dir.path().join("flotilla.db")).unwrap();
    let (_, format) = &texts(&conn, "jobs", "id", "record")["4"];
    assert_eq!(*format, Some(rows::FORMAT_LEGACY));
    let (_, format) = &texts(&conn, "jobs", "id", "record")["3"];
    assert_eq!(*format, Some(rows::FORMAT));
    let err = store.load(CUTOFF).unwrap_err().to_string();
    assert!(err.contains("corrupt record: job 4"), "{err}");
}

#[test]
fn a_database_from_a_newer_format_is_refused() {
    let dir = restore();
    drop(Store::open(dir.path(), SyncMode::Full).unwrap());
    let conn = Connection::open(dir.path().join("flotilla.db")).unwrap();
    conn.execute("UPDATE nodes SET format = ?1 WHERE name = 'gpu01'", [rows::FORMAT + 1])
        .unwrap();
    drop(conn);
    let store = Store::open(dir.path(), SyncMode::Full).unwrap();
    let err = store.load(CUTOFF).unwrap_err().to_string();
    assert!(err.contains("nodes holds rows of format 2"), "{err}");
}

/// The real controller on the migrated fixture: its running and pending jobs are there,
/// running on their nodes, right after the start (no node daemon has registered yet).
#[test]
fn controller_restarted_on_an_old_database_keeps_its_running_and_pending_jobs() {
    let env = common::Env::new(5);
    restore_into(&env.path("state"));
    let ctl = common::Ctl::start(&env, 0, &[]);
    let jobs: BTreeMap<u64, flotilla_proto::JobInfo> = common::all_jobs(&env, ctl.addr)
        .into_iter()
        .map(|j| (j.job_id, j))
        .collect();
    let state = |id: u64| jobs.get(&id).and_then(|j| j.state);
    assert_eq!(state(3), Some(JobStateWire::Running), "{jobs:?}");
    assert_eq!(jobs[&3].nodes, "gpu[01-02]");
    assert_eq!(state(6), Some(JobStateWire::Running));
    assert_eq!(jobs[&6].nodes, "gpu03");
    assert_eq!(state(4), Some(JobStateWire::Pending));
    assert_eq!(jobs[&4].reason, "JobHeldUser");
    let array = jobs
        .values()
        .find(|j| j.array_task_str.is_some())
        .expect("the array's pending tasks");
    assert_eq!((array.job_id, array.state), (5, Some(JobStateWire::Pending)));
    assert_eq!(array.array_task_str.as_deref(), Some("1-3%2"));
    let db = Connection::open(common::state_dir_db(&env)).unwrap();
    let version: u32 = db
        .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, flotilla_slurmctld::store::SCHEMA_VERSION);
    // Version 12: accounting rows written before it have no constraint.
    let (rows, empty): (i64, i64) = db
        .query_row("SELECT COUNT(*), COUNT(*) FILTER (WHERE constraints = '') FROM acct_jobs", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert!(rows > 0 && rows == empty, "{rows} accounting rows, {empty} without a constraint");
    // Version 13: accounting rows written before it have a derived exit code of 0, step rows
    // no canceller.
    let zero: i64 = db.query_row("SELECT COUNT(*) FROM acct_jobs WHERE derived_ec = 0", [], |r| r.get(0)).unwrap();
    assert_eq!(zero, rows);
    let (steps, nobody): (i64, i64) = db
        .query_row("SELECT COUNT(*), COUNT(*) FILTER (WHERE requid IS NULL) FROM job_steps", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert!(steps > 0 && steps == nobody, "{steps} step rows, {nobody} without a canceller");
    // Version 14: accounting rows written before it keep no pending reason.
    let none: i64 = db.query_row("SELECT COUNT(*) FROM acct_jobs WHERE state_reason_prev = ''", [], |r| r.get(0)).unwrap();
    assert_eq!(none, rows);
    // Version 15: step rows written before it have no CPUs or memory (sacct counts the job's).
    let unknown: i64 = db
        .query_row("SELECT COUNT(*) FROM job_steps WHERE alloc_cpus IS NULL AND alloc_mem_mib IS NULL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(unknown, steps);
}
