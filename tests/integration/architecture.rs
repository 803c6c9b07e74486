//! The map in docs/ARCHITECTURE.md, checked: which library module may use
//! which, that the library neither reads the environment nor prints, and
//! that lib.rs maps every module. A new dependency is a decision: change
//! the rule here and the document in the same commit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each library module and the modules it may use (besides itself).
/// Layers, low to high: pure values; inputs and containers; the trust
/// chain; the repository and its outlets; the pipeline; the workflows.
const RULES: &[(&str, &[&str])] = &[
    // Pure, or nothing of the crate.
    ("digest", &[]),
    ("error", &[]),
    ("cores", &[]),
    ("report", &[]),
    ("format", &["digest"]),
    ("input", &[]),
    ("files", &["digest", "error"]),
    ("serve", &[]),
    // Containers, recipes, keys.
    ("deb", &["digest", "error", "format", "input"]),
    (
        "recipe",
        &["cores", "digest", "error", "files", "format", "input"],
    ),
    ("openpgp", &["error", "format"]),
    ("keys", &["error", "input", "openpgp"]),
    // The trust chain.
    ("fetch", &["digest", "error", "report"]),
    (
        "upstream",
        &[
            "deb", "digest", "error", "fetch", "format", "input", "openpgp", "recipe",
        ],
    ),
    // The repository and its outlets.
    (
        "repo",
        &[
            "cores", "deb", "digest", "error", "files", "format", "input", "openpgp", "report",
        ],
    ),
    ("publish", &["error", "format", "input", "report"]),
    (
        "bundle",
        &[
            "deb", "digest", "error", "files", "format", "input", "publish", "report",
        ],
    ),
    (
        "native",
        &["deb", "error", "format", "input", "recipe", "repo"],
    ),
    // Stages, then whole workflows.
    (
        "pipeline",
        &[
            "cores", "deb", "digest", "error", "fetch", "files", "format", "input", "native",
            "openpgp", "recipe", "repo", "report", "upstream",
        ],
    ),
    (
        "workflow",
        &[
            "bundle", "cores", "digest", "error", "files", "format", "input", "keys", "openpgp",
            "pipeline", "publish", "recipe", "repo", "report",
        ],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The library module a file belongs to (`src/repo/write.rs` → `repo`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "cli")).then(|| name.to_string())
}

/// Code before the file's tests (tests may use anything).
fn code(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

/// The crate modules a file names: `crate::x::…` and `use crate::{x, y}`.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let group = &inner[..inner.find('}').unwrap_or(inner.len())];
            for item in group.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
}

#[test]
fn the_module_dependency_rules_hold() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules: BTreeMap<&str, &[&str]> = RULES.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    let mut modules = BTreeSet::new();
    for f in &files {
        let Some(module) = module_of(&src, f) else {
            continue;
        };
        modules.insert(module.clone());
        let Some(allowed) = rules.get(module.as_str()) else {
            broken.push(format!("{}: module {module} has no rule", f.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for used in uses(code(&text)) {
            if used != module && !allowed.contains(&used.as_str()) {
                broken.push(format!("{}: {module} uses {used}", f.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "dependency rules broken:\n{}",
        broken.join("\n")
    );
    // Every rule names a module that exists (a stale rule misleads).
    for (m, _) in RULES {
        assert!(modules.contains(*m), "rule for a module that is gone: {m}");
    }
}

#[test]
fn the_library_reads_no_environment_and_prints_nothing() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for f in &files {
        if module_of(&src, f).is_none() {
            continue; // the binary: cli/ and main.rs
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = code(&text);
        // The one exception, in ARCHITECTURE.md: S3 credentials the AWS way.
        let aws = f.ends_with("publish/s3.rs");
        for (n, line) in code.lines().enumerate() {
            let reads_env = line.contains("env::var");
            let prints = ["println!", "eprintln!", "print!(", "eprint!("]
                .iter()
                .any(|p| line.contains(p));
            if (reads_env && !aws) || prints {
                broken.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "the library must not:\n{}",
        broken.join("\n")
    );
}

#[test]
fn lib_rs_maps_every_module() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .unwrap();
    for line in lib.lines() {
        if let Some(m) = line.strip_prefix("pub mod ") {
            let m = m.trim_end_matches(';');
            assert!(
                lib.contains(&format!("[`{m}`]")),
                "lib.rs's map does not name module {m}"
            );
            assert!(
                doc.contains(&format!("`{m}`")),
                "docs/ARCHITECTURE.md does not name module {m}"
            );
        }
    }
}
