//! Recipes: what a lab needs, as TOML under `recipes/`.
//!
//! - `recipes/sources.toml`: named upstream repositories, each with its base
//!   URL, layout, and the key that must have signed it.
//! - `recipes/packages/*.toml`: one package each, saying where its file comes
//!   from (an upstream source, a direct URL with its SHA256 and size, or a
//!   local path) and what to do with it.
//!
//! Parsing is pure (text in, values out); `load` reads the files. Errors name
//! the file, the line and the field.

pub mod lock;
mod remembered;

/// The lock file, in the project's directory.
pub const LOCK_FILE: &str = "debforge.lock";

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::format::version::Version;

/// A recipe problem: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RecipeError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "{}:{line}: {}",
                crate::error::ShortPath(&self.file),
                self.message
            ),
            None => write!(
                f,
                "{}: {}",
                crate::error::ShortPath(&self.file),
                self.message
            ),
        }
    }
}

fn line_of(text: &str, span: Range<usize>) -> usize {
    text[..span.start.min(text.len())].matches('\n').count() + 1
}

fn error_at(
    file: &Path,
    text: &str,
    span: Option<Range<usize>>,
    message: impl Into<String>,
) -> RecipeError {
    RecipeError {
        file: file.to_path_buf(),
        line: span.map(|s| line_of(text, s)),
        message: message.into(),
    }
}

fn toml_error(file: &Path, text: &str, e: toml::de::Error) -> RecipeError {
    // toml's message repeats the location; keep its first line, which names the field.
    let message = e
        .message()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    error_at(file, text, e.span(), message)
}

/// How a repository lays out its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `deb URL /`: Release, Packages and the debs side by side (NVIDIA's).
    Flat,
    /// `deb URL SUITE COMPONENT`: `dists/SUITE/…` and `pool/` (Debian's, Ubuntu's).
    Dists,
}

/// One or several fingerprints (a repository may be signed by a current and
/// a next key).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    url: Spanned<String>,
    layout: Layout,
    suite: Option<String>,
    component: Option<String>,
    key: Spanned<String>,
    fingerprint: Spanned<OneOrMany>,
    #[serde(default)]
    archive: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSources {
    #[serde(default)]
    source: BTreeMap<String, Spanned<RawSource>>,
}

/// An upstream repository debforge trusts, and the key that must sign it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    /// Base URL, always ending in `/`.
    pub url: String,
    pub layout: Layout,
    /// For `dists`: the suite (`bionic-updates`) and component (`main`).
    pub suite: Option<String>,
    pub component: Option<String>,
    /// The keyring file (armored or binary), relative to the project root.
    pub key: PathBuf,
    /// Upper-case hex, 40 characters each.
    pub fingerprints: Vec<String>,
    /// An archived repository: an expired `Valid-Until` is accepted.
    pub archive: bool,
}

impl Source {
    /// Where this source's Release files live, relative to its base URL.
    pub fn release_dir(&self) -> String {
        match self.layout {
            Layout::Flat => String::new(),
            Layout::Dists => format!("dists/{}/", self.suite.as_deref().unwrap_or_default()),
        }
    }

    /// The directory of the Packages index for `arch`, relative to the Release dir.
    pub fn index_dir(&self, arch: &str) -> String {
        match self.layout {
            Layout::Flat => String::new(),
            Layout::Dists => format!(
                "{}/binary-{arch}/",
                self.component.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// Where a package's file comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum Origin {
    /// Resolved through a source's signed index.
    Upstream { source: String },
    /// A direct download, trusted through the recipe's own hash.
    Url {
        url: String,
        sha256: String,
        size: u64,
    },
    /// A file on disk, relative to the recipes directory.
    Path { path: PathBuf },
    /// Nothing to fetch: `action = "build"` makes the package.
    Built,
}

/// What to do with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Publish the upstream file as it is.
    Keep,
    /// Rewrite its control member: merged maintainer scripts, fields
    /// (`[repack]`); the data is copied verbatim.
    Repack,
    /// Build the package from the recipe alone (`[build]`): a metapackage,
    /// a script, the repository's own configuration.
    Build,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
    source: String,
    #[serde(default = "default_mode")]
    mode: String,
}

fn default_mode() -> String {
    "644".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRepoConfig {
    /// Names the installed files: /etc/apt/sources.list.d/<name>.sources, …
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawBuild {
    maintainer: String,
    section: Option<String>,
    priority: Option<String>,
    homepage: Option<String>,
    summary: String,
    description: String,
    #[serde(default)]
    depends_exact: Vec<String>,
    #[serde(default)]
    depends: Vec<String>,
    #[serde(default)]
    files: Vec<RawFile>,
    copyright: String,
    repo_config: Option<RawRepoConfig>,
}

/// A file a built package installs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct BuildFile {
    /// Absolute path on the target system.
    pub path: String,
    /// The file in the recipes directory; `@VERSION_OF:<package>@` in a text
    /// file is replaced by that recipe's version.
    pub source: PathBuf,
    pub mode: u32,
}

/// What `action = "build"` makes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct BuildRecipe {
    pub maintainer: String,
    pub section: Option<String>,
    pub priority: Option<String>,
    pub homepage: Option<String>,
    pub summary: String,
    pub description: String,
    /// Packages depended on at exactly their recipes' versions.
    pub depends_exact: Vec<String>,
    /// Further relations, as written (`libc-ares-dev`, `a (>= 1) | b`).
    pub depends: Vec<String>,
    pub files: Vec<BuildFile>,
    /// The copyright file, relative to the recipes directory.
    pub copyright: PathBuf,
    /// Also install the repository's apt source, keyring and pins (the
    /// lab's repo-config package), files named after this.
    pub repo_config: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRepack {
    preinst: Option<String>,
    postinst: Option<String>,
    prerm: Option<String>,
    postrm: Option<String>,
    #[serde(default)]
    vars: BTreeMap<String, String>,
    #[serde(default)]
    set: BTreeMap<String, String>,
    version_suffix: Option<String>,
}

/// What `action = "repack"` does to the upstream file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub struct RepackRecipe {
    /// Our maintainer scripts (name, file relative to the recipes
    /// directory), merged after upstream's. `@NAME@` in them is replaced by
    /// `vars` (and `@PACKAGE@`, `@VERSION@`).
    pub scripts: Vec<(String, PathBuf)>,
    pub vars: BTreeMap<String, String>,
    pub set: BTreeMap<String, String>,
    pub version_suffix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFrom {
    source: Option<String>,
    url: Option<String>,
    sha256: Option<String>,
    size: Option<u64>,
    path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPackage {
    name: Spanned<String>,
    version: Spanned<String>,
    architecture: Spanned<String>,
    from: Option<Spanned<RawFrom>>,
    #[serde(default = "default_action")]
    action: Action,
    repack: Option<Spanned<RawRepack>>,
    build: Option<Spanned<RawBuild>>,
    pin: Option<bool>,
}

fn default_action() -> Action {
    Action::Keep
}

/// One package the lab needs (kept between builds: `remembered`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct PackageRecipe {
    pub name: String,
    pub version: String,
    pub architecture: String,
    pub origin: Origin,
    pub action: Action,
    /// For `action = "repack"`. Boxed, as `build` is: a build holds
    /// thousands of recipes, most with neither.
    pub repack: Option<Box<RepackRecipe>>,
    /// For `action = "build"`.
    pub build: Option<Box<BuildRecipe>>,
    /// `pin = true|false`: whether the pins hold this package to our
    /// repository. `None`: the default (`pipeline::pinned_packages`):
    /// pinned when its exact build is the point (repacked, built here,
    /// named by a `depends-exact`, or in their exact-dependency closure),
    /// never otherwise (a distribution's own library).
    pub pin: Option<bool>,
    /// The recipe file, for messages (where it lies now, never kept).
    #[serde(skip)]
    pub file: PathBuf,
    /// Picked by the base's closure (`[base] closure`), read back from the
    /// lock: no recipe file names it.
    pub for_base: bool,
}

impl PackageRecipe {
    /// Whether a build reads this recipe once its package is prepared: for
    /// what it builds (`action = "build"`), the pins (`pin`, a repack, an
    /// exact dependency) and the base's picks (`pipeline::pinned_packages`,
    /// `pipeline::package_versions`). A plain `keep` recipe is read only to
    /// resolve its own package (`Session::resolve_releasing`): what fetching
    /// and preparing it read of it (its repack, whether it is a base pick)
    /// the resolved package carries.
    pub fn needed_after_prepare(&self) -> bool {
        self.build.is_some()
            || self.pin.is_some()
            || self.for_base
            || matches!(self.action, Action::Repack | Action::Build)
    }

    /// A deep copy, in the calling thread's memory (see the `cores`
    /// module): what a parsing worker made is held to the end of the build.
    fn kept(&self) -> PackageRecipe {
        self.clone()
    }
}

/// All recipes of a project.
#[derive(Debug, Clone)]
pub struct RecipeSet {
    /// The recipes directory; keys and local paths resolve against it.
    pub dir: PathBuf,
    pub sources: BTreeMap<String, Source>,
    /// Shared with what is resolved and prepared from them (a build holds
    /// every package's at once: one copy each).
    pub packages: Vec<std::sync::Arc<PackageRecipe>>,
}

impl RecipeSet {
    /// A file a recipe names (a copyright file, a file to install, a
    /// maintainer script): it must be a regular file inside the recipes
    /// directory once symlinks are resolved, so a recipe cannot pack
    /// `/etc/shadow` (or read `/dev/zero` forever) into a package.
    pub fn file(&self, rel: &Path) -> Result<PathBuf, RecipeError> {
        let fail = |message: String| RecipeError {
            file: self.dir.join(rel),
            line: None,
            message,
        };
        let dir = fs::canonicalize(&self.dir)
            .map_err(|e| fail(format!("cannot resolve the recipes directory: {e}")))?;
        let full = fs::canonicalize(self.dir.join(rel))
            .map_err(|e| fail(format!("cannot read the file: {e}")))?;
        if !full.starts_with(&dir) {
            return Err(fail(format!(
                "resolves to {}, outside the recipes directory {}; recipes may only use files inside it",
                full.display(),
                dir.display()
            )));
        }
        let meta = fs::metadata(&full).map_err(|e| fail(format!("cannot read the file: {e}")))?;
        if !meta.is_file() {
            return Err(fail("is not a regular file".into()));
        }
        Ok(full)
    }

    /// The project root (the recipes directory's parent), where `keys/` is.
    pub fn root(&self) -> PathBuf {
        self.dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// Parses `sources.toml`.
pub fn parse_sources(file: &Path, text: &str) -> Result<BTreeMap<String, Source>, RecipeError> {
    let raw: RawSources = toml::from_str(text).map_err(|e| toml_error(file, text, e))?;
    let mut out = BTreeMap::new();
    for (name, spanned) in raw.source {
        let source = parse_source(file, text, name, spanned)?;
        out.insert(source.name.clone(), source);
    }
    Ok(out)
}

/// Checks one `[source.NAME]` table and turns it into a `Source`.
fn parse_source(
    file: &Path,
    text: &str,
    name: String,
    spanned: Spanned<RawSource>,
) -> Result<Source, RecipeError> {
    let span = spanned.span();
    let raw = spanned.into_inner();
    let at = |span: Range<usize>, msg: String| {
        error_at(file, text, Some(span), format!("source '{name}': {msg}"))
    };
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(at(
            span,
            "a source name uses letters, digits, '-' and '_' only".into(),
        ));
    }
    let url = source_url(&raw.url).map_err(|msg| at(raw.url.span(), msg))?;
    check_source_layout(&raw).map_err(|msg| at(span, msg))?;
    let fingerprints = source_fingerprints(raw.fingerprint.get_ref())
        .map_err(|msg| at(raw.fingerprint.span(), msg))?;
    Ok(Source {
        name,
        url,
        layout: raw.layout,
        suite: raw.suite,
        component: raw.component,
        key: PathBuf::from(raw.key.into_inner()),
        fingerprints,
        archive: raw.archive,
    })
}

/// A source's base URL, checked for its scheme and ending in `/`.
fn source_url(url: &Spanned<String>) -> Result<String, String> {
    let url = url.get_ref().clone();
    if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("file://")) {
        return Err(format!(
            "field 'url' {url:?} must start with http://, https:// or file://"
        ));
    }
    Ok(if url.ends_with('/') {
        url
    } else {
        format!("{url}/")
    })
}

/// Checks that a source's suite and component fit its layout.
fn check_source_layout(raw: &RawSource) -> Result<(), String> {
    if raw.layout == Layout::Dists && (raw.suite.is_none() || raw.component.is_none()) {
        return Err("layout \"dists\" needs 'suite' and 'component'".into());
    }
    for (field, value) in [("suite", &raw.suite), ("component", &raw.component)] {
        if let Some(v) = value
            && let Err(e) = crate::format::path::check_relative(v)
        {
            return Err(format!("field '{field}': {e}"));
        }
    }
    if raw.layout == Layout::Flat && (raw.suite.is_some() || raw.component.is_some()) {
        return Err("layout \"flat\" takes no 'suite' or 'component'".into());
    }
    Ok(())
}

/// A source's fingerprints, upper-case with spaces removed; at least one,
/// each 40 hex digits.
fn source_fingerprints(fingerprint: &OneOrMany) -> Result<Vec<String>, String> {
    let fingerprints = match fingerprint {
        OneOrMany::One(f) => vec![f.clone()],
        OneOrMany::Many(v) => v.clone(),
    };
    let mut normalized = Vec::new();
    for f in fingerprints {
        let hex: String = f
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_uppercase();
        if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "field 'fingerprint' {f:?} is not a full 40-hex-digit v4 fingerprint"
            ));
        }
        normalized.push(hex);
    }
    if normalized.is_empty() {
        return Err("field 'fingerprint' is empty".into());
    }
    Ok(normalized)
}

/// Parses one package recipe; `sources` are the names it may refer to.
pub fn parse_package(
    file: &Path,
    text: &str,
    sources: &BTreeMap<String, Source>,
) -> Result<PackageRecipe, RecipeError> {
    let raw: RawPackage = toml::from_str(text).map_err(|e| toml_error(file, text, e))?;
    check_package_identity(file, text, &raw)?;
    let build = parse_build_table(file, text, raw.action, raw.build)?;
    let origin = parse_origin(file, text, raw.action, raw.from, sources)?;
    let repack = parse_repack_table(file, text, raw.action, raw.repack)?;
    Ok(PackageRecipe {
        name: raw.name.into_inner(),
        version: raw.version.into_inner(),
        architecture: raw.architecture.into_inner(),
        origin,
        action: raw.action,
        repack: repack.map(Box::new),
        build: build.map(Box::new),
        pin: raw.pin,
        file: file.to_path_buf(),
        for_base: false,
    })
}

/// The recipe of a package picked for the base's closure: the source's
/// exact build, kept as it is, not pinned (the distribution's own build
/// stays in charge). `why` (the chain that needs it) becomes a one-line
/// comment. The values come from a foreign index: checked (the name by
/// policy, the version by dpkg's syntax, each one plain word) before they
/// become TOML.
pub fn picked_recipe_text(
    name: &str,
    version: &str,
    architecture: &str,
    source: &str,
    why: &str,
) -> Result<String, String> {
    crate::format::control::check_package_name(name)?;
    Version::parse(version).map_err(|e| e.to_string())?;
    let plain = |v: &str| {
        !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".+~:-".contains(&b))
    };
    if !plain(version) || !plain(architecture) || architecture.contains([':', '.', '+', '~']) {
        return Err(format!(
            "version {version:?} or architecture {architecture:?} is not one plain word"
        ));
    }
    if !is_word(source) {
        return Err(format!("{source:?} is not a source's name"));
    }
    let why: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Ok(format!(
        "# Picked for the lab's base: {why}.\nname = \"{name}\"\nversion = \"{version}\"\narchitecture = \"{architecture}\"\nfrom = {{ source = \"{source}\" }}\naction = \"keep\"\npin = false\n"
    ))
}

/// A package the base's closure picked, as a recipe ([`picked_recipe_text`],
/// then parsed as any recipe); `file` names where it was read (the lock).
pub fn picked_recipe(
    file: &Path,
    (name, version, architecture): (&str, &str, &str),
    source: &str,
    sources: &BTreeMap<String, Source>,
) -> Result<PackageRecipe, RecipeError> {
    // Said of the package and its source, not of the generated text's
    // lines.
    let fail = |m: String| RecipeError {
        file: file.to_path_buf(),
        line: None,
        message: format!(
            "{name} {version} ({architecture}), picked for the base from source '{source}': {m}"
        ),
    };
    let text = picked_recipe_text(name, version, architecture, source, "").map_err(fail)?;
    let mut r = parse_package(file, &text, sources).map_err(|e| fail(e.message))?;
    r.for_base = true;
    Ok(r)
}

/// Checks a package recipe's name, version and architecture.
fn check_package_identity(file: &Path, text: &str, raw: &RawPackage) -> Result<(), RecipeError> {
    let at = |span: Range<usize>, msg: String| error_at(file, text, Some(span), msg);
    let name = raw.name.get_ref();
    crate::format::control::check_package_name(name)
        .map_err(|e| at(raw.name.span(), format!("field 'name': {e}")))?;
    Version::parse(raw.version.get_ref()).map_err(|e| {
        at(
            raw.version.span(),
            format!("field 'version' {:?}: {e}", raw.version.get_ref()),
        )
    })?;
    let arch = raw.architecture.get_ref();
    if arch.is_empty()
        || !arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(at(
            raw.architecture.span(),
            format!("field 'architecture' {arch:?} is not an architecture name"),
        ));
    }
    Ok(())
}

/// The `[build]` table, which goes with `action = "build"` and only with it.
fn parse_build_table(
    file: &Path,
    text: &str,
    action: Action,
    build: Option<Spanned<RawBuild>>,
) -> Result<Option<BuildRecipe>, RecipeError> {
    match (action, build) {
        (Action::Build, Some(b)) => Ok(Some(parse_build(file, text, b)?)),
        (Action::Build, None) => Err(error_at(
            file,
            text,
            None,
            "action = \"build\" needs a [build] table",
        )),
        (_, Some(b)) => Err(error_at(
            file,
            text,
            Some(b.span()),
            "a [build] table needs action = \"build\"",
        )),
        (_, None) => Ok(None),
    }
}

/// Where the package comes from: the `from` table, which every action but
/// `build` needs.
fn parse_origin(
    file: &Path,
    text: &str,
    action: Action,
    from: Option<Spanned<RawFrom>>,
    sources: &BTreeMap<String, Source>,
) -> Result<Origin, RecipeError> {
    match (action, from) {
        (Action::Build, None) => Ok(Origin::Built),
        (Action::Build, Some(f)) => Err(error_at(
            file,
            text,
            Some(f.span()),
            "action = \"build\" makes the package: it takes no 'from'",
        )),
        (_, None) => Err(error_at(
            file,
            text,
            None,
            "missing table 'from' (where the package file comes from)",
        )),
        (_, Some(from)) => parse_from(file, text, from, sources),
    }
}

/// The `[repack]` table, which goes with `action = "repack"` and only with it.
fn parse_repack_table(
    file: &Path,
    text: &str,
    action: Action,
    repack: Option<Spanned<RawRepack>>,
) -> Result<Option<RepackRecipe>, RecipeError> {
    match (action, repack) {
        (Action::Keep | Action::Build, None) => Ok(None),
        (Action::Keep | Action::Build, Some(r)) => Err(error_at(
            file,
            text,
            Some(r.span()),
            "a [repack] table needs action = \"repack\"",
        )),
        (Action::Repack, None) => Err(error_at(
            file,
            text,
            None,
            "action = \"repack\" needs a [repack] table (scripts, vars, set, version-suffix)",
        )),
        (Action::Repack, Some(r)) => Ok(Some(parse_repack(file, text, r)?)),
    }
}

/// Checks a `[repack]` table's fields and vars and turns it into a
/// `RepackRecipe`.
fn parse_repack(
    file: &Path,
    text: &str,
    r: Spanned<RawRepack>,
) -> Result<RepackRecipe, RecipeError> {
    let span = r.span();
    let r = r.into_inner();
    let at = |msg: String| error_at(file, text, Some(span.clone()), msg);
    for (k, v) in &r.set {
        crate::format::field::one_line(v)
            .map_err(|e| at(format!("repack.set: value of {k:?} {v:?} {e}")))?;
    }
    // vars fill `@NAME@` inside the scripts' double quotes.
    for (k, v) in &r.vars {
        crate::format::field::shell_quoted(v)
            .map_err(|e| at(format!("repack.vars: value of {k:?} {v:?} {e}")))?;
    }
    for k in r.set.keys() {
        if k.is_empty()
            || k.starts_with('-')
            || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        {
            return Err(at(format!("repack.set: {k:?} is not a field name")));
        }
    }
    let mut scripts = Vec::new();
    for (name, path) in [
        ("preinst", r.preinst),
        ("postinst", r.postinst),
        ("prerm", r.prerm),
        ("postrm", r.postrm),
    ] {
        if let Some(p) = path {
            scripts.push((name.to_string(), PathBuf::from(p)));
        }
    }
    Ok(RepackRecipe {
        scripts,
        vars: r.vars,
        set: r.set,
        version_suffix: r.version_suffix,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRepository {
    origin: Option<Spanned<String>>,
    label: Option<Spanned<String>>,
    suite: Option<String>,
    codename: Option<String>,
    component: Option<String>,
    architectures: Option<Vec<String>>,
    description: Option<Spanned<String>>,
    valid_for_days: Option<u32>,
    mirror: Option<String>,
}

/// Parses `repository.toml`: what the built repository is called (defaults:
/// suite and codename `bionic`, component `main`, architecture `amd64`).
pub fn parse_repository(
    file: &Path,
    text: &str,
) -> Result<crate::format::release::RepoConfig, RecipeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Top {
        repository: Spanned<RawRepository>,
        /// Read by [`parse_base`].
        #[allow(dead_code)]
        base: Option<toml::Value>,
    }
    let top: Top = toml::from_str(text).map_err(|e| toml_error(file, text, e))?;
    let span = top.repository.span();
    let mut raw = top.repository.into_inner();
    let mut c = crate::format::release::RepoConfig::default();
    let at = |msg: String| error_at(file, text, Some(span.clone()), msg);
    set_repository_words(&mut raw, &mut c).map_err(at)?;
    set_repository_texts(file, text, &mut raw, &mut c)?;
    if let Some(a) = raw.architectures {
        if a.is_empty() || !a.iter().all(|x| is_word(x) && x != "all") {
            return Err(at(
                "repository.architectures must list architectures such as \"amd64\" (not \"all\")"
                    .into(),
            ));
        }
        c.architectures = a;
    }
    c.valid_for = raw.valid_for_days.map(|d| i64::from(d) * 86_400);
    if let Some(m) = raw.mirror {
        c.mirror = Some(check_mirror(&m).map_err(|e| at(format!("repository.mirror: {e}")))?);
    }
    Ok(c)
}

/// `repository.toml`'s `[base]`: what the lab's machines run, and where
/// what they lack comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaseConfig {
    /// Project files: dpkg status files copied from lab machines, or
    /// Packages indexes (plain, .gz or .xz).
    pub files: Vec<PathBuf>,
    /// Sources (sources.toml) whose signed index is the base: the release
    /// the machines were installed from, as a mirror inside the air gap
    /// offers it.
    pub sources: Vec<String>,
    /// The source the build pulls what the base lacks from (the closure),
    /// each package through its signed index and recorded in the lock.
    pub closure: Option<String>,
}

impl BaseConfig {
    /// Whether a base is named at all.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.sources.is_empty()
    }
}

/// Parses `[base]` (defaults: none). Files are relative to the project;
/// sources and the closure's source must be named in `sources.toml`
/// (checked where they are opened).
pub fn parse_base(file: &Path, text: &str) -> Result<BaseConfig, RecipeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawBase {
        #[serde(default)]
        files: Vec<String>,
        #[serde(default)]
        sources: Vec<String>,
        closure: Option<String>,
    }
    #[derive(Deserialize)]
    struct Top {
        base: Option<Spanned<RawBase>>,
    }
    let top: Top = toml::from_str(text).map_err(|e| toml_error(file, text, e))?;
    let Some(base) = top.base else {
        return Ok(BaseConfig::default());
    };
    let span = base.span();
    let at = |msg: String| error_at(file, text, Some(span.clone()), msg);
    let dir = file.parent().unwrap_or(Path::new("."));
    let raw = base.into_inner();
    let mut out = BaseConfig::default();
    for f in raw.files {
        crate::format::path::check_relative(&f).map_err(|e| {
            at(format!(
                "base.files: {e}: a file of the project, relative to it"
            ))
        })?;
        out.files.push(dir.join(f));
    }
    for name in raw.sources.iter().chain(&raw.closure) {
        if !is_word(name) {
            return Err(at(format!(
                "base: {name:?} is not a source's name (a [source.NAME] of sources.toml)"
            )));
        }
    }
    if let Some(c) = raw.closure.as_ref().filter(|c| raw.sources.contains(c)) {
        return Err(at(format!(
            "base: the closure's source {c:?} is in base.sources too: the base has all it offers, so it can never lack anything from it (name the machines' own base in files = [...], or drop it from sources)"
        )));
    }
    out.sources = raw.sources;
    out.closure = raw.closure;
    if out.closure.is_some() && out.is_empty() {
        return Err(at(
            "base.closure: the closure is what the base lacks: name the base too (files = [...] or sources = [...])".into(),
        ));
    }
    Ok(out)
}

/// The project's `[base]` ([`parse_base`]); none without repository.toml.
pub fn load_base(dir: &Path) -> Result<BaseConfig, RecipeError> {
    let file = dir.join("repository.toml");
    match crate::input::read_to_string(&file, crate::input::limit::RECIPE) {
        Ok(text) => parse_base(&file, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BaseConfig::default()),
        Err(e) => Err(RecipeError {
            file,
            line: None,
            message: format!("cannot read: {e}"),
        }),
    }
}

/// Whether `v` is one word of a repository's names: letters, digits and `-_.+`.
fn is_word(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b))
}

/// Moves the repository's suite, codename and component, each one word,
/// from `raw` into `c`.
fn set_repository_words(
    raw: &mut RawRepository,
    c: &mut crate::format::release::RepoConfig,
) -> Result<(), String> {
    for (field, value, slot) in [
        ("suite", raw.suite.take(), &mut c.suite),
        ("codename", raw.codename.take(), &mut c.codename),
        ("component", raw.component.take(), &mut c.component),
    ] {
        if let Some(v) = value {
            // Each names a directory (`dists/<suite>`, `pool/<component>`):
            // `.` or `..` would name another.
            if !is_word(&v) || v == "." || v == ".." {
                return Err(format!("repository.{field} {v:?} must be one word"));
            }
            *slot = v;
        }
    }
    Ok(())
}

/// Moves the repository's origin, label and description, each checked for
/// where it ends up, from `raw` into `c`.
fn set_repository_texts(
    file: &Path,
    text: &str,
    raw: &mut RawRepository,
    c: &mut crate::format::release::RepoConfig,
) -> Result<(), RecipeError> {
    // Origin and Label end up in the Release and in the pins' `Pin: release
    // o=…,l=…`; Description in the Release.
    use crate::format::field;
    for (field, value, slot, check) in [
        (
            "origin",
            raw.origin.take(),
            &mut c.origin,
            field::pin_value as fn(&str) -> Result<(), String>,
        ),
        ("label", raw.label.take(), &mut c.label, field::pin_value),
        (
            "description",
            raw.description.take(),
            &mut c.description,
            field::one_line,
        ),
    ] {
        if let Some(v) = value {
            check(v.get_ref()).map_err(|e| {
                error_at(
                    file,
                    text,
                    Some(v.span()),
                    format!("repository.{field} {:?} {e}", v.get_ref()),
                )
            })?;
            *slot = v.into_inner();
        }
    }
    Ok(())
}

/// A mirror URL for lab machines' apt source, ending in `/`.
pub fn check_mirror(m: &str) -> Result<String, String> {
    if !(m.starts_with("http://") || m.starts_with("https://") || m.starts_with("file:/")) {
        return Err(format!("{m:?} must be an http://, https:// or file:/ URL"));
    }
    if m.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("{m:?} holds a space or a control character"));
    }
    Ok(if m.ends_with('/') {
        m.to_string()
    } else {
        format!("{m}/")
    })
}

fn parse_from(
    file: &Path,
    text: &str,
    from: Spanned<RawFrom>,
    sources: &BTreeMap<String, Source>,
) -> Result<Origin, RecipeError> {
    let at = |span: Range<usize>, msg: String| error_at(file, text, Some(span), msg);
    let from_span = from.span();
    let from = from.into_inner();
    let given = [
        from.source.is_some(),
        from.url.is_some(),
        from.path.is_some(),
    ]
    .iter()
    .filter(|&&b| b)
    .count();
    if given != 1 {
        return Err(at(
            from_span,
            "table 'from' needs exactly one of 'source' (an upstream in sources.toml), 'url' (with sha256 and size) or 'path'".into(),
        ));
    }
    let origin = if let Some(source) = from.source {
        if !sources.contains_key(&source) {
            let known: Vec<&str> = sources.keys().map(String::as_str).collect();
            return Err(at(
                from_span,
                format!(
                    "from.source {source:?} is not in sources.toml (known: {})",
                    known.join(", ")
                ),
            ));
        }
        if from.sha256.is_some() || from.size.is_some() {
            return Err(at(
                from_span,
                "from.sha256 and from.size go with 'url'; a source's signed index gives them"
                    .into(),
            ));
        }
        Origin::Upstream { source }
    } else if let Some(url) = from.url {
        let (Some(sha256), Some(size)) = (from.sha256, from.size) else {
            return Err(at(from_span, "from.url needs from.sha256 and from.size: a direct download is trusted through them".into()));
        };
        let sha256 = sha256.to_ascii_lowercase();
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(at(
                from_span,
                format!("from.sha256 {sha256:?} is not 64 hex digits"),
            ));
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(at(
                from_span,
                format!("from.url {url:?} must start with http:// or https://"),
            ));
        }
        // Its last segment names the file in the cache and the pool.
        let last = url.rsplit('/').next().unwrap_or_default();
        if last.is_empty()
            || last == "."
            || last == ".."
            || !last
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._+~-".contains(&b))
        {
            return Err(at(
                from_span,
                format!(
                    "from.url {url:?} must end in a file name such as x_1.0_all.deb (letters, digits and ._+~-), not {last:?}"
                ),
            ));
        }
        Origin::Url { url, sha256, size }
    } else {
        Origin::Path {
            path: PathBuf::from(from.path.unwrap_or_default()),
        }
    };
    Ok(origin)
}

fn parse_build(file: &Path, text: &str, b: Spanned<RawBuild>) -> Result<BuildRecipe, RecipeError> {
    let span = b.span();
    let b = b.into_inner();
    let at = |msg: String| error_at(file, text, Some(span.clone()), msg);
    for d in &b.depends {
        crate::format::Relations::parse(d).map_err(|e| at(format!("build.depends: {e}")))?;
    }
    for n in &b.depends_exact {
        crate::format::control::check_package_name(n)
            .map_err(|e| at(format!("build.depends-exact: {e}")))?;
    }
    if b.summary.contains('\n') || b.summary.trim().is_empty() {
        return Err(at("build.summary is one non-empty line".into()));
    }
    // What lands in the built package's control file, field by field.
    use crate::format::field;
    for (key, value) in [
        ("maintainer", Some(&b.maintainer)),
        ("summary", Some(&b.summary)),
        ("section", b.section.as_ref()),
        ("priority", b.priority.as_ref()),
        ("homepage", b.homepage.as_ref()),
    ]
    .into_iter()
    .chain(b.depends.iter().map(|d| ("depends", Some(d))))
    {
        if let Some(v) = value {
            field::one_line(v).map_err(|e| at(format!("build.{key} {v:?} {e}")))?;
        }
    }
    field::extended_description(&b.description)
        .map_err(|e| at(format!("build.description: {e}")))?;
    let mut files = Vec::new();
    for f in b.files {
        field::install_path(&f.path)
            .map_err(|e| at(format!("build.files: path {:?} {e}", f.path)))?;
        let mode = u32::from_str_radix(&f.mode, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .ok_or_else(|| {
                at(format!(
                    "build.files: mode {:?} is not octal like \"755\"",
                    f.mode
                ))
            })?;
        files.push(BuildFile {
            path: f.path,
            source: PathBuf::from(f.source),
            mode,
        });
    }
    if let Some(rc) = &b.repo_config
        && (!rc
            .name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-')
            || rc.name.is_empty())
    {
        return Err(at(format!(
            "build.repo-config.name {:?}: letters, digits and '-'",
            rc.name
        )));
    }
    Ok(BuildRecipe {
        maintainer: b.maintainer,
        section: b.section,
        priority: b.priority,
        homepage: b.homepage,
        summary: b.summary,
        description: b.description,
        depends_exact: b.depends_exact,
        depends: b.depends,
        files,
        copyright: PathBuf::from(b.copyright),
        repo_config: b.repo_config.map(|r| r.name),
    })
}

/// Reads `dir/repository.toml` when present, else the defaults.
pub fn load_repository(dir: &Path) -> Result<crate::format::release::RepoConfig, RecipeError> {
    let file = dir.join("repository.toml");
    match crate::input::read_to_string(&file, crate::input::limit::RECIPE) {
        Ok(text) => parse_repository(&file, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(crate::format::release::RepoConfig::default())
        }
        Err(e) => Err(RecipeError {
            file,
            line: None,
            message: format!("cannot read: {e}"),
        }),
    }
}

/// Reads `dir/sources.toml` and every `dir/packages/*.toml` (sorted by name).
pub fn load(dir: &Path) -> Result<RecipeSet, RecipeError> {
    load_remembering(dir, None, None)
}

/// The package recipes' files as a walk of the project stat'ed them (links
/// not followed), by name in `packages/`, and when the walk began: what
/// [`load_remembering`] compares with the kept recipes instead of stating
/// each file again.
pub struct Seen {
    pub taken: std::time::SystemTime,
    /// Sorted by name: a list, not a hash table (memory: at 20,000 recipes
    /// the table's buckets were 1.1 MB more, held at the recipes' peak).
    files: Vec<(std::ffi::OsString, crate::files::FileIdentity)>,
}

impl Seen {
    pub fn new(
        taken: std::time::SystemTime,
        mut files: Vec<(std::ffi::OsString, crate::files::FileIdentity)>,
    ) -> Seen {
        files.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Seen { taken, files }
    }

    /// The identity the walk took of the recipe file `name`.
    fn get(&self, name: &std::ffi::OsStr) -> Option<&crate::files::FileIdentity> {
        let at = self
            .files
            .binary_search_by(|(n, _)| n.as_os_str().cmp(name));
        at.ok().map(|i| &self.files[i].1)
    }
}

/// [`load`], taking the recipes the last build kept in the cache directory
/// `cache` as they are where their files did not change ([`remembered`]),
/// and keeping there the ones it parsed; each file's identity from `seen`
/// where a walk of the project took it.
pub fn load_remembering(
    dir: &Path,
    cache: Option<&Path>,
    seen: Option<Seen>,
) -> Result<RecipeSet, RecipeError> {
    // Before any file is stat'ed: a file changed after this may show the
    // same identity as before (`remembered::write`).
    let taken = seen
        .as_ref()
        .map_or_else(std::time::SystemTime::now, |s| s.taken);
    load_at(dir, cache, taken, seen).map(|(set, _)| set)
}

/// [`load_remembering`] with the stats begun at `taken`; and how many
/// recipes were taken as kept.
fn load_at(
    dir: &Path,
    cache: Option<&Path>,
    taken: std::time::SystemTime,
    seen: Option<Seen>,
) -> Result<(RecipeSet, usize), RecipeError> {
    let unreadable = |path: &Path, e: std::io::Error| RecipeError {
        file: path.to_path_buf(),
        line: None,
        message: format!("cannot read: {e}"),
    };
    let sources_file = dir.join("sources.toml");
    let (sources, sources_sha256) = if sources_file.exists() {
        let text = crate::input::read_to_string(&sources_file, crate::input::limit::RECIPE)
            .map_err(|e| unreadable(&sources_file, e))?;
        (
            parse_sources(&sources_file, &text)?,
            crate::digest::sha256_hex(text.as_bytes()),
        )
    } else {
        (BTreeMap::new(), String::new())
    };
    let packages_dir = dir.join("packages");
    let cannot_list = |e: std::io::Error| RecipeError {
        file: packages_dir.clone(),
        line: None,
        message: format!(
            "cannot read the package recipes: {e} (a project keeps one TOML file per package there)"
        ),
    };
    // The directory opened once, as a directory (never blocking on what
    // is put in its place), each recipe read relative to it; by name:
    // names in one directory sort as their paths do.
    let listing = {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::open(&packages_dir, flags, Mode::empty())
            .map(std::fs::File::from)
            .map_err(|e| cannot_list(e.into()))?
    };
    let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&packages_dir)
        .map_err(cannot_list)?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|n| Path::new(n).extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort_unstable();
    let kept_in = cache.zip(std::path::absolute(&packages_dir).ok());
    let (known, mut recipes) = kept_in
        .as_ref()
        .map(|(cache, packages)| remembered::read(cache, packages, &sources_sha256))
        .unwrap_or_default();
    let file_of = |name: &[u8]| {
        packages_dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name))
    };
    // On all cores (thousands of small TOML files), in the order of
    // `names`; each recipe is held to the end of the build: copied into
    // the calling thread's memory (see `cores`), or taken from what was
    // kept, decoded there.
    let parsed = crate::cores::map_kept(
        &names,
        |name| {
            let file = || packages_dir.join(name);
            let stat_now =
                || crate::input::stat_in(&listing, name).map_err(|e| unreadable(&file(), e));
            // As the project's walk saw it, else stat'ed now.
            let (identity, stat) = match seen.as_ref().and_then(|s| s.get(name)) {
                Some(identity) => (*identity, None),
                None => {
                    let stat = stat_now()?;
                    (crate::files::FileIdentity::of_stat(&stat), Some(stat))
                }
            };
            if let Some(i) = known.find(name.as_encoded_bytes(), &identity) {
                return Ok((Got::Kept(i), identity));
            }
            let stat = match stat {
                Some(stat) => stat,
                None => stat_now()?,
            };
            let (bytes, opened) =
                crate::input::read_in_as(&listing, name, &stat, crate::input::limit::RECIPE)
                    .map_err(|e| unreadable(&file(), e))?;
            let text = crate::input::utf8(bytes).map_err(|e| unreadable(&file(), e))?;
            // Kept under the identity of the file read, not of the one
            // stat'ed: a link pointed elsewhere in between (and back later)
            // would name another file's recipe.
            let identity = crate::files::FileIdentity::of(&opened);
            Ok((
                Got::Parsed(parse_package(&file(), &text, &sources)?),
                identity,
            ))
        },
        // Each made shared here, where it is kept: not a second copy of
        // every recipe beside the list of results. An error boxed: the
        // list holds one result a recipe.
        |r: Result<(Got, crate::files::FileIdentity), RecipeError>| {
            r.map(|(got, identity)| match got {
                Got::Kept(i) => {
                    let mut r = recipes[i].take().expect("each file once");
                    r.file = file_of(known.name(i));
                    (std::sync::Arc::new(r), identity, true)
                }
                Got::Parsed(p) => (std::sync::Arc::new(p.kept()), identity, false),
            })
            .map_err(Box::new)
        },
    );
    drop(recipes);
    // Its stats served the reading (memory: a name and an identity a recipe).
    drop(seen);
    // The first problem in file order, as a sequential read would say: a
    // recipe that does not load, or one that describes a package an earlier
    // one does.
    let loaded = parsed
        .iter()
        .position(Result::is_err)
        .unwrap_or(parsed.len());
    let packages: Vec<std::sync::Arc<PackageRecipe>> = parsed[..loaded]
        .iter()
        .flatten()
        .map(|(recipe, _, _)| recipe.clone())
        .collect();
    if let Some((earlier, later)) = first_described_twice(&packages) {
        let (recipe, other) = (&packages[later], &packages[earlier]);
        return Err(RecipeError {
            file: recipe.file.clone(),
            line: None,
            message: format!(
                "package {} ({}) is also described by {}",
                recipe.name,
                recipe.architecture,
                other.file.display()
            ),
        });
    }
    if loaded < parsed.len() {
        let Some(Err(e)) = parsed.into_iter().nth(loaded) else {
            unreachable!("the first result that is an error")
        };
        return Err(*e);
    }
    let kept_count = parsed.iter().flatten().filter(|(_, _, kept)| *kept).count();
    // Written again unless every recipe was as kept, and no more.
    let all_kept = kept_count == names.len() && known.len() == names.len();
    if let Some((cache, packages_abs)) = kept_in.filter(|_| !all_kept) {
        let entries = names
            .iter()
            .zip(parsed.iter().flatten())
            .map(|(n, (p, id, _))| (n.as_encoded_bytes(), *id, &**p));
        remembered::write(cache, &packages_abs, &sources_sha256, taken, entries);
    }
    drop(parsed);
    let set = RecipeSet {
        dir: dir.to_path_buf(),
        sources,
        packages,
    };
    Ok((set, kept_count))
}

/// The first recipe, in file order, that describes the package an earlier
/// one does (its architecture too), and that earlier one: `(earlier,
/// later)`. By sorting positions, not a table of every name (memory).
fn first_described_twice(packages: &[std::sync::Arc<PackageRecipe>]) -> Option<(usize, usize)> {
    let key = |i: usize| (&packages[i].name, &packages[i].architecture);
    let mut order: Vec<usize> = (0..packages.len()).collect();
    order.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)).then(a.cmp(&b)));
    // In a run of one key, each position beside the one before it: the
    // run's second is its earliest repeat, paired with its first.
    order
        .windows(2)
        .filter(|w| key(w[0]) == key(w[1]))
        .map(|w| (w[0], w[1]))
        .min_by_key(|&(_, later)| later)
}

/// A recipe as a parsing worker found it.
enum Got {
    /// Kept by the last build, at this index ([`remembered::Known`]).
    Kept(usize),
    Parsed(PackageRecipe),
}

impl crate::error::Hint for RecipeError {}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCES: &str = r#"
[source.nvidia-ml]
url = "https://developer.download.nvidia.com/compute/machine-learning/repos/ubuntu1804/x86_64"
layout = "flat"
key = "keys/nvidia-cudatools-7fa2af80.asc"
fingerprint = "AE09FE4BBD223A84B2CCFCE3F60F4B3D7FA2AF80"
archive = true

[source.ubuntu-bionic-updates]
url = "http://archive.ubuntu.com/ubuntu/"
layout = "dists"
suite = "bionic-updates"
component = "main"
key = "keys/ubuntu-archive-keyring.gpg"
fingerprint = ["790BC7277767219C42C86F933B4FE6ACC0B21F32", "f6ec b376 2474 eda9 d21b 7022 8719 20d1 991b c93c"]
"#;

    /// A project of path recipes `names` (each `version`) in `dir`.
    fn write_recipes(dir: &Path, names: &[&str], version: &str) {
        fs::create_dir_all(dir.join("packages")).unwrap();
        for n in names {
            let text = format!(
                "name = \"{n}\"\nversion = \"{version}\"\narchitecture = \"all\"\nfrom = {{ path = \"{n}.deb\" }}\n"
            );
            fs::write(dir.join(format!("packages/{n}.toml")), text).unwrap();
        }
    }

    #[test]
    fn the_first_problem_in_file_order_is_reported_a_recipe_that_does_not_load_or_a_package_described_twice()
     {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_recipes(dir, &["aa", "bb", "cc", "dd"], "1");
        let recipe = |file: &str, name: &str, arch: &str| {
            let text = format!(
                "name = \"{name}\"\nversion = \"2\"\narchitecture = \"{arch}\"\nfrom = {{ path = \"x.deb\" }}\n"
            );
            fs::write(dir.join("packages").join(file), text).unwrap();
        };
        let problem = || {
            let e = load(dir).map(|_| ()).unwrap_err();
            (
                e.file.file_name().unwrap().to_str().unwrap().to_owned(),
                e.message,
            )
        };
        // Another architecture is another package.
        recipe("bb2.toml", "bb", "amd64");
        assert!(load(dir).is_ok());
        // Of two repeats, the earlier second one, named beside the first.
        recipe("cc2.toml", "cc", "all");
        recipe("bb3.toml", "bb", "all");
        recipe("bb4.toml", "bb", "all");
        let (file, message) = problem();
        assert_eq!(file, "bb3.toml");
        assert!(
            message.contains("package bb (all) is also described by"),
            "{message}"
        );
        assert!(message.ends_with("packages/bb.toml"), "{message}");
        // A recipe that does not load, before the first repeat: it is the problem.
        fs::write(dir.join("packages/bb20.toml"), "name = ").unwrap();
        assert_eq!(problem().0, "bb20.toml");
        // After it: the repeat is.
        fs::remove_file(dir.join("packages/bb20.toml")).unwrap();
        fs::write(dir.join("packages/bb5.toml"), "name = ").unwrap();
        assert_eq!(problem().0, "bb3.toml");
        fs::remove_file(dir.join("packages/bb3.toml")).unwrap();
        fs::remove_file(dir.join("packages/bb4.toml")).unwrap();
        assert_eq!(problem().0, "bb5.toml");
        fs::remove_file(dir.join("packages/bb5.toml")).unwrap();
        assert_eq!(problem().0, "cc2.toml");
    }

    #[test]
    fn recipes_kept_by_the_last_load_are_taken_while_their_files_are_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, cache) = (tmp.path().join("recipes"), tmp.path().join("cache"));
        fs::create_dir_all(&cache).unwrap();
        write_recipes(&dir, &["aa", "bb", "cc"], "1");
        let now = std::time::SystemTime::now();
        let later = now + std::time::Duration::from_secs(10);
        let load = |taken| {
            let (set, kept) = load_at(&dir, Some(&cache), taken, None).unwrap();
            let versions: Vec<String> = set.packages.iter().map(|p| p.version.clone()).collect();
            // The same set as a plain load, file paths included.
            assert_eq!(set.packages, load(&dir).unwrap().packages);
            (versions, kept)
        };
        // Files changed within the racy window of the stats are not kept.
        assert_eq!(load(now).1, 0);
        assert_eq!(load(now).1, 0);
        // Ten seconds later they are, then taken as they are.
        assert_eq!(load(later).1, 0);
        assert_eq!(load(later), (vec!["1".into(), "1".into(), "1".into()], 3));
        // One edited, one gone, one added: those read, the rest kept.
        write_recipes(&dir, &["bb"], "22");
        fs::remove_file(dir.join("packages/cc.toml")).unwrap();
        write_recipes(&dir, &["dd"], "1");
        assert_eq!(load(later), (vec!["1".into(), "22".into(), "1".into()], 1));
        assert_eq!(load(later).1, 3);
        // An edit of the same size: read again.
        write_recipes(&dir, &["bb"], "33");
        assert_eq!(load(later), (vec!["1".into(), "33".into(), "1".into()], 2));
        // Another sources.toml: parsed again.
        fs::write(dir.join("sources.toml"), "").unwrap();
        assert_eq!(load(later).1, 0);
        assert_eq!(load(later).1, 3);
        // The identities a walk of the project took stand for each file's
        // stat: a recipe edited after that walk is taken as the walk saw it
        // (the next build's walk sees the edit).
        let walk = |dir: &Path| {
            let files = crate::files::tree_entries_without_links(dir, &|_| false)
                .unwrap()
                .into_iter()
                .filter_map(|e| Some((e.rel.strip_prefix("packages/")?.into(), e.id)))
                .collect();
            Seen::new(later, files)
        };
        let seen = walk(&dir);
        // Past a file time's tick: the same size, another identity.
        let tick = || std::thread::sleep(std::time::Duration::from_millis(20));
        tick();
        write_recipes(&dir, &["bb"], "44");
        let versions = |(set, kept): (RecipeSet, usize)| {
            let v: Vec<String> = set.packages.iter().map(|p| p.version.clone()).collect();
            (v, kept)
        };
        let loaded = load_at(&dir, Some(&cache), later, Some(seen)).unwrap();
        assert_eq!(
            versions(loaded),
            (vec!["1".into(), "33".into(), "1".into()], 3)
        );
        let loaded = load_at(&dir, Some(&cache), later, Some(walk(&dir))).unwrap();
        assert_eq!(
            versions(loaded),
            (vec!["1".into(), "44".into(), "1".into()], 2)
        );
        tick();
        write_recipes(&dir, &["bb"], "33");
        assert_eq!(load(later).1, 2);
        assert_eq!(load(later).1, 3);
        // A damaged cache file is none (cut short, or a value changed in
        // place: "33" kept as "34" would be taken unchecked); another
        // project's too.
        let file = cache.join(remembered::FILE);
        let bytes = fs::read(&file).unwrap();
        fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(load(later).1, 0);
        assert_eq!(load(later).1, 3);
        let mut bytes = fs::read(&file).unwrap();
        let at = bytes.windows(2).position(|w| w == b"33").unwrap();
        bytes[at + 1] = b'4';
        fs::write(&file, &bytes).unwrap();
        assert_eq!(load(later), (vec!["1".into(), "33".into(), "1".into()], 0));
        assert_eq!(load(later).1, 3);
        let other = tmp.path().join("other");
        write_recipes(&other, &["aa"], "1");
        load_at(&other, Some(&cache), later, None).unwrap();
        assert_eq!(load(later).1, 0);
    }

    fn sources() -> BTreeMap<String, Source> {
        parse_sources(Path::new("sources.toml"), SOURCES).unwrap()
    }

    #[test]
    fn parses_sources() {
        let s = sources();
        assert_eq!(
            s["nvidia-ml"].url,
            "https://developer.download.nvidia.com/compute/machine-learning/repos/ubuntu1804/x86_64/"
        );
        assert_eq!(
            s["ubuntu-bionic-updates"].fingerprints[1],
            "F6ECB3762474EDA9D21B7022871920D1991BC93C"
        );
        assert_eq!(
            s["ubuntu-bionic-updates"].release_dir(),
            "dists/bionic-updates/"
        );
        assert_eq!(
            s["ubuntu-bionic-updates"].index_dir("amd64"),
            "main/binary-amd64/"
        );
    }

    #[test]
    fn package_errors_name_file_line_and_field() {
        let f = Path::new("packages/x.toml");
        let e = parse_package(f, "name = \"libcudnn7\"\nversion = \"7.5\"\narchitecture = \"amd64\"\nfrom = { source = \"nvidia\" }\n", &sources()).unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(
            e.to_string()
                .starts_with("packages/x.toml:4: from.source \"nvidia\" is not in sources.toml"),
            "{e}"
        );
        let e = parse_package(f, "name = \"libcudnn7\"\nversion = \"7.5\"\narchitecture = \"amd64\"\nfrom = { source = \"nvidia-ml\" }\nflavour = 1\n", &sources()).unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(e.message.contains("unknown field `flavour`"), "{e}");
        let e = parse_package(f, "name = \"libcudnn7\"\nversion = \"7.5-\"\narchitecture = \"amd64\"\nfrom = { source = \"nvidia-ml\" }\n", &sources()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("field 'version'"), "{e}");
        let e = parse_package(f, "name = \"x1\"\nversion = \"1\"\narchitecture = \"all\"\nfrom = { url = \"https://e.org/x.deb\" }\n", &sources()).unwrap_err();
        assert!(e.message.contains("needs from.sha256 and from.size"), "{e}");
    }

    #[test]
    fn source_errors() {
        let e = parse_sources(Path::new("s.toml"), "[source.a]\nurl = \"ftp://x\"\nlayout = \"flat\"\nkey = \"k\"\nfingerprint = \"AE09FE4BBD223A84B2CCFCE3F60F4B3D7FA2AF80\"\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        let e = parse_sources(Path::new("s.toml"), "[source.a]\nurl = \"http://x\"\nlayout = \"flat\"\nkey = \"k\"\nfingerprint = \"7FA2AF80\"\n").unwrap_err();
        assert!(e.message.contains("full 40-hex-digit"), "{e}");
        let e = parse_sources(
            Path::new("s.toml"),
            "[source.a]\nurl = \"http://x\"\nlayout = \"tree\"\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3));
    }

    fn check_pulled(p: (&str, &str, &str)) -> Result<String, String> {
        picked_recipe_text(p.0, p.1, p.2, "ubuntu", "tool 1\nname = \"evil\" → x")
    }

    #[test]
    fn values_from_the_index_are_checked_before_they_become_a_recipe() {
        assert!(check_pulled(("python3", "3.6.5-3", "amd64")).is_ok());
        assert!(check_pulled(("libc6", "1:2.27-3ubuntu1", "all")).is_ok());
        for (n, v, a) in [
            ("Python3", "1", "amd64"),
            ("x\"y", "1", "amd64"),
            ("ok-name", "1\"\nname = \"evil", "amd64"),
            ("ok-name", "1", "am d64"),
            ("ok-name", "1", "amd64:x"),
        ] {
            assert!(check_pulled((n, v, a)).is_err(), "{n} {v} {a}");
        }
        let text = check_pulled(("python3", "3.6.5-3", "amd64")).unwrap();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("name = ")).count(),
            1,
            "{text}"
        );
        let parsed: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(parsed["name"].as_str(), Some("python3"));
    }

    #[test]
    fn base_names_files_sources_and_the_closure_source() {
        let f = Path::new("/p/repository.toml");
        let b = parse_base(
            f,
            "[base]\nfiles = [\"base/lab.status\"]\nsources = [\"lab-mirror\"]\nclosure = \"ubuntu-bionic\"\n",
        )
        .unwrap();
        assert_eq!(b.files, [PathBuf::from("/p/base/lab.status")]);
        assert_eq!(b.sources, ["lab-mirror"]);
        assert_eq!(b.closure.as_deref(), Some("ubuntu-bionic"));
        assert!(parse_base(f, "[repository]\n").unwrap().is_empty());
        for (text, says) in [
            ("[base]\nclosure = \"ubuntu\"\n", "name the base too"),
            ("[base]\nsources = [\"a b\"]\n", "is not a source's name"),
            ("[base]\nfiles = [\"/etc/passwd\"]\n", "relative to it"),
            ("[base]\nfile = []\n", "unknown field"),
            (
                "[base]\nsources = [\"u\"]\nclosure = \"u\"\n",
                "can never lack anything from it",
            ),
        ] {
            let e = parse_base(f, text).unwrap_err();
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }
}
