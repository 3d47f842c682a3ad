//! Slurm time strings: the time limits `sbatch -t` accepts and the way squeue, sinfo and
//! scontrol print durations; and, in [`calendar`], dates (`2026-11-29T09:19:57`, `sbatch
//! --begin`, `sacct -S/-E`).
//!
//! Everything here reproduces Slurm 22.05 (`src/common/parse_time.c`, squeue's and sinfo's
//! `print.c`) bit for bit, including its oddities; each function says which C function it mirrors.
//! Pure: no clock, no I/O.
//!
//! # Parsing (`sbatch -t`, `--time`)
//!
//! [`time_str2secs`] / [`time_str2mins`] are Slurm's functions of the same name. They accept
//! `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, `D-` and `-D`, plus `-1`, `INFINITE` and
//! `UNLIMITED` (case-insensitive) for no limit. There are no range checks: `10:60` is 11 minutes
//! and `1:70:00` is 2 h 10 min. Seconds round *up* to whole minutes with C's truncating
//! division, `(secs + 59) / 60`, which for a negative `-D` is one minute short of `-D` days.
//!
//! [`parse_time_limit`] is what `sbatch --time` does with that (Slurm's `arg_set_time`): a
//! result of 0 means no limit, and a negative result (only `-D` can give one) is wrapped into
//! the controller's unsigned 32-bit minutes, so `-5` becomes 4294960097 minutes, which sacct
//! shows as `2982611-04:17:00` and squeue as `INVALID`.
//!
//! Deliberate deviation: where Slurm's 32-bit `int` arithmetic would overflow (undefined
//! behaviour in C, garbage in practice, e.g. `99999999` minutes), these functions reject the
//! string instead.
//!
//! # Formatting
//!
//! - [`mins2time_str`] / [`secs2time_str`]: scontrol (`TimeLimit=00:10:00`, `MaxTime=2-00:00:00`,
//!   `RunTime=`) and sacct (`Timelimit`): always `[D-]HH:MM:SS`, `UNLIMITED`, `INVALID`.
//! - [`squeue_secs`], [`squeue_time_limit`]: squeue `%l %L %M` (`10:00`, `1:00:00`,
//!   `1-02:04:00`, `UNLIMITED`, `NOT_SET`, `INVALID` past one year).
//! - [`sinfo_time_limit`]: sinfo `TIMELIMIT` (`30:00`, `2-00:00:00`, `infinite`).

use std::fmt;

pub mod calendar;

pub use calendar::{civil, days_from_civil, fmt_ctime, fmt_time, parse_begin, parse_time, parse_time_spec};

/// Slurm's `INFINITE` (`0xffffffff`): the 32-bit value meaning "no limit" on the wire.
pub const INFINITE: u32 = u32::MAX;

/// Slurm's `NO_VAL` (`0xfffffffe`): the 32-bit value meaning "not set" (for a job's time limit:
/// the partition's `DefaultTime`, else its `MaxTime`, applies).
pub const NO_VAL: u32 = 0xffff_fffe;

/// Seconds in the year past which squeue prints a duration as `INVALID`.
const SQUEUE_MAX_SECS: i64 = 365 * 24 * 3600;

/// A job's time limit as the controller stores it.
///
/// "Not set" (Slurm's `NO_VAL`) is not a variant: it is `Option::<TimeLimit>::None` at the
/// call sites that need it (see [`TimeLimit::from_slurm_u32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TimeLimit {
    /// A limit in whole minutes. Values produced by this module are always below [`NO_VAL`],
    /// so that they survive a trip through Slurm's 32-bit field.
    Minutes(u32),
    /// No limit (Slurm's `INFINITE`; `sbatch -t 0`, `-t UNLIMITED`, `-t INFINITE`).
    Unlimited,
}

impl TimeLimit {
    /// Reads Slurm's 32-bit minutes field: [`NO_VAL`] is `None` (not set), [`INFINITE`] is
    /// [`TimeLimit::Unlimited`], anything else is that many minutes.
    pub const fn from_slurm_u32(minutes: u32) -> Option<TimeLimit> {
        match minutes {
            NO_VAL => None,
            INFINITE => Some(TimeLimit::Unlimited),
            m => Some(TimeLimit::Minutes(m)),
        }
    }

    /// The value Slurm's 32-bit minutes field holds for this limit ([`INFINITE`] when unlimited).
    pub const fn to_slurm_u32(self) -> u32 {
        match self {
            TimeLimit::Minutes(m) => m,
            TimeLimit::Unlimited => INFINITE,
        }
    }

    /// The limit in minutes, `None` when unlimited.
    pub const fn minutes(self) -> Option<u32> {
        match self {
            TimeLimit::Minutes(m) => Some(m),
            TimeLimit::Unlimited => None,
        }
    }
}

impl fmt::Display for TimeLimit {
    /// scontrol's form ([`mins2time_str`]): `00:10:00`, `1-02:04:00`, `UNLIMITED`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&mins2time_str(self.to_slurm_u32()))
    }
}

/// A time string Slurm does not accept.
///
/// Displays as the text Slurm's sbatch prints after `sbatch: error: ` (it then exits with
/// status 255): `Invalid --time specification`. The rejected input is kept for logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid --time specification")]
pub struct TimeError {
    input: String,
}

impl TimeError {
    fn new(input: &str) -> TimeError {
        TimeError {
            input: input.to_owned(),
        }
    }

    /// The string that was rejected.
    pub fn input(&self) -> &str {
        &self.input
    }
}

/// The result of Slurm's `time_str2secs` / `time_str2mins`: a signed 32-bit count (seconds or
/// minutes; negative only for `-D`) or `INFINITE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlurmDuration {
    /// A count in the function's unit (seconds or minutes); may be zero or negative.
    Finite(i32),
    /// `-1`, `INFINITE` or `UNLIMITED`.
    Infinite,
}

/// Slurm's `_is_valid_timespec`: only digits, at most one `-` (never after a `:`), at most two
/// `:`, and enough digit groups for the separators used.
fn is_valid_timespec(s: &str) -> bool {
    let (mut digit, mut dash, mut colon) = (0u32, 0u32, 0u32);
    let mut already_digit = false;
    for b in s.bytes() {
        match b {
            b'0'..=b'9' => {
                if !already_digit {
                    digit += 1;
                    already_digit = true;
                }
            }
            b'-' => {
                already_digit = false;
                dash += 1;
                if colon > 0 {
                    return false;
                }
            }
            b':' => {
                already_digit = false;
                colon += 1;
            }
            _ => return false,
        }
    }
    if digit == 0 || dash > 1 || colon > 2 {
        return false;
    }
    let needed = match (dash > 0, colon) {
        (true, 1) => 3,
        (true, 2) => 4,
        (false, 1) => 2,
        (false, 2) => 3,
        _ => 0,
    };
    digit >= needed
}

/// A run of digits as C's `int`; `None` if it does not fit (or is empty).
fn int_field(digits: &str) -> Option<i32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i32>().ok()
}

/// Up to `N` `:`-separated integer fields, as `sscanf("%d:%d:%d")` reads them from a string
/// that [`is_valid_timespec`] accepted: all present fields are non-empty digit runs.
fn colon_fields(s: &str) -> Option<Vec<i32>> {
    s.split(':').map(int_field).collect()
}

/// Slurm's `time_str2secs`: a time string to seconds.
///
/// Forms: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, `D-` (D days), `-D` (minus D days);
/// `-1`, `INFINITE`, `UNLIMITED` (case-insensitive) give [`SlurmDuration::Infinite`]. Fields
/// have no upper bound (`10:60` is 660 s).
///
/// # Errors
/// [`TimeError`] for anything else (empty, letters, spaces, `1:2:3:4`, `1-2-3`, `:5`, ...) and,
/// unlike Slurm, when the arithmetic would overflow C's 32-bit `int`.
pub fn time_str2secs(s: &str) -> Result<SlurmDuration, TimeError> {
    let err = || TimeError::new(s);
    if s.is_empty() {
        return Err(err());
    }
    if s == "-1" || s.eq_ignore_ascii_case("INFINITE") || s.eq_ignore_ascii_case("UNLIMITED") {
        return Ok(SlurmDuration::Infinite);
    }
    if !is_valid_timespec(s) {
        return Err(err());
    }
    let (d, h, m, sec) = if let Some((days, rest)) = s.split_once('-') {
        // sscanf("%d-%d:%d:%d"): "-D" reads as one negative %d and then stops (the validator
        // allows nothing after it); "D-" stops after the days; otherwise H[:M[:S]] follow.
        if days.is_empty() {
            let d = int_field(rest).ok_or_else(err)?;
            (-d, 0, 0, 0)
        } else {
            let d = int_field(days).ok_or_else(err)?;
            let f = if rest.is_empty() {
                Vec::new()
            } else {
                colon_fields(rest).ok_or_else(err)?
            };
            let get = |i: usize| f.get(i).copied().unwrap_or(0);
            (d, get(0), get(1), get(2))
        }
    } else {
        let f = colon_fields(s).ok_or_else(err)?;
        match f.as_slice() {
            [h, m, sec] => (0, *h, *m, *sec),
            // minutes[:seconds]
            [m] => (0, 0, *m, 0),
            [m, sec] => (0, 0, *m, *sec),
            _ => return Err(err()),
        }
    };
    let total = d
        .checked_mul(86_400)
        .and_then(|d| h.checked_mul(3_600).and_then(|h| d.checked_add(h)))
        .and_then(|t| m.checked_mul(60).and_then(|m| t.checked_add(m)))
        .and_then(|t| t.checked_add(sec))
        .ok_or_else(err)?;
    Ok(SlurmDuration::Finite(total))
}

/// Slurm's `time_str2mins`: [`time_str2secs`] rounded up to minutes as C does it,
/// `(secs + 59) / 60` with truncating division (so `0:45` is 1 and `-5` is -7199, not -7200).
///
/// # Errors
/// As [`time_str2secs`].
pub fn time_str2mins(s: &str) -> Result<SlurmDuration, TimeError> {
    match time_str2secs(s)? {
        SlurmDuration::Infinite => Ok(SlurmDuration::Infinite),
        SlurmDuration::Finite(secs) => {
            let secs = secs.checked_add(59).ok_or_else(|| TimeError::new(s))?;
            Ok(SlurmDuration::Finite(secs / 60))
        }
    }
}

/// A time limit as `sbatch -t` / `--time` takes it (Slurm's `arg_set_time` on top of
/// [`time_str2mins`]).
///
/// `0` (and anything rounding to 0 minutes, e.g. `0:00`) means [`TimeLimit::Unlimited`], as do
/// `-1`, `INFINITE`, `UNLIMITED`. A negative count (`-D`) is wrapped into the controller's
/// unsigned 32-bit minutes the way Slurm's own cast does (`-5` → 4294960097 minutes).
///
/// # Errors
/// [`TimeError`] exactly where sbatch prints `sbatch: error: Invalid --time specification`
/// and exits 255 (plus 32-bit overflow, see the module docs).
pub fn parse_time_limit(s: &str) -> Result<TimeLimit, TimeError> {
    match time_str2mins(s)? {
        SlurmDuration::Infinite | SlurmDuration::Finite(0) => Ok(TimeLimit::Unlimited),
        // Two's-complement wrap, as C's int -> uint32_t conversion. For -D the result is
        // 2^32 - 1440 D + 1, never INFINITE or NO_VAL.
        SlurmDuration::Finite(m) => Ok(TimeLimit::Minutes(m as u32)),
    }
}

/// Days, hours, minutes, seconds of a non-negative second count.
fn split_secs(secs: i64) -> (i64, i64, i64, i64) {
    (
        secs / 86_400,
        (secs / 3_600) % 24,
        (secs / 60) % 60,
        secs % 60,
    )
}

/// `[D-]HH:MM:SS`, days only when non-zero (Slurm's `secs2time_str` body).
fn long_form(secs: i64) -> String {
    let (d, h, m, s) = split_secs(secs);
    if d != 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// `[D-HH:MM:SS | H:MM:SS | M:SS]`: the leading field unpadded (squeue's and sinfo's
/// `_print_secs` body).
fn short_form(secs: i64) -> String {
    let (d, h, m, s) = split_secs(secs);
    if d != 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h != 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// Slurm's `secs2time_str`, used by scontrol (`RunTime=`, `TimeLimit=` of steps, ...):
/// `00:00:15`, `1-02:03:04`; `UNLIMITED` for `INFINITE` (4294967295); `INVALID` when negative.
pub fn secs2time_str(secs: i64) -> String {
    if secs == i64::from(INFINITE) {
        "UNLIMITED".to_owned()
    } else if secs < 0 {
        "INVALID".to_owned()
    } else {
        long_form(secs)
    }
}

/// Slurm's `mins2time_str` on its 32-bit minutes field, used by scontrol (`TimeLimit=`,
/// `MaxTime=`, `DefaultTime=`) and sacct (`Timelimit`): `00:10:00`, `01:00:00`, `1-02:04:00`,
/// `UNLIMITED` for [`INFINITE`]. Never `INVALID` (the field is unsigned). Callers handle
/// [`NO_VAL`] themselves (scontrol prints `Partition_Limit`, `NONE`, or `N/A` for `TimeMin`).
pub fn mins2time_str(minutes: u32) -> String {
    if minutes == INFINITE {
        "UNLIMITED".to_owned()
    } else {
        long_form(i64::from(minutes) * 60)
    }
}

/// squeue's `_print_secs` (`%l`, `%L`, `%M`, `-O TimeLimit,TimeLeft,TimeUsed`): `0:00`,
/// `30:00`, `1:00:00`, `1-02:04:00`; `INVALID` when negative or over 365 days.
pub fn squeue_secs(secs: i64) -> String {
    if !(0..=SQUEUE_MAX_SECS).contains(&secs) {
        "INVALID".to_owned()
    } else {
        short_form(secs)
    }
}

/// squeue's `TIME_LIMIT` column (`%l`): `UNLIMITED`, `NOT_SET` for `None` (Slurm's `NO_VAL`),
/// else [`squeue_secs`] of the minutes times 60 computed in unsigned 32-bit arithmetic as
/// squeue does (`job->time_limit * 60`), so limits past a year print `INVALID`.
pub fn squeue_time_limit(limit: Option<TimeLimit>) -> String {
    match limit {
        None => "NOT_SET".to_owned(),
        Some(TimeLimit::Unlimited) => "UNLIMITED".to_owned(),
        Some(TimeLimit::Minutes(m)) => squeue_secs(i64::from(m.wrapping_mul(60))),
    }
}

/// sinfo's `TIMELIMIT` column (`%l`, `-O Time`) for a partition's `MaxTime`: `infinite`, else
/// `_print_secs` of the minutes (`30:00`, `2-00:00:00`; no `INVALID` cut-off in sinfo).
pub fn sinfo_time_limit(limit: TimeLimit) -> String {
    match limit {
        TimeLimit::Unlimited => "infinite".to_owned(),
        TimeLimit::Minutes(m) => short_form(i64::from(m) * 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mins(s: &str) -> TimeLimit {
        parse_time_limit(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn minutes_and_minutes_seconds() {
        assert_eq!(mins("10"), TimeLimit::Minutes(10));
        assert_eq!(mins("90"), TimeLimit::Minutes(90));
        assert_eq!(mins("10:30"), TimeLimit::Minutes(11));
        assert_eq!(mins("0:45"), TimeLimit::Minutes(1));
        assert_eq!(mins("0:1"), TimeLimit::Minutes(1));
        assert_eq!(mins("5:00"), TimeLimit::Minutes(5));
        assert_eq!(mins("007"), TimeLimit::Minutes(7));
    }

    #[test]
    fn hours_minutes_seconds() {
        assert_eq!(mins("1:00:00"), TimeLimit::Minutes(60));
        assert_eq!(mins("01:00:01"), TimeLimit::Minutes(61));
        assert_eq!(mins("2:03:04"), TimeLimit::Minutes(124));
    }

    #[test]
    fn days_forms() {
        assert_eq!(mins("1-0"), TimeLimit::Minutes(1440));
        assert_eq!(mins("1-2"), TimeLimit::Minutes(1440 + 120));
        assert_eq!(mins("1-2:3"), TimeLimit::Minutes(1440 + 123));
        assert_eq!(mins("1-02:03:04"), TimeLimit::Minutes(1440 + 124));
        assert_eq!(mins("3-00:00:00"), TimeLimit::Minutes(3 * 1440));
        assert_eq!(mins("1-"), TimeLimit::Minutes(1440));
        assert_eq!(mins("0-0:0:30"), TimeLimit::Minutes(1));
    }

    #[test]
    fn no_range_checks() {
        assert_eq!(mins("10:60"), TimeLimit::Minutes(11));
        assert_eq!(mins("1:70:00"), TimeLimit::Minutes(130));
        assert_eq!(mins("0-48"), TimeLimit::Minutes(48 * 60));
        assert_eq!(mins("0:0:600"), TimeLimit::Minutes(10));
    }

    #[test]
    fn unlimited_spellings() {
        for s in [
            "0",
            "0:00",
            "0:0:0",
            "0-0",
            "0-",
            "-0",
            "-1",
            "UNLIMITED",
            "unlimited",
            "Infinite",
            "INFINITE",
            "infinite",
        ] {
            assert_eq!(mins(s), TimeLimit::Unlimited, "{s}");
        }
        assert_eq!(time_str2mins("0"), Ok(SlurmDuration::Finite(0)));
        assert_eq!(time_str2secs("-1"), Ok(SlurmDuration::Infinite));
    }

    #[test]
    fn negative_days_wrap_like_slurm() {
        // sbatch -t -5 was accepted; sacct showed Timelimit 2982611-04:17:00.
        assert_eq!(time_str2secs("-5"), Ok(SlurmDuration::Finite(-432_000)));
        assert_eq!(time_str2mins("-5"), Ok(SlurmDuration::Finite(-7199)));
        assert_eq!(mins("-5"), TimeLimit::Minutes(4_294_960_097));
        assert_eq!(mins2time_str(4_294_960_097), "2982611-04:17:00");
        assert_eq!(squeue_time_limit(Some(mins("-5"))), "INVALID");
        // "-01" is not the literal "-1".
        assert_eq!(time_str2mins("-01"), Ok(SlurmDuration::Finite(-1439)));
    }

    #[test]
    fn rejected() {
        for s in [
            "",
            "abc",
            "1:2:3:4",
            "10:xx",
            "1-2-3",
            "5s",
            "-",
            ":",
            ":5",
            "5:",
            "1::2",
            "1:2:",
            "1-2:",
            "1-:2",
            "-1:2",
            "-1:2:3",
            "1:-2",
            "--5",
            " 5",
            "5 ",
            "+5",
            "1.5",
            "1-2:3:",
            "unlimitedx",
            "\u{0661}",
        ] {
            let e = parse_time_limit(s).expect_err(s);
            assert_eq!(e.to_string(), "Invalid --time specification");
            assert_eq!(e.input(), s);
        }
    }

    #[test]
    fn overflow_is_rejected() {
        assert!(parse_time_limit("99999999999").is_err());
        assert!(parse_time_limit("35791395").is_err()); // * 60 > i32::MAX
        assert!(parse_time_limit("35791394").is_err()); // * 60 + 59 > i32::MAX
        assert_eq!(mins("35791393"), TimeLimit::Minutes(35_791_393));
        assert!(parse_time_limit("24856-").is_err());
        assert!(parse_time_limit("-24856").is_err());
        assert!(parse_time_limit("0:0:2147483647").is_err()); // + 59
    }

    #[test]
    fn scontrol_and_sacct_format() {
        assert_eq!(mins2time_str(10), "00:10:00");
        assert_eq!(mins2time_str(60), "01:00:00");
        assert_eq!(mins2time_str(2 * 1440), "2-00:00:00");
        assert_eq!(mins2time_str(1440 + 124), "1-02:04:00");
        assert_eq!(mins2time_str(INFINITE), "UNLIMITED");
        assert_eq!(TimeLimit::Minutes(30).to_string(), "00:30:00");
        assert_eq!(TimeLimit::Unlimited.to_string(), "UNLIMITED");
        assert_eq!(secs2time_str(0), "00:00:00");
        assert_eq!(secs2time_str(79), "00:01:19");
        assert_eq!(secs2time_str(93_784), "1-02:03:04");
        assert_eq!(secs2time_str(-1), "INVALID");
        assert_eq!(secs2time_str(i64::from(INFINITE)), "UNLIMITED");
    }

    #[test]
    fn squeue_format() {
        assert_eq!(squeue_secs(0), "0:00");
        assert_eq!(squeue_secs(14), "0:14");
        assert_eq!(squeue_secs(1800), "30:00");
        assert_eq!(squeue_secs(3600), "1:00:00");
        assert_eq!(squeue_secs(5400), "1:30:00");
        assert_eq!(squeue_secs(93_840), "1-02:04:00");
        assert_eq!(squeue_secs(SQUEUE_MAX_SECS), "365-00:00:00");
        assert_eq!(squeue_secs(SQUEUE_MAX_SECS + 1), "INVALID");
        assert_eq!(squeue_secs(-1), "INVALID");
        assert_eq!(squeue_time_limit(None), "NOT_SET");
        assert_eq!(squeue_time_limit(Some(TimeLimit::Unlimited)), "UNLIMITED");
        assert_eq!(squeue_time_limit(Some(TimeLimit::Minutes(10))), "10:00");
        // Slurm multiplies in uint32_t: 71582789 min * 60 wraps to 44 s.
        assert_eq!(
            squeue_time_limit(Some(TimeLimit::Minutes(71_582_789))),
            "0:44"
        );
    }

    #[test]
    fn sinfo_format() {
        assert_eq!(sinfo_time_limit(TimeLimit::Minutes(30)), "30:00");
        assert_eq!(sinfo_time_limit(TimeLimit::Minutes(2880)), "2-00:00:00");
        assert_eq!(sinfo_time_limit(TimeLimit::Unlimited), "infinite");
    }

    #[test]
    fn slurm_u32_field() {
        assert_eq!(TimeLimit::from_slurm_u32(NO_VAL), None);
        assert_eq!(
            TimeLimit::from_slurm_u32(INFINITE),
            Some(TimeLimit::Unlimited)
        );
        assert_eq!(TimeLimit::from_slurm_u32(5), Some(TimeLimit::Minutes(5)));
        assert_eq!(TimeLimit::Unlimited.to_slurm_u32(), INFINITE);
        assert_eq!(TimeLimit::Minutes(7).minutes(), Some(7));
        assert_eq!(TimeLimit::Unlimited.minutes(), None);
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC{0,16}") {
            let _ = parse_time_limit(&s);
        }

        #[test]
        fn parser_never_panics_on_time_like(s in "[-:0-9]{0,14}") {
            let _ = parse_time_limit(&s);
        }

        #[test]
        fn scontrol_form_round_trips(m in 1u32..35_791_394) {
            prop_assert_eq!(parse_time_limit(&mins2time_str(m)), Ok(TimeLimit::Minutes(m)));
        }

        #[test]
        fn squeue_form_round_trips(m in 1u32..=525_600) {
            let shown = squeue_time_limit(Some(TimeLimit::Minutes(m)));
            prop_assert_eq!(parse_time_limit(&shown), Ok(TimeLimit::Minutes(m)));
        }

        #[test]
        fn seconds_round_up(secs in 1u32..=1_000_000) {
            let s = format!("0:{secs}");
            let want = i32::try_from(secs.div_ceil(60)).unwrap();
            prop_assert_eq!(time_str2mins(&s), Ok(SlurmDuration::Finite(want)));
        }
    }
}
