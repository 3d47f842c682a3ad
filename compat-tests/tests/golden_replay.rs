//! Replays every golden of real Slurm 22.05 (`shared/slurm-reference/goldens`), in recorded
//! order, against Flotilla: a local cluster ([`LocalCluster`], the code of `flotilla dev up`)
//! of the real `slurmctld` and four real `slurmd -N gpu01..gpu04` (8 fake GPUs each; in
//! production mode: `--cgroup auto` as root with `FLOTILLA_TEST_ROOT=1`, see
//! `cluster::default_cgroup`, and the reference's cgroup settings: it has no cgroup.conf, so
//! Slurm's defaults, nothing constrained but jobs held in cgroups) configured like the
//! reference (`shared/slurm-reference/conf`, plus its accounting associations as
//! `quota.conf`), with Flotilla's commands first on `PATH`. Each
//! case runs as its user (`runuser`, as `capture_goldens.py` does) with exactly the recorded
//! environment plus `FLOTILLA_CONF` (the goldens had `/etc/slurm/slurm.conf`; ours is in a temp
//! dir), and the waits of `capture_goldens.py` are repeated between cases, each on the event it
//! needs (a job state, a reason, the batch script running, a scheduling cycle of the
//! controller) and with a deadline: a wait that times out fails the test with what it waited
//! for. Between cases the replay waits for nothing else (but two events the reference had
//! reached, before `squeue_t_all_after_cancels` and `sbatch_sacct_ok`): the controller paces its scheduling
//! cycles as Slurm's main scheduler does (`SchedulerParameters=batch_sched_delay`, Slurm's 3 s
//! by default: a submission, a release or an update is decided at the next cycle, a job's
//! end at once), so that what a case sees depends on that pacing as it did on the reference
//! (array tasks, for one, take their ids when they start, at that cycle).
//!
//! Job ids by identity. The recordings name the jobs they submitted: a case's template
//! (`scontrol show job {C_ok}`) uses the id that an earlier case's sbatch printed (`74`). Slurm
//! and Flotilla give the same submission different ids where they number array tasks at
//! different moments (Slurm at its next scheduling pass or when a pending task is updated,
//! Flotilla when a task starts, at its next cycle), so their ids may run apart. So the
//! replay keeps, for every sbatch case that printed one id, the recorded id and the id Flotilla
//! printed for the same case, after checking that the latter is a job the case created (absent
//! before it, present after). Commands run with Flotilla's ids (the template with its symbols
//! resolved), the replay's own waits use them, and in Flotilla's output every whole number
//! equal to one of those ids (not part of a time `hh:mm:ss`, a decimal or a size such as
//! `75G`) is written as the recorded id of the same submission before the comparison. The rule
//! maps a job only to itself: it cannot make two different jobs compare equal, it changes
//! nothing where both give a submission the same id, and it leaves every other number alone,
//! among them the ids of jobs no sbatch printed (started array tasks, `JobIDRaw`), which stay a
//! difference where they differ.
//!
//! Comparison: both sides go through the reference `normalize.py` (called with `python3`, so
//! there is exactly one implementation of the rules), then through the documented
//! divergences in `divergences.tsv` (applied to both sides). Cases that still differ must be
//! listed in `known_failures.txt` with a reason; a listed case that passes fails the test
//! (the list may only shrink), and so does a case not listed that fails: every case is
//! deterministic (no exemption). Needs root (to create and become alice/bob and run their
//! jobs); otherwise prints `SKIPPED: <reason>`.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_cycles;
use flotilla_compat_tests::{goldens_dir, load_goldens, shared_dir, GoldenCase};
use flotilla_proto::client::Client;
use flotilla_proto::{JobInfo, JobQuery, JobRef, JobStateWire, NodeQuery, Request, Response, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds a time-limit minute lasts in the replay (the 1-minute timeout case would
/// otherwise take a minute; every fill job's limit is ≥ 20 minutes = 200 s).
const MINUTE_S: u32 = 10;

/// Waits, if need be, until the wall clock is at second 1 to 40 of a minute, for the four fill
/// jobs (cases 0145-0148, `sbatch_fill_*`: started one after the other within seconds) to start
/// within one minute, after its first second, as they did in the recording (54-56 at
/// 09:41:00-09:41:06). Slurm's backfill plan, which goldens 0178, 0209 and 0210 show, rounds
/// absolute times down to `bf_resolution` (60 s; backfill.c `_attempt_backfill` rounds the
/// map's first slot, `start_time` and `end_reserve` since the epoch), so its answer depends
/// on where a minute boundary falls among those starts: with one between the starts of fill3
/// and bobfill, Slurm too plans job 58 on gpu01, not gpu02 (the core's `backfill_map` tests
/// show both cases). Waiting makes the replay replay the recorded case, not another one.
fn start_within_a_minute() {
    let in_window = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        (1.0..=40.0).contains(&(since.as_secs_f64() % 60.0))
    };
    // At most the 21 s from second 40 to second 1 of the next minute.
    flotilla_compat_tests::wait::wait_until("second 1-40 of a minute", Duration::from_secs(30), in_window, String::new);
}

/// The reference's accounting associations (`setup.sh`: `sacctmgr add account research`,
/// `sacctmgr add user alice,bob account=research`), as Flotilla's `quota.conf`.
const QUOTA_CONF: &str = "# The reference cluster's accounting associations.\nAccount=research Users=alice,bob\n";

const SCRIPTS: &[(&str, &str)] = &[
    ("env.sh", "#!/bin/bash\n# prints the job's Slurm/GPU environment, sorted\nenv | grep -E '^(SLURM|SLURMD|CUDA|GPU|ROCR|ZE_)' | sort\necho \"HOSTNAME_CMD=$(hostname)\"\necho \"PWD=$PWD\"\nsleep 2\n"),
    ("directives.sh", "#!/bin/bash\n#SBATCH --job-name=early\n#SBATCH -t 7\n#SBATCH --partition=batch   # trailing comment after a directive\n##SBATCH --job-name=doublehash\n# SBATCH --job-name=spacehash\n #SBATCH --job-name=leadingspace\n#SBATCH --comment=\"quoted comment with spaces\"\n\necho first command\n#SBATCH --job-name=late\n#SBATCH -t 99\n#SBATCH --gres=gpu:3\nsleep 1\n"),
    ("sleep.sh", "#!/bin/bash\nsleep ${1:-600}\n"),
    ("exit3.sh", "#!/bin/bash\necho about to fail\nexit 3\n"),
    ("sigkill.sh", "#!/bin/bash\necho about to die by SIGKILL\nkill -9 $$\n"),
    ("noshebang.sh", "echo no shebang line\n"),
    ("empty.sh", ""),
    ("arrfail.sh", "#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\n[ \"$SLURM_ARRAY_TASK_ID\" = 1 ] && exit 2\nexit 0\n"),
    ("badopt.sh", "#!/bin/bash\n#SBATCH --no-such-option\necho hi\n"),
];

fn ensure_users() -> Result<(), String> {
    for (name, uid) in [("alice", 2001), ("bob", 2002)] {
        match nix::unistd::User::from_name(name) {
            Ok(Some(u)) if u.uid.as_raw() == uid => {}
            Ok(Some(u)) => return Err(format!("user {name} exists with uid {} (want {uid})", u.uid)),
            _ => {
                if !flotilla_compat_tests::sh(&format!(
                    "getent group {uid} >/dev/null || groupadd -g {uid} {name}; useradd -u {uid} -g {uid} -m -d /home/{name} -s /bin/bash {name}"
                )) {
                    return Err(format!("cannot create user {name}"));
                }
            }
        }
    }
    Ok(())
}

struct Harness {
    dir: tempfile::TempDir,
    socket: PathBuf,
    conf: PathBuf,
    bin_dir: PathBuf,
    /// Stand-ins that fail for the Slurm commands Flotilla does not build ([`flotilla_compat_tests::stub_commands`]).
    stub_dir: PathBuf,
}

/// The recordings' id of each submission and Flotilla's id of the same submission (see the
/// module doc, "Job ids by identity").
#[derive(Debug, Default)]
struct Ids {
    /// Recorded id → Flotilla's id.
    here: BTreeMap<u64, u64>,
}

impl Ids {
    /// Flotilla's id of the submission the recordings call `rec` (`rec` itself when no case
    /// printed it).
    fn here(&self, rec: u64) -> u64 {
        self.here.get(&rec).copied().unwrap_or(rec)
    }

    /// The command line to run for `case`: its template with each symbol as Flotilla's id of
    /// that submission (the recorded command when the case has no template).
    fn command(&self, case: &GoldenCase) -> String {
        if case.template.is_empty() || case.ids.is_empty() {
            return case.cmd.clone();
        }
        let mut cmd = case.template.clone();
        for (sym, rec) in &case.ids {
            let id = rec.parse().map_or_else(|_| rec.clone(), |r| self.here(r).to_string());
            cmd = cmd.replace(&format!("{{{sym}}}"), &id);
        }
        cmd
    }

    /// `text` with every whole number that is Flotilla's id of a submission written as that
    /// submission's recorded id; numbers inside a time (`12:34:56`), a decimal (`1.5`) or a
    /// size (`75G`) stay.
    fn to_recorded(&self, text: &str) -> String {
        let back: BTreeMap<u64, u64> = self.here.iter().filter(|(r, h)| r != h).map(|(r, h)| (*h, *r)).collect();
        if back.is_empty() {
            return text.to_string();
        }
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < b.len() {
            if !b[i].is_ascii_digit() {
                let next = text[i..].find(|c: char| c.is_ascii_digit()).map_or(text.len(), |n| i + n);
                out.push_str(&text[i..next]);
                i = next;
                continue;
            }
            let end = text[i..].find(|c: char| !c.is_ascii_digit()).map_or(text.len(), |n| i + n);
            let at = |k: usize| b.get(k).copied();
            let digit_at = |k: usize| at(k).is_some_and(|c| c.is_ascii_digit());
            let before_sep = i >= 2 && matches!(at(i - 1), Some(b':' | b'.')) && digit_at(i - 2);
            let after_sep = matches!(at(end), Some(b':' | b'.')) && digit_at(end + 1);
            let unit = matches!(at(end), Some(b'K' | b'M' | b'G' | b'T' | b'P'));
            match text[i..end].parse::<u64>().ok().and_then(|n| back.get(&n)) {
                Some(rec) if !before_sep && !after_sep && !unit => out.push_str(&rec.to_string()),
                _ => out.push_str(&text[i..end]),
            }
            i = end;
        }
        out
    }
}

/// The one job id a submission printed (`--parsable`: `74`; else `Submitted batch job 74`).
fn printed_id(stdout: &str) -> Option<u64> {
    let t = stdout.strip_suffix('\n')?;
    t.strip_prefix("Submitted batch job ").unwrap_or(t).parse().ok()
}

/// How long the replay waits for anything (a state, a reason, a cycle) at most, unless a wait
/// says otherwise.
const WAIT: Duration = Duration::from_secs(120);

impl Harness {
    fn call(&self, req: Request) -> Option<Response> {
        let mut c = Client::connect_unix(&self.socket, Role::Command).ok()?;
        c.call(None, req).ok()
    }

    fn jobs(&self) -> Vec<JobInfo> {
        match self.call(Request::QueryJobs(JobQuery {
            include_finished: true,
            ..JobQuery::default()
        })) {
            Some(Response::Jobs(j)) => j,
            _ => Vec::new(),
        }
    }

    fn states_of(&self, id: u64) -> Vec<JobStateWire> {
        match self.call(Request::QueryJobs(JobQuery {
            jobs: vec![JobRef::id(id)],
            include_finished: true,
            ..JobQuery::default()
        })) {
            Some(Response::Jobs(j)) => j.iter().filter_map(|j| j.state).collect(),
            _ => Vec::new(),
        }
    }

    fn live(&self, id: u64) -> bool {
        self.jobs().iter().any(|j| {
            (j.job_id == id || j.array_job_id == Some(id)) && j.state.is_some_and(|s| !s.is_finished())
        })
    }

    /// Polls `f` every 100 ms until it holds; `Err(what)` after `timeout`.
    fn wait(&self, what: impl Fn() -> String, timeout: Duration, mut f: impl FnMut() -> bool) -> Result<(), String> {
        let t0 = Instant::now();
        while !f() {
            if t0.elapsed() >= timeout {
                return Err(format!("timed out after {timeout:?} waiting for {}", what()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Until every job of `ids` (and every task of an array among them) is finished.
    fn wait_done(&self, ids: &[u64], timeout: Duration) -> Result<(), String> {
        self.wait(|| format!("jobs {ids:?} to finish (live: {:?})", ids.iter().filter(|&&i| self.live(i)).collect::<Vec<_>>()), timeout, || {
            ids.iter().all(|&i| !self.live(i))
        })
    }

    /// Until job `id` (or a task of it) is in one of `want`.
    fn wait_state(&self, id: u64, want: &[JobStateWire], timeout: Duration) -> Result<(), String> {
        self.wait(|| format!("job {id} in {want:?} (is {:?})", self.states_of(id)), timeout, || {
            self.states_of(id).iter().any(|s| want.contains(s))
        })
    }

    /// Until pending job `id` has a reason other than `bad`.
    fn wait_reason(&self, id: u64, bad: &[&str], timeout: Duration) -> Result<(), String> {
        let reason = || self.jobs().into_iter().find(|j| j.job_id == id).map(|j| j.reason);
        self.wait(|| format!("job {id} to have a reason other than {bad:?} (is {:?})", reason()), timeout, || {
            reason().is_some_and(|r| !bad.contains(&r.as_str()))
        })
    }

    /// Until the batch script of job `id` runs: a child of the job's supervisor (`slurmd
    /// --stepd <spool>/jobs/<id>.<run>`) that is no longer the supervisor's binary.
    fn wait_script(&self, id: u64, timeout: Duration) -> Result<(), String> {
        let running = || {
            let mut sups = Vec::new();
            let mut others = Vec::new();
            for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
                let exe = std::fs::read_link(e.path().join("exe")).ok();
                let args: Vec<String> = std::fs::read(e.path().join("cmdline"))
                    .unwrap_or_default()
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                let ppid = std::fs::read_to_string(e.path().join("status"))
                    .unwrap_or_default()
                    .lines()
                    .find_map(|l| l.strip_prefix("PPid:").and_then(|p| p.trim().parse::<i32>().ok()));
                let job_dir = args.get(2).and_then(|d| Path::new(d).file_name()).map(|n| n.to_string_lossy().into_owned());
                if args.get(1).map(String::as_str) == Some("--stepd") && job_dir.is_some_and(|n| n.starts_with(&format!("{id}."))) {
                    sups.push((pid, exe.clone()));
                }
                others.push((ppid, exe));
            }
            others.iter().any(|(ppid, exe)| sups.iter().any(|(s, sexe)| Some(*s) == *ppid && exe != sexe))
        };
        self.wait(|| format!("the batch script of job {id} to run"), timeout, running)
    }

    /// Until the controller has run a scheduling cycle (committed) that began after this call.
    fn cycle(&self) -> Result<(), String> {
        wait_cycles(&self.socket, 1, Duration::from_secs(30)).map(|_| ())
    }

    /// Cancels every job that has not finished and waits until all have.
    fn cancel_all(&self) -> Result<(), String> {
        let ids: BTreeSet<u64> = self
            .jobs()
            .iter()
            .filter(|j| j.state.is_some_and(|s| !s.is_finished()))
            .map(|j| j.array_job_id.unwrap_or(j.job_id))
            .collect();
        if !ids.is_empty() {
            let _ = self.call(Request::CancelJob(flotilla_proto::CancelJob {
                jobs: ids.iter().map(|&i| JobRef::id(i)).collect(),
                ..flotilla_proto::CancelJob::default()
            }));
        }
        let live = || self.jobs().iter().filter(|j| j.state.is_some_and(|s| !s.is_finished())).map(|j| j.job_id).collect::<Vec<_>>();
        self.wait(|| format!("every job to finish after cancelling all (live: {:?})", live()), Duration::from_secs(60), || live().is_empty())
    }

    /// The waits `capture_goldens.py` makes before a case, on the same jobs (their recorded
    /// ids as `ids` knows them here).
    fn before(&self, case: &GoldenCase, ids: &Ids) -> Result<(), String> {
        let here = |recs: &[u64]| recs.iter().map(|&r| ids.here(r)).collect::<Vec<u64>>();
        match case.case.as_str() {
            // After its cancels Slurm ran a pass (`_slurm_rpc_epilog_complete`), from which its
            // next pass is `batch_sched_delay` away: the replay starts the cases there too
            // (0137-0141: array 45's tasks take their ids after the next two submissions).
            "sbatch_test_only_idle" | "sbatch_time_10" | "sbatch_plain" | "sbatch_outpat_single" => {
                self.cancel_all()?;
                self.cycle()
            }
            "sbatch_fill_A1_gpu4" => {
                self.cancel_all()?;
                start_within_a_minute();
                Ok(())
            }
            // The jobs of the output-pattern cases (0137-0140).
            "ls_output_files" => self.wait_done(&here(&[44, 45, 46, 47]), WAIT),
            // The pending jobs P1, P2, P5, P6, P7, P9 have their reasons, and a cycle planned
            // them (the capture waited for Slurm's backfill pass).
            "squeue_default_busy" => {
                for id in here(&[57, 58, 61, 62, 63, 65]) {
                    self.wait_reason(id, &["None"], Duration::from_secs(20))?;
                }
                self.cycle()
            }
            "sbatch_sacct_ok" => {
                // Before this cancel_all Slurm had ended bob's 56 (`scancel -u bob`, 0261) and
                // a pass had found 67's `afterok:56` never satisfied (0309 shows the reason);
                // Flotilla's commands run faster than that end takes (9 ms against 70 ms):
                // the replay waits for the event instead of racing it.
                self.wait_reason(ids.here(67), &["None", "Dependency"], Duration::from_secs(30))?;
                self.cancel_all()?;
                self.cycle()
            }
            // C_cancel runs its script when it is cancelled.
            "scancel_running" => {
                let id = ids.here(77);
                self.wait_state(id, &[JobStateWire::Running], Duration::from_secs(60))?;
                self.wait_script(id, Duration::from_secs(30))
            }
            // C_ok, C_fail, C_kill, C_arr, C_N2, C_bob, C_cancel; C_depfail's dependency.
            "squeue_dependency_never_satisfied" => {
                self.wait_done(&here(&[74, 75, 76, 79, 80, 81, 77]), WAIT)?;
                self.wait_reason(ids.here(84), &["None", "Dependency"], Duration::from_secs(40))
            }
            // By this case Slurm had ended 64_4 (cancelled while running, 0253) and started
            // 64_1 in the throttle slot it freed (`_slurm_rpc_epilog_complete` runs
            // `schedule()` at once), all within the second of 0253. Flotilla does the same
            // 30-100 ms after the cancel, which the five cases between may or may not
            // outlast: the replay waits for that event instead of racing it.
            "squeue_t_all_after_cancels" => {
                let array = ids.here(64);
                let task_1 = || self.jobs().into_iter().find(|j| j.array_job_id == Some(array) && j.array_task_id == Some(1));
                self.wait(|| format!("task 1 of array {array} to run (is {:?})", task_1().map(|j| j.state)), Duration::from_secs(30), || {
                    task_1().is_some_and(|j| j.state == Some(JobStateWire::Running))
                })
            }
            // C_timeout.
            "scontrol_show_job_timeout" => self.wait_done(&here(&[78]), Duration::from_secs(200)),
            // Accounting after the last cancel (C_depfail, case 0281): every job has ended.
            "sacct_default" => {
                let live = || self.jobs().iter().filter(|j| j.state.is_some_and(|s| !s.is_finished())).map(|j| j.job_id).collect::<Vec<_>>();
                self.wait(|| format!("every job to finish (live: {:?})", live()), WAIT, || live().is_empty())?;
                self.cycle()
            }
            _ => Ok(()),
        }
    }

    /// The waits `capture_goldens.py` makes after a case.
    fn after(&self, case: &GoldenCase, stdout: &str, ids: &Ids) -> Result<(), String> {
        let id = || -> Option<u64> {
            stdout
                .split(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
                .and_then(|s| s.parse().ok())
        };
        let name = case.case.as_str();
        let running_or_done = [
            JobStateWire::Running,
            JobStateWire::Completed,
            JobStateWire::Completing,
            JobStateWire::Failed,
        ];
        match name {
            "sbatch_plain" | "sbatch_parsable" | "sbatch_wrap" | "sbatch_J_name" | "sbatch_array_env" => match id() {
                Some(i) => self.wait_done(&[i], WAIT),
                None => Ok(()),
            },
            "sbatch_fill_A1_gpu4" | "sbatch_fill_A2_gpu4" | "sbatch_fill_A3_N2_gpu8" | "sbatch_fill_B1_bob_gpu8" => match id() {
                Some(i) => {
                    self.wait_state(i, &[JobStateWire::Running], Duration::from_secs(60))?;
                    if name == "sbatch_fill_B1_bob_gpu8" {
                        // The inputs of the backfill plan 0178/0209/0210 show (see
                        // `start_within_a_minute`), for a run that differs.
                        let fills = [ids.here(53), ids.here(54), ids.here(55), i];
                        let starts: Vec<(u64, Option<i64>)> = self
                            .jobs()
                            .iter()
                            .filter(|j| fills.contains(&j.job_id))
                            .map(|j| (j.job_id, j.start_time))
                            .collect();
                        eprintln!("fill jobs' starts (id, s since the epoch): {starts:?}");
                    }
                    Ok(())
                }
                None => Ok(()),
            },
            // A requeued job is pending again once its run ended (the capture slept a second
            // after `scontrol_requeue_running`); a requeue that was refused leaves the job as
            // it was. How long the stop takes (a script that got SIGTERM, or SIGKILL after
            // KillWait) then matters to no later case.
            _ if case.cmd.starts_with("scontrol requeue") => {
                for rec in case.ids.values().filter_map(|v| v.parse::<u64>().ok()) {
                    let id = ids.here(rec);
                    self.wait(|| format!("job {id} to be pending again or finished after the requeue (is {:?})", self.states_of(id)), WAIT, || {
                        let st = self.states_of(id);
                        !st.is_empty() && st.iter().all(|s| *s == JobStateWire::Pending || s.is_finished())
                    })?;
                }
                Ok(())
            }
            _ if name.starts_with("sbatch_") && case.cmd.contains("-o env-%x-%j.out") => match id() {
                Some(i) => self.wait_state(i, &running_or_done, Duration::from_secs(30)),
                None => Ok(()),
            },
            _ if name.starts_with("scontrol_show_job_d_") && !name.ends_with("_A1") && !name.ends_with("_A3") => {
                match case.ids.values().next().and_then(|v| v.parse().ok()) {
                    Some(rec) => self.wait_done(&[ids.here(rec)], WAIT),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Runs `cmd` (the case's command line, with Flotilla's ids) as the case's user, in its
    /// environment and directory.
    fn run_case(&self, case: &GoldenCase, cmd: &str) -> (i32, String, String) {
        let mut env: BTreeMap<String, String> = case.env.clone();
        let path = format!(
            "{}:{}:{}",
            self.bin_dir.display(),
            self.stub_dir.display(),
            env.get("PATH").cloned().unwrap_or_default()
        );
        env.insert("PATH".into(), path);
        env.insert("FLOTILLA_CONF".into(), self.conf.display().to_string());
        let mut argv: Vec<String> = Vec::new();
        if case.user != "root" {
            argv.extend(["runuser", "-u", case.user.as_str(), "--"].map(String::from));
        }
        argv.extend(["env", "-i"].map(String::from));
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.extend(["/bin/bash", "-c", cmd].map(String::from));
        let cwd = if case.cwd.is_empty() { "/".to_string() } else { case.cwd.clone() };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if case.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().expect("spawn case");
        if let (Some(input), Some(mut pipe)) = (&case.stdin, child.stdin.take()) {
            let _ = pipe.write_all(input.as_bytes());
        }
        let out = child.wait_with_output().expect("case runs");
        let code = out.status.code().unwrap_or(128);
        (
            code,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

const DRIVER: &str = r#"
import json, os, re, sys, fnmatch, difflib
ref, gold_dir, got_dir, div_file, host = sys.argv[1:6]
sys.path.insert(0, ref)
import normalize
divs = []
for line in open(div_file):
    if not line.strip() or line.startswith('#'):
        continue
    pat, rx, rep, _reason = line.rstrip('\n').split('\t')
    divs.append((pat, re.compile(rx, re.M), rep))
res = {}
for f in sorted(os.listdir(got_dir)):
    b = json.load(open(os.path.join(got_dir, f)))
    a = json.load(open(os.path.join(gold_dir, f)))
    na, nb = normalize.normalize_case(a, 'vm'), normalize.normalize_case(b, host)
    name = f[:-5]
    for k in ('stdout', 'stderr'):
        for pat, rx, rep in divs:
            if fnmatch.fnmatch(name, pat):
                na[k] = rx.sub(rep, na[k]); nb[k] = rx.sub(rep, nb[k])
    diff = [k for k in ('exit_code', 'stdout', 'stderr') if na[k] != nb[k]]
    lines = []
    for k in diff:
        if k == 'exit_code':
            lines.append('exit_code: want %s got %s' % (na[k], nb[k]))
            continue
        for l in difflib.unified_diff(na[k].splitlines(), nb[k].splitlines(), 'want', 'got', lineterm='', n=0):
            lines.append('  ' + l)
    res[name] = {'ok': not diff, 'diff': '\n'.join(lines[:40])}
print(json.dumps(res))
"#;

#[test]
fn golden_replay() {
    if !goldens_dir().is_dir() {
        eprintln!("SKIPPED: no goldens at {}", goldens_dir().display());
        return;
    }
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: the replay runs cases as alice (2001), bob (2002) and root and their jobs as them; it needs root");
        return;
    }
    if !flotilla_compat_tests::sh("command -v python3 >/dev/null && command -v runuser >/dev/null") {
        eprintln!("SKIPPED: python3 and runuser are needed");
        return;
    }
    if let Err(e) = ensure_users() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    flotilla_compat_tests::build_binaries();
    let dir = tempfile::Builder::new().prefix("flotilla-replay").tempdir().expect("tempdir");
    flotilla_compat_tests::sh(&format!("chmod 755 {}", dir.path().display()));
    // The reference configuration, plus the accounting associations the reference made with
    // sacctmgr (alice and bob in account `research`, their default) as Flotilla's quota.conf.
    let confdir = dir.path().join("conf");
    std::fs::create_dir_all(&confdir).unwrap();
    let refconf = shared_dir().join("slurm-reference").join("conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), confdir.join(f)).unwrap();
    }
    std::fs::write(confdir.join("quota.conf"), QUOTA_CONF).unwrap();
    let cluster = LocalCluster::start_with(Some(&confdir), |o| {
        o.fast = false;
        o.bin_dir = Some(flotilla_compat_tests::bin_dir());
        o.ctld_args = vec!["--minute-s".into(), MINUTE_S.to_string()];
    });
    let stub_dir = flotilla_compat_tests::stub_commands(dir.path(), &flotilla_compat_tests::bin_dir());
    let h = Harness {
        dir,
        socket: cluster.socket(),
        conf: cluster.slurm_conf(),
        bin_dir: flotilla_compat_tests::bin_dir(),
        stub_dir,
    };
    let t0 = Instant::now();
    loop {
        if let Some(Response::Nodes(n)) = h.call(Request::QueryNodes(NodeQuery::default())) {
            if n.len() == 4 && n.iter().all(|n| !n.not_responding && n.state == "IDLE") {
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "nodes did not register");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (user, home) in [("alice", "/home/alice/g"), ("bob", "/home/bob/g")] {
        let _ = std::fs::remove_dir_all(home);
        std::fs::create_dir_all(home).unwrap();
        for (f, body) in SCRIPTS {
            std::fs::write(Path::new(home).join(f), body).unwrap();
        }
        flotilla_compat_tests::sh(&format!("chmod 755 {home}/*.sh; chown -R {user}:{user} {home}"));
    }
    let got_dir = h.dir.path().join("got");
    std::fs::create_dir_all(&got_dir).unwrap();
    let cases = load_goldens().expect("goldens load");
    let only = std::env::var("FLOTILLA_REPLAY_UNTIL").ok().and_then(|s| s.parse::<u32>().ok());
    let mut ids = Ids::default();
    // Waits that timed out, by case: each fails its case and the test.
    let mut wait_failures: BTreeMap<String, String> = BTreeMap::new();
    for case in &cases {
        if only.is_some_and(|n| case.seq > n) {
            break;
        }
        let name = format!("{:04}_{}", case.seq, sanitize(&case.case));
        let mut failed = Vec::new();
        if let Err(e) = h.before(case, &ids) {
            failed.push(format!("before it: {e}"));
        }
        // A submission that printed one id: note Flotilla's id of it, if it is a job the case
        // created.
        let submits = case.cmd.contains("sbatch") && !case.cmd.contains("--test-only");
        let recorded_id = printed_id(&case.stdout).filter(|_| submits);
        let known_before: BTreeSet<u64> = if recorded_id.is_some() { h.jobs().iter().map(|j| j.job_id).collect() } else { BTreeSet::new() };
        let cmd = ids.command(case);
        let (code, out, err) = h.run_case(case, &cmd);
        if let (Some(rec), Some(got)) = (recorded_id, printed_id(&out)) {
            if !known_before.contains(&got) && h.jobs().iter().any(|j| j.job_id == got) {
                ids.here.insert(rec, got);
            }
        }
        if let Err(e) = h.after(case, &out, &ids) {
            failed.push(format!("after it: {e}"));
        }
        if !failed.is_empty() {
            wait_failures.insert(name.clone(), failed.join("; "));
        }
        let rec = serde_json::json!({
            "case": case.case, "seq": case.seq, "cmd": case.cmd, "user": case.user, "ran": cmd,
            "exit_code": code, "stdout": ids.to_recorded(&out), "stderr": ids.to_recorded(&err),
            "raw_stdout": out, "raw_stderr": err,
        });
        std::fs::write(got_dir.join(format!("{name}.json")), serde_json::to_string(&rec).unwrap()).unwrap();
    }
    if std::env::var_os("FLOTILLA_REPLAY_KEEP").is_some() {
        let keep = std::env::temp_dir().join("flotilla-replay-cluster");
        let _ = std::fs::remove_dir_all(&keep);
        flotilla_compat_tests::sh(&format!("mkdir -p {k} && cp {d}/*.log {k}/", k = keep.display(), d = cluster.dir().display()));
    }
    drop(cluster);
    let here = flotilla_compat_tests::workspace_root().join("compat-tests");
    let out = Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(shared_dir().join("slurm-reference"))
        .arg(goldens_dir())
        .arg(&got_dir)
        .arg(here.join("divergences.tsv"))
        .arg(flotilla_compat_tests::hostname())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "normalize driver failed: {}", String::from_utf8_lossy(&out.stderr));
    let res: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&out.stdout).expect("driver json");
    let known = flotilla_compat_tests::read_list(&here.join("known_failures.txt"));
    let mut pass = 0;
    let mut unexpected = Vec::new();
    let mut now_passing = Vec::new();
    let mut report = String::new();
    for (name, r) in &res {
        let ok = r["ok"].as_bool().unwrap_or(false) && !wait_failures.contains_key(name);
        if ok {
            pass += 1;
            if known.contains_key(name) {
                now_passing.push(name.clone());
            }
        } else {
            let waited = wait_failures.get(name).map_or(String::new(), |e| format!("  wait: {e}\n"));
            report.push_str(&format!("--- {name}\n{waited}{}\n", r["diff"].as_str().unwrap_or("")));
            if !known.contains_key(name) {
                unexpected.push(name.clone());
            }
        }
    }
    std::fs::write(std::env::temp_dir().join("flotilla-replay-report.txt"), &report).unwrap();
    if std::env::var_os("FLOTILLA_REPLAY_KEEP").is_some() {
        let keep = std::env::temp_dir().join("flotilla-replay-got");
        let _ = std::fs::remove_dir_all(&keep);
        flotilla_compat_tests::sh(&format!("cp -r {} {}", got_dir.display(), keep.display()));
    }
    eprintln!(
        "golden replay: {pass} of {} goldens pass ({} known failures listed); diffs in {}",
        res.len(),
        known.len(),
        std::env::temp_dir().join("flotilla-replay-report.txt").display()
    );
    let mut problems = Vec::new();
    if !wait_failures.is_empty() {
        let lines: Vec<String> = wait_failures.iter().map(|(c, e)| format!("{c}: {e}")).collect();
        problems.push(format!("waits that timed out (each fails its case):\n  {}", lines.join("\n  ")));
    }
    // A partial replay (FLOTILLA_REPLAY_UNTIL) checks its waits only: the lists are about
    // the whole sequence.
    if only.is_some() {
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        return;
    }
    if !unexpected.is_empty() {
        problems.push(format!("goldens failing but not in known_failures.txt:\n  {}", unexpected.join("\n  ")));
    }
    if !now_passing.is_empty() {
        problems.push(format!(
            "goldens now passing: remove them from known_failures.txt:\n  {}",
            now_passing.join("\n  ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect()
}

/// The job-id rule: Flotilla's id of a submission is written as the recorded one, whole numbers
/// only, not inside a time, a decimal or a size; a template runs with Flotilla's ids.
#[test]
fn job_ids_map_by_identity() {
    let mut ids = Ids::default();
    ids.here.extend([(74, 73), (79, 78), (51, 51)]);
    assert_eq!(ids.to_recorded("73\n"), "74\n");
    assert_eq!(
        ids.to_recorded("78_0|79|00:00:73|73:05|1.73|73.5|73G|afterok:73(failed)|730|slurm-73.out|JobId=51"),
        "79_0|79|00:00:73|73:05|1.73|73.5|73G|afterok:74(failed)|730|slurm-74.out|JobId=51"
    );
    let case: GoldenCase = serde_json::from_value(serde_json::json!({
        "case": "sacct_j", "seq": 1, "cmd": "sacct -j 74,79_1", "template": "sacct -j {C_ok},{C_arr}_1",
        "ids": {"C_ok": "74", "C_arr": "79"}, "env": {}, "exit_code": 0, "stdout": "", "stderr": ""
    }))
    .unwrap();
    assert_eq!(ids.command(&case), "sacct -j 73,78_1");
    assert_eq!(printed_id("Submitted batch job 43\n"), Some(43));
    assert_eq!(printed_id("45\n"), Some(45));
    assert_eq!(printed_id("45;cluster\n"), None);
}
