//! Slurm's error codes (`slurm/slurm_errno.h`) and texts (`slurm_strerror`), as the commands
//! print them after `sbatch: error: Batch job submission failed: ` and friends.
//!
//! The numbers are Slurm's so that exit statuses derived from them match: `scancel` of another
//! user's job exits 210, which is `ESLURM_ACCESS_DENIED` (2002) modulo 256.

use serde::{Deserialize, Serialize};

/// `SLURM_PROTOCOL_VERSION_ERROR`.
pub const SLURM_PROTOCOL_VERSION_ERROR: i32 = 1005;
/// `SLURM_ERROR`: a failure without a more precise code.
pub const SLURM_ERROR: i32 = -1;
/// `EAGAIN` (errno 11): Slurm's answer when no job id is free (`_set_job_id`).
pub const EAGAIN: i32 = 11;
/// `SLURM_PROTOCOL_AUTHENTICATION_ERROR`: a credential missing, forged, expired or replayed.
pub const SLURM_PROTOCOL_AUTHENTICATION_ERROR: i32 = 1007;
/// `SLURM_PROTOCOL_INSANE_MSG_LENGTH`: a frame over the maximum size.
pub const SLURM_PROTOCOL_INSANE_MSG_LENGTH: i32 = 1017;
/// `SLURM_UNEXPECTED_MSG_ERROR`: undecodable or unexpected message.
pub const SLURM_UNEXPECTED_MSG_ERROR: i32 = 1000;
/// `SLURM_COMMUNICATIONS_CONNECTION_ERROR`: a connection refused or closed by the server
/// (too many connections, a deadline missed).
pub const SLURM_COMMUNICATIONS_CONNECTION_ERROR: i32 = 1001;
/// `ESLURM_INVALID_PARTITION_NAME`.
pub const ESLURM_INVALID_PARTITION_NAME: i32 = 2000;
/// `ESLURM_DEFAULT_PARTITION_NOT_SET`.
pub const ESLURM_DEFAULT_PARTITION_NOT_SET: i32 = 2001;
/// `ESLURM_ACCESS_DENIED`.
pub const ESLURM_ACCESS_DENIED: i32 = 2002;
/// `ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP` (`AllowGroups`).
pub const ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP: i32 = 2003;
/// `ESLURM_TOO_MANY_REQUESTED_CPUS`.
pub const ESLURM_TOO_MANY_REQUESTED_CPUS: i32 = 2005;
/// `ESLURM_INVALID_NODE_COUNT`.
pub const ESLURM_INVALID_NODE_COUNT: i32 = 2006;
/// `ESLURM_MAX_JOB_COUNT` (`MaxJobCount` reached).
pub const ESLURM_MAX_JOB_COUNT: i32 = 2007;
/// `ESLURM_JOB_SCRIPT_MISSING`.
pub const ESLURM_JOB_SCRIPT_MISSING: i32 = 2009;
/// `ESLURM_USER_ID_MISSING` ("Invalid user id").
pub const ESLURM_USER_ID_MISSING: i32 = 2010;
/// `ESLURM_PARTITION_NOT_AVAIL`: a submission to a `DRAIN` or `INACTIVE` partition.
pub const ESLURM_PARTITION_NOT_AVAIL: i32 = 2070;
/// `ESLURM_PATHNAME_TOO_LONG`: a string of the submission over its limit (the batch script
/// over `SchedulerParameters=max_script_size`).
pub const ESLURM_PATHNAME_TOO_LONG: i32 = 2012;
/// `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE`.
pub const ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE: i32 = 2014;
/// `ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE`: an update of a job whose partition is
/// `INACTIVE` (job_mgr.c `_update_job` after `job_limits_check`); the update is kept.
pub const ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE: i32 = 2015;
/// `ESLURM_NODES_BUSY` (a step waits for CPUs or GPUs other steps hold).
pub const ESLURM_NODES_BUSY: i32 = 2016;
/// `ESLURM_INVALID_JOB_ID`.
pub const ESLURM_INVALID_JOB_ID: i32 = 2017;
/// `ESLURM_INVALID_NODE_NAME`.
pub const ESLURM_INVALID_NODE_NAME: i32 = 2018;
/// `ESLURM_INVALID_NODE_STATE`.
pub const ESLURM_INVALID_NODE_STATE: i32 = 2028;
/// `ESLURM_WRITING_TO_FILE`: the script and environment could not be saved (Slurm: a write
/// into `StateSaveLocation` failed; Flotilla: the state database's commit failed, e.g. a
/// full disk).
pub const ESLURM_WRITING_TO_FILE: i32 = 2019;
/// `ESLURM_TRANSITION_STATE_NO_UPDATE`.
pub const ESLURM_TRANSITION_STATE_NO_UPDATE: i32 = 2020;
/// `ESLURM_ALREADY_DONE`.
pub const ESLURM_ALREADY_DONE: i32 = 2021;
/// `ESLURM_JOB_PENDING`.
pub const ESLURM_JOB_PENDING: i32 = 2024;
/// `ESLURM_IN_STANDBY_MODE`: a standby controller (one that does not hold the leader lease)
/// answers every request but a ping so; the commands try the next `SlurmctldHost=`.
pub const ESLURM_IN_STANDBY_MODE: i32 = 2027;
/// `ESLURM_INVALID_FEATURE`: a `--constraint` Slurm refuses (syntax, or a feature no node
/// has).
pub const ESLURM_INVALID_FEATURE: i32 = 2029;
/// `ESLURM_ACTIVE_FEATURE_NOT_SUBSET`: a node's active features must be among its
/// available ones.
pub const ESLURM_ACTIVE_FEATURE_NOT_SUBSET: i32 = 2031;
/// `ESLURM_NOT_SUPPORTED`.
pub const ESLURM_NOT_SUPPORTED: i32 = 2036;
/// `ESLURM_DISABLED`.
pub const ESLURM_DISABLED: i32 = 2037;
/// `ESLURM_JOB_HELD`.
pub const ESLURM_JOB_HELD: i32 = 2042;
/// `ESLURM_DEPENDENCY`.
pub const ESLURM_DEPENDENCY: i32 = 2038;
/// `ESLURM_BATCH_ONLY`: `scontrol requeue` of a job that is not a batch job (an `salloc`
/// allocation; Slurm's `_job_requeue_op`, job_mgr.c).
pub const ESLURM_BATCH_ONLY: i32 = 2039;
/// `ESLURM_INVALID_ACCOUNT`.
pub const ESLURM_INVALID_ACCOUNT: i32 = 2045;
/// `ESLURM_INVALID_TIME_LIMIT`.
pub const ESLURM_INVALID_TIME_LIMIT: i32 = 2051;
/// `ESLURM_RESERVATION_ACCESS`.
pub const ESLURM_RESERVATION_ACCESS: i32 = 2052;
/// `ESLURM_RESERVATION_INVALID`: a job names a reservation that does not exist.
pub const ESLURM_RESERVATION_INVALID: i32 = 2053;
/// `ESLURM_ACCOUNTING_POLICY`: an association or QOS limit (`MaxSubmitJobs`) refuses the
/// job.
pub const ESLURM_ACCOUNTING_POLICY: i32 = 2050;
/// `ESLURM_INVALID_TIME_VALUE`.
pub const ESLURM_INVALID_TIME_VALUE: i32 = 2054;
/// `ESLURM_INVALID_QOS`.
pub const ESLURM_INVALID_QOS: i32 = 2066;
/// `ESLURM_INVALID_GRES`.
pub const ESLURM_INVALID_GRES: i32 = 2072;
/// `ESLURM_BAD_TASK_COUNT`.
pub const ESLURM_BAD_TASK_COUNT: i32 = 2025;
/// `ESLURM_INVALID_CPU_COUNT`.
pub const ESLURM_INVALID_CPU_COUNT: i32 = 2069;
/// `ESLURM_INVALID_LICENSES`.
pub const ESLURM_INVALID_LICENSES: i32 = 2048;
/// `ESLURM_JOB_NOT_PENDING`.
pub const ESLURM_JOB_NOT_PENDING: i32 = 2073;
/// `ESLURM_INVALID_ARRAY`.
pub const ESLURM_INVALID_ARRAY: i32 = 2081;
/// `ESLURM_JOB_FINISHED`.
pub const ESLURM_JOB_FINISHED: i32 = 2084;
/// `ESLURM_JOB_NOT_RUNNING`.
pub const ESLURM_JOB_NOT_RUNNING: i32 = 2085;
/// `ESLURM_INTERNAL`.
pub const ESLURM_INTERNAL: i32 = 2090;
/// `ESLURM_INVALID_NICE`.
pub const ESLURM_INVALID_NICE: i32 = 2123;
/// `ESLURM_INVALID_TIME_MIN_LIMIT`.
pub const ESLURM_INVALID_TIME_MIN_LIMIT: i32 = 2124;
/// `ESLURM_GROUP_ID_MISSING` ("Invalid group id").
pub const ESLURM_GROUP_ID_MISSING: i32 = 2113;
/// `ESLURM_AUTH_CRED_INVALID`.
pub const ESLURM_AUTH_CRED_INVALID: i32 = 6000;
/// `ESLURM_AUTH_EXPIRED`.
pub const ESLURM_AUTH_EXPIRED: i32 = 6001;

/// Slurm's text for an error code (`slurm_strerror`), for the codes Flotilla returns.
pub fn strerror(code: i32) -> &'static str {
    match code {
        0 => "No error",
        SLURM_ERROR => "Unspecified error",
        EAGAIN => "Resource temporarily unavailable",
        ESLURM_IN_STANDBY_MODE => "Slurm backup controller in standby mode",
        SLURM_UNEXPECTED_MSG_ERROR => "Unexpected message received",
        SLURM_COMMUNICATIONS_CONNECTION_ERROR => "Communication connection failure",
        SLURM_PROTOCOL_VERSION_ERROR => "Protocol version has changed, re-link your code",
        SLURM_PROTOCOL_INSANE_MSG_LENGTH => "Insane message length",
        SLURM_PROTOCOL_AUTHENTICATION_ERROR => "Protocol authentication error",
        ESLURM_INVALID_PARTITION_NAME => "Invalid partition name specified",
        ESLURM_PARTITION_NOT_AVAIL => "Required partition not available (inactive or drain)",
        ESLURM_DEFAULT_PARTITION_NOT_SET => "No partition specified or system default partition",
        ESLURM_ACCESS_DENIED => "Access/permission denied",
        ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP => "User's group not permitted to use this partition",
        ESLURM_TOO_MANY_REQUESTED_CPUS => "More processors requested than permitted",
        ESLURM_INVALID_NODE_COUNT => "Node count specification invalid",
        ESLURM_MAX_JOB_COUNT => "Unable to create job record, try again",
        ESLURM_JOB_SCRIPT_MISSING => "Job script not specified",
        ESLURM_USER_ID_MISSING => "Invalid user id",
        ESLURM_PATHNAME_TOO_LONG => "Pathname of a file, directory or other parameter too long",
        ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE => "Requested node configuration is not available",
        ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE => "Requested partition configuration not available now",
        ESLURM_NODES_BUSY => "Requested nodes are busy",
        ESLURM_INVALID_JOB_ID => "Invalid job id specified",
        ESLURM_INVALID_NODE_NAME => "Invalid node name specified",
        ESLURM_INVALID_NODE_STATE => "Invalid node state specified",
        ESLURM_WRITING_TO_FILE => "I/O error writing script/environment to file",
        ESLURM_TRANSITION_STATE_NO_UPDATE => "Job can not be altered now, try again later",
        ESLURM_ALREADY_DONE => "Job/step already completing or completed",
        ESLURM_JOB_PENDING => "Job is pending execution",
        ESLURM_INVALID_FEATURE => "Invalid feature specification",
        ESLURM_ACTIVE_FEATURE_NOT_SUBSET => "Active features not subset of available features",
        ESLURM_NOT_SUPPORTED => "Requested operation not supported on this system",
        ESLURM_DISABLED => "Requested operation is presently disabled",
        ESLURM_JOB_HELD => "Job is in held state, pending scheduler release",
        ESLURM_DEPENDENCY => "Job dependency problem",
        ESLURM_BATCH_ONLY => "Only batch jobs are accepted or processed",
        ESLURM_INVALID_ACCOUNT => "Invalid account or account/partition combination specified",
        ESLURM_INVALID_TIME_LIMIT => "Requested time limit is invalid (missing or exceeds some limit)",
        ESLURM_RESERVATION_ACCESS => "Access denied to requested reservation",
        ESLURM_RESERVATION_INVALID => "Requested reservation is invalid",
        ESLURM_ACCOUNTING_POLICY => {
            "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
        }
        ESLURM_INVALID_TIME_VALUE => "Invalid time specified",
        ESLURM_INVALID_QOS => "Invalid qos specification",
        ESLURM_INVALID_GRES => "Invalid generic resource (gres) specification",
        ESLURM_BAD_TASK_COUNT => "Task count specification invalid",
        ESLURM_INVALID_CPU_COUNT => "CPU count specification invalid",
        ESLURM_INVALID_LICENSES => "Invalid license specification",
        ESLURM_JOB_NOT_PENDING => "Job is no longer pending execution",
        ESLURM_INVALID_ARRAY => "Invalid job array specification",
        ESLURM_JOB_FINISHED => "Job has already finished",
        ESLURM_JOB_NOT_RUNNING => "Job is not running",
        ESLURM_INTERNAL => "Slurm internal error, contact system administrator",
        ESLURM_INVALID_NICE => "Invalid --nice value",
        ESLURM_INVALID_TIME_MIN_LIMIT => "Invalid time-min specification (exceeds job's time or other limits)",
        ESLURM_GROUP_ID_MISSING => "Invalid group id",
        ESLURM_AUTH_CRED_INVALID => "Invalid authentication credential",
        ESLURM_AUTH_EXPIRED => "Authentication credential expired",
        _ => "Unknown error",
    }
}

/// An error reply: Slurm's code, its text, and lines the command prints before it (as
/// `sbatch: error: <line>`, e.g. `invalid partition specified: nosuch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmError {
    /// Slurm error code (`ESLURM_*`).
    pub code: i32,
    /// Slurm's text for the code.
    pub text: String,
    /// Extra lines the controller sends to the user before the error itself.
    pub messages: Vec<String>,
}

impl SlurmError {
    /// The error for `code` with Slurm's text.
    pub fn new(code: i32) -> SlurmError {
        SlurmError {
            code,
            text: strerror(code).to_string(),
            messages: Vec::new(),
        }
    }

    /// The error with one extra message line.
    pub fn with_message(code: i32, message: impl Into<String>) -> SlurmError {
        SlurmError {
            messages: vec![message.into()],
            ..SlurmError::new(code)
        }
    }
}

impl std::fmt::Display for SlurmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for SlurmError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_denied_exit_status_matches_scancel_golden() {
        // goldens/0250_scancel_other_users_job: exit 210.
        assert_eq!(ESLURM_ACCESS_DENIED % 256, 210);
        assert_eq!(strerror(ESLURM_ACCESS_DENIED), "Access/permission denied");
        assert_eq!(strerror(ESLURM_USER_ID_MISSING), "Invalid user id");
    }
}
