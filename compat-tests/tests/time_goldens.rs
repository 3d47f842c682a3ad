//! `sbatch -t` against real Slurm 22.05: every time string the goldens submit is parsed by
//! `flotilla_core::time`, and the limit must print exactly as real Slurm printed that job's
//! limit back (squeue `%l`, `scontrol show job` `TimeLimit=`, sacct `Timelimit`). Every string
//! sbatch rejected (`Invalid --time specification`, exit 255) must be rejected too.
//!
//! The goldens are read from `<workspace>/../shared/slurm-reference/goldens` (README there).

use std::collections::BTreeMap;
use std::path::PathBuf;

use flotilla_core::time::{mins2time_str, parse_time_limit, squeue_time_limit, TimeLimit};
use serde_json::Value;

/// One recorded case: the fields of the golden JSON this test needs.
#[derive(Debug)]
struct Case {
    file: String,
    seq: u64,
    cmd: String,
    exit_code: i64,
    stdout: String,
    stderr: String,
}

/// All cases of `goldens/NNNN_*.json`, in execution order.
fn load_cases() -> Vec<Case> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root
        .parent()
        .expect("compat-tests sits in the workspace")
        .join("../shared/slurm-reference/goldens");
    let mut cases = Vec::new();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("goldens not found at {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("readable goldens dir").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".json") || !name.as_bytes()[0].is_ascii_digit() {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable golden");
        let v: Value = serde_json::from_str(&text).expect("golden is JSON");
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        cases.push(Case {
            file: name,
            seq: v["seq"].as_u64().expect("seq"),
            cmd: s("cmd"),
            exit_code: v["exit_code"].as_i64().expect("exit_code"),
            stdout: s("stdout"),
            stderr: s("stderr"),
        });
    }
    cases.sort_by_key(|c| c.seq);
    assert!(
        cases.len() > 100,
        "only {} goldens in {}",
        cases.len(),
        dir.display()
    );
    cases
}

/// Shell words of a golden command line: blanks split, '…' and "…" quote (enough for these).
fn shell_words(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The value of `-t X`, `--time X` or `--time=X` in an sbatch command.
fn time_arg(words: &[String]) -> Option<String> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == "-t" || w == "--time" {
            return it.next().cloned();
        }
        if let Some(v) = w.strip_prefix("--time=") {
            return Some(v.to_owned());
        }
    }
    None
}

/// The job id an accepted sbatch printed (`Submitted batch job N` or `--parsable`'s `N[;cluster]`).
fn submitted_id(stdout: &str) -> Option<u64> {
    let line = stdout.lines().next()?.trim();
    let id = line.strip_prefix("Submitted batch job ").unwrap_or(line);
    id.split(';').next()?.parse().ok()
}

/// The argument of option `-o`/`--format` (squeue) or `-o`/`--format` (sacct).
fn format_arg(words: &[String]) -> Option<&str> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == "-o" || w == "--format" {
            return it.next().map(String::as_str);
        }
        if let Some(v) = w.strip_prefix("--format=") {
            return Some(v);
        }
    }
    None
}

/// Where real Slurm printed a job's time limit, and which formatter reproduces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Squeue,
    Scontrol,
    Sacct,
}

impl Shown {
    fn format(self, limit: TimeLimit) -> String {
        match self {
            Shown::Squeue => squeue_time_limit(Some(limit)),
            Shown::Scontrol => mins2time_str(limit.to_slurm_u32()),
            Shown::Sacct => sacct_timelimit(limit),
        }
    }
}

/// The `Timelimit` column our `sacct` prints (its own field formatter,
/// `flotilla_commands::sacct::job_value`) for an accounting record holding `limit` as the
/// controller stores it (minutes; `None` = UNLIMITED).
fn sacct_timelimit(limit: TimeLimit) -> String {
    let raw = limit.to_slurm_u32();
    let rec = flotilla_proto::AcctJob {
        job_id: 1,
        array_job_id: None,
        array_task_id: None,
        array_task_str: None,
        name: String::new(),
        user: String::new(),
        uid: 0,
        gid: 0,
        account: String::new(),
        qos: String::new(),
        partition: String::new(),
        state: "PENDING".into(),
        cancelled_by: None,
        exit_code: 0,
        signal: 0,
        submit_time: 0,
        eligible_time: None,
        start_time: None,
        end_time: None,
        time_limit_min: (raw != flotilla_core::time::INFINITE).then_some(raw),
        nodes: String::new(),
        alloc_nodes: 0,
        alloc_cpus: 0,
        alloc_gpus: 0,
        alloc_mem_mib: 0,
        req_nodes: 1,
        req_cpus: 1,
        req_gpus: 0,
        req_mem_mib: 0,
        restarts: 0,
        work_dir: String::new(),
        comment: String::new(),
        steps: Vec::new(),
        show_job: true,
        constraints: String::new(),
        derived_exit: (0, 0),
        reason_prev: None,
    };
    let ctx = flotilla_commands::sacct::Ctx {
        now: 0,
        cluster: String::new(),
        ..flotilla_commands::sacct::Ctx::default()
    };
    flotilla_commands::sacct::job_value("Timelimit", &rec, &ctx).expect("sacct prints Timelimit")
}

/// A time limit real Slurm printed for a job.
#[derive(Debug, Clone)]
struct Readback {
    file: String,
    seq: u64,
    how: Shown,
    text: String,
}

/// squeue `-o` rows: `%i`/`%A` and `%l` columns (space- or `|`-delimited formats).
fn squeue_readbacks(case: &Case, words: &[String], out: &mut BTreeMap<u64, Vec<Readback>>) {
    let Some(fmt) = format_arg(words) else { return };
    let delimited = fmt.contains('|');
    let split = |s: &str| -> Vec<String> {
        if delimited {
            s.split('|').map(str::to_owned).collect()
        } else {
            s.split_whitespace().map(str::to_owned).collect()
        }
    };
    // Each field is %[-][.][width]<letter>; keep the letter.
    let fields: Vec<char> = split(fmt)
        .iter()
        .map(|f| f.chars().last().unwrap_or(' '))
        .collect();
    let Some(l_col) = fields.iter().position(|&c| c == 'l') else {
        return;
    };
    let Some(id_col) = fields
        .iter()
        .position(|&c| c == 'A')
        .or_else(|| fields.iter().position(|&c| c == 'i'))
    else {
        return;
    };
    let has_header = !words.iter().any(|w| w == "-h" || w == "--noheader");
    for line in case.stdout.lines().skip(usize::from(has_header)) {
        let cols = split(line);
        if cols.len() != fields.len() {
            continue; // a value with blanks in it: columns cannot be located reliably
        }
        if let Ok(id) = cols[id_col].parse::<u64>() {
            out.entry(id).or_default().push(Readback {
                file: case.file.clone(),
                seq: case.seq,
                how: Shown::Squeue,
                text: cols[l_col].clone(),
            });
        }
    }
}

/// `scontrol show job`: `JobId=N` opens a record, `TimeLimit=X` inside it.
fn scontrol_readbacks(case: &Case, out: &mut BTreeMap<u64, Vec<Readback>>) {
    let mut current: Option<u64> = None;
    for tok in case.stdout.split_whitespace() {
        if let Some(id) = tok.strip_prefix("JobId=") {
            current = id.parse().ok();
        } else if let (Some(id), Some(limit)) = (current, tok.strip_prefix("TimeLimit=")) {
            out.entry(id).or_default().push(Readback {
                file: case.file.clone(),
                seq: case.seq,
                how: Shown::Scontrol,
                text: limit.to_owned(),
            });
        }
    }
}

/// `sacct -P -o ...JobID...Timelimit...`: columns named by the header line.
fn sacct_readbacks(case: &Case, words: &[String], out: &mut BTreeMap<u64, Vec<Readback>>) {
    let parsable = words.iter().any(|w| w == "-P" || w == "--parsable2");
    if !parsable || words.iter().any(|w| w == "-n" || w == "--noheader") {
        return;
    }
    let mut lines = case.stdout.lines();
    let Some(header) = lines.next() else { return };
    let names: Vec<&str> = header.split('|').collect();
    let (Some(id_col), Some(l_col)) = (
        names.iter().position(|n| *n == "JobID"),
        names.iter().position(|n| *n == "Timelimit"),
    ) else {
        return;
    };
    for line in lines {
        let cols: Vec<&str> = line.split('|').collect();
        if cols.len() != names.len() {
            continue;
        }
        if let Ok(id) = cols[id_col].parse::<u64>() {
            out.entry(id).or_default().push(Readback {
                file: case.file.clone(),
                seq: case.seq,
                how: Shown::Sacct,
                text: cols[l_col].to_owned(),
            });
        }
    }
}

/// Every time limit real Slurm printed, by job id, leaving out what it printed after an
/// `scontrol update ... TimeLimit=` of that job (the limit is then no longer the submitted one).
fn readbacks(cases: &[Case]) -> BTreeMap<u64, Vec<Readback>> {
    let mut updated: BTreeMap<u64, u64> = BTreeMap::new();
    for case in cases {
        let words = shell_words(&case.cmd);
        if words.first().map(String::as_str) == Some("scontrol")
            && words.iter().any(|w| w == "update")
            && words
                .iter()
                .any(|w| w.to_ascii_lowercase().starts_with("timelimit="))
        {
            for w in &words {
                let lower = w.to_ascii_lowercase();
                if let Some(id) = lower.strip_prefix("jobid=") {
                    let numeric: String = id.chars().take_while(char::is_ascii_digit).collect();
                    if let Ok(id) = numeric.parse() {
                        updated.entry(id).or_insert(case.seq);
                    }
                }
            }
        }
    }
    let mut out: BTreeMap<u64, Vec<Readback>> = BTreeMap::new();
    for case in cases.iter().filter(|c| c.exit_code == 0) {
        let words = shell_words(&case.cmd);
        match words.first().map(String::as_str) {
            Some("squeue") => squeue_readbacks(case, &words, &mut out),
            Some("scontrol") if words.get(1).map(String::as_str) == Some("show") => {
                scontrol_readbacks(case, &mut out);
            }
            Some("sacct") => sacct_readbacks(case, &words, &mut out),
            _ => {}
        }
    }
    for (id, seen) in &mut out {
        if let Some(&upd) = updated.get(id) {
            seen.retain(|r| r.seq < upd);
        }
    }
    out
}

#[test]
fn sbatch_time_strings_match_real_slurm() {
    let cases = load_cases();
    let shown = readbacks(&cases);
    let (mut accepted, mut rejected, mut compared) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();

    for case in &cases {
        let words = shell_words(&case.cmd);
        if words.first().map(String::as_str) != Some("sbatch") {
            continue;
        }
        let Some(t) = time_arg(&words) else { continue };
        let parsed = parse_time_limit(&t);

        if case.stderr.contains("Invalid --time specification") {
            rejected += 1;
            assert_eq!(case.exit_code, 255, "{}", case.file);
            match parsed {
                Err(e) => assert_eq!(
                    format!("sbatch: error: {e}\n"),
                    case.stderr,
                    "{}: error text",
                    case.file
                ),
                Ok(l) => failures.push(format!("{}: -t {t:?} accepted as {l:?}", case.file)),
            }
            continue;
        }

        accepted += 1;
        assert_eq!(case.exit_code, 0, "{}: unexpected failure", case.file);
        let limit = match parsed {
            Ok(l) => l,
            Err(e) => {
                failures.push(format!("{}: -t {t:?} rejected: {e}", case.file));
                continue;
            }
        };
        if words.iter().any(|w| w == "--test-only") {
            continue; // no job is created, nothing is read back
        }
        let id = submitted_id(&case.stdout)
            .unwrap_or_else(|| panic!("{}: no job id in {:?}", case.file, case.stdout));
        let seen = shown.get(&id).map(Vec::as_slice).unwrap_or_default();
        if seen.is_empty() {
            failures.push(format!("{}: job {id} (-t {t:?}) is never shown", case.file));
        }
        for r in seen {
            compared += 1;
            let ours = r.how.format(limit);
            if ours != r.text {
                failures.push(format!(
                    "{}: -t {t:?} (job {id}) parsed as {limit:?} -> {ours:?}, but {} printed {:?}",
                    case.file, r.file, r.text
                ));
            }
        }
    }

    eprintln!(
        "time goldens: {accepted} accepted and {rejected} rejected -t strings, \
         {compared} read-backs compared"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        accepted >= 30 && rejected >= 6,
        "goldens lost their -t cases"
    );
    assert!(compared >= accepted, "too few read-backs");
}

#[test]
fn shell_words_handles_quotes() {
    assert_eq!(
        shell_words("sbatch -t '' --wrap true"),
        ["sbatch", "-t", "", "--wrap", "true"]
    );
    assert_eq!(shell_words("squeue -o '%i %l'"), ["squeue", "-o", "%i %l"]);
}
