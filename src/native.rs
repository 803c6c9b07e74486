//! Native packages: made here, with no upstream, from `action = "build"`
//! recipes (the metapackage, the repo-config package). A
//! package tree is laid out in a temporary directory (control, files, the
//! docs Debian Policy asks for, and for a repo-config package the apt
//! source, keyring and pins) and built with the `.deb` writer.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::deb::{BuildOptions, build_from_dir};
use crate::error::FileError;
use crate::format::date::format_rfc2822;
use crate::format::deb822::ControlParagraph;
use crate::recipe::{BuildRecipe, PackageRecipe, RecipeSet};
use crate::repo::RepoConfig;

#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    #[error("{}: {message}", crate::error::ShortPath(file))]
    Recipe { file: PathBuf, message: String },
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("{0}")]
    Build(#[from] crate::deb::build::BuildError),
}

/// What a repo-config package installs, besides its recipe's files.
pub struct RepoConfigInput<'a> {
    pub config: &'a RepoConfig,
    /// The public keyring, binary.
    pub keyring: &'a [u8],
    /// The pins (`debforge.pref`).
    pub preferences: &'a str,
    /// The packages those pins hold to the repository.
    pub pinned: &'a [String],
    /// What a lab machine installs (the metapackages: packages built here
    /// other than the repo-config package).
    pub install: &'a [String],
}

/// `text` as one single-quoted shell word (`'` written as `'\''`).
fn sh_single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The repo-config package's postinst: it never fails; it tells the admin
/// what would stop the stack from installing — packages of the stack held
/// with `apt-mark hold` (NVIDIA's container images and install guides hold
/// cuDNN and NCCL), with the one command that moves them to the lab's
/// builds — and says when the machine is not the release the repository
/// is built for.
fn repo_config_postinst(name: &str, input: &RepoConfigInput) -> String {
    let pinned: Vec<&str> = input
        .pinned
        .iter()
        .map(String::as_str)
        .filter(|p| *p != name)
        .collect();
    format!(
        r#"#!/bin/sh
# Written by debforge for {name}. It changes nothing: it says what would
# stop `apt-get install {install}` on this machine.
set -e
[ "$1" = configure ] || exit 0
# The repository's Label, quoted for the shell (it may hold any printable text).
label={label}
release=""
if [ -r /etc/os-release ]; then
    release=$(. /etc/os-release; echo "${{VERSION_CODENAME:-}}|${{PRETTY_NAME:-}}")
fi
codename=${{release%%|*}}
if [ -n "$codename" ] && [ "$codename" != "{codename}" ]; then
    echo "{name}: warning: the $label repository is built for {codename}; this machine runs $codename (${{release#*|}}). Its packages are not meant for this release; only they are pinned, nothing of the distribution's." >&2
fi
held=$(dpkg-query -W -f='${{Status}} ${{Package}}
' {pinned} 2>/dev/null | sed -n 's/^hold [^ ]* [^ ]* //p' | tr '
' ' ')
held=${{held% }}
if [ -n "$held" ]; then
    echo "{name}: $held: held (apt-mark hold), so apt will not move them to the $label repository's builds and \`apt-get install {install}\` fails with \"held broken packages\"." >&2
    echo "{name}: the pins now keep every other build away; to move them: sudo apt-mark unhold $held && sudo apt-get update && sudo apt-get install {install}" >&2
fi
exit 0
"#,
        install = input.install.join(" "),
        codename = input.config.codename,
        label = sh_single_quoted(&input.config.label),
        pinned = pinned.join(" "),
    )
}

/// Replaces `@VERSION_OF:<package>@` with that package's version (as its
/// own file says: `pipeline::package_versions`). `build_package` also fills
/// `@PACKAGE@` (the package built) and `@DEPENDS_EXACT@` (`name=version …`
/// of its `depends-exact`).
fn fill_versions(
    text: &str,
    versions: &BTreeMap<String, String>,
    file: &Path,
) -> Result<String, NativeError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("@VERSION_OF:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "@VERSION_OF:".len()..];
        let end = after.find('@').ok_or_else(|| NativeError::Recipe {
            file: file.to_path_buf(),
            message: "an @VERSION_OF:<package>@ placeholder is not closed".into(),
        })?;
        let name = &after[..end];
        let version = versions.get(name).ok_or_else(|| NativeError::Recipe {
            file: file.to_path_buf(),
            message: format!("@VERSION_OF:{name}@ names a package no recipe provides"),
        })?;
        out.push_str(version);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn write(root: &Path, path: &str, data: &[u8], mode: u32) -> Result<(), NativeError> {
    let p = root.join(path.trim_start_matches('/'));
    let io = |source| {
        NativeError::Io(crate::error::FileError {
            path: p.clone(),
            source,
        })
    };
    fs::create_dir_all(p.parent().expect("absolute path has a parent")).map_err(io)?;
    fs::write(&p, data).map_err(io)?;
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(io)?;
    Ok(())
}

fn gzip_n(data: &[u8]) -> Vec<u8> {
    // gzip -9n: no name, no time, so the bytes depend on the text alone.
    let mut e = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    e.write_all(data).expect("to memory");
    e.finish().expect("to memory")
}

/// Builds `recipe` into `out_dir`; returns the `.deb`. `versions` gives
/// every package's version for `depends-exact` and `@VERSION_OF:…@`.
pub fn build_package(
    recipes: &RecipeSet,
    versions: &BTreeMap<String, String>,
    recipe: &PackageRecipe,
    build: &BuildRecipe,
    repo_config: Option<&RepoConfigInput>,
    date: i64,
    out_dir: &Path,
) -> Result<PathBuf, NativeError> {
    let tmp = tree_dir(out_dir)?;
    let root = tmp.path().join("tree");

    let (depends, exact) = exact_depends(recipe, build, versions)?;
    write_control(&root, recipe, build, &depends)?;
    let mut conffiles = write_build_files(&root, recipes, versions, recipe, build, &exact)?;
    match (&build.repo_config, repo_config) {
        (Some(rc_name), Some(input)) => {
            conffiles.extend(write_repo_config(&root, recipe, rc_name, input)?);
        }
        (Some(_), None) => {
            return Err(recipe_error(
                recipe,
                "a repo-config package is built by `debforge build`, which has the keys and pins"
                    .into(),
            ));
        }
        (None, _) => {}
    }
    write_policy_docs(&root, recipes, recipe, build, date)?;
    write_conffiles(&root, conffiles)?;
    // Directories as a packager's umask would leave them, whatever ours is.
    set_dir_modes(&root)?;
    build_deb(&root, out_dir, date)
}

/// A problem with `recipe`, reported against its file.
fn recipe_error(recipe: &PackageRecipe, message: String) -> NativeError {
    NativeError::Recipe {
        file: recipe.file.clone(),
        message,
    }
}

/// Makes the temporary directory the package tree is laid out in.
fn tree_dir(out_dir: &Path) -> Result<tempfile::TempDir, NativeError> {
    // The tree is built beside the package (under the cache, where the next
    // build clears what a killed one left), not in the system temp dir.
    let dir = tempfile::Builder::new()
        .prefix(".tree-")
        .tempdir_in(out_dir)
        .map_err(FileError::at(out_dir))?;
    Ok(dir)
}

/// The package's Depends (its `depends-exact` at their versions, then its
/// `depends`) and the `name=version` words that fill `@DEPENDS_EXACT@`.
fn exact_depends(
    recipe: &PackageRecipe,
    build: &BuildRecipe,
    versions: &BTreeMap<String, String>,
) -> Result<(Vec<String>, Vec<String>), NativeError> {
    let mut depends: Vec<String> = Vec::new();
    // `@DEPENDS_EXACT@` in the package's files: `name=version …`, what a
    // check script compares the machine against.
    let mut exact: Vec<String> = Vec::new();
    for n in &build.depends_exact {
        let version = versions.get(n).ok_or_else(|| {
            recipe_error(
                recipe,
                format!("build.depends-exact names {n}, which no recipe provides"),
            )
        })?;
        depends.push(format!("{n} (= {version})"));
        exact.push(format!("{n}={version}"));
    }
    depends.extend(build.depends.iter().cloned());
    Ok((depends, exact))
}

/// Writes `DEBIAN/control` from the recipe and its Depends.
fn write_control(
    root: &Path,
    recipe: &PackageRecipe,
    build: &BuildRecipe,
    depends: &[String],
) -> Result<(), NativeError> {
    let mut control = ControlParagraph::new();
    control.set("Package", &recipe.name);
    control.set("Version", &recipe.version);
    control.set("Architecture", &recipe.architecture);
    control.set("Maintainer", &build.maintainer);
    if !depends.is_empty() {
        control.set("Depends", &depends.join(", "));
    }
    if let Some(s) = &build.section {
        control.set("Section", s);
    }
    if let Some(p) = &build.priority {
        control.set("Priority", p);
    }
    if let Some(h) = &build.homepage {
        control.set("Homepage", h);
    }
    control.set(
        "Description",
        &format!("{}\n{}", build.summary.trim(), build.description.trim_end()),
    );
    write(
        root,
        "/DEBIAN/control",
        control.to_string().as_bytes(),
        0o644,
    )
}

/// Installs the recipe's `build.files`, with the placeholders of text files
/// filled; returns those under `/etc/` (the conffiles).
fn write_build_files(
    root: &Path,
    recipes: &RecipeSet,
    versions: &BTreeMap<String, String>,
    recipe: &PackageRecipe,
    build: &BuildRecipe,
    exact: &[String],
) -> Result<Vec<String>, NativeError> {
    let fail = |message: String| recipe_error(recipe, message);
    let mut conffiles = Vec::new();
    for f in &build.files {
        let src = recipes
            .file(&f.source)
            .map_err(|e| fail(format!("build.files: {e}")))?;
        let bytes = crate::input::read(&src, crate::input::limit::PAYLOAD)
            .map_err(|e| fail(format!("build.files: {}: {e}", src.display())))?;
        let bytes = match String::from_utf8(bytes) {
            Ok(text) => fill_versions(&text, versions, &src)?
                .replace("@PACKAGE@", &recipe.name)
                .replace("@DEPENDS_EXACT@", &exact.join(" "))
                .into_bytes(),
            Err(e) => e.into_bytes(),
        };
        write(root, &f.path, &bytes, f.mode)?;
        if f.path.starts_with("/etc/") {
            conffiles.push(f.path.clone());
        }
    }
    Ok(conffiles)
}

/// Installs a repo-config package's apt source, keyring, pins, postinst and
/// lintian overrides; returns its conffiles (the source and the pins).
fn write_repo_config(
    root: &Path,
    recipe: &PackageRecipe,
    rc_name: &str,
    input: &RepoConfigInput,
) -> Result<Vec<String>, NativeError> {
    let name = &recipe.name;
    let mirror = input.config.mirror.as_deref().ok_or_else(|| {
        recipe_error(
            recipe,
            "a repo-config package needs the mirror URL: set `mirror` in recipes/repository.toml"
                .into(),
        )
    })?;
    let keyring = format!("/usr/share/keyrings/{rc_name}-archive-keyring.gpg");
    let sources = format!(
        "Types: deb\nURIs: {mirror}\nSuites: {}\nComponents: {}\nArchitectures: {}\nSigned-By: {keyring}\n",
        input.config.suite,
        input.config.component,
        input.config.architectures.join(" ")
    );
    let sources_path = format!("/etc/apt/sources.list.d/{rc_name}.sources");
    let pref_path = format!("/etc/apt/preferences.d/{rc_name}.pref");
    write(root, &sources_path, sources.as_bytes(), 0o644)?;
    write(root, &keyring, input.keyring, 0o644)?;
    write(root, &pref_path, input.preferences.as_bytes(), 0o644)?;
    write(
        root,
        "/DEBIAN/postinst",
        repo_config_postinst(name, input).as_bytes(),
        0o755,
    )?;
    // Debian's own archive forbids packages that configure apt; this
    // package exists to do exactly that, and says so to lintian.
    let overrides = format!(
        "# {name} is the lab's repository configuration: installing an apt source\n\
         # and pins is its purpose.\n\
         {name}: package-installs-apt-sources [{}]\n\
         {name}: package-installs-apt-preferences [{}]\n",
        sources_path.trim_start_matches('/'),
        pref_path.trim_start_matches('/')
    );
    write(
        root,
        &format!("/usr/share/lintian/overrides/{name}"),
        overrides.as_bytes(),
        0o644,
    )?;
    Ok(vec![sources_path, pref_path])
}

/// Writes the copyright file and the gzipped Debian changelog.
fn write_policy_docs(
    root: &Path,
    recipes: &RecipeSet,
    recipe: &PackageRecipe,
    build: &BuildRecipe,
    date: i64,
) -> Result<(), NativeError> {
    let name = &recipe.name;
    let fail = |message: String| recipe_error(recipe, message);
    // What Debian Policy asks of every package: its copyright and changelog.
    let copyright_src = recipes
        .file(&build.copyright)
        .map_err(|e| fail(format!("build.copyright: {e}")))?;
    let copyright = crate::input::read(&copyright_src, crate::input::limit::PAYLOAD)
        .map_err(|e| fail(format!("build.copyright: {}: {e}", copyright_src.display())))?;
    write(
        root,
        &format!("/usr/share/doc/{name}/copyright"),
        &copyright,
        0o644,
    )?;
    let recipe_rel = recipe
        .file
        .strip_prefix(&recipes.dir)
        .unwrap_or(&recipe.file)
        .display()
        .to_string();
    let changelog = format!(
        "{name} ({}) unstable; urgency=medium\n\n  * Built by debforge from {recipe_rel}.\n\n -- {}  {}\n",
        recipe.version,
        build.maintainer,
        format_rfc2822(date).replace(" UTC", " +0000")
    );
    write(
        root,
        &format!("/usr/share/doc/{name}/changelog.Debian.gz"),
        &gzip_n(changelog.as_bytes()),
        0o644,
    )
}

/// Writes `DEBIAN/conffiles`, sorted, when there are any.
fn write_conffiles(root: &Path, mut conffiles: Vec<String>) -> Result<(), NativeError> {
    if !conffiles.is_empty() {
        conffiles.sort();
        write(
            root,
            "/DEBIAN/conffiles",
            format!("{}\n", conffiles.join("\n")).as_bytes(),
            0o644,
        )?;
    }
    Ok(())
}

/// Builds the `.deb` from the laid-out tree into `out_dir`; returns its path.
fn build_deb(root: &Path, out_dir: &Path, date: i64) -> Result<PathBuf, NativeError> {
    fs::create_dir_all(out_dir).map_err(FileError::at(out_dir))?;
    let opts = BuildOptions {
        source_date_epoch: Some(date.max(0) as u64),
        ..BuildOptions::default()
    };
    let report = build_from_dir(root, out_dir, &opts)?;
    Ok(report.output)
}

fn set_dir_modes(dir: &Path) -> Result<(), NativeError> {
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.map_err(|e| FileError::new(dir, crate::error::walk_error(e)))?;
        if entry.file_type().is_dir() {
            fs::set_permissions(entry.path(), fs::Permissions::from_mode(0o755))
                .map_err(FileError::at(entry.path()))?;
        }
    }
    Ok(())
}

impl crate::error::Hint for NativeError {
    fn hint(&self) -> Option<String> {
        match self {
            NativeError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sh_single_quoted;

    #[test]
    fn a_label_reaches_the_postinst_as_text_never_as_shell() {
        for label in ["gpu-lab", "x$(touch /tmp/pwned)`id`\"y", "it's \\ here"] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "label={}; printf %s \"$label\"",
                    sh_single_quoted(label)
                ))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), label);
        }
    }
}
