//! The PostgreSQL store (`StateStorageType=state/postgres`) on a throw-away server: the
//! password file's rules, a refused login, and a server restarted between commits (a commit
//! while it is down fails as one the controller may retry; once it is back, a turn whose
//! connection is found lost before its COMMIT reconnects and runs again, and a transaction
//! whose connection was lost never "commits" on a new one).

mod backends;

use backends::TestPg;
use flotilla_slurmctld::store::postgres::{read_password_file, PassFileError};
use flotilla_slurmctld::store::{Store, WriteBatch};
use std::os::unix::fs::PermissionsExt;

fn write(path: &std::path::Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn the_password_file_must_be_the_controllers_and_private() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pw");
    write(&p, "s3cret\nsecond line ignored\n", 0o600);
    assert_eq!(read_password_file(&p).unwrap(), "s3cret");
    write(&p, "s3cret\n", 0o400);
    assert_eq!(read_password_file(&p).unwrap(), "s3cret");
    for mode in [0o640, 0o604, 0o660] {
        write(&p, "s3cret\n", mode);
        let e = read_password_file(&p).unwrap_err();
        assert!(matches!(e, PassFileError::Unsafe { .. }), "{mode:o}: {e}");
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }
    // Through a symlink: refused (O_NOFOLLOW), never read.
    write(&p, "s3cret\n", 0o600);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    assert!(matches!(read_password_file(&link), Err(PassFileError::Io { .. })));
    assert!(matches!(read_password_file(&dir.path().join("missing")), Err(PassFileError::Io { .. })));
    if nix::unistd::geteuid().is_root() {
        // Another user's file, however private.
        std::os::unix::fs::chown(&p, Some(2001), None).unwrap();
        let e = read_password_file(&p).unwrap_err();
        assert!(e.to_string().contains("owned by uid 2001"), "{e}");
    }
}

#[test]
fn a_wrong_password_is_refused_for_good() {
    let Some(pg) = TestPg::start("a_wrong_password_is_refused_for_good") else { return };
    let mut conf = pg.conf();
    conf.password = Some("wrong".into());
    let e = Store::open_postgres(&conf).unwrap_err();
    assert!(e.to_string().contains("password authentication failed"), "{e}");
    assert!(!e.may_recover(), "a refused login is not waited out: {e}");
    assert_eq!(pg.store().schema_version().unwrap(), flotilla_slurmctld::store::SCHEMA_VERSION);
}

#[test]
fn a_restarted_server_fails_one_commit_then_is_reconnected() {
    let Some(mut pg) = TestPg::start("a_restarted_server_fails_one_commit_then_is_reconnected") else { return };
    let mut store = pg.store();
    let batch = |n: u64| WriteBatch { next_job_id: Some(n), ..WriteBatch::default() };
    store.commit(&batch(10), &|_| None).unwrap();
    pg.pg.stop("fast").unwrap();
    let e = store.commit(&batch(11), &|_| None).unwrap_err();
    assert!(e.may_recover(), "the server gone is waited out: {e}");
    // Still down: a reconnect fails, also as something to wait out.
    let e = store.commit(&batch(11), &|_| None).unwrap_err();
    assert!(e.may_recover(), "{e}");
    pg.pg.restart().unwrap();
    store.commit(&batch(12), &|_| None).unwrap();
    assert_eq!(store.load(0).unwrap().next_job_id, 12);
    // After an immediate stop (a crash of the server) the same, and the commits before it kept.
    pg.pg.stop("immediate").unwrap();
    assert!(store.commit(&batch(13), &|_| None).unwrap_err().may_recover());
    pg.pg.restart().unwrap();
    assert_eq!(store.load(0).unwrap().next_job_id, 12, "the failed commit left nothing");
    // A restart between two turns costs no failed commit: the connection found lost before
    // anything of the turn was kept is replaced and the turn runs.
    pg.pg.stop("fast").unwrap();
    pg.pg.restart().unwrap();
    store.commit(&batch(14), &|_| None).unwrap();
    assert_eq!(store.load(0).unwrap().next_job_id, 14);
}

/// The server ends the store's session (`pg_terminate_backend`, as a restart or an
/// administrator does) just before a turn: the turn's BEGIN meets the dying session or a
/// closed client; either way nothing of it was kept, so it runs again on a new connection and
/// succeeds. Twenty times, with the lease held (the fence goes with the retried turn).
#[test]
fn a_turn_whose_connection_is_lost_before_its_commit_runs_again() {
    let Some(pg) = TestPg::start("a_turn_whose_connection_is_lost_before_its_commit_runs_again") else { return };
    let mut store = pg.store();
    let admin = pg.store();
    let ttl = std::time::Duration::from_secs(30);
    assert!(matches!(
        store.acquire_lease("a:1:x", "127.0.0.1:1", ttl, false).unwrap(),
        flotilla_slurmctld::store::Acquired::Leader(1)
    ));
    let batch = |n: u64| WriteBatch { next_job_id: Some(n), ..WriteBatch::default() };
    store.commit(&batch(10), &|_| None).unwrap();
    for n in 11..31u64 {
        let pid: i64 = store.db().query("SELECT CAST(pg_backend_pid() AS BIGINT)", &[]).unwrap()[0].get(0).unwrap();
        let ended = admin.db().query("SELECT pg_terminate_backend(CAST(?1 AS INTEGER))", &flotilla_slurmctld::store::backend::params![pid]).unwrap();
        assert!(ended[0].get::<bool>(0).unwrap(), "session {pid} ended");
        store.commit(&batch(n), &|_| None).unwrap_or_else(|e| panic!("turn {n}, its session {pid} ended before it: {e}"));
    }
    assert_eq!(store.load(0).unwrap().next_job_id, 30);
    assert_eq!(store.lease_row().unwrap().epoch, 1, "the same lease throughout");
}

/// A transaction whose connection is lost between its statements and its COMMIT fails at the
/// COMMIT: the server rolled it back, and a COMMIT sent on a new connection would answer
/// success for a transaction that no longer exists.
#[test]
fn a_connection_lost_inside_a_transaction_never_commits_on_a_new_one() {
    let Some(mut pg) = TestPg::start("a_connection_lost_inside_a_transaction_never_commits_on_a_new_one") else { return };
    let mut store = pg.store();
    store.commit(&WriteBatch { next_job_id: Some(10), ..WriteBatch::default() }, &|_| None).unwrap();
    let db = store.db();
    db.begin().unwrap();
    db.exec("UPDATE meta SET value = 99 WHERE key = 'next_job_id'", &[]).unwrap();
    pg.pg.stop("fast").unwrap();
    pg.pg.restart().unwrap();
    let e = db.commit().unwrap_err();
    assert!(e.connection_lost(), "{e}");
    assert_eq!(store.load(0).unwrap().next_job_id, 10, "nothing of the lost transaction kept");
}

/// The two dialects' migrations (`sql/` and `sql/postgres/`) make the same tables with the
/// same columns in the same order (PostgreSQL's `acct_qos` adds `ord`, its stand-in for
/// SQLite's `rowid`), and every number is applied on both.
#[test]
fn both_dialects_make_the_same_schema() {
    let Some(pg) = TestPg::start("both_dialects_make_the_same_schema") else { return };
    let dir = tempfile::tempdir().unwrap();
    let lite = Store::open(dir.path(), flotilla_slurmctld::store::SyncMode::Normal).unwrap();
    let post = pg.store();
    let versions = |s: &Store| -> Vec<i64> {
        s.db().query("SELECT version FROM schema_migrations ORDER BY version", &[]).unwrap().iter().map(|r| r.get(0).unwrap()).collect()
    };
    assert_eq!(versions(&lite), versions(&post));
    let tables = |s: &Store, sql: &str| -> Vec<String> {
        s.db().query(sql, &[]).unwrap().iter().map(|r| r.get(0).unwrap()).collect()
    };
    let lt = tables(&lite, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    let pt = tables(&post, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
    assert_eq!(lt, pt);
    for t in &lt {
        let lc = tables(&lite, &format!("SELECT name FROM pragma_table_info('{t}') ORDER BY cid"));
        let mut pc = tables(
            &post,
            &format!("SELECT column_name::text FROM information_schema.columns WHERE table_name = '{t}' ORDER BY ordinal_position"),
        );
        if t == "acct_qos" {
            pc.retain(|c| c != "ord");
        }
        assert_eq!(lc, pc, "columns of {t}");
    }
}
