//! Real cgroup tests: they create cgroups under `/sys/fs/cgroup`, device nodes on a fresh
//! tmpfs and child processes. Root only, gated by `FLOTILLA_TEST_ROOT=1` (CI sets it and runs
//! as root); without it they print `SKIPPED: ...` and pass; with it, anything missing fails.
//!
//! Fake GPUs are character devices with NVIDIA's major number 195 and no driver behind them:
//! opening one the cgroup allows gets past the cgroup and fails in the driver lookup with
//! `ENXIO`; opening one the cgroup denies fails with `EPERM` before that.

use flotilla_slurmd::confine::bpf::{self, BpfAttach, DeviceFilterAttach};
use flotilla_slurmd::confine::v1::CgroupV1;
use flotilla_slurmd::confine::{ConfineSpec, Confinement, GpuDevice, JobCgroup};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid};
use std::ffi::CString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
const NVIDIA_MAJOR: u32 = 195;

fn root_enabled() -> bool {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: needs root and FLOTILLA_TEST_ROOT=1");
        return false;
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "FLOTILLA_TEST_ROOT=1 but the test does not run as root"
    );
    true
}

/// A tmpfs mounted with device nodes allowed, holding fake GPU device nodes; unmounted on drop.
struct FakeDev {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl FakeDev {
    fn new(gpus: u32) -> FakeDev {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dev");
        std::fs::create_dir(&dir).unwrap();
        // No MS_NODEV: device nodes on this tmpfs can be opened.
        mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            MsFlags::MS_NOSUID,
            Some("mode=755"),
        )
        .expect("mount a tmpfs for fake GPU device nodes");
        for i in 0..gpus {
            let path = dir.join(format!("nvidia{i}"));
            mknod(
                &path,
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                makedev(NVIDIA_MAJOR.into(), i.into()),
            )
            .expect("mknod a fake GPU");
        }
        FakeDev { _tmp: tmp, dir }
    }

    fn gpus(&self, n: u32) -> Vec<GpuDevice> {
        (0..n)
            .map(|i| GpuDevice {
                index: i,
                major: NVIDIA_MAJOR,
                minor: i,
                path: self.dir.join(format!("nvidia{i}")).display().to_string(),
            })
            .collect()
    }
}

impl Drop for FakeDev {
    fn drop(&mut self) {
        let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
    }
}

/// A forked child that waits until it is told to go (after the parent moved it into a
/// cgroup), then opens each path read-only and reports the errno of each open (0 = opened).
struct Opener {
    pid: Pid,
    go: OwnedFd,
    results: OwnedFd,
    count: usize,
}

impl Opener {
    #[allow(unsafe_code)]
    fn fork(paths: &[String]) -> Opener {
        let paths: Vec<CString> = paths
            .iter()
            .map(|p| CString::new(p.as_str()).unwrap())
            .collect();
        let (go_r, go_w) = nix::unistd::pipe().unwrap();
        let (res_r, res_w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only makes async-signal-safe system calls (read, open, close,
        // write, _exit) on memory prepared before the fork, and never returns into the test
        // harness; the parent continues normally.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            ForkResult::Child => {
                let mut byte = [0u8; 1];
                let _ = nix::unistd::read(&go_r, &mut byte);
                for path in &paths {
                    let errno =
                        match nix::fcntl::open(path.as_c_str(), OFlag::O_RDONLY, Mode::empty()) {
                            Ok(fd) => {
                                drop(fd);
                                0
                            }
                            Err(e) => e as i32,
                        };
                    let _ = nix::unistd::write(&res_w, &errno.to_ne_bytes());
                }
                // SAFETY: _exit(2) ends the child without running the parent's atexit handlers
                // or destructors (async-signal-safe, unlike `std::process::exit`).
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => Opener {
                pid: child,
                go: go_w,
                results: res_r,
                count: paths.len(),
            },
        }
    }

    /// Lets the child open its paths; returns the errno of each open.
    fn go(self) -> Vec<Errno> {
        nix::unistd::write(&self.go, b"g").unwrap();
        let mut out = Vec::new();
        for _ in 0..self.count {
            let mut buf = [0u8; 4];
            let mut got = 0;
            while got < 4 {
                let n = nix::unistd::read(&self.results, &mut buf[got..]).unwrap();
                assert!(n > 0, "child died before reporting");
                got += n;
            }
            out.push(Errno::from_raw(i32::from_ne_bytes(buf)));
        }
        waitpid(self.pid, None).unwrap();
        out
    }
}

/// `sh -c script` that waits for a line on stdin before running `script`'s body.
fn gated_shell(body: &str) -> std::process::Child {
    std::process::Command::new("sh")
        .args(["-c", &format!("read go; {body}")])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn release(child: &mut std::process::Child) {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills and removes the test's cgroups even when an assertion fails.
struct Cleanup<'a> {
    jobs: Vec<&'a dyn JobCgroup>,
    node_dirs: Vec<PathBuf>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for job in &self.jobs {
            let _ = job.signal_all(9);
            let deadline = Instant::now() + Duration::from_secs(5);
            while job.pids().map(|p| !p.is_empty()).unwrap_or(false) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = job.destroy();
        }
        for dir in &self.node_dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn v1_devices_memory_signals_and_destroy() {
    if !root_enabled() {
        return;
    }
    let root = Path::new(CGROUP_ROOT);
    for c in ["memory", "devices"] {
        assert!(
            root.join(c).join("cgroup.procs").exists(),
            "FLOTILLA_TEST_ROOT=1 but no cgroup v1 {c} hierarchy at {}",
            root.join(c).display()
        );
    }
    let node = format!("test-{}", std::process::id());
    let v1 = CgroupV1::new(root, &node);
    let dev = FakeDev::new(2);
    let gpus = dev.gpus(2);

    // GPU 1 allowed, GPU 0 denied; a 64 MiB limit.
    let spec = ConfineSpec {
        name: "job_1".into(),
        memory: Some(flotilla_slurmd::confine::MemoryLimits::hard_mib(64)),
        allowed_gpus: vec![1],
        all_gpus: gpus.clone(),
    };
    let job = v1.create(&spec).expect("create a v1 job cgroup");
    // A second job with a small limit, to see the OOM killer.
    let oom_spec = ConfineSpec {
        name: "job_2".into(),
        memory: Some(flotilla_slurmd::confine::MemoryLimits::hard_mib(16)),
        allowed_gpus: vec![0, 1],
        all_gpus: gpus.clone(),
    };
    let oom_job = v1.create(&oom_spec).expect("create a second v1 job cgroup");
    let _cleanup = Cleanup {
        jobs: vec![job.as_ref(), oom_job.as_ref()],
        node_dirs: ["memory", "devices", "pids"]
            .iter()
            .map(|c| root.join(c).join("flotilla").join(&node))
            .collect(),
    };

    // Memory limit read back from the kernel.
    let limit =
        std::fs::read_to_string(v1.dir("memory", "job_1").join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), (64u64 << 20).to_string());
    println!("memory.limit_in_bytes = {}", limit.trim());

    // Devices: outside the mask EPERM, inside it past the cgroup (ENXIO: no driver).
    let opener = Opener::fork(&[gpus[0].path.clone(), gpus[1].path.clone()]);
    // Before joining the cgroup nothing is denied: check the control first.
    let control = Opener::fork(&[gpus[0].path.clone(), gpus[1].path.clone()]);
    assert_eq!(
        control.go(),
        vec![Errno::ENXIO, Errno::ENXIO],
        "outside any job cgroup"
    );
    job.add_pid(opener.pid.as_raw()).unwrap();
    assert_eq!(job.pids().unwrap(), vec![opener.pid.as_raw()]);
    let errnos = opener.go();
    println!(
        "in job_1 (gpu 1 allowed): open {} -> {:?}, open {} -> {:?}",
        gpus[0].path, errnos[0], gpus[1].path, errnos[1]
    );
    assert_eq!(errnos, vec![Errno::EPERM, Errno::ENXIO]);

    // signal_all kills the whole tree: a shell, its children and a grandchild.
    let mut tree = gated_shell("sh -c 'sleep 1000 & wait' & sleep 1000 & wait");
    job.add_pid(tree.id() as i32).unwrap();
    release(&mut tree);
    wait_for("4 processes in job_1", || job.pids().unwrap().len() == 4);
    println!("job_1 processes before SIGKILL: {:?}", job.pids().unwrap());
    job.signal_all(9).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(tree.wait().unwrap().signal(), Some(9));
    wait_for("job_1 to be empty", || job.pids().unwrap().is_empty());
    assert!(!job.oom_killed().unwrap());

    // OOM: `tail -c` holds 100 MB from a pipe in a 16 MiB cgroup.
    let mut hog = gated_shell("head -c 200000000 /dev/zero | tail -c 100000000 > /dev/null");
    oom_job.add_pid(hog.id() as i32).unwrap();
    release(&mut hog);
    let status = hog.wait().unwrap();
    assert!(!status.success(), "the hog must not fit in 16 MiB");
    assert!(
        oom_job.oom_killed().unwrap(),
        "memory.oom_control reports the kill"
    );
    println!("job_2 (16 MiB): hog exited with {status}, oom_killed = true");

    // destroy removes every controller's directory.
    for j in [&job, &oom_job] {
        wait_for("empty cgroup", || j.pids().unwrap().is_empty());
        j.destroy().unwrap();
    }
    for c in ["memory", "devices", "pids"] {
        let d = v1.dir(c, "job_1");
        assert!(!d.exists(), "{} still exists", d.display());
    }
}

/// The cgroup2 mount point, if the host has one (hybrid hosts mount it at
/// `/sys/fs/cgroup/unified`).
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The BPF device filter passes the kernel's verifier, attaches to a cgroup2 directory and
/// enforces the mask. BPF device programs need no v2 controller (hybrid hosts have them too).
#[test]
fn bpf_device_filter_in_the_kernel() {
    if !root_enabled() {
        return;
    }
    let Some(mnt) = cgroup2_mount() else {
        println!("SKIPPED: no cgroup v2 hierarchy mounted on this host");
        return;
    };
    let dev = FakeDev::new(3);
    let gpus = dev.gpus(3);
    let dir = mnt.join(format!("flotilla-test-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    struct Rmdir(PathBuf);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _rmdir = Rmdir(dir.clone());
    // Job holds GPU 1: deny 0 and 2.
    let prog = bpf::device_filter(&[(NVIDIA_MAJOR, 0), (NVIDIA_MAJOR, 2)]);
    print!("{}", bpf::disassemble(&prog));
    BpfAttach
        .attach(&dir, &prog)
        .expect("load and attach the device filter");
    BpfAttach
        .attach(&dir, &prog)
        .expect("re-attaching is a no-op");

    let paths: Vec<String> = gpus.iter().map(|g| g.path.clone()).collect();
    let opener = Opener::fork(&paths);
    std::fs::write(dir.join("cgroup.procs"), opener.pid.as_raw().to_string()).unwrap();
    let errnos = opener.go();
    println!("in the BPF-filtered cgroup (gpu 1 allowed): {errnos:?}");
    assert_eq!(errnos, vec![Errno::EPERM, Errno::ENXIO, Errno::EPERM]);
    // /dev/null is untouched.
    let opener = Opener::fork(&["/dev/null".to_string()]);
    std::fs::write(dir.join("cgroup.procs"), opener.pid.as_raw().to_string()).unwrap();
    assert_eq!(opener.go(), vec![Errno::from_raw(0)]);
}
