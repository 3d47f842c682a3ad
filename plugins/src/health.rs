//! GPU health policies: which GPU events quarantine (drain) a node, which only warn, which are
//! ignored. Pure: the events come from the node daemon's health source (NVML), the verdict's
//! reason becomes the node's drain reason (`scontrol show node` `Reason=`).
//!
//! The XID classes follow NVIDIA's Xid catalog ("Analyzing Xid Errors with the Xid Catalog",
//! NVIDIA GPU deployment docs, Ampere and newer): Xids whose resolution bucket is a GPU reset,
//! a node reboot or hardware service quarantine the node; Xids whose bucket is "restart the
//! application" (usually an application bug: bad memory access, illegal instruction) only
//! warn, because draining a node for a user's segfault would let one buggy job drain a fleet.

use flotilla_core::health::{HealthEvent, HealthPolicy, HealthVerdict};

/// Xids that quarantine the node, with the catalog's short description.
pub const CRITICAL_XIDS: &[(u64, &str)] = &[
    (48, "double-bit ECC error"),
    (61, "internal micro-controller breakpoint/warning"),
    (62, "internal micro-controller halt"),
    (63, "ECC page retirement or row remapping recording event"),
    (64, "ECC page retirement or row remapper recording failure"),
    (74, "NVLink error"),
    (79, "GPU has fallen off the bus"),
    (92, "high single-bit ECC error rate"),
    (94, "contained ECC error"),
    (95, "uncontained ECC error"),
    (119, "GSP RPC timeout"),
    (120, "GSP error"),
];

/// Xids that warn: mostly caused by the application (restart the application), or a
/// consequence of an earlier error.
pub const WARN_XIDS: &[(u64, &str)] = &[
    (13, "graphics engine exception"),
    (31, "GPU memory page fault"),
    (43, "GPU stopped processing"),
    (45, "preemptive cleanup, due to previous errors"),
    (46, "GPU stopped processing"),
    (68, "NVDEC0 exception"),
    (69, "graphics engine class error"),
    (154, "GPU recovery action changed"),
];

/// Catalog description of an XID code, if Flotilla classifies it.
pub fn xid_description(xid: u64) -> Option<&'static str> {
    CRITICAL_XIDS
        .iter()
        .chain(WARN_XIDS)
        .find(|(code, _)| *code == xid)
        .map(|(_, text)| *text)
}

/// The default GPU health policy (`health/nvidia`), with its thresholds.
///
/// Rules, per event:
/// - `Xid`: in [`CRITICAL_XIDS`] → quarantine; in [`WARN_XIDS`] → warn; any other code → warn
///   (an unknown Xid is surfaced, never silently dropped, and never drains a node on its own).
/// - `Ecc`: uncorrected > 0 → quarantine; corrected ≥ `ecc_corrected_warn` → warn.
/// - `NvLink`: errors > `nvlink_quarantine` → quarantine; > `nvlink_warn` → warn.
/// - `RetiredPages`: pending > 0 → quarantine (the pages retire at the next GPU reset, which
///   the node must get before new work).
/// - `Temperature`: ≥ `temp_quarantine_c` → quarantine; ≥ `temp_warn_c` → warn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaHealth {
    /// Corrected ECC errors from which to warn (volatile count).
    pub ecc_corrected_warn: u64,
    /// NVLink errors on one link above which to warn.
    pub nvlink_warn: u64,
    /// NVLink errors on one link above which to quarantine.
    pub nvlink_quarantine: u64,
    /// Degrees C from which to warn (around the slowdown temperature of data-centre GPUs).
    pub temp_warn_c: u32,
    /// Degrees C from which to quarantine (around the shutdown temperature).
    pub temp_quarantine_c: u32,
}

impl Default for NvidiaHealth {
    fn default() -> Self {
        NvidiaHealth {
            ecc_corrected_warn: 1000,
            nvlink_warn: 0,
            nvlink_quarantine: 100,
            temp_warn_c: 85,
            temp_quarantine_c: 95,
        }
    }
}

impl HealthPolicy for NvidiaHealth {
    fn name(&self) -> &str {
        "health/nvidia"
    }

    fn evaluate(&self, event: &HealthEvent) -> HealthVerdict {
        let quarantine = |reason: String| HealthVerdict::Quarantine { reason };
        let warn = |reason: String| HealthVerdict::Warn { reason };
        match *event {
            HealthEvent::Xid { gpu, xid } => {
                if let Some((_, text)) = CRITICAL_XIDS.iter().find(|(code, _)| *code == xid) {
                    quarantine(format!("Xid {xid} on gpu {gpu}: {text}"))
                } else if let Some((_, text)) = WARN_XIDS.iter().find(|(code, _)| *code == xid) {
                    warn(format!("Xid {xid} on gpu {gpu}: {text}"))
                } else {
                    warn(format!(
                        "Xid {xid} on gpu {gpu}: not in the catalog of critical Xids"
                    ))
                }
            }
            HealthEvent::Ecc {
                gpu,
                corrected,
                uncorrected,
            } => {
                if uncorrected > 0 {
                    quarantine(format!(
                        "uncorrectable ECC errors on gpu {gpu}: {uncorrected}"
                    ))
                } else if corrected >= self.ecc_corrected_warn {
                    warn(format!(
                        "corrected ECC errors on gpu {gpu}: {corrected} (warn at {})",
                        self.ecc_corrected_warn
                    ))
                } else {
                    HealthVerdict::Ignore
                }
            }
            HealthEvent::NvLink { gpu, link, errors } => {
                if errors > self.nvlink_quarantine {
                    quarantine(format!(
                        "NVLink errors on gpu {gpu} link {link}: {errors} (limit {})",
                        self.nvlink_quarantine
                    ))
                } else if errors > self.nvlink_warn {
                    warn(format!("NVLink errors on gpu {gpu} link {link}: {errors}"))
                } else {
                    HealthVerdict::Ignore
                }
            }
            HealthEvent::RetiredPages { gpu, pending } => {
                if pending > 0 {
                    quarantine(format!(
                        "retired pages pending on gpu {gpu}: {pending} (GPU reset needed)"
                    ))
                } else {
                    HealthVerdict::Ignore
                }
            }
            HealthEvent::Temperature { gpu, celsius } => {
                if celsius >= self.temp_quarantine_c {
                    quarantine(format!(
                        "gpu {gpu} at {celsius} C (limit {} C)",
                        self.temp_quarantine_c
                    ))
                } else if celsius >= self.temp_warn_c {
                    warn(format!(
                        "gpu {gpu} at {celsius} C (warn at {} C)",
                        self.temp_warn_c
                    ))
                } else {
                    HealthVerdict::Ignore
                }
            }
        }
    }
}

/// A policy that never quarantines: every event is ignored (`health/none`), for clusters that
/// leave GPU health to another tool (Slurm's `HealthCheckProgram`, DCGM).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoHealth;

impl HealthPolicy for NoHealth {
    fn name(&self) -> &str {
        "health/none"
    }

    fn evaluate(&self, _event: &HealthEvent) -> HealthVerdict {
        HealthVerdict::Ignore
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(event: HealthEvent) -> HealthVerdict {
        NvidiaHealth::default().evaluate(&event)
    }

    fn q(reason: &str) -> HealthVerdict {
        HealthVerdict::Quarantine {
            reason: reason.into(),
        }
    }

    fn w(reason: &str) -> HealthVerdict {
        HealthVerdict::Warn {
            reason: reason.into(),
        }
    }

    #[test]
    fn xid_79_quarantines_with_the_catalog_text() {
        assert_eq!(
            verdict(HealthEvent::Xid { gpu: 3, xid: 79 }),
            q("Xid 79 on gpu 3: GPU has fallen off the bus")
        );
    }

    #[test]
    fn every_critical_xid_quarantines() {
        for xid in [48, 63, 64, 74, 79, 92, 94, 95, 119, 120] {
            let v = verdict(HealthEvent::Xid { gpu: 0, xid });
            assert_eq!(v.severity(), 2, "xid {xid}: {v:?}");
            assert!(
                v.reason().starts_with(&format!("Xid {xid} on gpu 0: ")),
                "{v:?}"
            );
        }
    }

    #[test]
    fn application_xids_warn() {
        assert_eq!(
            verdict(HealthEvent::Xid { gpu: 1, xid: 13 }),
            w("Xid 13 on gpu 1: graphics engine exception")
        );
        assert_eq!(
            verdict(HealthEvent::Xid { gpu: 1, xid: 31 }),
            w("Xid 31 on gpu 1: GPU memory page fault")
        );
    }

    #[test]
    fn unknown_xid_warns_never_quarantines() {
        assert_eq!(
            verdict(HealthEvent::Xid { gpu: 2, xid: 999 }),
            w("Xid 999 on gpu 2: not in the catalog of critical Xids")
        );
    }

    #[test]
    fn uncorrectable_ecc_quarantines() {
        let ecc = |corrected, uncorrected| HealthEvent::Ecc {
            gpu: 5,
            corrected,
            uncorrected,
        };
        assert_eq!(
            verdict(ecc(0, 1)),
            q("uncorrectable ECC errors on gpu 5: 1")
        );
        assert_eq!(verdict(ecc(0, 0)), HealthVerdict::Ignore);
        assert_eq!(verdict(ecc(999, 0)), HealthVerdict::Ignore);
        assert_eq!(
            verdict(ecc(1000, 0)),
            w("corrected ECC errors on gpu 5: 1000 (warn at 1000)")
        );
    }

    #[test]
    fn nvlink_errors_warn_then_quarantine_above_threshold() {
        let link = |errors| HealthEvent::NvLink {
            gpu: 0,
            link: 7,
            errors,
        };
        assert_eq!(verdict(link(0)), HealthVerdict::Ignore);
        assert_eq!(verdict(link(1)), w("NVLink errors on gpu 0 link 7: 1"));
        assert_eq!(verdict(link(100)).severity(), 1);
        assert_eq!(
            verdict(link(101)),
            q("NVLink errors on gpu 0 link 7: 101 (limit 100)")
        );
    }

    #[test]
    fn pending_retired_pages_quarantine() {
        assert_eq!(
            verdict(HealthEvent::RetiredPages { gpu: 4, pending: 2 }),
            q("retired pages pending on gpu 4: 2 (GPU reset needed)")
        );
        assert_eq!(
            verdict(HealthEvent::RetiredPages { gpu: 4, pending: 0 }),
            HealthVerdict::Ignore
        );
    }

    #[test]
    fn temperature_warns_then_quarantines() {
        let t = |celsius| HealthEvent::Temperature { gpu: 6, celsius };
        assert_eq!(verdict(t(70)), HealthVerdict::Ignore);
        assert_eq!(verdict(t(85)), w("gpu 6 at 85 C (warn at 85 C)"));
        assert_eq!(verdict(t(95)), q("gpu 6 at 95 C (limit 95 C)"));
    }

    #[test]
    fn thresholds_are_configurable() {
        let strict = NvidiaHealth {
            nvlink_quarantine: 0,
            temp_quarantine_c: 80,
            ..NvidiaHealth::default()
        };
        let link = HealthEvent::NvLink {
            gpu: 0,
            link: 0,
            errors: 1,
        };
        assert_eq!(strict.evaluate(&link).severity(), 2);
        let hot = HealthEvent::Temperature {
            gpu: 0,
            celsius: 80,
        };
        assert_eq!(strict.evaluate(&hot).severity(), 2);
    }

    #[test]
    fn batch_verdict_is_the_first_most_severe() {
        let events = [
            HealthEvent::Temperature {
                gpu: 0,
                celsius: 40,
            },
            HealthEvent::Xid { gpu: 1, xid: 13 },
            HealthEvent::Xid { gpu: 3, xid: 79 },
            HealthEvent::Ecc {
                gpu: 2,
                corrected: 0,
                uncorrected: 4,
            },
        ];
        assert_eq!(
            NvidiaHealth::default().evaluate_all(&events),
            q("Xid 79 on gpu 3: GPU has fallen off the bus")
        );
        assert_eq!(
            NvidiaHealth::default().evaluate_all(&[]),
            HealthVerdict::Ignore
        );
        assert_eq!(NoHealth.evaluate_all(&events), HealthVerdict::Ignore);
    }

    #[test]
    fn descriptions_cover_both_tables() {
        assert_eq!(xid_description(48), Some("double-bit ECC error"));
        assert_eq!(xid_description(43), Some("GPU stopped processing"));
        assert_eq!(xid_description(1), None);
    }
}
