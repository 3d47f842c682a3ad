//! A fake [`Confinement`] for tests of other components (launch, signals, the daemon's main
//! loop): records every call, keeps the pids it was given, and reports OOM kills the test sets.

use super::{ConfineError, ConfineSpec, Confinement, JobCgroup};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeCall {
    /// [`Confinement::create`].
    Create(ConfineSpec),
    /// [`JobCgroup::add_pid`].
    AddPid {
        /// Cgroup name.
        name: String,
        /// Pid.
        pid: i32,
    },
    /// [`JobCgroup::signal_all`].
    SignalAll {
        /// Cgroup name.
        name: String,
        /// Signal number.
        signal: i32,
    },
    /// [`JobCgroup::destroy`].
    Destroy {
        /// Cgroup name.
        name: String,
    },
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<FakeCall>,
    /// Live cgroups: name → pids.
    cgroups: BTreeMap<String, Vec<i32>>,
    oom: Vec<String>,
    fail_create: Option<String>,
}

/// Records calls; clones share the record.
#[derive(Debug, Clone, Default)]
pub struct FakeConfinement {
    state: Arc<Mutex<State>>,
}

impl FakeConfinement {
    /// An empty fake.
    pub fn new() -> FakeConfinement {
        FakeConfinement::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake confinement lock")
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.state().calls.clone()
    }

    /// Names of the cgroups created and not destroyed.
    pub fn live(&self) -> Vec<String> {
        self.state().cgroups.keys().cloned().collect()
    }

    /// Makes [`JobCgroup::oom_killed`] of cgroup `name` report true.
    pub fn set_oom_killed(&self, name: &str) {
        self.state().oom.push(name.to_string());
    }

    /// Makes the next [`Confinement::create`] of cgroup `name` fail (as a host without the
    /// memory controller would).
    pub fn fail_create(&self, name: &str) {
        self.state().fail_create = Some(name.to_string());
    }
}

impl Confinement for FakeConfinement {
    fn kind(&self) -> &'static str {
        "fake"
    }

    fn create(&self, spec: &ConfineSpec) -> Result<Box<dyn JobCgroup>, ConfineError> {
        let mut state = self.state();
        state.calls.push(FakeCall::Create(spec.clone()));
        if state.fail_create.as_deref() == Some(spec.name.as_str()) {
            state.fail_create = None;
            return Err(ConfineError::Unsupported("memory".into()));
        }
        state.cgroups.entry(spec.name.clone()).or_default();
        Ok(Box::new(FakeJobCgroup {
            name: spec.name.clone(),
            state: Arc::clone(&self.state),
        }))
    }
}

/// A job cgroup of [`FakeConfinement`].
#[derive(Debug)]
pub struct FakeJobCgroup {
    name: String,
    state: Arc<Mutex<State>>,
}

impl FakeJobCgroup {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("fake confinement lock")
    }

    fn gone(&self) -> ConfineError {
        ConfineError::Io {
            path: format!("fake/{}", self.name),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
    }
}

impl JobCgroup for FakeJobCgroup {
    fn add_pid(&self, pid: i32) -> Result<(), ConfineError> {
        let mut state = self.state();
        state.calls.push(FakeCall::AddPid {
            name: self.name.clone(),
            pid,
        });
        match state.cgroups.get_mut(&self.name) {
            Some(pids) => {
                pids.push(pid);
                Ok(())
            }
            None => Err(self.gone()),
        }
    }

    /// None: the fake has no files; tests of launches use [`JobCgroup::add_pid`].
    fn procs_files(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    fn pids(&self) -> Result<Vec<i32>, ConfineError> {
        self.state()
            .cgroups
            .get(&self.name)
            .cloned()
            .ok_or_else(|| self.gone())
    }

    /// Records the signal; `SIGKILL` (9) empties the cgroup, as the kernel would.
    fn signal_all(&self, signal: i32) -> Result<(), ConfineError> {
        let mut state = self.state();
        state.calls.push(FakeCall::SignalAll {
            name: self.name.clone(),
            signal,
        });
        match state.cgroups.get_mut(&self.name) {
            Some(pids) => {
                if signal == 9 {
                    pids.clear();
                }
                Ok(())
            }
            None => Err(self.gone()),
        }
    }

    fn oom_killed(&self) -> Result<bool, ConfineError> {
        Ok(self.state().oom.contains(&self.name))
    }

    fn destroy(&self) -> Result<(), ConfineError> {
        let mut state = self.state();
        state.calls.push(FakeCall::Destroy {
            name: self.name.clone(),
        });
        state.cgroups.remove(&self.name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_calls_and_tracks_pids() {
        let fake = FakeConfinement::new();
        let spec = ConfineSpec {
            name: "job_1".into(),
            memory: Some(crate::confine::MemoryLimits::hard_mib(100)),
            allowed_gpus: vec![0],
            all_gpus: vec![],
        };
        let confinement: &dyn Confinement = &fake;
        assert_eq!(confinement.kind(), "fake");
        let job = confinement.create(&spec).unwrap();
        job.add_pid(10).unwrap();
        job.add_pid(11).unwrap();
        assert_eq!(job.pids().unwrap(), vec![10, 11]);
        assert!(!job.oom_killed().unwrap());
        fake.set_oom_killed("job_1");
        assert!(job.oom_killed().unwrap());
        job.signal_all(15).unwrap();
        assert_eq!(job.pids().unwrap().len(), 2);
        job.signal_all(9).unwrap();
        assert!(job.pids().unwrap().is_empty());
        assert_eq!(fake.live(), vec!["job_1".to_string()]);
        job.destroy().unwrap();
        assert!(fake.live().is_empty());
        assert!(job.add_pid(12).is_err());
        assert_eq!(
            fake.calls(),
            vec![
                FakeCall::Create(spec.clone()),
                FakeCall::AddPid {
                    name: "job_1".into(),
                    pid: 10
                },
                FakeCall::AddPid {
                    name: "job_1".into(),
                    pid: 11
                },
                FakeCall::SignalAll {
                    name: "job_1".into(),
                    signal: 15
                },
                FakeCall::SignalAll {
                    name: "job_1".into(),
                    signal: 9
                },
                FakeCall::Destroy {
                    name: "job_1".into()
                },
                FakeCall::AddPid {
                    name: "job_1".into(),
                    pid: 12
                },
            ]
        );
        fake.fail_create("job_2");
        let spec2 = ConfineSpec {
            name: "job_2".into(),
            ..spec
        };
        assert!(fake.create(&spec2).is_err());
        assert!(fake.create(&spec2).is_ok(), "fails once");
    }
}
