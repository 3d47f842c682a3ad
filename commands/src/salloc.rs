//! `salloc`: obtains an allocation, runs a command in it, and gives it back (Slurm 22.05
//! salloc(1)).
//!
//! The allocation options are sbatch's (`-N`, `-n`, `--gpus-per-node`, `-p`, `-t`, ...). The
//! command (default: the user's shell, `$SHELL`, else `/bin/sh`) runs on this host with the
//! allocation's environment ([`crate::alloc::alloc_env`]); `srun` inside it launches steps on
//! the allocated nodes. stderr: `salloc: Granted job allocation N` when granted (preceded by
//! `salloc: Pending job allocation N` / `salloc: job N queued and waiting for resources` /
//! `salloc: job N has been allocated resources` when it had to wait), `salloc:
//! Relinquishing job allocation N` when the command ended. The exit status is the command's
//! (`128 + s` when a signal `s` ended it); option errors exit 255, a refused allocation 1.
//! When the allocation ends under it (`scancel`, time limit) the command gets SIGHUP and
//! `salloc: Job allocation N has been revoked.` is printed when it has ended.

use crate::alloc;
use crate::common::{self, Ctl, Io};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs `salloc` with `args` (`args[0]` is the program name); returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    // Options end at the first operand (the command), as with sbatch's script.
    let split = first_operand(argv);
    let (words, command) = argv.split_at(split);
    let mut opts = match crate::sbatch::parse_options(words) {
        Ok(o) => o,
        Err(f) => {
            for l in f.lines {
                io.err(&format!("{}\n", l.replacen("sbatch", "salloc", 1)));
            }
            return f.code;
        }
    };
    let ntasks_given = opts.job.ntasks.is_some();
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("salloc: error: Job submit/allocate failed: {}\n", e.slurm().text));
            return 1;
        }
    };
    let shell = (io.env)("SHELL").filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into());
    let command: Vec<String> = if command.is_empty() { vec![shell] } else { command.to_vec() };
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into());
    let job = &mut opts.job;
    if job.name.is_none() {
        job.name = Some(if argv.len() == split {
            "interactive".into()
        } else {
            command[0].rsplit('/').next().unwrap_or(&command[0]).to_string()
        });
    }
    job.work_dir = match &opts.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => format!("{cwd}/{d}"),
        None => cwd,
    };
    job.uid = common::my_uid();
    job.gid = common::my_gid();
    // `job.user` stays empty: the controller names the user from the uid it authenticated.
    job.submit_host = common::hostname();
    job.environment = crate::sbatch::environment_for(opts.export.as_deref());
    let info = match alloc::allocate(&ctl, opts.job, "salloc", io) {
        Ok(j) => j,
        Err(e) => {
            for l in e.lines {
                io.err(&format!("{l}\n"));
            }
            return e.code;
        }
    };
    let id = info.job_id;
    io.err(&format!("salloc: Granted job allocation {id}\n"));
    let _ = io.err.flush();
    let conf_path = flotilla_conf::conf_path(io.env).to_string_lossy().into_owned();
    let env = alloc::alloc_env(&info, &ctl.conf.cluster_name, &conf_path, ntasks_given);
    let released = Arc::new(AtomicBool::new(false));
    let revoked = Arc::new(AtomicBool::new(false));
    let status = std::process::Command::new(&command[0]).args(&command[1..]).envs(env).spawn().and_then(|mut child| {
        watch_revocation(io.env, id, child.id() as i32, released.clone(), revoked.clone());
        child.wait()
    });
    released.store(true, Ordering::SeqCst);
    if revoked.load(Ordering::SeqCst) {
        io.err(&format!("salloc: Job allocation {id} has been revoked.\n"));
    }
    let (exit_code, signal, code) = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => (c, 0, c),
            (None, Some(sig)) => (0, sig, 128 + sig),
            _ => (0, 0, 0),
        },
        Err(e) => {
            io.err(&format!("salloc: error: {}: {e}\n", command[0]));
            (1, 0, 1)
        }
    };
    io.err(&format!("salloc: Relinquishing job allocation {id}\n"));
    if let Err(e) = alloc::release(&ctl, id, exit_code, signal) {
        io.err(&format!("salloc: error: Unable to release job allocation {id}: {}\n", e.slurm().text));
    }
    code
}

/// Watches the allocation while the command runs: when it ends without being given back
/// (`scancel`, time limit), sets `revoked` and sends the command SIGHUP, as salloc does.
/// (It never prints: the command's stderr sink belongs to the main thread.)
fn watch_revocation(env: &dyn Fn(&str) -> Option<String>, id: u64, pid: i32, released: Arc<AtomicBool>, revoked: Arc<AtomicBool>) {
    let Ok(ctl) = Ctl::new(env) else { return };
    std::thread::spawn(move || loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let Some(j) = alloc::job_info(&ctl, id) else { continue };
        if released.load(Ordering::SeqCst) {
            return;
        }
        if j.state.is_some_and(|s| s != flotilla_proto::JobStateWire::Running) {
            revoked.store(true, Ordering::SeqCst);
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGHUP);
            return;
        }
    });
}

/// Index of the first operand: the command and its arguments start there. Follows sbatch's
/// option table (options taking a value consume the next word unless glued).
fn first_operand(argv: &[String]) -> usize {
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--" {
            return i + 1;
        }
        if !a.starts_with('-') || a == "-" {
            return i;
        }
        i += if takes_value(a) { 2 } else { 1 };
    }
    argv.len()
}

/// Whether option word `a` takes the next word as its value (short letters with a required
/// value, or a long option with a required value written without `=`).
fn takes_value(a: &str) -> bool {
    const SHORT_WITH_VALUE: &str = "aAbBcCdDeFGiJLmMnNopqStwx";
    if let Some(long) = a.strip_prefix("--") {
        if long.contains('=') {
            return false;
        }
        const FLAGS: &[&str] = &[
            "exclusive", "hold", "help", "usage", "overcommit", "oversubscribe", "quiet", "verbose", "version",
            "no-requeue", "requeue", "contiguous", "preemptible", "test-only", "nice", "no-kill", "ignore-pbs",
            "get-user-env", "propagate", "spread-job", "use-min-nodes", "wait", "parsable", "no-shell",
        ];
        return !FLAGS.contains(&long);
    }
    let chars: Vec<char> = a.chars().skip(1).collect();
    // The last letter of a bundle takes the next word when it needs a value and none is glued.
    for (k, ch) in chars.iter().enumerate() {
        if SHORT_WITH_VALUE.contains(*ch) {
            return k == chars.len() - 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_starts_after_the_options() {
        assert_eq!(first_operand(&words(&["-N", "2", "--gpus-per-node=8", "srun", "-n", "2", "x"])), 3);
        assert_eq!(first_operand(&words(&["-N2", "--exclusive", "hostname"])), 2);
        assert_eq!(first_operand(&words(&["--time", "5", "-p", "batch"])), 4);
        assert_eq!(first_operand(&words(&["--", "-x"])), 1);
        assert_eq!(first_operand(&words(&[])), 0);
    }
}
