//! Arguments and environment resolved once, into the settings values the
//! library's workflows take (uv's `settings.rs`; ripgrep's low args → high
//! args). The only place that reads `SOURCE_DATE_EPOCH`, the clock, the
//! cache location, the passphrase and the test hooks.

use std::path::{Path, PathBuf};

use debforge::workflow::{Dates, KeySettings, TestHooks};

use super::Failure;
use super::args::{KeyArgs, ProjectArgs};

/// What every command may need from the environment, read once per run.
pub(crate) struct Environment {
    pub(crate) dates: Dates,
    /// `XDG_CACHE_HOME/debforge` or `~/.cache/debforge`, if either is set.
    pub(crate) cache: Option<PathBuf>,
    pub(crate) hooks: TestHooks,
    source_date_epoch: Result<Option<i64>, String>,
}

impl Environment {
    pub(crate) fn read() -> Environment {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let source_date_epoch = match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(v) if !v.is_empty() => v.trim().parse::<i64>().map(Some).map_err(|_| v),
            _ => Ok(None),
        };
        let cache = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
            (Some(x), _) if !x.is_empty() => Some(PathBuf::from(x).join("debforge")),
            (_, Some(h)) => Some(PathBuf::from(h).join(".cache/debforge")),
            _ => None,
        };
        // Test hooks (tests/integration/faults.rs, rollback.rs): points
        // where a test kills a run. `REL:MARKER` for the publish pause.
        let hooks = TestHooks {
            pause_in_swap: std::env::var_os("DEBFORGE_TEST_PAUSE_IN_SWAP").map(PathBuf::from),
            pause_before: std::env::var("DEBFORGE_TEST_PAUSE_BEFORE")
                .ok()
                .and_then(|p| {
                    p.split_once(':')
                        .map(|(rel, marker)| (rel.to_string(), PathBuf::from(marker)))
                }),
        };
        Environment {
            dates: Dates {
                now,
                source_date_epoch: source_date_epoch.clone().unwrap_or(None),
            },
            cache,
            hooks,
            source_date_epoch: source_date_epoch.map_err(|v| v.to_string()),
        }
    }

    /// The dates, refusing a `SOURCE_DATE_EPOCH` that is not a number (only
    /// the commands that use it refuse).
    pub(crate) fn dates(&self) -> Result<Dates, Failure> {
        match &self.source_date_epoch {
            Ok(_) => Ok(self.dates),
            Err(v) => Err(Failure::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a whole number of seconds"
            ))
            .hint(Some(
                "set it to e.g. $(git log -1 --format=%ct), or unset it",
            ))),
        }
    }

    pub(crate) fn cache_dir(&self) -> Result<PathBuf, Failure> {
        self.cache
            .clone()
            .ok_or_else(|| Failure::new("no cache directory: set --cache, XDG_CACHE_HOME or HOME"))
    }

    /// The pipeline's settings from the project arguments.
    pub(crate) fn pipeline(
        &self,
        project: &ProjectArgs,
    ) -> Result<debforge::pipeline::Settings, Failure> {
        project.check_project()?;
        let cache = match &project.cache {
            Some(c) => c.clone(),
            None => self.cache_dir()?,
        };
        project.settings(cache, self.dates.now)
    }
}

/// The keys directory and the passphrase: `--passphrase-file`, else
/// `DEBFORGE_KEY_PASSPHRASE`.
pub(crate) fn keys(args: &KeyArgs) -> Result<KeySettings, Failure> {
    Ok(KeySettings {
        dir: args.keys.clone(),
        passphrase: passphrase(args.passphrase_file.as_deref())?,
    })
}

pub(crate) fn passphrase(file: Option<&Path>) -> Result<Option<String>, Failure> {
    if let Some(f) = file {
        let text = debforge::input::read_to_string(f, debforge::input::limit::PASSPHRASE).map_err(
            |e| {
                Failure::new(format!(
                    "{}: cannot read the passphrase file: {e}",
                    f.display()
                ))
            },
        )?;
        return Ok(Some(text.trim_end_matches(['\n', '\r']).to_string()));
    }
    Ok(std::env::var("DEBFORGE_KEY_PASSPHRASE")
        .ok()
        .filter(|p| !p.is_empty()))
}
