//! The API versions Flotilla serves: Slurm 22.05's `v0.0.38` (the `openapi/v0.0.38` and
//! `openapi/dbv0.0.38` plugins) and `v0.0.41`–`v0.0.44` (the `data_parser` plugins of Slurm
//! 23.11–25.11, whose schemas the `slurmrestapi` client's models pin).

/// One API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApiVersion {
    /// `v0.0.38` (Slurm 22.05).
    V0038,
    /// `v0.0.41` (Slurm 24.05).
    V0041,
    /// `v0.0.42` (Slurm 24.11).
    V0042,
    /// `v0.0.43` (Slurm 25.05).
    V0043,
    /// `v0.0.44` (Slurm 25.11).
    V0044,
}

impl ApiVersion {
    /// Every version served, oldest first.
    pub const ALL: [ApiVersion; 5] = [
        ApiVersion::V0038,
        ApiVersion::V0041,
        ApiVersion::V0042,
        ApiVersion::V0043,
        ApiVersion::V0044,
    ];

    /// `v0.0.42`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0038 => "v0.0.38",
            ApiVersion::V0041 => "v0.0.41",
            ApiVersion::V0042 => "v0.0.42",
            ApiVersion::V0043 => "v0.0.43",
            ApiVersion::V0044 => "v0.0.44",
        }
    }

    /// `v0042`, as in Slurm's operation ids (`slurm_v0042_get_jobs`) and schema names.
    pub fn short(self) -> &'static str {
        match self {
            ApiVersion::V0038 => "v0038",
            ApiVersion::V0041 => "v0041",
            ApiVersion::V0042 => "v0042",
            ApiVersion::V0043 => "v0043",
            ApiVersion::V0044 => "v0044",
        }
    }

    /// The version a path segment names (`v0.0.42`), if served.
    pub fn parse(s: &str) -> Option<ApiVersion> {
        ApiVersion::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether this is one of the `data_parser` versions (v0.0.41 and later).
    pub fn is_data_parser(self) -> bool {
        self != ApiVersion::V0038
    }
}

/// The Slurm release whose API each answer claims in its `meta` (Flotilla implements
/// 22.05's behaviour; the newer versions' `meta.slurm` still names this release).
pub const SLURM_RELEASE: (u32, u32, u32) = (22, 5, 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip() {
        for v in ApiVersion::ALL {
            assert_eq!(ApiVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(ApiVersion::parse("v0.0.40"), None);
    }
}
