//! The crate's one error type.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong in the simulator.
///
/// Trace errors name the file, the 1-based line as a text editor shows it (the header is line 1)
/// and the column, so a bad row can be found and fixed by hand.
#[derive(Debug, Error)]
pub enum SimError {
    /// A file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The header row (line 1) lacks a column the loader needs.
    #[error("{}:1: missing column `{column}`", file.display())]
    MissingColumn {
        /// The CSV file.
        file: PathBuf,
        /// The column that is not in the header.
        column: &'static str,
    },
    /// A data row cannot be read: wrong field count, a value that does not parse, or a value
    /// outside what the trace's README allows.
    #[error("{}:{line}: column `{column}`: {message}", file.display())]
    Malformed {
        /// The CSV file.
        file: PathBuf,
        /// 1-based line of the row; the header is line 1.
        line: u64,
        /// The header name of the offending column.
        column: String,
        /// What is wrong, lower-case.
        message: String,
    },
    /// An openb pod-list variant that is not one of the 17 shipped.
    #[error(
        "unknown openb pod list `{name}` (expected one of {})",
        crate::traces::openb::OpenbVariant::names()
    )]
    UnknownOpenbVariant {
        /// The name asked for.
        name: String,
    },
    /// An ITP cluster name with no jobs in `itp/jobs.csv`.
    #[error("no itp jobs for cluster `{cluster}`")]
    UnknownItpCluster {
        /// The cluster asked for, e.g. `cluster04`.
        cluster: String,
    },
    /// A policy name no experiment knows.
    #[error("unknown policy `{name}`")]
    UnknownPolicy {
        /// The name asked for.
        name: String,
    },
    /// An output file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("cannot draw {}: {message}", path.display())]
    Plot {
        /// The PNG file.
        path: PathBuf,
        /// What the plotting library said.
        message: String,
    },
    /// An experiment option is out of range.
    #[error("bad option: {0}")]
    BadOption(String),
}
