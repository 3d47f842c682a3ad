//! Calendar time: seconds since the Unix epoch to and from the date strings Slurm prints and
//! accepts. Always UTC (the commands print UTC, as the goldens recorded with `TZ=UTC` show);
//! there is no time-zone table here, and "now" is always a parameter.
//!
//! - [`fmt_time`]: Slurm's `slurm_make_time_str` default format, `2026-11-29T09:19:57`
//!   (squeue `%V %S %e`, scontrol `SubmitTime=`, sacct `Start`, the stop notice).
//! - [`fmt_ctime`]: `ctime(3)` without the newline, `Sun Nov 29 09:19:57 2026` (the first
//!   line of `squeue -l` / `sinfo -l`).
//! - [`parse_time_spec`]: Slurm's `parse_time`, with the position it reports an error at;
//!   [`parse_begin`] (`sbatch --begin`, `scontrol update StartTime=`: the next such time)
//!   and [`parse_time`] (`sacct -S/-E`: the last one) over it.
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

/// Slurm 22.05's time specification (`parse_time.c` `parse_time`), read as its scanner reads
/// it, in UTC, relative to `now` (seconds since the epoch). The string is scanned left to
/// right; blanks, `-` and an upper-case `T` separate tokens; the tokens are `today`,
/// `tomorrow`, `midnight`, `noon`, `fika` (15:00), `teatime` (16:00) (lower case only where
/// Slurm compares case-insensitively after the `T` test: `Today` fails at its `o`),
/// `now[{+|-}COUNT[UNIT]]` (units spelled out: `seconds`, `minutes`, `hours`, `days`,
/// `weeks` or their singulars; blanks allowed), `HH:MM[:SS][ ][am|pm]`, `YYYY-MM-DD`,
/// `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]`; `utsSECONDS` alone (at least 1000000). A time
/// without a date is the next one (today when `past`, as `sacct` asks); a date without a
/// year is the next one (this year, or last year when `past` and its month is later).
///
/// `Ok(0)` when nothing names a time (an empty string: Slurm's callers then print only
/// their own `Invalid --begin specification`); `Err(pos)` with the position Slurm prints
/// in `Invalid time specification (pos=N): S` (its own arithmetic, including where a
/// `now` after another token puts it).
pub fn parse_time_spec(s: &str, now: i64, past: bool) -> Result<i64, i64> {
    let b = s.as_bytes();
    // C string access: 0 at and past the end.
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let starts = |i: usize, w: &str| b.len() >= i + w.len() && b[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes());
    let digit = |c: u8| c.is_ascii_digit();
    let num = |c: u8| i64::from(c) - i64::from(b'0');
    if starts(0, "uts") {
        let rest = &s[3..];
        let t = rest.trim_start();
        let body = t.strip_prefix(['+', '-']).unwrap_or(t);
        let ok = !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit());
        return match t.parse::<i64>() {
            Ok(v) if ok && v >= 1_000_000 => Ok(v),
            _ => Err(0),
        };
    }
    let (ny, nmo, nd, nh, nmi, _) = civil(now);
    let (mut hour, mut minute, mut second) = (-1i64, -1i64, 0i64);
    // Month 0-11, year as `tm_year` (years since 1900); -1 when not given.
    let (mut month, mut mday, mut year) = (-1i64, -1i64, -1i64);
    let set_date = |t: i64, month: &mut i64, mday: &mut i64, year: &mut i64| {
        let (y, mo, d, ..) = civil(t);
        (*month, *mday, *year) = (i64::from(mo) - 1, i64::from(d), y - 1900);
    };
    let mut pos = 0usize;
    while at(pos) != 0 && at(pos) != b'\n' {
        let c = at(pos);
        if c == b' ' || c == b'\t' || c == b'-' || c == b'T' {
            pos += 1;
            continue;
        }
        let fixed = [("midnight", 0), ("noon", 12), ("fika", 15), ("teatime", 16)];
        if starts(pos, "today") {
            set_date(now, &mut month, &mut mday, &mut year);
            pos += 5;
            continue;
        }
        if starts(pos, "tomorrow") {
            set_date(now + DAY, &mut month, &mut mday, &mut year);
            pos += 8;
            continue;
        }
        if let Some((w, h)) = fixed.iter().find(|(w, _)| starts(pos, w)) {
            (hour, minute, second) = (*h, 0, 0);
            pos += w.len();
            continue;
        }
        if starts(pos, "now") {
            let mut delta = 0i64;
            let mut i = pos + 3;
            loop {
                match at(i) {
                    sign @ (b'+' | b'-') => {
                        pos += i;
                        delta = time_delta(b, &mut pos)?;
                        if sign == b'-' {
                            delta = -delta;
                        }
                        break;
                    }
                    b' ' | b'\t' => i += 1,
                    0 | b'\n' => {
                        pos += i - 1;
                        break;
                    }
                    _ => return Err((pos + i) as i64),
                }
            }
            let later = now + delta;
            set_date(later, &mut month, &mut mday, &mut year);
            let (_, _, _, h, mi, se) = civil(later);
            (hour, minute, second) = (i64::from(h), i64::from(mi), i64::from(se));
            pos += 1;
            continue;
        }
        if !digit(c) {
            return Err(pos as i64);
        }
        if at(pos + 1) == b':' || at(pos + 2) == b':' {
            // `HH:MM[:SS] [AM|PM]` (`_get_time`).
            let mut o = pos;
            let mut hr = num(at(o));
            o += 1;
            if at(o) != b':' {
                if !digit(at(o)) {
                    return Err(o as i64);
                }
                hr = hr * 10 + num(at(o));
                o += 1;
            }
            if hr > 23 {
                return Err(o as i64 - 2);
            }
            if at(o) != b':' {
                return Err(o as i64);
            }
            o += 1;
            let two = |o: &mut usize| -> Result<i64, i64> {
                if !digit(at(*o)) {
                    return Err(*o as i64);
                }
                let mut v = num(at(*o));
                *o += 1;
                if !digit(at(*o)) {
                    return Err(*o as i64);
                }
                v = v * 10 + num(at(*o));
                *o += 1;
                Ok(v)
            };
            let mi = two(&mut o)?;
            if mi > 59 {
                return Err(o as i64 - 2);
            }
            let mut se = 0;
            if at(o) == b':' {
                o += 1;
                se = two(&mut o)?;
                if se > 59 {
                    return Err(o as i64 - 2);
                }
            }
            while at(o).is_ascii_whitespace() || at(o) == 0x0b {
                o += 1;
            }
            if starts(o, "pm") {
                hr += 12;
                if hr > 23 {
                    if hr == 24 {
                        hr = 12;
                    } else {
                        return Err(o as i64);
                    }
                }
                o += 2;
            } else if starts(o, "am") {
                if hr > 11 {
                    if hr == 12 {
                        hr = 0;
                    } else {
                        return Err(o as i64);
                    }
                }
                o += 2;
            }
            (hour, minute, second) = (hr, mi, se);
            pos = o;
            continue;
        }
        // A date (`_get_date`): `YYYY-MM-DD`, or `MM[./]DD[./][YY]`. A month's first
        // character is taken as a digit unchecked, as Slurm takes it; a day's must be one.
        let mut o = pos;
        let field = |o: &mut usize, range: std::ops::RangeInclusive<i64>| -> Result<i64, i64> {
            let mut v = num(at(*o));
            *o += 1;
            if digit(at(*o)) {
                v = v * 10 + num(at(*o));
                *o += 1;
            }
            // Slurm steps back two characters to report a value out of range.
            if range.contains(&v) { Ok(v) } else { Err(*o as i64 - 2) }
        };
        let day = |o: &mut usize| -> Result<i64, i64> {
            if !digit(at(*o)) {
                return Err(*o as i64);
            }
            field(o, 1..=31)
        };
        let sep = |o: &mut usize| {
            if at(*o) == b'.' || at(*o) == b'/' {
                *o += 1;
            }
        };
        if b.len() >= o + 7 && at(o + 4) == b'-' && at(o + 7) == b'-' {
            let mut yr = 0;
            for _ in 0..4 {
                if !digit(at(o)) {
                    return Err(o as i64);
                }
                yr = yr * 10 + num(at(o));
                o += 1;
            }
            o += 1;
            let mon = field(&mut o, 1..=12)?;
            o += 1;
            let d = day(&mut o)?;
            (month, mday, year) = (mon - 1, d, yr - 1900);
            pos = o;
            continue;
        }
        let mon = field(&mut o, 1..=12)?;
        sep(&mut o);
        let d = day(&mut o)?;
        sep(&mut o);
        let mut yr = 0;
        if digit(at(o)) {
            yr = num(at(o));
            o += 1;
            if !digit(at(o)) {
                return Err(o as i64);
            }
            yr = yr * 10 + num(at(o));
            o += 1;
        }
        (month, mday) = (mon - 1, d);
        if yr != 0 {
            year = yr + 100;
        }
        pos = o;
    }
    let (nmo, nd, nh, nmi) = (i64::from(nmo) - 1, i64::from(nd), i64::from(nh), i64::from(nmi));
    match (hour, month) {
        (-1, -1) => return Ok(0),
        (-1, _) => (hour, minute) = (0, 0),
        (_, -1) => {
            let today = past || hour > nh || (hour == nh && minute > nmi);
            set_date(if today { now } else { now + DAY }, &mut month, &mut mday, &mut year);
        }
        _ => {}
    }
    if year == -1 {
        let this_year = ny - 1900;
        year = if past {
            if month > nmo { this_year - 1 } else { this_year }
        } else if (month, mday, hour, minute) > (nmo, nd, nh, nmi) {
            this_year
        } else {
            this_year + 1
        };
    }
    let days = days_from_civil(year + 1900, (month + 1) as u32, 1) + mday - 1;
    Ok(days * DAY + hour * 3600 + minute * 60 + second)
}

/// `now`'s `+COUNT[UNIT]` (`_get_delta`): `pos` is at the sign; afterwards at the last
/// character read. Units are spelled out; the count ends at the unit. No digit at all, or
/// any other character: `Err` with the position Slurm prints.
fn time_delta(b: &[u8], pos: &mut usize) -> Result<i64, i64> {
    const UNITS: [(&str, i64); 10] = [
        ("seconds", 1),
        ("second", 1),
        ("minutes", 60),
        ("minute", 60),
        ("hours", 3600),
        ("hour", 3600),
        ("days", DAY),
        ("day", DAY),
        ("weeks", 7 * DAY),
        ("week", 7 * DAY),
    ];
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let (mut cnt, mut digits) = (0i64, 0);
    let mut o = *pos + 1;
    while at(o) != 0 && at(o) != b'\n' {
        if at(o).is_ascii_whitespace() || at(o) == 0x0b {
            o += 1;
            continue;
        }
        if let Some((w, m)) = UNITS.iter().find(|(w, _)| b.len() >= o + w.len() && b[o..o + w.len()].eq_ignore_ascii_case(w.as_bytes())) {
            o += w.len();
            cnt = cnt.saturating_mul(*m);
            break;
        }
        if at(o).is_ascii_digit() {
            cnt = cnt.saturating_mul(10).saturating_add(i64::from(at(o) - b'0'));
            digits += 1;
            o += 1;
            continue;
        }
        return Err(o as i64 - 1);
    }
    if digits == 0 {
        return Err(*pos as i64);
    }
    *pos = o - 1;
    Ok(cnt)
}

/// A time of `sbatch --begin` (and `scontrol update StartTime=`), seconds since the epoch:
/// [`parse_time_spec`] looking ahead. `None` when Slurm refuses it (or it names no time).
pub fn parse_begin(a: &str, now: i64) -> Option<i64> {
    parse_time_spec(a, now, false).ok().filter(|&t| t != 0)
}

/// A time of `sacct -S`/`-E`, seconds since the epoch: [`parse_time_spec`] looking back
/// (sacct's `parse_time(optarg, 1)`). `None` when Slurm refuses it.
pub fn parse_time(a: &str, now: i64) -> Option<i64> {
    parse_time_spec(a, now, true).ok()
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

    /// Slurm's `parse_time` as the reference answers it (`sacct -S`, `sbatch --begin`):
    /// refusals with the position it prints, and the forms it accepts.
    #[test]
    fn slurm_time_specs() {
        // 2026-12-05T08:30:00Z.
        let day = days_from_civil(2026, 12, 5) * DAY;
        let now = day + 8 * 3600 + 1800;
        for (spec, pos) in [
            ("bogus", 0),
            ("now+x", 3),
            ("now+1h", 4),
            ("now+", 3),
            ("Today", 1),
            ("25:00", 0),
            ("12:61", 3),
            ("2026-13-01", 5),
            ("13/01", 0),
            ("uts5", 0),
            ("3pm", 1),
            ("now+1hourx", 9),
            ("now+1hour+", 9),
            // Slurm adds the index of the sign to the position `now` started at.
            ("tomorrow now+1", 21),
            // A one-digit month out of range steps back before the string's start.
            ("0", -1),
            ("0/5", -1),
            ("tomorrow 0", 8),
            ("9/0", 1),
        ] {
            assert_eq!(parse_time_spec(spec, now, true), Err(pos), "{spec}");
        }
        assert_eq!(parse_time_spec("", now, false), Ok(0));
        assert_eq!(parse_time_spec("now + 1 hour", now, false), Ok(now + 3600));
        assert_eq!(parse_time_spec("now+2days", now, false), Ok(now + 2 * DAY));
        assert_eq!(parse_time_spec("now-1week", now, true), Ok(now - 7 * DAY));
        assert_eq!(parse_time_spec("uts1700000000", now, false), Ok(1_700_000_000));
        // A time without a date: the next one (tomorrow once past), today looking back.
        assert_eq!(parse_time_spec("09:00", now, false), Ok(day + 9 * 3600));
        assert_eq!(parse_time_spec("08:00", now, false), Ok(day + DAY + 8 * 3600));
        assert_eq!(parse_time_spec("08:00", now, true), Ok(day + 8 * 3600));
        assert_eq!(parse_time_spec("8:00 pm", now, false), Ok(day + 20 * 3600));
        assert_eq!(parse_time_spec("12:00am", now, false), Ok(day + DAY));
        assert_eq!(parse_time_spec("noon", now, false), Ok(day + 12 * 3600));
        assert_eq!(parse_time_spec("teatime tomorrow", now, false), Ok(day + DAY + 16 * 3600));
        assert_eq!(parse_time_spec("midnight", now, false), Ok(day + DAY));
        assert_eq!(parse_time_spec("today", now, false), Ok(day));
        // A date without a year: the next one, or looking back the last one.
        assert_eq!(parse_time_spec("01/02", now, false), Ok(days_from_civil(2027, 1, 2) * DAY));
        assert_eq!(parse_time_spec("01/02", now, true), Ok(days_from_civil(2026, 1, 2) * DAY));
        // Looking back, only a later month is last year's (`12/25` in December is this one).
        assert_eq!(parse_time_spec("12/25", now, true), Ok(days_from_civil(2026, 12, 25) * DAY));
        assert_eq!(parse_time_spec("2026-02-31", now, false), Ok(days_from_civil(2026, 3, 3) * DAY));
        assert_eq!(parse_time_spec("2026-12-05T10:11:12", now, false), Ok(day + 10 * 3600 + 11 * 60 + 12));
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
