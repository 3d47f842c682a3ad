//! Calendar time: seconds since the Unix epoch to and from the date strings Slurm prints and
//! accepts. Always UTC (the commands print UTC, as the goldens recorded with `TZ=UTC` show);
//! there is no time-zone table here, and "now" is always a parameter.
//!
//! - [`fmt_time`]: Slurm's `slurm_make_time_str` default format, `2026-11-29T09:19:57`
//!   (squeue `%V %S %e`, scontrol `SubmitTime=`, sacct `Start`, the stop notice).
//! - [`fmt_ctime`]: `ctime(3)` without the newline, `Sun Nov 29 09:19:57 2026` (the first
//!   line of `squeue -l` / `sinfo -l`).
//! - [`parse_begin`]: the forms of Slurm's `parse_time` that `sbatch --begin` and
//!   `scontrol update StartTime=` accept; [`parse_time`]: those plus the `MM/DD[/YY]` family
//!   that `sacct -S/-E` accepts.
//! - [`civil`], [`days_from_civil`]: the proleptic Gregorian calendar (Howard Hinnant's
//!   algorithms), for both directions.

/// Seconds in a day.
const DAY: i64 = 86_400;

/// Slurm's `slurm_make_time_str` with the default format: `YYYY-MM-DDTHH:MM:SS` for `t`
/// seconds since the epoch, in UTC.
pub fn fmt_time(t: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
}

/// `Sun Nov 29 09:19:57 2026` (`ctime(3)` without its newline; the day of the month padded
/// to two columns with a space) for `t` seconds since the epoch, in UTC.
pub fn fmt_ctime(t: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][t.div_euclid(DAY).rem_euclid(7) as usize];
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][mo as usize - 1];
    format!("{wd} {mon} {d:2} {h:02}:{mi:02}:{s:02} {y}")
}

/// Seconds since the epoch to (year, month 1-12, day 1-31, hour, minute, second), UTC.
pub fn civil(t: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = t.div_euclid(DAY);
    let secs = t.rem_euclid(DAY);
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    (y, m, d, (secs / 3600) as u32, ((secs % 3600) / 60) as u32, (secs % 60) as u32)
}

/// Days since the epoch of the civil date `y`-`m`-`d` (UTC; `m` 1-12). Out-of-range months
/// and days are not rejected: they count on from the date's start as the arithmetic gives.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A time of `sbatch --begin` (and `scontrol update StartTime=`), seconds since the epoch,
/// UTC, relative to `now` (seconds since the epoch): `now[{+|-}N[units]]` (units `s`, `m`, `h`,
/// `d`, `w` and their long spellings; none is seconds), `today`, `midnight` (the next one),
/// `tomorrow`, `noon` (the next one), `HH:MM[:SS]` (the next such time), and
/// `YYYY-MM-DD[THH:MM[:SS]]`. Case-insensitive, surrounding blanks ignored.
///
/// `None` for anything else (the commands print `Invalid time specification`).
pub fn parse_begin(a: &str, now: i64) -> Option<i64> {
    let s = a.trim().to_ascii_lowercase();
    let midnight = now - now.rem_euclid(DAY);
    if let Some(rest) = s.strip_prefix("now") {
        if rest.is_empty() {
            return Some(now);
        }
        // Slurm's parse_time: `now` then `+` or `-` and a count (`sacct -S now-1hours`).
        let (sign, rest) = match rest.as_bytes()[0] {
            b'+' => (1, &rest[1..]),
            b'-' => (-1, &rest[1..]),
            _ => return None,
        };
        let split = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (n, unit) = rest.split_at(split);
        let n: i64 = n.parse().ok()?;
        let mult = match unit {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => DAY,
            "w" | "week" | "weeks" => 604_800,
            _ => return None,
        };
        return Some(now + sign * n * mult);
    }
    match s.as_str() {
        "today" | "midnight" => return Some(if s == "today" { midnight } else { midnight + DAY }),
        "tomorrow" => return Some(midnight + DAY),
        "noon" => return Some(if now < midnight + 43_200 { midnight + 43_200 } else { midnight + DAY + 43_200 }),
        _ => {}
    }
    let hms = |t: &str| -> Option<i64> {
        let p: Vec<&str> = t.split(':').collect();
        let v: Vec<i64> = p.iter().map(|x| x.parse().ok()).collect::<Option<_>>()?;
        match v.as_slice() {
            [h, m] => Some(h * 3600 + m * 60),
            [h, m, s] => Some(h * 3600 + m * 60 + s),
            _ => None,
        }
    };
    if let Some((d, t)) = s.split_once('t') {
        let p: Vec<i64> = d.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let [y, m, dd] = p.as_slice() else { return None };
        return Some(days_from_civil(*y, *m as u32, *dd as u32) * DAY + hms(t)?);
    }
    if s.contains('-') {
        let p: Vec<i64> = s.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let [y, m, dd] = p.as_slice() else { return None };
        return Some(days_from_civil(*y, *m as u32, *dd as u32) * DAY);
    }
    let t = hms(&s)?;
    Some(if midnight + t > now { midnight + t } else { midnight + DAY + t })
}

/// Slurm's `parse_time` forms `sacct -S`/`-E` accept, seconds since the epoch, UTC, relative
/// to `now`: those of [`parse_begin`] plus `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]` and
/// `MM/DD[/YY]-HH:MM[:SS]` (a missing year is `now`'s; a two-digit year is 20YY).
///
/// `None` for anything else, or a month outside 1-12 or a day outside 1-31.
pub fn parse_time(a: &str, now: i64) -> Option<i64> {
    if let Some(t) = parse_begin(a, now) {
        return Some(t);
    }
    let (date, time) = match a.split_once('-') {
        Some((d, t)) => (d, Some(t)),
        None => (a, None),
    };
    let (y_now, ..) = civil(now);
    let parts: Vec<&str> = if date.contains('/') {
        date.split('/').collect()
    } else if date.contains('.') {
        date.split('.').collect()
    } else if date.len() == 4 || date.len() == 6 {
        let (m, rest) = date.split_at(2);
        let (d, y) = rest.split_at(2);
        if y.is_empty() {
            vec![m, d]
        } else {
            vec![m, d, y]
        }
    } else {
        return None;
    };
    let nums: Vec<i64> = parts.iter().map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let (m, d, y) = match nums.as_slice() {
        [m, d] => (*m, *d, y_now),
        [m, d, y] => (*m, *d, if *y < 100 { 2000 + y } else { *y }),
        _ => return None,
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut t = days_from_civil(y, m as u32, d as u32) * DAY;
    if let Some(hms) = time {
        let v: Vec<i64> = hms.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
        t += match v.as_slice() {
            [h, mi] => h * 3600 + mi * 60,
            [h, mi, s] => h * 3600 + mi * 60 + s,
            _ => return None,
        };
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn formats() {
        // 2026-11-29T09:19:57Z was a Sunday.
        let t = days_from_civil(2026, 11, 29) * DAY + 9 * 3600 + 19 * 60 + 57;
        assert_eq!(fmt_time(t), "2026-11-29T09:19:57");
        assert_eq!(fmt_ctime(t), "Sun Nov 29 09:19:57 2026");
        assert_eq!(fmt_time(0), "1970-01-01T00:00:00");
        assert_eq!(fmt_ctime(0), "Thu Jan  1 00:00:00 1970");
    }

    #[test]
    fn begin_forms() {
        assert_eq!(parse_begin("now+2hours", 1000), Some(1000 + 7200));
        assert_eq!(parse_begin("now-1hours", 10_000), Some(10_000 - 3600));
        assert_eq!(parse_time("now-30minutes", 10_000), Some(10_000 - 1800));
        assert_eq!(parse_begin("now*1", 1000), None);
        assert_eq!(parse_begin("2026-01-01T00:00:00", 0), Some(days_from_civil(2026, 1, 1) * DAY));
    }

    #[test]
    fn sacct_forms() {
        const NOW: i64 = 1_795_945_500;
        let d = days_from_civil(2026, 11, 29) * DAY;
        assert_eq!(parse_time("2026-11-29T09:00:00", NOW), Some(d + 9 * 3600));
        assert_eq!(parse_time("2026-11-29T09:00", NOW), Some(d + 9 * 3600));
        assert_eq!(parse_time("11/29", NOW), Some(d));
        assert_eq!(parse_time("112926", NOW), Some(d));
        assert_eq!(parse_time("11/29/26-01:02:03", NOW), Some(d + 3723));
        assert_eq!(parse_time("now", NOW), Some(NOW));
        assert_eq!(parse_time("bogus", NOW), None);
    }

    proptest! {
        #[test]
        fn civil_and_days_from_civil_are_inverse(t in -10_000_000_000i64..10_000_000_000) {
            let (y, m, d, h, mi, s) = civil(t);
            let back = days_from_civil(y, m, d) * DAY + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
            prop_assert_eq!(back, t);
        }
    }
}
