//! Switch topology of an Alibaba Lingjun cluster (Crux, SIGCOMM'24): `topology/crux_lingjun_topo.csv`,
//! 847 hosts in a 3-tier Clos (ToR = ASW, aggregation = PSW, core = DSW).

use std::path::Path;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use crate::SimError;

/// A host and its switches.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CruxHost {
    /// 0-based host index.
    pub host_idx: u32,
    /// Core switch (DSW).
    pub dsw: String,
    /// Aggregation switch (PSW).
    pub psw: String,
    /// ToR switch (ASW). ASW names repeat under different PSWs, so a ToR is identified by
    /// [`CruxHost::tor`], not by this name alone.
    pub asw: String,
    /// Anonymised host name.
    pub host_hash: String,
}

impl CruxHost {
    /// The ToR group key, `(psw, asw)`: 119 groups of 2–8 hosts.
    pub fn tor(&self) -> (&str, &str) {
        (&self.psw, &self.asw)
    }
}

/// Columns `topology/crux_lingjun_topo.csv` must have.
pub const CRUX_COLUMNS: &[&str] = &["host_idx", "dsw", "psw", "asw", "host_hash"];

/// Loads `topology/crux_lingjun_topo.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_crux_topology(path: &Path) -> Result<Vec<CruxHost>, SimError> {
    read_file(path, CRUX_COLUMNS, Ok::<_, Fault>)
}
