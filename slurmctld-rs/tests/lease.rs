//! The leader lease and its epoch (`store::lease`): at no interleaving do two controllers
//! commit in one epoch.
//!
//! The property test drives three controllers — each its own `Store` connection to one
//! database, as three processes would be — through random sequences of acquire, commit,
//! renew, check, release, crash (the process gone without releasing: kill -9, or a zombie
//! that later resumes) and restart, with the lease's clock a table the test advances (the
//! lease's real statements, only `now` replaced). A controller that is told it lost the lease
//! steps down (fail-stop: it does nothing more until restarted as a new holder). After every
//! step: each epoch's commits all come from one holder, epochs of commits never go back, and
//! the database holds exactly what the last successful commit wrote. On SQLite with a fixed
//! small case count, on PostgreSQL with fewer cases, and on PostgreSQL under real
//! concurrency (threads racing with the database's own clock).

mod backends;

use flotilla_slurmctld::store::{Acquired, Store, StoreError, SyncMode, WriteBatch};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(1000);
const CLOCK: &str = "(SELECT ms FROM lease_test_clock)";

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize),
    Commit(usize),
    Renew(usize),
    Check(usize),
    Release(usize),
    /// The process stops without releasing (kill -9, SIGSTOP); its store is kept to resume.
    Pause(usize),
    /// A paused process resumes (a zombie leader after SIGCONT).
    Resume(usize),
    /// A restart: a new process, a new holder.
    Restart(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize).prop_map(Op::Acquire),
        6 => (0..3usize).prop_map(Op::Commit),
        2 => (0..3usize).prop_map(Op::Renew),
        1 => (0..3usize).prop_map(Op::Check),
        1 => (0..3usize).prop_map(Op::Release),
        1 => (0..3usize).prop_map(Op::Pause),
        1 => (0..3usize).prop_map(Op::Resume),
        1 => (0..3usize).prop_map(Op::Restart),
        3 => (0..1600u64).prop_map(Op::Advance),
    ]
}

/// One controller process.
struct Ctl {
    store: Store,
    /// Told it lost the lease: steps down, does nothing more.
    stepped_down: bool,
    paused: bool,
    incarnation: u32,
}

/// A committed write: which controller incarnation, in which epoch, wrote which value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Commit {
    holder: (usize, u32),
    epoch: u64,
    value: u64,
}

fn check_history(log: &[Commit]) -> Result<(), String> {
    let mut by_epoch: BTreeMap<u64, (usize, u32)> = BTreeMap::new();
    for c in log {
        if let Some(h) = by_epoch.insert(c.epoch, c.holder) {
            if h != c.holder {
                return Err(format!("epoch {} committed by {:?} and {:?}: {log:?}", c.epoch, h, c.holder));
            }
        }
    }
    for w in log.windows(2) {
        if w[1].epoch < w[0].epoch {
            return Err(format!("a commit of epoch {} after one of epoch {}: {log:?}", w[1].epoch, w[0].epoch));
        }
    }
    Ok(())
}

/// Runs `ops` on three controllers opened by `open`; errors name the broken rule.
fn run(open: &dyn Fn() -> Store, ops: &[Op]) -> Result<(), String> {
    let first = open();
    first.db().batch("DROP TABLE IF EXISTS lease_test_clock; CREATE TABLE lease_test_clock (ms BIGINT NOT NULL); INSERT INTO lease_test_clock VALUES (1000000)").unwrap();
    first.db().exec("UPDATE ha_lease SET holder = '', epoch = 0, expires_at = 0, session = 0", &[]).unwrap();
    first.db().exec("UPDATE meta SET value = 1 WHERE key = 'next_job_id'", &[]).unwrap();
    let mk = |incarnation: u32| {
        let mut s = open();
        s.set_lease_clock(Some(CLOCK.into()));
        Ctl { store: s, stepped_down: false, paused: false, incarnation }
    };
    let mut ctls: Vec<Ctl> = (0..3).map(|_| mk(0)).collect();
    drop(first);
    let mut log: Vec<Commit> = Vec::new();
    // Processes gone without releasing: their connections stay open until the case ends.
    let mut graveyard = Vec::new();
    let mut value = 0u64;
    for op in ops {
        match *op {
            Op::Advance(ms) => {
                ctls[0].store.db().exec("UPDATE lease_test_clock SET ms = ms + ?1", &[flotilla_slurmctld::store::backend::Param::Int(ms as i64)]).unwrap();
            }
            Op::Pause(i) => ctls[i].paused = true,
            Op::Resume(i) => ctls[i].paused = false,
            Op::Restart(i) => {
                // The old process is gone without releasing (as a killed process leaves its
                // lease in the database).
                let next = mk(ctls[i].incarnation + 1);
                graveyard.push(std::mem::replace(&mut ctls[i], next));
            }
            Op::Acquire(i) | Op::Commit(i) | Op::Renew(i) | Op::Check(i) | Op::Release(i) if ctls[i].paused || ctls[i].stepped_down => {}
            Op::Acquire(i) => {
                if ctls[i].store.lease().is_none() {
                    let holder = format!("c{i}.{}", ctls[i].incarnation);
                    match ctls[i].store.acquire_lease(&holder, "", TTL, false).unwrap() {
                        Acquired::Leader(e) => {
                            if log.last().is_some_and(|c| c.epoch >= e) {
                                return Err(format!("acquired epoch {e} not above the last commit's {:?}", log.last()));
                            }
                        }
                        Acquired::Held(_) => {}
                    }
                }
            }
            Op::Commit(i) => {
                let c = &mut ctls[i];
                if c.store.lease().is_none() {
                    continue; // a standby writes nothing
                }
                value += 1;
                let epoch = c.store.epoch();
                match c.store.commit(&WriteBatch { next_job_id: Some(value), ..WriteBatch::default() }, &|_| None) {
                    Ok(()) => log.push(Commit { holder: (i, c.incarnation), epoch, value }),
                    Err(StoreError::LeaseLost { .. }) => c.stepped_down = true,
                    Err(e) => return Err(format!("commit: {e}")),
                }
            }
            Op::Renew(i) => match ctls[i].store.renew_lease() {
                Ok(()) => {}
                Err(StoreError::LeaseLost { .. }) => ctls[i].stepped_down = true,
                Err(e) => return Err(format!("renew: {e}")),
            },
            Op::Check(i) => match ctls[i].store.check_lease() {
                Ok(()) => {}
                Err(StoreError::LeaseLost { .. }) => ctls[i].stepped_down = true,
                Err(e) => return Err(format!("check: {e}")),
            },
            Op::Release(i) => {
                // A clean shutdown: the process ends after it.
                ctls[i].store.release_lease();
                ctls[i].stepped_down = true;
            }
        }
        check_history(&log)?;
        let stored: i64 = ctls[0]
            .store
            .db()
            .query("SELECT value FROM meta WHERE key = 'next_job_id'", &[])
            .map_err(|e| e.to_string())?[0]
            .get(0)
            .map_err(|e| e.to_string())?;
        let stored = stored as u64;
        let want = log.last().map_or(1, |c| c.value);
        if stored != want {
            return Err(format!("the database holds next_job_id {stored}, the last successful commit wrote {want}"));
        }
    }
    drop(graveyard);
    drop(ctls);
    Ok(())
}

/// Cases per run, fixed. The runners are built here, not by `proptest!`: that macro lets
/// `PROPTEST_CASES` override its configuration (proptest's `contextualize_config`), and CI's
/// PROPTEST_CASES=10000 would run each of these (three stores on a real database per case)
/// for minutes.
const SQLITE_CASES: u32 = 256;
const POSTGRES_CASES: u32 = 24;

fn runner(cases: u32) -> proptest::test_runner::TestRunner {
    proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases))
}

#[test]
fn no_two_controllers_commit_in_one_epoch_sqlite() {
    // One database for every case (each case resets the lease, the clock and the sequence
    // first), so that a case costs its operations, not a new database's migrations.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    // Durability is not under test here: without fsync a case costs its statements, not the
    // shared disk's flushes (which took minutes on a loaded machine).
    let open = || {
        let s = Store::open(&path, SyncMode::Normal).unwrap();
        s.db().batch("PRAGMA synchronous=OFF").unwrap();
        s
    };
    runner(SQLITE_CASES)
        .run(&prop::collection::vec(op(), 1..60), |ops| {
            let r = run(&open, &ops);
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            Ok(())
        })
        .unwrap();
}

#[test]
fn no_two_controllers_commit_in_one_epoch_postgres() {
    let Some(pg) = backends::TestPg::start("no_two_controllers_commit_in_one_epoch_postgres") else { return };
    runner(POSTGRES_CASES)
        .run(&prop::collection::vec(op(), 1..40), |ops| {
            let r = run(&|| pg.store(), &ops);
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            Ok(())
        })
        .unwrap();
}

/// Real concurrency on PostgreSQL with its own clock: three threads each loop taking the lease
/// (100 ms), committing, and now and then stalling past the lease (a paused leader) before
/// committing again; every commit that returned Ok is logged with its epoch. No epoch has two
/// holders, and stalled leaders find their lease lost.
#[test]
fn racing_controllers_on_postgres_never_share_an_epoch() {
    let Some(pg) = backends::TestPg::start("racing_controllers_on_postgres_never_share_an_epoch") else { return };
    // (epoch, thread, incarnation) of each commit that returned Ok.
    let log: Arc<Mutex<Vec<(u64, usize, u32)>>> = Arc::default();
    let lost = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(4);
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let (conf, log, lost) = (pg.conf(), log.clone(), lost.clone());
            std::thread::spawn(move || {
                let mut incarnation = 0u32;
                let mut n = 0u64;
                let mut zombies = Vec::new();
                while Instant::now() < deadline {
                    incarnation += 1;
                    let mut s = Store::open_postgres(&conf).unwrap();
                    let holder = format!("t{t}.{incarnation}");
                    // A standby: polls until the lease is its.
                    while let Acquired::Held(_) = s.acquire_lease(&holder, "", Duration::from_millis(100), false).unwrap() {
                        if Instant::now() >= deadline {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let epoch = s.epoch();
                    loop {
                        n += 1;
                        if n % 7 == 0 {
                            std::thread::sleep(Duration::from_millis(150)); // stalled past the lease
                        }
                        match s.commit(&WriteBatch { next_job_id: Some(n), ..WriteBatch::default() }, &|_| None) {
                            Ok(()) => log.lock().unwrap().push((epoch, t, incarnation)),
                            Err(StoreError::LeaseLost { .. }) => {
                                lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                break;
                            }
                            Err(e) => panic!("commit: {e}"),
                        }
                        if Instant::now() >= deadline {
                            break;
                        }
                    }
                    // A stepped-down process: its connection stays (a zombie), the lease
                    // passes by expiry.
                    zombies.push(s);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let log = log.lock().unwrap();
    let mut holders: BTreeMap<u64, (usize, u32)> = BTreeMap::new();
    for &(epoch, t, inc) in log.iter() {
        let h = holders.entry(epoch).or_insert((t, inc));
        assert_eq!(*h, (t, inc), "epoch {epoch} committed by two holders");
    }
    let epochs = holders.len();
    let lost = lost.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("{} commits in {epochs} epochs; {lost} leaders found their lease lost", log.len());
    assert!(epochs >= 3 && lost >= 2, "the leadership changed hands: {epochs} epochs, {lost} lost");
}
