//! apt preferences (pins) that make apt take exactly what our repository
//! offers, up or down, and nothing else.
//!
//! Spec: apt_preferences(5). The first specific record that matches a
//! version decides its priority; `>= 1000` lets apt downgrade to it; a
//! negative priority means the version is never a candidate. So each package
//! gets `Pin: release o=ORIGIN,l=LABEL` (our repository's Release) at 1001
//! and then `Pin: version *` at -1, in that order: apt takes our build over
//! newer ones from any repository, and with our repository gone it fails
//! ("has no installation candidate") instead of falling back to another
//! build. Pinning our release rather than an exact version keeps the pins
//! the same from one generation to the next: the pins a lab machine already
//! has let it take the next generation, or an earlier one published again
//! (a rollback), in one `apt-get dist-upgrade`. With exact versions the
//! installed pins would give the new versions -1 until the repo-config
//! package bringing new pins was installed by an earlier run. Our
//! repository lists one version of each package, so "ours" is exact.
//! Exact version pins (`Pin: version V`) are still read (for `policy` and
//! `verify`, and for hand-written preferences).

/// The preferences file for `packages` from the repository whose Release
/// says `Origin: origin` and `Label: label`, in the order given.
pub fn release_pins<'a>(
    origin: &str,
    label: &str,
    packages: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut out = String::new();
    for name in packages {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "Explanation: debforge: {name} from the {label} repository, whichever version it offers\n\
             Package: {name}\nPin: release o={origin},l={label}\nPin-Priority: 1001\n\n\
             Explanation: debforge: no other build of {name} is a candidate\n\
             Package: {name}\nPin: version *\nPin-Priority: -1\n"
        ));
    }
    out
}

/// The preferences file for `(package, exact version)` pairs, in the order
/// given (tests and hand-written pins; builds write [`release_pins`]).
pub fn exact_pins<'a>(packages: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, version) in packages {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "Explanation: debforge: {name} exactly {version}, never another build\n\
             Package: {name}\nPin: version {version}\nPin-Priority: 1001\n\n\
             Explanation: debforge: no other version of {name} is a candidate\n\
             Package: {name}\nPin: version *\nPin-Priority: -1\n"
        ));
    }
    out
}

/// What a record's `Pin:` line selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// `Pin: version GLOB`.
    Version(String),
    /// `Pin: release k=v,…`: each given field of the version's Release must
    /// match (o origin, l label, a suite, n codename, c component).
    Release(Vec<(char, String)>),
}

/// The Release a version is offered from, as pins see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseMeta {
    pub origin: String,
    pub label: String,
    pub suite: String,
    pub codename: String,
    pub component: String,
}

impl Pin {
    fn matches(&self, version: &str, release: Option<&ReleaseMeta>) -> bool {
        match self {
            Pin::Version(g) => glob(g, version),
            Pin::Release(fields) => {
                let Some(r) = release else { return false };
                fields.iter().all(|(k, v)| {
                    let have = match k {
                        'o' => &r.origin,
                        'l' => &r.label,
                        'a' => &r.suite,
                        'n' => &r.codename,
                        'c' => &r.component,
                        _ => return false,
                    };
                    glob(v, have)
                })
            }
        }
    }
}

/// One record of a preferences file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRecord {
    /// Package names or globs (`*` is the general form).
    pub packages: Vec<String>,
    pub pin: Pin,
    pub priority: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreferencesError {
    #[error("{0}")]
    Syntax(#[from] super::deb822::ParseError),
    #[error("record at line {line}: missing {field}")]
    Missing { line: usize, field: &'static str },
    #[error("record at line {line}: Pin-Priority {value:?} is not a number")]
    BadPriority { line: usize, value: String },
    #[error(
        "record at line {line}: only 'Pin: version …' and 'Pin: release o=…,l=…,a=…,n=…,c=…' are supported here, not {pin:?}"
    )]
    Unsupported { line: usize, pin: String },
}

/// A parsed preferences file (version pins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preferences {
    pub records: Vec<PinRecord>,
    /// Record numbers by the exact package name they list (in file order),
    /// and the records listing a pattern: a lookup costs the records that
    /// can match, not all of them (a lab pins thousands of packages).
    by_name: std::collections::HashMap<String, Vec<usize>>,
    patterns: Vec<usize>,
}

impl Preferences {
    pub fn parse(text: &str) -> Result<Preferences, PreferencesError> {
        let doc = super::deb822::Document::parse(text)?;
        let mut records = Vec::new();
        for p in doc.paragraphs() {
            let line = p.line();
            let packages = p.get("Package").ok_or(PreferencesError::Missing {
                line,
                field: "Package",
            })?;
            let pin = p
                .get("Pin")
                .ok_or(PreferencesError::Missing { line, field: "Pin" })?;
            let prio = p.get("Pin-Priority").ok_or(PreferencesError::Missing {
                line,
                field: "Pin-Priority",
            })?;
            let priority = prio.parse().map_err(|_| PreferencesError::BadPriority {
                line,
                value: prio.to_string(),
            })?;
            let pin = if let Some(version) = pin.strip_prefix("version ") {
                Pin::Version(version.trim().to_string())
            } else if let Some(spec) = pin.strip_prefix("release ") {
                let mut fields = Vec::new();
                for frag in spec.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    let mut chars = frag.chars();
                    match (chars.next(), chars.next()) {
                        (Some(k @ ('o' | 'l' | 'a' | 'n' | 'c')), Some('=')) => {
                            fields.push((k, frag[2..].to_string()))
                        }
                        _ => {
                            return Err(PreferencesError::Unsupported {
                                line,
                                pin: pin.to_string(),
                            });
                        }
                    }
                }
                Pin::Release(fields)
            } else {
                return Err(PreferencesError::Unsupported {
                    line,
                    pin: pin.to_string(),
                });
            };
            records.push(PinRecord {
                packages: packages.split_whitespace().map(String::from).collect(),
                pin,
                priority,
            });
        }
        Ok(Preferences::new(records))
    }

    /// Preferences of these records, in this order.
    pub fn new(records: Vec<PinRecord>) -> Preferences {
        let mut by_name: std::collections::HashMap<String, Vec<usize>> = Default::default();
        let mut patterns = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if r.packages.iter().any(|n| n.contains(['*', '?'])) {
                patterns.push(i);
            }
            for n in r.packages.iter().filter(|n| !n.contains(['*', '?'])) {
                let list = by_name.entry(n.clone()).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        Preferences {
            records,
            by_name,
            patterns,
        }
    }

    /// Whether any record may name `package` (by its name or a pattern):
    /// if none does, every version of it has its index's priority.
    pub fn may_name(&self, package: &str) -> bool {
        !self.patterns.is_empty() || self.by_name.contains_key(package)
    }

    /// apt's rule: the first specific record (naming the package) whose
    /// pin matches decides; else the first general record (`*`). `release`
    /// is where the version is offered from (None: no Release known).
    pub fn priority(
        &self,
        package: &str,
        version: &str,
        release: Option<&ReleaseMeta>,
    ) -> Option<i32> {
        // The records that can name `package`, in file order.
        let mut candidates: Vec<usize> = self
            .by_name
            .get(package)
            .into_iter()
            .flatten()
            .chain(&self.patterns)
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let matching = |specific: bool| {
            candidates.iter().map(|&i| &self.records[i]).find(|r| {
                let names = r.packages.iter().any(|n| {
                    if specific {
                        n != "*" && glob(n, package)
                    } else {
                        n == "*"
                    }
                });
                names && r.pin.matches(version, release)
            })
        };
        matching(true)
            .or_else(|| matching(false))
            .map(|r| r.priority)
    }
}

/// fnmatch-style `*` and `?` (apt matches version pins this way).
fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// One version on offer, with the priority of the index it comes from
/// (500 for an ordinary repository).
#[derive(Debug, Clone)]
pub struct Offer {
    pub version: super::version::Version,
    pub index_priority: i32,
    /// The Release of the index it comes from, when known.
    pub release: Option<ReleaseMeta>,
}

/// The candidate apt picks for `package` from `offers` (nothing installed):
/// each version's priority is its pin's, or else the best of its indexes';
/// the highest priority wins, then the highest version; a negative priority
/// is never a candidate. Returns (candidate, every version with its priority,
/// highest version first).
pub fn candidate(
    prefs: &Preferences,
    package: &str,
    offers: &[Offer],
) -> (
    Option<super::version::Version>,
    Vec<(super::version::Version, i32)>,
) {
    let mut table: Vec<(super::version::Version, i32)> = Vec::new();
    for o in offers {
        let pinned = prefs.priority(package, &o.version.to_string(), o.release.as_ref());
        let prio = pinned.unwrap_or(o.index_priority);
        match table.iter_mut().find(|(v, _)| *v == o.version) {
            Some((_, p)) if pinned.is_none() => *p = (*p).max(prio),
            Some(_) => {}
            None => table.push((o.version.clone(), prio)),
        }
    }
    table.sort_by(|a, b| b.0.cmp(&a.0));
    let best = table
        .iter()
        .filter(|(_, p)| *p >= 0)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
        .map(|(v, _)| v.clone());
    (best, table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::deb822::Document;

    #[test]
    fn pins_decide_the_candidate() {
        let prefs =
            Preferences::parse(&exact_pins([("libcudnn7", "7.5.0.56-1+cuda10.1")])).unwrap();
        let v = |s: &str| crate::format::Version::parse(s).unwrap();
        let offers = |vs: &[&str]| {
            vs.iter()
                .map(|s| Offer {
                    version: v(s),
                    index_priority: 500,
                    release: None,
                })
                .collect::<Vec<_>>()
        };
        let (c, table) = candidate(
            &prefs,
            "libcudnn7",
            &offers(&[
                "7.6.5.32-1+cuda10.1",
                "7.5.0.56-1+cuda10.1",
                "7.0.5.15-1ubuntu1",
            ]),
        );
        assert_eq!(c, Some(v("7.5.0.56-1+cuda10.1")));
        assert_eq!(
            table.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
            vec![-1, 1001, -1]
        );
        let (c, _) = candidate(
            &prefs,
            "libcudnn7",
            &offers(&["7.6.5.32-1+cuda10.1", "7.0.5.15-1ubuntu1"]),
        );
        assert_eq!(c, None);
        let (c, _) = candidate(&prefs, "other", &offers(&["1.0", "2.0"]));
        assert_eq!(c, Some(v("2.0")));
        assert!(glob("7.5*", "7.5.0.56-1+cuda10.1") && !glob("7.5", "7.5.0"));
    }

    #[test]
    fn exact_version_first_then_the_catch_all() {
        let text = exact_pins([("libcudnn7", "7.5.0.56-1+cuda10.1")]);
        let doc = Document::parse(&text).unwrap();
        let p: Vec<_> = doc.paragraphs().collect();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].get("Pin"), Some("version 7.5.0.56-1+cuda10.1"));
        assert_eq!(p[0].get("Pin-Priority"), Some("1001"));
        assert_eq!(p[1].get("Pin"), Some("version *"));
        assert_eq!(p[1].get("Pin-Priority"), Some("-1"));
    }

    #[test]
    fn release_pins_take_whatever_our_repository_offers_and_nothing_else() {
        let prefs = Preferences::parse(&release_pins("GPU lab", "gpu-lab", ["libnccl2"])).unwrap();
        let ours = ReleaseMeta {
            origin: "GPU lab".into(),
            label: "gpu-lab".into(),
            ..Default::default()
        };
        let theirs = ReleaseMeta {
            origin: "NVIDIA".into(),
            label: "gpu-lab".into(),
            ..Default::default()
        };
        let v = |s: &str| crate::format::Version::parse(s).unwrap();
        let offer = |s: &str, r: &ReleaseMeta| Offer {
            version: v(s),
            index_priority: 500,
            release: Some(r.clone()),
        };
        // An older version from us beats a newer one from anyone else.
        let (c, table) = candidate(
            &prefs,
            "libnccl2",
            &[
                offer("2.4.8-1+cuda10.1", &theirs),
                offer("2.4.2-1+cuda10.1", &ours),
            ],
        );
        assert_eq!(c, Some(v("2.4.2-1+cuda10.1")));
        assert_eq!(
            table.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
            vec![-1, 1001]
        );
        let (c, _) = candidate(&prefs, "libnccl2", &[offer("2.4.8-1+cuda10.1", &theirs)]);
        assert_eq!(c, None);
        assert!(Preferences::parse("Package: x\nPin: release v=1\nPin-Priority: 1\n").is_err());
    }
}
