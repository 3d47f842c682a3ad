//! Submission limits that keep one submission or one user from filling the controller: the
//! size of a batch script (`SchedulerParameters=max_script_size`).
//!
//! Pure checks over what admission already holds; no I/O. Slurm 22.05 checks the script's
//! length in `job_mgr.c` `_test_job_desc_fields` before a job record exists (no job id is
//! consumed) and answers `ESLURM_PATHNAME_TOO_LONG`; `read_config.c` refuses to start with a
//! `max_script_size` above 512 MB. Slurm 22.05 has no limit on the environment's size or
//! count other than its RPC decoder's (1 GiB per string); Flotilla's is the frame's
//! (`proto::frame::DEFAULT_MAX_FRAME`, 16 MiB), and the environment is purged with the script.

use flotilla_proto::errno::ESLURM_PATHNAME_TOO_LONG;
use flotilla_proto::SlurmError;

/// Slurm 22.05's default `max_script_size`: 4 MiB (bytes).
pub const DEFAULT_MAX_SCRIPT_SIZE: usize = 4 * 1024 * 1024;

/// The largest `max_script_size` Slurm accepts: 512 MiB (bytes).
pub const MAX_MAX_SCRIPT_SIZE: usize = 512 * 1024 * 1024;

/// The `max_script_size=N` of a `SchedulerParameters=` value (bytes), the default 4 MiB when
/// unset or absent.
///
/// # Errors
/// A value that is not a whole number of bytes, or one above 512 MiB (Slurm: "SchedulerParameters
/// option max_script_size cannot exceed 512 MB", fatal at start).
pub fn max_script_size(scheduler_parameters: Option<&str>) -> Result<usize, String> {
    let Some(params) = scheduler_parameters else { return Ok(DEFAULT_MAX_SCRIPT_SIZE) };
    let mut size = DEFAULT_MAX_SCRIPT_SIZE;
    for opt in params.split(',') {
        let Some((k, v)) = opt.trim().split_once('=') else { continue };
        if !k.trim().eq_ignore_ascii_case("max_script_size") {
            continue;
        }
        size = v
            .trim()
            .parse()
            .map_err(|_| format!("SchedulerParameters option max_script_size={v} is not a number of bytes"))?;
        if size > MAX_MAX_SCRIPT_SIZE {
            return Err("SchedulerParameters option max_script_size cannot exceed 512 MB".into());
        }
    }
    Ok(size)
}

/// Refuses a batch script longer than `max` bytes with Slurm's `ESLURM_PATHNAME_TOO_LONG`
/// ("Pathname of a file, directory or other parameter too long"; `sbatch` prints it after
/// "Batch job submission failed: " and exits 1).
///
/// # Errors
/// The error above.
pub fn check_script(script: &str, max: usize) -> Result<(), SlurmError> {
    if script.len() > max {
        tracing::info!(len = script.len(), max, "job_create_request: strlen(script) too big");
        return Err(SlurmError::new(ESLURM_PATHNAME_TOO_LONG));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_script_size_from_scheduler_parameters() {
        assert_eq!(max_script_size(None), Ok(4 << 20));
        assert_eq!(max_script_size(Some("bf_continue,default_queue_depth=100")), Ok(4 << 20));
        assert_eq!(max_script_size(Some("bf_continue,max_script_size=1000")), Ok(1000));
        assert_eq!(max_script_size(Some("MAX_SCRIPT_SIZE=536870912")), Ok(512 << 20));
        assert!(max_script_size(Some("max_script_size=536870913")).unwrap_err().contains("512 MB"));
        assert!(max_script_size(Some("max_script_size=4M")).is_err());
    }

    #[test]
    fn script_over_the_limit_is_refused_with_slurms_error() {
        assert!(check_script("#!/bin/sh\n", 10).is_ok());
        let e = check_script("#!/bin/sh\ntrue\n", 10).unwrap_err();
        assert_eq!(e.code, ESLURM_PATHNAME_TOO_LONG);
        assert_eq!(e.text, "Pathname of a file, directory or other parameter too long");
    }
}
