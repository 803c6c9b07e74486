//! Relationship fields: `Depends`, `Pre-Depends`, `Recommends`, `Conflicts`, …
//!
//! Spec: Debian Policy §7.1
//! (<https://www.debian.org/doc/debian-policy/ch-relationships.html#syntax-of-relationship-fields>),
//! with architecture qualifiers (`:any`, `:native`, `:amd64`) and build
//! profiles (`<!nocheck>`) from deb-src-control(5).
//!
//! `a (>= 1) | b [amd64], c:any` is a [`Relations`] of two [`Alternatives`].

use std::fmt;

use super::version::{CompareOp, Version};

/// A whole field: every entry must hold (comma = and).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relations(pub Vec<Alternatives>);

/// One entry: any of its relations may hold (`|` = or).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternatives(pub Vec<Relation>);

/// One package relation: `name[:arch] [(op version)] [[archs]] [<profiles>]…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub name: String,
    pub arch_qualifier: Option<String>,
    pub constraint: Option<(RelationOp, Version)>,
    /// `[amd64 !i386]`: each with `true` when negated.
    pub architectures: Vec<(bool, String)>,
    /// `<!nocheck cross> <stage1>`: each group a list of (negated, profile).
    pub profiles: Vec<Vec<(bool, String)>>,
}

/// The version operators of relationship fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationOp {
    /// `<<`
    Earlier,
    /// `<=` (also the obsolete `<`)
    EarlierOrEqual,
    /// `=`
    Exactly,
    /// `>=` (also the obsolete `>`)
    LaterOrEqual,
    /// `>>`
    Later,
}

impl RelationOp {
    pub fn as_str(self) -> &'static str {
        match self {
            RelationOp::Earlier => "<<",
            RelationOp::EarlierOrEqual => "<=",
            RelationOp::Exactly => "=",
            RelationOp::LaterOrEqual => ">=",
            RelationOp::Later => ">>",
        }
    }

    fn compare_op(self) -> CompareOp {
        match self {
            RelationOp::Earlier => CompareOp::Lt,
            RelationOp::EarlierOrEqual => CompareOp::Le,
            RelationOp::Exactly => CompareOp::Eq,
            RelationOp::LaterOrEqual => CompareOp::Ge,
            RelationOp::Later => CompareOp::Gt,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("in relation {entry:?}: {reason}")]
pub struct RelationError {
    pub entry: String,
    pub reason: String,
}

impl Relations {
    /// Parses a field value; folded (multi-line) values are accepted.
    /// The package names [`Relations::parse`] finds in `text`, read
    /// without the rest (where one of them is, nothing else about the
    /// field matters).
    pub fn names(text: &str) -> impl Iterator<Item = &str> {
        text.split([',', '|']).map(|rel| name_part(rel.trim()))
    }

    pub fn parse(text: &str) -> Result<Relations, RelationError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Relations(Vec::new()));
        }
        text.split(',')
            .map(|entry| {
                entry
                    .split('|')
                    .map(Relation::parse)
                    .collect::<Result<Vec<_>, _>>()
                    .map(Alternatives)
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Relations)
    }

    /// True when every entry has an alternative satisfied by one of `available`
    /// (package name, version). Architecture restrictions and profiles are not
    /// evaluated: they concern source packages and the arch they build for.
    pub fn satisfied_by<'a>(
        &self,
        available: impl Clone + IntoIterator<Item = (&'a str, &'a Version)>,
    ) -> bool {
        self.0.iter().all(|alt| {
            alt.0.iter().any(|rel| {
                available
                    .clone()
                    .into_iter()
                    .any(|(n, v)| rel.matches(n, v))
            })
        })
    }
}

/// A relation's package name: what comes before its architecture
/// qualifier, version, architectures or profiles.
fn name_part(relation: &str) -> &str {
    let end = relation
        .find(|c: char| c.is_whitespace() || "([<:".contains(c))
        .unwrap_or(relation.len());
    &relation[..end]
}

impl Relation {
    pub fn parse(text: &str) -> Result<Relation, RelationError> {
        let fail = |reason: &str| RelationError {
            entry: text.trim().to_string(),
            reason: reason.to_string(),
        };
        let mut rest = text.trim();
        let name = name_part(rest);
        let name_end = name.len();
        if name.is_empty() {
            return Err(fail("missing package name"));
        }
        // Policy's name rules, less the two-character minimum (old packages).
        let first_ok =
            name.as_bytes()[0].is_ascii_lowercase() || name.as_bytes()[0].is_ascii_digit();
        if !first_ok
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
        {
            return Err(fail(&format!("invalid package name {name:?}")));
        }
        rest = &rest[name_end..];

        let mut arch_qualifier = None;
        if let Some(after) = rest.strip_prefix(':') {
            let end = after
                .find(|c: char| c.is_whitespace() || "([<".contains(c))
                .unwrap_or(after.len());
            let arch = &after[..end];
            if arch.is_empty() || !arch.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(fail("invalid architecture qualifier after ':'"));
            }
            arch_qualifier = Some(arch.to_string());
            rest = &after[end..];
        }
        rest = rest.trim_start();

        let mut constraint = None;
        if let Some(after) = rest.strip_prefix('(') {
            let close = after.find(')').ok_or_else(|| fail("missing ')'"))?;
            let inner = after[..close].trim();
            let (op, version) = split_operator(inner).ok_or_else(|| {
                fail("version constraint needs an operator: one of << <= = >= >>")
            })?;
            let version = version.trim();
            let version = Version::parse_lenient(version)
                .map_err(|e| fail(&format!("bad version {version:?}: {e}")))?
                .0;
            constraint = Some((op, version));
            rest = after[close + 1..].trim_start();
        }

        let mut architectures = Vec::new();
        if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']').ok_or_else(|| fail("missing ']'"))?;
            for word in after[..close].split_whitespace() {
                let (neg, arch) = match word.strip_prefix('!') {
                    Some(a) => (true, a),
                    None => (false, word),
                };
                if arch.is_empty() {
                    return Err(fail("empty architecture in '[...]'"));
                }
                architectures.push((neg, arch.to_string()));
            }
            if architectures.is_empty() {
                return Err(fail("empty architecture list '[]'"));
            }
            rest = after[close + 1..].trim_start();
        }

        let mut profiles = Vec::new();
        while let Some(after) = rest.strip_prefix('<') {
            let close = after.find('>').ok_or_else(|| fail("missing '>'"))?;
            let group: Vec<_> = after[..close]
                .split_whitespace()
                .map(|w| match w.strip_prefix('!') {
                    Some(p) => (true, p.to_string()),
                    None => (false, w.to_string()),
                })
                .collect();
            if group.is_empty() {
                return Err(fail("empty build profile '<>'"));
            }
            profiles.push(group);
            rest = after[close + 1..].trim_start();
        }
        if !rest.is_empty() {
            return Err(fail(&format!("unexpected {rest:?}")));
        }
        Ok(Relation {
            name: name.to_string(),
            arch_qualifier,
            constraint,
            architectures,
            profiles,
        })
    }

    /// Does package `name` at `version` satisfy this relation?
    pub fn matches(&self, name: &str, version: &Version) -> bool {
        self.name == name
            && self
                .constraint
                .as_ref()
                .is_none_or(|(op, want)| op.compare_op().holds(version.compare(want)))
    }
}

/// Whether a constraint `(op V)` in `field` says something of version `V`
/// itself that a later rebuild `V+suffix` would no longer satisfy (or, for
/// Breaks/Conflicts/Replaces, no longer be caught by): `=` and `<=`
/// everywhere, `<<` too where it names what a package breaks or replaces.
/// `Provides` names the package's own virtual versions, never another's.
pub fn names_exact_version(field: &str, op: RelationOp) -> bool {
    match field {
        "Provides" => false,
        "Breaks" | "Conflicts" | "Replaces" => matches!(
            op,
            RelationOp::Exactly | RelationOp::EarlierOrEqual | RelationOp::Earlier
        ),
        _ => matches!(op, RelationOp::Exactly | RelationOp::EarlierOrEqual),
    }
}

/// Rewrites a relation field's text: every constraint on a package for
/// which `new_version(name, version)` gives a new version, and whose
/// operator [`names_exact_version`], gets that version; every other byte
/// stays as it was (a repacked control file differs from upstream's only
/// where it must). Returns the text and the names retargeted.
///
/// Text, not [`Relations`]: printing parsed relations would also normalise
/// spacing and obsolete operators that dpkg accepts as they are.
pub fn retarget(
    field: &str,
    value: &str,
    new_version: &dyn Fn(&str, &str) -> Option<String>,
) -> (String, Vec<String>) {
    let mut out = String::with_capacity(value.len());
    let mut names = Vec::new();
    let mut rest = value;
    loop {
        let end = rest.find([',', '|']).unwrap_or(rest.len());
        let entry = &rest[..end];
        match retarget_entry(field, entry, new_version) {
            Some((text, name)) => {
                out.push_str(&text);
                names.push(name);
            }
            None => out.push_str(entry),
        }
        if end == rest.len() {
            break;
        }
        out.push_str(&rest[end..=end]);
        rest = &rest[end + 1..];
    }
    (out, names)
}

/// One entry of [`retarget`]: the rewritten text and the package's name, if
/// its constraint is one to move.
fn retarget_entry(
    field: &str,
    entry: &str,
    new_version: &dyn Fn(&str, &str) -> Option<String>,
) -> Option<(String, String)> {
    let trimmed = entry.trim_start();
    let name_end = trimmed
        .find(|c: char| c.is_whitespace() || "([<:".contains(c))
        .unwrap_or(trimmed.len());
    let name = &trimmed[..name_end];
    let open = entry.find('(')?;
    let close = open + entry[open..].find(')')?;
    let (op, version) = split_operator(entry[open + 1..close].trim())?;
    if !names_exact_version(field, op) {
        return None;
    }
    let new = new_version(name, version.trim())?;
    Some((
        format!(
            "{}({} {new}){}",
            &entry[..open],
            op.as_str(),
            &entry[close + 1..]
        ),
        name.to_string(),
    ))
}

fn split_operator(s: &str) -> Option<(RelationOp, &str)> {
    // Longest operators first; bare `<`/`>` are the obsolete forms of `<=`/`>=`.
    for (text, op) in [
        ("<<", RelationOp::Earlier),
        ("<=", RelationOp::EarlierOrEqual),
        (">=", RelationOp::LaterOrEqual),
        (">>", RelationOp::Later),
        ("=", RelationOp::Exactly),
        ("<", RelationOp::EarlierOrEqual),
        (">", RelationOp::LaterOrEqual),
    ] {
        if let Some(rest) = s.strip_prefix(text) {
            return Some((op, rest));
        }
    }
    None
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(q) = &self.arch_qualifier {
            write!(f, ":{q}")?;
        }
        if let Some((op, v)) = &self.constraint {
            write!(f, " ({} {v})", op.as_str())?;
        }
        if !self.architectures.is_empty() {
            let list: Vec<_> = self
                .architectures
                .iter()
                .map(|(neg, a)| format!("{}{a}", if *neg { "!" } else { "" }))
                .collect();
            write!(f, " [{}]", list.join(" "))?;
        }
        for group in &self.profiles {
            let list: Vec<_> = group
                .iter()
                .map(|(neg, p)| format!("{}{p}", if *neg { "!" } else { "" }))
                .collect();
            write!(f, " <{}>", list.join(" "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Alternatives {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Relations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_policy_forms() {
        let text = "a (>= 1) | b [amd64], c:any,\n d (<<2:1.0~rc1) [!i386 amd64] <!nocheck> <stage1 cross>";
        let r = Relations::parse(text).unwrap();
        assert_eq!(r.0.len(), 3);
        assert_eq!(
            r.0[0].0[1].architectures,
            vec![(false, "amd64".to_string())]
        );
        assert_eq!(r.0[1].0[0].arch_qualifier.as_deref(), Some("any"));
        assert_eq!(
            r.to_string(),
            "a (>= 1) | b [amd64], c:any, d (<< 2:1.0~rc1) [!i386 amd64] <!nocheck> <stage1 cross>"
        );
        assert_eq!(Relations::parse(&r.to_string()).unwrap(), r);
    }

    /// The names read without parsing are the names the parse finds, in
    /// its order, whatever follows each.
    #[test]
    fn names_are_the_names_a_parse_finds() {
        for text in [
            "a (>= 1) | b [amd64], c:any, d (<< 2:1.0~rc1) [!i386 amd64] <!nocheck> <stage1 cross>",
            " libc6 (>= 2.27) ",
            "x|z(=1),w<stage1>",
            "",
        ] {
            let parsed: Vec<String> = Relations::parse(text)
                .unwrap()
                .0
                .iter()
                .flat_map(|g| g.0.iter().map(|r| r.name.clone()))
                .collect();
            let read: Vec<&str> = Relations::names(text).filter(|n| !n.is_empty()).collect();
            assert_eq!(read, parsed, "{text:?}");
        }
    }

    #[test]
    fn exact_pins_are_checked() {
        let r = Relations::parse("libcudnn7 (= 7.5.0.56-1+cuda10.1), libc-ares-dev").unwrap();
        let good = Version::parse("7.5.0.56-1+cuda10.1").unwrap();
        let newer = Version::parse("7.6.5.32-1+cuda10.1").unwrap();
        let ares = Version::parse("1.14.0-1").unwrap();
        assert!(r.satisfied_by([("libcudnn7", &good), ("libc-ares-dev", &ares)]));
        assert!(!r.satisfied_by([("libcudnn7", &newer), ("libc-ares-dev", &ares)]));
        assert!(!r.satisfied_by([("libcudnn7", &good)]));
    }

    #[test]
    fn retarget_moves_only_exact_constraints_on_the_named_versions() {
        let new = |name: &str, v: &str| {
            (name == "libcudnn7" && v == "7.5.0.56-1+cuda10.1")
                .then(|| "7.5.0.56-1+cuda10.1+debforge1".to_string())
        };
        let (text, names) = retarget(
            "Depends",
            "libc6 (>= 2.3.4),  libcudnn7 (=7.5.0.56-1+cuda10.1) | libcudnn7:amd64 (>= 7.5.0.56-1+cuda10.1),\n libcudnn7 (<< 7.5.0.56-1+cuda10.1)",
            &new,
        );
        assert_eq!(
            text,
            "libc6 (>= 2.3.4),  libcudnn7 (= 7.5.0.56-1+cuda10.1+debforge1) | libcudnn7:amd64 (>= 7.5.0.56-1+cuda10.1),\n libcudnn7 (<< 7.5.0.56-1+cuda10.1)"
        );
        assert_eq!(names, ["libcudnn7"]);
        let (text, _) = retarget("Breaks", "libcudnn7 (<< 7.5.0.56-1+cuda10.1)", &new);
        assert_eq!(text, "libcudnn7 (<< 7.5.0.56-1+cuda10.1+debforge1)");
        let (text, names) = retarget("Provides", "libcudnn7 (= 7.5.0.56-1+cuda10.1)", &new);
        assert_eq!(
            (text.as_str(), names.len()),
            ("libcudnn7 (= 7.5.0.56-1+cuda10.1)", 0)
        );
        let (text, names) = retarget(
            "Depends",
            "libcudnn7 (= 7.6.5.32-1+cuda10.1), other (= 7.5.0.56-1+cuda10.1)",
            &new,
        );
        assert_eq!(
            text,
            "libcudnn7 (= 7.6.5.32-1+cuda10.1), other (= 7.5.0.56-1+cuda10.1)"
        );
        assert!(names.is_empty());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "a (1.0)",
            "a (>= 1.0",
            "a [amd64",
            "a, , b",
            "A_b",
            "a (>= )",
            "a foo",
        ] {
            assert!(Relations::parse(bad).is_err(), "{bad}");
        }
    }
}
