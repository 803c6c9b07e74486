//! One file per command (uv's layout): each resolves its settings
//! (`settings`), calls the library (a workflow, for the long ones), and
//! hands the report to `output`. No command decides how a thing is done.

pub(crate) mod build;
pub(crate) mod bundle;
pub(crate) mod closure;
pub(crate) mod deb;
pub(crate) mod fetch;
pub(crate) mod history;
pub(crate) mod index;
pub(crate) mod keygen;
pub(crate) mod lock;
pub(crate) mod policy;
pub(crate) mod publish;
pub(crate) mod rollback;
pub(crate) mod serve;
pub(crate) mod vercmp;
pub(crate) mod verify;

/// What every command uses.
mod prelude {
    pub(crate) use std::path::{Path, PathBuf};
    pub(crate) use std::time::Duration;

    pub(crate) use debforge::deb::{self, BuildOptions};
    pub(crate) use debforge::format::version::{CompareOp, Version};
    pub(crate) use debforge::pipeline::{self, PipelineError};

    pub(crate) use crate::cli::args::*;
    pub(crate) use crate::cli::{Context, EXIT_FALSE, EXIT_OK, Failure, output, settings};
}
