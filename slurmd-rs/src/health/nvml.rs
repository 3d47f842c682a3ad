//! The NVML health source. `libnvidia-ml.so.1` is loaded at run time (`nvml-wrapper` uses
//! `dlopen` through `libloading`), so the daemon builds and links without a GPU driver; on a
//! host without one, [`NvmlHealth::new`] returns [`HealthError::NvmlUnavailable`] and
//! [`nvml_or_log`] logs one line and returns `None`.
//!
//! Each poll samples every GPU's counters (volatile ECC corrected/uncorrected, NVLink error
//! counters per active link, retired pages pending, temperature) and then waits at most
//! `timeout_ms` for critical XID events on the NVML event set. A GPU whose calls answer
//! "GPU is lost" is reported as Xid 79 (fallen off the bus). Counters a GPU does not support
//! (ECC on consumer boards, page retirement on GPUs with row remapping) are skipped, logged
//! once.
//!
//! The conversions from NVML answers to [`HealthEvent`]s are pure functions, unit-tested here;
//! the calls themselves are tested behind `FLOTILLA_TEST_GPU=1` on a GPU host.

use super::{GpuInfo, HealthError, HealthEvent, HealthSource};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use std::collections::BTreeSet;
use std::fmt;

/// NVLink links probed per GPU (`NVML_NVLINK_MAX_LINKS`).
pub const MAX_NVLINKS: u32 = 18;

/// XID events drained per poll at most (a storm does not hold the daemon's loop).
pub const MAX_XIDS_PER_POLL: usize = 256;

/// The XID NVIDIA logs when a GPU falls off the bus; reported for GPUs NVML says are lost.
pub const XID_FALLEN_OFF_BUS: u64 = 79;

/// What one poll read from one GPU; `None` = not supported or not readable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuSample {
    /// GPU index.
    pub gpu: u32,
    /// NVML answered "GPU is lost" (no other field is meaningful then).
    pub lost: bool,
    /// Volatile ECC errors: (corrected, uncorrected).
    pub ecc: Option<(u64, u64)>,
    /// Degrees C.
    pub temperature: Option<u32>,
    /// Retired pages pending retirement.
    pub pending_retired: Option<u64>,
    /// (link, error count) of each active link.
    pub nvlink: Vec<(u32, u64)>,
}

/// The events one sample reports: a lost GPU is Xid 79; otherwise ECC, retired pages and
/// temperature as read, and NVLink only for links with errors (a node has up to 18 links per
/// GPU: zero counters are not news).
pub fn sample_events(sample: &GpuSample) -> Vec<HealthEvent> {
    let gpu = sample.gpu;
    if sample.lost {
        return vec![HealthEvent::Xid {
            gpu,
            xid: XID_FALLEN_OFF_BUS,
        }];
    }
    let mut events = Vec::new();
    if let Some((corrected, uncorrected)) = sample.ecc {
        events.push(HealthEvent::Ecc {
            gpu,
            corrected,
            uncorrected,
        });
    }
    events.extend(
        sample
            .nvlink
            .iter()
            .filter(|(_, errors)| *errors > 0)
            .map(|&(link, errors)| HealthEvent::NvLink { gpu, link, errors }),
    );
    if let Some(pending) = sample.pending_retired {
        events.push(HealthEvent::RetiredPages { gpu, pending });
    }
    if let Some(celsius) = sample.temperature {
        events.push(HealthEvent::Temperature { gpu, celsius });
    }
    events
}

/// The event for an XID NVML delivered on GPU `gpu`; `None` when NVML could not say which XID.
pub fn xid_event(gpu: u32, xid: Option<XidError>) -> Option<HealthEvent> {
    match xid? {
        XidError::Value(xid) => Some(HealthEvent::Xid { gpu, xid }),
        XidError::Unknown => None,
    }
}

/// NVLink errors of one link: the sum of its data-link counters (replay, recovery, CRC flit,
/// CRC data); counters the link does not support count 0.
pub fn nvlink_errors(counters: &[Result<u64, NvmlError>]) -> u64 {
    counters.iter().filter_map(|c| c.as_ref().ok()).sum()
}

/// Pages pending retirement: NVML says only whether some are pending; the count reported is
/// the pages retired so far (the pending ones among them), at least 1 when some are pending.
pub fn pending_pages(pending: bool, retired: u64) -> u64 {
    if pending {
        retired.max(1)
    } else {
        0
    }
}

/// MiB from bytes.
pub fn mib(bytes: u64) -> u64 {
    bytes / (1024 * 1024)
}

/// GPU health from NVML.
pub struct NvmlHealth {
    /// One NVML handle for the daemon's lifetime, leaked so that the event set (which borrows
    /// it) can live beside it; `nvmlShutdown` is left to process exit.
    nvml: &'static Nvml,
    events: Option<EventSet<'static>>,
    gpus: u32,
    /// (gpu, what) already logged as unsupported or failing.
    logged: BTreeSet<(u32, &'static str)>,
}

impl fmt::Debug for NvmlHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NvmlHealth")
            .field("gpus", &self.gpus)
            .field("xid_events", &self.events.is_some())
            .finish()
    }
}

fn unavailable(source: NvmlError) -> HealthError {
    HealthError::NvmlUnavailable(source.to_string())
}

impl NvmlHealth {
    /// Loads `libnvidia-ml.so.1`, initialises NVML, counts the GPUs and registers for critical
    /// XID events. Errors: [`HealthError::NvmlUnavailable`] (no library, no driver).
    pub fn new() -> Result<NvmlHealth, HealthError> {
        NvmlHealth::from_nvml(Nvml::init().map_err(unavailable)?)
    }

    /// Same, loading NVML from `lib_path` (a driver installed outside the loader's path).
    pub fn with_library(lib_path: &std::path::Path) -> Result<NvmlHealth, HealthError> {
        let nvml = Nvml::builder()
            .lib_path(lib_path.as_os_str())
            .init()
            .map_err(unavailable)?;
        NvmlHealth::from_nvml(nvml)
    }

    fn from_nvml(nvml: Nvml) -> Result<NvmlHealth, HealthError> {
        let gpus = nvml.device_count().map_err(unavailable)?;
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let mut health = NvmlHealth {
            nvml,
            events: None,
            gpus,
            logged: BTreeSet::new(),
        };
        health.events = health.register_xid_events();
        Ok(health)
    }

    /// An event set with every GPU that supports critical XID events; `None` when none does
    /// (logged). NVML frees a set whose registration failed, so a failure starts over without
    /// that GPU.
    fn register_xid_events(&mut self) -> Option<EventSet<'static>> {
        let nvml = self.nvml;
        let mut skip: BTreeSet<u32> = BTreeSet::new();
        'again: loop {
            let mut set = match nvml.create_event_set() {
                Ok(set) => set,
                Err(e) => {
                    tracing::warn!("GPU health: no NVML event set, XID events not watched: {e}");
                    return None;
                }
            };
            let mut registered = 0;
            let candidates: Vec<u32> = (0..self.gpus).filter(|g| !skip.contains(g)).collect();
            for gpu in candidates {
                let supported = nvml
                    .device_by_index(gpu)
                    .and_then(|d| d.supported_event_types().map(|t| (d, t)));
                let device = match supported {
                    Ok((device, types)) if types.contains(EventTypes::CRITICAL_XID_ERROR) => device,
                    Ok(_) => {
                        tracing::warn!("GPU health: gpu {gpu} does not report XID events");
                        skip.insert(gpu);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("GPU health: gpu {gpu}: {e}; XID events not watched");
                        skip.insert(gpu);
                        continue;
                    }
                };
                match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                    Ok(s) => {
                        set = s;
                        registered += 1;
                    }
                    Err(e) => {
                        tracing::warn!("GPU health: gpu {gpu}: XID registration failed: {e}");
                        skip.insert(gpu);
                        continue 'again;
                    }
                }
            }
            return (registered > 0).then_some(set);
        }
    }

    /// Logs `what` failing on `gpu` once (not supported is expected on some boards: info).
    fn log_once(&mut self, gpu: u32, what: &'static str, err: &NvmlError) {
        if self.logged.insert((gpu, what)) {
            match err {
                NvmlError::NotSupported => {
                    tracing::info!("GPU health: gpu {gpu}: {what} not supported")
                }
                other => tracing::warn!("GPU health: gpu {gpu}: reading {what} failed: {other}"),
            }
        }
    }

    fn read<T>(&mut self, gpu: u32, what: &'static str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.log_once(gpu, what, &e);
                None
            }
        }
    }

    fn sample(&mut self, gpu: u32) -> GpuSample {
        let lost = |e: &NvmlError| matches!(e, NvmlError::GpuLost);
        let device: Device<'static> = match self.nvml.device_by_index(gpu) {
            Ok(d) => d,
            Err(e) => {
                let is_lost = lost(&e);
                self.log_once(gpu, "device handle", &e);
                return GpuSample {
                    gpu,
                    lost: is_lost,
                    ..GpuSample::default()
                };
            }
        };
        let temperature = device.temperature(TemperatureSensor::Gpu);
        if matches!(&temperature, Err(e) if lost(e)) {
            return GpuSample {
                gpu,
                lost: true,
                ..GpuSample::default()
            };
        }
        let temperature = self.read(gpu, "temperature", temperature);
        let corrected = device.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile);
        let uncorrected = device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
        let ecc = match (corrected, uncorrected) {
            (Ok(c), Ok(u)) => Some((c, u)),
            (Err(e), _) | (_, Err(e)) => self.read(gpu, "ECC counters", Err(e)),
        };
        let pending_retired = match device.are_pages_pending_retired() {
            Ok(pending) => {
                let retired: u64 = [
                    RetirementCause::MultipleSingleBitEccErrors,
                    RetirementCause::DoubleBitEccError,
                ]
                .into_iter()
                .filter_map(|cause| device.retired_pages(cause).ok())
                .map(|pages| pages.len() as u64)
                .sum();
                Some(pending_pages(pending, retired))
            }
            Err(e) => self.read(gpu, "retired pages", Err(e)),
        };
        let mut nvlink = Vec::new();
        for link in 0..MAX_NVLINKS {
            let wrapper = device.link_wrapper_for(link);
            if !wrapper.is_active().unwrap_or(false) {
                continue;
            }
            let counters: Vec<Result<u64, NvmlError>> = [
                ErrorCounter::DlReplay,
                ErrorCounter::DlRecovery,
                ErrorCounter::DlCrcFlit,
                ErrorCounter::DlCrcData,
            ]
            .into_iter()
            .map(|c| wrapper.error_counter(c))
            .collect();
            nvlink.push((link, nvlink_errors(&counters)));
        }
        GpuSample {
            gpu,
            lost: false,
            ecc,
            temperature,
            pending_retired,
            nvlink,
        }
    }

    /// Waits at most `timeout_ms` for the first XID, then takes what is already queued.
    fn xids(&mut self, timeout_ms: u32) -> Vec<HealthEvent> {
        let Some(set) = &self.events else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut wait = timeout_ms;
        while out.len() < MAX_XIDS_PER_POLL {
            match set.wait(wait) {
                Ok(data) => {
                    let gpu = data.device.index().unwrap_or(u32::MAX);
                    if let Some(event) = xid_event(gpu, data.event_data) {
                        out.push(event);
                    }
                    wait = 0;
                }
                Err(NvmlError::Timeout) => break,
                Err(e) => {
                    tracing::warn!("GPU health: waiting for XID events failed: {e}");
                    break;
                }
            }
        }
        out
    }
}

impl HealthSource for NvmlHealth {
    fn kind(&self) -> &'static str {
        "nvml"
    }

    fn inventory(&mut self) -> Vec<GpuInfo> {
        let mut gpus = Vec::new();
        for index in 0..self.gpus {
            let info = self.nvml.device_by_index(index).and_then(|d| {
                Ok(GpuInfo {
                    index,
                    name: d.name()?,
                    uuid: d.uuid()?,
                    memory_mib: mib(d.memory_info()?.total),
                })
            });
            match info {
                Ok(info) => gpus.push(info),
                Err(e) => tracing::warn!("GPU health: gpu {index} left out of the inventory: {e}"),
            }
        }
        gpus
    }

    fn poll(&mut self, timeout_ms: u32) -> Vec<HealthEvent> {
        let mut events = Vec::new();
        for gpu in 0..self.gpus {
            let sample = self.sample(gpu);
            events.extend(sample_events(&sample));
        }
        events.extend(self.xids(timeout_ms));
        events
    }
}

/// The NVML health source, or `None` with one log line saying why (no driver on this host).
pub fn nvml_or_log() -> Option<NvmlHealth> {
    match NvmlHealth::new() {
        Ok(health) => {
            tracing::info!("GPU health: NVML with {} GPUs", health.gpus);
            Some(health)
        }
        Err(e) => {
            tracing::warn!("GPU health: {e}; no GPU inventory or health events");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_become_events() {
        let sample = GpuSample {
            gpu: 2,
            lost: false,
            ecc: Some((5, 1)),
            temperature: Some(61),
            pending_retired: Some(0),
            nvlink: vec![(0, 0), (3, 12)],
        };
        assert_eq!(
            sample_events(&sample),
            vec![
                HealthEvent::Ecc {
                    gpu: 2,
                    corrected: 5,
                    uncorrected: 1
                },
                HealthEvent::NvLink {
                    gpu: 2,
                    link: 3,
                    errors: 12
                },
                HealthEvent::RetiredPages { gpu: 2, pending: 0 },
                HealthEvent::Temperature {
                    gpu: 2,
                    celsius: 61
                },
            ]
        );
    }

    #[test]
    fn unsupported_counters_are_left_out_and_a_lost_gpu_is_xid_79() {
        let bare = GpuSample {
            gpu: 1,
            temperature: Some(40),
            ..GpuSample::default()
        };
        assert_eq!(
            sample_events(&bare),
            vec![HealthEvent::Temperature {
                gpu: 1,
                celsius: 40
            }]
        );
        let lost = GpuSample {
            gpu: 7,
            lost: true,
            temperature: Some(40),
            ..GpuSample::default()
        };
        assert_eq!(
            sample_events(&lost),
            vec![HealthEvent::Xid { gpu: 7, xid: 79 }]
        );
    }

    #[test]
    fn xid_and_counter_conversions() {
        assert_eq!(
            xid_event(3, Some(XidError::Value(48))),
            Some(HealthEvent::Xid { gpu: 3, xid: 48 })
        );
        assert_eq!(xid_event(3, Some(XidError::Unknown)), None);
        assert_eq!(xid_event(3, None), None);
        assert_eq!(
            nvlink_errors(&[Ok(1), Err(NvmlError::NotSupported), Ok(4)]),
            5
        );
        assert_eq!(pending_pages(false, 9), 0);
        assert_eq!(pending_pages(true, 0), 1);
        assert_eq!(pending_pages(true, 3), 3);
        assert_eq!(mib(85_899_345_920), 81_920);
    }

    #[test]
    fn without_nvml_construction_is_a_clear_error() {
        let err = NvmlHealth::with_library(std::path::Path::new("/nonexistent/libnvidia-ml.so.1"))
            .expect_err("no NVML library at that path");
        let text = err.to_string();
        assert!(text.starts_with("NVML unavailable"), "{text}");
        assert!(text.contains("libnvidia-ml"), "{text}");
        println!("{text}");
        // The default loader: a clear error on a host without a driver, a source with one.
        match NvmlHealth::new() {
            Ok(h) => println!("NVML present: {h:?}"),
            Err(e) => println!("this host: {e}"),
        }
    }

    #[test]
    fn real_gpus() {
        if std::env::var("FLOTILLA_TEST_GPU").as_deref() != Ok("1") {
            println!("SKIPPED: no GPU (set FLOTILLA_TEST_GPU=1 on a GPU host)");
            return;
        }
        let mut health = NvmlHealth::new().expect("FLOTILLA_TEST_GPU=1 but NVML is unavailable");
        assert_eq!(health.kind(), "nvml");
        let gpus = health.inventory();
        assert!(
            !gpus.is_empty(),
            "FLOTILLA_TEST_GPU=1 but NVML lists no GPU"
        );
        for gpu in &gpus {
            println!("{gpu:?}");
            assert!(gpu.uuid.starts_with("GPU-"), "{gpu:?}");
            assert!(gpu.memory_mib > 0, "{gpu:?}");
        }
        let started = std::time::Instant::now();
        let events = health.poll(200);
        println!("poll(200 ms) in {:?}: {events:?}", started.elapsed());
        for gpu in &gpus {
            assert!(
                events.iter().any(
                    |e| matches!(e, HealthEvent::Temperature { gpu: g, .. } if *g == gpu.index)
                ),
                "a temperature for gpu {}",
                gpu.index
            );
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }
}
