//! The controller's clock (STYLE.md "fakes at the edges"): every time the controller reads
//! for scheduling — submit, eligible, start and end times, time limits, begin times, node
//! timeouts, the timer periods of its owner loop — comes from one [`Clock`].
//!
//! - [`RealClock`], the default: the system's wall clock.
//! - [`ScaledClock`], for trace replay only (`slurmctld --time-scale F`, test-only): time starts
//!   at the wall clock when the controller starts and then runs `F` times faster:
//!   `now = start + (real time elapsed) × F`. The owner loop's periods (`--tick-ms`,
//!   `--sched-interval-ms`, `--debounce-ms`, given in controller time) shrink by `F` in real
//!   time ([`Clock::real`]), never below [`MIN_REAL_PERIOD`].
//!
//! What stays on the real clock whatever the scale: credentials and tokens (signed and checked
//! against other processes' real clocks), the leader lease (a real-time contract with the other
//! controllers and PostgreSQL), and durations measured for statistics (cycle and turn times,
//! `sdiag`). Node daemons need no scaled clock of their own: the controller stamps every job
//! time itself, and an emulated node (`flotilla emulate --time-scale F`) only runs each job for
//! `duration / F` real seconds.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The shortest real period a scaled clock gives the owner loop's timers (1 ms): a shorter
/// one would only spin the loop.
pub const MIN_REAL_PERIOD: Duration = Duration::from_millis(1);

/// Where the controller's time comes from.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Controller time: seconds since the Unix epoch.
    fn now(&self) -> i64;
    /// The real duration in which controller time advances by `d` (a timer's period).
    fn real(&self, d: Duration) -> Duration;
    /// Controller seconds per real second (1 for the real clock).
    fn scale(&self) -> f64;
}

/// The system's wall clock (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

/// Seconds since the epoch on the system's wall clock (0 before 1970).
fn wall_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Clock for RealClock {
    fn now(&self) -> i64 {
        wall_secs()
    }
    fn real(&self, d: Duration) -> Duration {
        d
    }
    fn scale(&self) -> f64 {
        1.0
    }
}

/// A clock running `factor` times faster than real time from `origin` (test-only: trace
/// replay).
#[derive(Debug, Clone, Copy)]
pub struct ScaledClock {
    origin: i64,
    started: Instant,
    factor: f64,
}

/// Why a time scale is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid time scale {0}: expected a finite number of at least 1")]
pub struct BadScale(pub String);

impl ScaledClock {
    /// A clock at `origin` (s since the epoch) now, running `factor` times faster than real
    /// time from here on.
    ///
    /// Errors: `factor` below 1, infinite or NaN (a slower clock would stretch every timer
    /// past what the daemons around it expect).
    pub fn new(origin: i64, factor: f64) -> Result<ScaledClock, BadScale> {
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(BadScale(factor.to_string()));
        }
        Ok(ScaledClock {
            origin,
            started: Instant::now(),
            factor,
        })
    }

    /// A clock starting at the wall clock's time now.
    ///
    /// Errors: as [`ScaledClock::new`].
    pub fn from_wall(factor: f64) -> Result<ScaledClock, BadScale> {
        ScaledClock::new(wall_secs(), factor)
    }

    /// Parses `--time-scale`'s value.
    ///
    /// Errors: not a number, or refused by [`ScaledClock::new`].
    pub fn parse_factor(s: &str) -> Result<f64, BadScale> {
        let f: f64 = s.trim().parse().map_err(|_| BadScale(s.to_string()))?;
        ScaledClock::new(0, f).map(|c| c.factor)
    }

    /// Controller time after `elapsed` real time since the clock started: `origin +
    /// ⌊elapsed × factor⌋` seconds.
    pub fn at(&self, elapsed: Duration) -> i64 {
        let s = (elapsed.as_secs_f64() * self.factor).floor();
        self.origin.saturating_add(if s >= i64::MAX as f64 {
            i64::MAX
        } else {
            s as i64
        })
    }
}

impl Clock for ScaledClock {
    fn now(&self) -> i64 {
        self.at(self.started.elapsed())
    }
    fn real(&self, d: Duration) -> Duration {
        d.div_f64(self.factor).max(MIN_REAL_PERIOD)
    }
    fn scale(&self) -> f64 {
        self.factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_clock_reads_the_wall_clock_and_keeps_periods() {
        let before = wall_secs();
        let now = RealClock.now();
        assert!(now >= before && now <= wall_secs());
        assert_eq!(
            RealClock.real(Duration::from_millis(20)),
            Duration::from_millis(20)
        );
        assert_eq!(RealClock.scale(), 1.0);
    }

    #[test]
    fn a_scaled_clock_runs_factor_times_faster_from_its_origin() {
        let c = ScaledClock::new(1_000_000, 100.0).unwrap();
        assert_eq!(c.at(Duration::ZERO), 1_000_000);
        assert_eq!(
            c.at(Duration::from_millis(9)),
            1_000_000,
            "0.9 s of controller time is still the same second"
        );
        assert_eq!(c.at(Duration::from_millis(10)), 1_000_001);
        assert_eq!(c.at(Duration::from_millis(1_500)), 1_000_150);
        assert_eq!(c.at(Duration::from_secs(3_600)), 1_360_000);
        // Monotonic in real time.
        let mut last = c.at(Duration::ZERO);
        for ms in (0..5_000).step_by(7) {
            let t = c.at(Duration::from_millis(ms));
            assert!(t >= last);
            last = t;
        }
        // Never overflows.
        assert_eq!(
            ScaledClock::new(i64::MAX - 5, 1e9)
                .unwrap()
                .at(Duration::from_secs(1 << 40)),
            i64::MAX
        );
    }

    #[test]
    fn a_scaled_clock_reads_its_origin_at_start_then_moves_on() {
        let c = ScaledClock::new(500, 1000.0).unwrap();
        let t0 = c.now();
        assert!((500..500 + 1000).contains(&t0), "{t0}");
        // Wait (bounded) until 2 ms of real time have passed: at least one controller second.
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.now() < t0 + 2 {
            assert!(
                Instant::now() < deadline,
                "the scaled clock did not advance"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_scaled_clock_shortens_timer_periods_down_to_a_floor() {
        let c = ScaledClock::new(0, 100.0).unwrap();
        assert_eq!(c.real(Duration::from_secs(1)), Duration::from_millis(10));
        assert_eq!(c.real(Duration::from_secs(60)), Duration::from_millis(600));
        assert_eq!(c.real(Duration::from_millis(20)), MIN_REAL_PERIOD);
        assert_eq!(c.scale(), 100.0);
        assert_eq!(
            ScaledClock::new(0, 1.0)
                .unwrap()
                .real(Duration::from_millis(20)),
            Duration::from_millis(20)
        );
    }

    #[test]
    fn bad_scales_are_refused() {
        for bad in ["0", "0.5", "-3", "inf", "NaN", "fast", ""] {
            assert!(ScaledClock::parse_factor(bad).is_err(), "{bad}");
        }
        assert_eq!(ScaledClock::parse_factor("20000").unwrap(), 20_000.0);
        assert_eq!(ScaledClock::parse_factor("1.5").unwrap(), 1.5);
        assert_eq!(
            ScaledClock::new(0, 0.0).unwrap_err().to_string(),
            "invalid time scale 0: expected a finite number of at least 1"
        );
    }
}
