//! `Release` files: the signed root of an apt repository.
//!
//! Spec: <https://wiki.debian.org/DebianRepository/Format#A.22Release.22_files>.
//! apt 1.6 (Ubuntu 18.04) trusts only SHA256 and SHA512 entries: a Release
//! with MD5Sum or SHA1 alone is treated as unsigned, and so it is refused here.

use super::date::parse_rfc2822;
use super::deb822::{ControlParagraph, Document, ParseError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum HashAlgo {
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

impl HashAlgo {
    /// The Release field that lists files with this hash.
    pub fn release_field(self) -> &'static str {
        match self {
            HashAlgo::Md5 => "MD5Sum",
            HashAlgo::Sha1 => "SHA1",
            HashAlgo::Sha256 => "SHA256",
            HashAlgo::Sha512 => "SHA512",
        }
    }

    /// The hex length of a digest.
    pub fn hex_len(self) -> usize {
        match self {
            HashAlgo::Md5 => 32,
            HashAlgo::Sha1 => 40,
            HashAlgo::Sha256 => 64,
            HashAlgo::Sha512 => 128,
        }
    }

    /// The algorithms apt 1.6 accepts as proof, strongest first.
    pub const TRUSTED: [HashAlgo; 2] = [HashAlgo::Sha512, HashAlgo::Sha256];
}

/// One line of a checksum list: `<digest> <size> <path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFile {
    pub digest: String,
    pub size: u64,
    pub path: String,
}

/// What a Release says about one index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub path: String,
    pub size: u64,
    pub sha256: Option<String>,
    pub sha512: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    #[error("{0}")]
    Syntax(#[from] ParseError),
    #[error("no paragraph")]
    Empty,
    #[error("field '{field}': line {line:?} is not '<digest> <size> <path>'")]
    BadChecksumLine { field: &'static str, line: String },
    #[error(
        "no SHA256 or SHA512 checksums (only MD5Sum/SHA1): apt 1.6 treats such a repository as unsigned"
    )]
    NoStrongHash,
    #[error("field '{field}' value {value:?} is not a date like 'Sat, 23 Mar 2019 06:13:20 UTC'")]
    BadDate { field: &'static str, value: String },
    #[error("'{path}' has size {first} in one checksum list and {second} in another")]
    SizeDisagrees {
        path: String,
        first: u64,
        second: u64,
    },
}

/// A parsed Release file.
#[derive(Debug, Clone)]
pub struct Release {
    paragraph: ControlParagraph,
}

impl Release {
    pub fn parse(text: &str) -> Result<Release, ReleaseError> {
        let doc = Document::parse(text)?;
        let paragraph = doc
            .paragraphs()
            .next()
            .cloned()
            .ok_or(ReleaseError::Empty)?;
        Ok(Release { paragraph })
    }

    pub fn paragraph(&self) -> &ControlParagraph {
        &self.paragraph
    }

    /// The checksum list for `algo` (empty when the field is absent).
    pub fn files(&self, algo: HashAlgo) -> Result<Vec<ReleaseFile>, ReleaseError> {
        let field = algo.release_field();
        let Some(f) = self.paragraph.field(field) else {
            return Ok(Vec::new());
        };
        f.lines()
            .into_iter()
            .filter(|l| !l.is_empty())
            .map(|line| {
                let bad = || ReleaseError::BadChecksumLine {
                    field,
                    line: line.to_string(),
                };
                let mut words = line.split_whitespace();
                let (Some(digest), Some(size), Some(path), None) =
                    (words.next(), words.next(), words.next(), words.next())
                else {
                    return Err(bad());
                };
                if digest.len() != algo.hex_len() || !digest.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(bad());
                }
                Ok(ReleaseFile {
                    digest: digest.to_ascii_lowercase(),
                    size: size.parse().map_err(|_| bad())?,
                    path: path.to_string(),
                })
            })
            .collect()
    }

    /// Fails unless SHA256 or SHA512 lists are present, as apt 1.6 requires.
    pub fn require_strong_hashes(&self) -> Result<(), ReleaseError> {
        for algo in HashAlgo::TRUSTED {
            if !self.files(algo)?.is_empty() {
                return Ok(());
            }
        }
        Err(ReleaseError::NoStrongHash)
    }

    /// What the SHA256 and SHA512 lists say about `path`, or `None` when
    /// neither lists it (MD5Sum/SHA1 entries do not count).
    pub fn entry(&self, path: &str) -> Result<Option<IndexEntry>, ReleaseError> {
        let mut entry: Option<IndexEntry> = None;
        for algo in HashAlgo::TRUSTED {
            for f in self.files(algo)? {
                if f.path != path {
                    continue;
                }
                let e = entry.get_or_insert_with(|| IndexEntry {
                    path: path.to_string(),
                    size: f.size,
                    sha256: None,
                    sha512: None,
                });
                if e.size != f.size {
                    return Err(ReleaseError::SizeDisagrees {
                        path: path.to_string(),
                        first: e.size,
                        second: f.size,
                    });
                }
                match algo {
                    HashAlgo::Sha256 => e.sha256 = Some(f.digest),
                    HashAlgo::Sha512 => e.sha512 = Some(f.digest),
                    _ => {}
                }
            }
        }
        Ok(entry)
    }

    fn date_field(&self, field: &'static str) -> Result<Option<i64>, ReleaseError> {
        match self.paragraph.get(field) {
            None => Ok(None),
            Some(v) => parse_rfc2822(v)
                .map(Some)
                .ok_or_else(|| ReleaseError::BadDate {
                    field,
                    value: v.to_string(),
                }),
        }
    }

    /// `Date`, as seconds since the epoch.
    pub fn date(&self) -> Result<Option<i64>, ReleaseError> {
        self.date_field("Date")
    }

    /// Origin, Label, Suite and Codename as pins see them (`component`
    /// is the index's, given by its path).
    pub fn meta(&self, component: &str) -> super::preferences::ReleaseMeta {
        let f = |k: &str| self.paragraph().get(k).unwrap_or_default().to_string();
        super::preferences::ReleaseMeta {
            origin: f("Origin"),
            label: f("Label"),
            suite: f("Suite"),
            codename: f("Codename"),
            component: component.to_string(),
        }
    }

    /// `Valid-Until`, as seconds since the epoch.
    pub fn valid_until(&self) -> Result<Option<i64>, ReleaseError> {
        self.date_field("Valid-Until")
    }
}

/// The header fields of a Release we write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFields {
    pub origin: String,
    pub label: String,
    pub suite: String,
    pub codename: String,
    /// Seconds since the epoch.
    pub date: i64,
    pub valid_until: Option<i64>,
    pub architectures: Vec<String>,
    pub components: Vec<String>,
    pub description: String,
    pub acquire_by_hash: bool,
}

/// Renders a Release: the header, then MD5Sum, SHA1, SHA256 and SHA512 lists
/// of `files` (paths relative to the Release's directory), sorted by path.
/// apt 1.6 reads the SHA256/SHA512 lists; the weaker ones are for old tools.
pub fn render(fields: &ReleaseFields, files: &[(String, crate::digest::Digests)]) -> String {
    use super::date::format_rfc2822;
    let mut p = ControlParagraph::new();
    p.set("Origin", &fields.origin);
    p.set("Label", &fields.label);
    p.set("Suite", &fields.suite);
    p.set("Codename", &fields.codename);
    p.set("Date", &format_rfc2822(fields.date));
    if let Some(v) = fields.valid_until {
        p.set("Valid-Until", &format_rfc2822(v));
    }
    if fields.acquire_by_hash {
        p.set("Acquire-By-Hash", "yes");
    }
    p.set("Architectures", &fields.architectures.join(" "));
    p.set("Components", &fields.components.join(" "));
    p.set("Description", &fields.description);
    let mut sorted: Vec<&(String, crate::digest::Digests)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = p.to_string();
    for field in ["MD5Sum", "SHA1", "SHA256", "SHA512"] {
        // A section lists every file or is left out (indexes are hashed
        // with all four, so in practice all four are there).
        let Some(lines) = sorted
            .iter()
            .map(|(path, d)| {
                let digest = d.by_field(field)?;
                Some(format!(" {digest} {:>16} {path}\n", d.size))
            })
            .collect::<Option<Vec<String>>>()
        else {
            continue;
        };
        text.push_str(field);
        text.push_str(":\n");
        text.extend(lines);
    }
    text
}

/// What the repository is called and what it holds: the recipes'
/// `[repository]` table, the fields of the Release debforge writes.
/// Recorded in each generation, so an earlier one is published again with
/// the Release fields (and so the pins) it had.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RepoConfig {
    pub origin: String,
    pub label: String,
    pub suite: String,
    pub codename: String,
    pub component: String,
    pub architectures: Vec<String>,
    pub description: String,
    /// Seconds after `Date` for `Valid-Until`, when wanted.
    pub valid_for: Option<i64>,
    /// Where lab machines reach the published repository (for the
    /// repo-config package's apt source).
    pub mirror: Option<String>,
}

impl Default for RepoConfig {
    fn default() -> Self {
        RepoConfig {
            origin: "debforge".into(),
            label: "debforge".into(),
            suite: "bionic".into(),
            codename: "bionic".into(),
            component: "main".into(),
            architectures: vec!["amd64".into()],
            description: "Packages built by debforge".into(),
            valid_for: None,
            mirror: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA256_EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn finds_entries_in_the_strong_lists_only() {
        let text = format!(
            "Origin: test\nDate: Tue, 23 Apr 2019 06:13:20 UTC\nMD5Sum:\n d41d8cd98f00b204e9800998ecf8427e 0 Packages\nSHA256:\n {SHA256_EMPTY}        0 Packages\n {SHA256_EMPTY} 0 main/binary-amd64/Packages\n"
        );
        let r = Release::parse(&text).unwrap();
        r.require_strong_hashes().unwrap();
        let e = r.entry("Packages").unwrap().unwrap();
        assert_eq!(
            (e.size, e.sha256.as_deref(), e.sha512),
            (0, Some(SHA256_EMPTY), None)
        );
        assert_eq!(r.entry("Sources").unwrap(), None);
        assert_eq!(r.date().unwrap(), Some(1_556_000_000));
        assert_eq!(r.valid_until().unwrap(), None);
    }

    #[test]
    fn renders_what_it_parses() {
        let d = crate::digest::digest_reader(&b""[..]).unwrap();
        let fields = ReleaseFields {
            origin: "debforge".into(),
            label: "lab".into(),
            suite: "bionic".into(),
            codename: "bionic".into(),
            date: 1_556_000_000,
            valid_until: Some(1_556_600_000),
            architectures: vec!["amd64".into()],
            components: vec!["main".into()],
            description: "GPU lab".into(),
            acquire_by_hash: true,
        };
        let text = render(&fields, &[("main/binary-amd64/Packages".into(), d.clone())]);
        let r = Release::parse(&text).unwrap();
        assert_eq!(r.date().unwrap(), Some(1_556_000_000));
        assert_eq!(r.valid_until().unwrap(), Some(1_556_600_000));
        let e = r.entry("main/binary-amd64/Packages").unwrap().unwrap();
        assert_eq!(e.sha256.as_deref(), Some(SHA256_EMPTY));
        assert_eq!(
            Some(&r.files(HashAlgo::Md5).unwrap()[0].digest),
            d.md5.as_ref()
        );
        assert_eq!(r.paragraph().get("Acquire-By-Hash"), Some("yes"));
    }

    #[test]
    fn refuses_weak_only_and_malformed() {
        let weak =
            Release::parse("MD5Sum:\n d41d8cd98f00b204e9800998ecf8427e 0 Packages\n").unwrap();
        assert_eq!(
            weak.require_strong_hashes(),
            Err(ReleaseError::NoStrongHash)
        );
        assert_eq!(weak.entry("Packages").unwrap(), None);
        let bad = Release::parse("SHA256:\n abc 0 Packages\n").unwrap();
        assert!(matches!(
            bad.entry("Packages"),
            Err(ReleaseError::BadChecksumLine { .. })
        ));
        let date = Release::parse("Valid-Until: soon\n").unwrap();
        assert!(matches!(
            date.valid_until(),
            Err(ReleaseError::BadDate { .. })
        ));
    }
}
