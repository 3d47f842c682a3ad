//! The PostgreSQL store (`StateStorageType=state/postgres`) on a throw-away server: the
//! password file's rules, a refused login, and a server restarted between commits (the commit
//! that finds it gone fails as one the controller may retry, the next one reconnects).

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
