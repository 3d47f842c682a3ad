//! Signal names as Slurm's commands accept them (`scancel -s`, `sbatch --signal`): names with
//! or without `SIG`, any case, or numbers.

const NAMES: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// A signal number from `USR1`, `SIGUSR1`, `usr1` or `10`.
pub fn parse(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    NAMES.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_and_numbers() {
        assert_eq!(super::parse("USR1"), Some(10));
        assert_eq!(super::parse("SIGTERM"), Some(15));
        assert_eq!(super::parse("cont"), Some(18));
        assert_eq!(super::parse("2"), Some(2));
        assert_eq!(super::parse("NOPE"), None);
    }
}
