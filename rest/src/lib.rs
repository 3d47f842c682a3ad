//! Slurm's REST data: what `slurmrestd` answers and what the commands print for `--json` and
//! `--yaml` (Slurm's `data_parser`), for each API version Flotilla serves
//! ([`version::ApiVersion`]), built from the controller's wire types (`flotilla-proto`), with
//! the OpenAPI schema of every object ([`schema`]) so that the spec served and the JSON sent
//! come from one description.
//!
//! Pure: no I/O, no clock (callers pass `now`), no HTTP. `slurmrestd` adds the server; the
//! commands add the printing.

pub mod dp;
pub mod meta;
pub mod model;
pub mod schema;
pub mod v38;
pub mod v38db;
pub mod version;

pub use meta::{ClientInfo, RestError, RestWarning};
pub use schema::{Components, Schema, Spec};
pub use version::ApiVersion;
