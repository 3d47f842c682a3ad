//! Waits for end-to-end tests: every wait has a deadline, and a wait that reaches it fails the
//! test with what it waited for (never a warning and on). Two kinds:
//!
//! - [`wait_until`]: until a predicate holds (a state, a file, a process).
//! - [`Turns`] barriers ([`wait_cycles`], [`LocalCluster::wait_cycles`]): until the controller
//!   has run whole scheduling cycles after the call, counted by `Request::QueryTurns`. Before
//!   asserting that something did *not* happen (a held job did not start, a signal did not
//!   end a job), wait for a cycle instead of sleeping: whatever the controller decides about
//!   the events it had before the barrier is then decided and visible. [`wait_settled`] is
//!   the cheap kind: until no cycle is due.

use std::path::Path;
use std::time::{Duration, Instant};

use flotilla_proto::client::Client;
use flotilla_proto::{Request, Response, Role};

use crate::cluster::LocalCluster;

/// Waits until `f` is true, polling every 20 ms; after `timeout` fails the test with
/// `timed out after {timeout:?} waiting for {what}` and `diag()` (log tails, last states).
pub fn wait_until(what: &str, timeout: Duration, f: impl FnMut() -> bool, diag: impl Fn() -> String) {
    if !poll_until(timeout, f) {
        panic!("timed out after {timeout:?} waiting for {what}\n{}", diag());
    }
}

/// [`wait_until`] for a caller that records a timeout instead of failing at once (a golden
/// replay marks the case failed and goes on): true when `f` held within `timeout`.
pub fn poll_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !f() {
        if t0.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The controller's counters (`Request::QueryTurns`): owner-loop turns and scheduling cycles
/// completed since it started, as of the turn that answered (that turn not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turns {
    /// Turns completed (each: events handled, timers, maybe a cycle, the commit).
    pub turns: u64,
    /// Scheduling cycles completed.
    pub cycles: u64,
    /// A scheduling cycle is due (an event since the last one asked for it).
    pub cycle_due: bool,
}

/// Asks the controller on its local socket `socket` (no credential needed there) for its
/// [`Turns`]. Errors: the connection or the call failed, or the answer is not `Turns`.
pub fn turns(socket: &Path) -> Result<Turns, String> {
    let mut c = Client::connect_unix(socket, Role::Command).map_err(|e| format!("{}: {e}", socket.display()))?;
    match c.call(None, Request::QueryTurns) {
        Ok(Response::Turns { turns, cycles, cycle_due }) => Ok(Turns { turns, cycles, cycle_due }),
        other => Err(format!("turn query: {other:?}")),
    }
}

/// A barrier: returns once the controller on `socket` has completed `n` scheduling cycles that
/// began after this call's first query was handled, each committed with its turn (its replies
/// and node messages sent). Errors, after `timeout`: the cycles did not come (or the controller
/// did not answer), with the counters seen.
pub fn wait_cycles(socket: &Path, n: u64, timeout: Duration) -> Result<Turns, String> {
    let t0 = Instant::now();
    let start = loop {
        match turns(socket) {
            Ok(t) => break t,
            Err(e) if t0.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    loop {
        let now = turns(socket);
        if let Ok(t) = now {
            if t.cycles >= start.cycles + n {
                return Ok(t);
            }
        }
        if t0.elapsed() >= timeout {
            return Err(format!("{n} scheduling cycles after {start:?} did not come in {timeout:?} (now {now:?})"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A barrier without a cycle of its own: returns once no scheduling cycle is due on the
/// controller on `socket` (every cycle that the events it handled so far asked for has run and
/// was committed); at once when none is due. Cheaper than [`wait_cycles`] (which waits for the
/// periodic cycle when nothing asked for one) and enough to make what follows independent of
/// how fast it follows an action that triggers a cycle (a submission: its jobs and array tasks
/// start, and take their ids, in that cycle). Errors, after `timeout`: a cycle stayed due.
pub fn wait_settled(socket: &Path, timeout: Duration) -> Result<Turns, String> {
    let t0 = Instant::now();
    loop {
        let now = turns(socket);
        if let Ok(t) = now {
            if !t.cycle_due {
                return Ok(t);
            }
        }
        if t0.elapsed() >= timeout {
            return Err(format!("a scheduling cycle stayed due for {timeout:?} (last answer {now:?})"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl LocalCluster {
    /// The controller's [`Turns`]; panics when it does not answer.
    pub fn turns(&self) -> Turns {
        turns(&self.socket()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`wait_cycles`] on this cluster's controller, failing the test after 30 s.
    pub fn wait_cycles(&self, n: u64) -> Turns {
        wait_cycles(&self.socket(), n, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"))
    }
}
