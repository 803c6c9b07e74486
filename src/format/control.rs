//! The control paragraph of a binary package (`DEBIAN/control`).
//!
//! Spec: Debian Policy §5.3 and §5.6
//! (<https://www.debian.org/doc/debian-policy/ch-controlfields.html#binary-package-control-files-debian-control>).

use super::deb822::{ControlParagraph, ParseError};
use super::relation::Relations;
use super::version::Version;

/// Fields every binary package must have (Policy §5.3).
pub const REQUIRED_FIELDS: [&str; 5] = [
    "Package",
    "Version",
    "Architecture",
    "Maintainer",
    "Description",
];

/// Fields whose values are relationship lists (Policy §7).
pub const RELATION_FIELDS: [&str; 9] = [
    "Pre-Depends",
    "Depends",
    "Recommends",
    "Suggests",
    "Enhances",
    "Breaks",
    "Conflicts",
    "Provides",
    "Replaces",
];

/// Policy §5.6.1: at least two characters, lower-case letters, digits, `+`,
/// `-` and `.`, starting with a letter or digit.
pub fn check_package_name(name: &str) -> Result<(), String> {
    if name.len() < 2 {
        return Err(format!(
            "package name {name:?} is shorter than two characters"
        ));
    }
    let first = name.as_bytes()[0];
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Err(format!(
            "package name {name:?} must start with a lower-case letter or digit"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c)))
    {
        return Err(format!(
            "package name {name:?} contains {bad:?}; allowed are a-z, 0-9, '+', '-' and '.'"
        ));
    }
    Ok(())
}

/// A binary package's `Source`: a source package name, optionally followed
/// by its version in parentheses (Policy §5.6.1).
fn check_source(value: &str) -> Result<(), String> {
    let mut parts = value.splitn(2, ' ');
    let name = parts.next().unwrap_or_default();
    check_package_name(name)?;
    if let Some(rest) = parts.next() {
        let version = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| {
                format!("expected \"name\" or \"name (version)\", found {rest:?} after the name")
            })?;
        Version::parse(version.trim()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A problem with a control paragraph, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    Syntax(#[from] ParseError),
    #[error("missing required field '{0}'")]
    MissingField(&'static str),
    #[error("field '{field}' is empty")]
    EmptyField { field: String },
    #[error("field 'Package': {0}")]
    BadPackage(String),
    #[error("field 'Version' value {value:?}: {reason}")]
    BadVersion { value: String, reason: String },
    #[error(
        "field 'Architecture' value {0:?}: expected one architecture name such as amd64 or all"
    )]
    BadArchitecture(String),
    #[error("field '{field}': {reason}")]
    BadRelation { field: String, reason: String },
    #[error("field 'Source' value {value:?}: {reason}")]
    BadSource { value: String, reason: String },
    #[error("field 'Installed-Size' value {0:?} is not a whole number of KiB")]
    BadInstalledSize(String),
}

/// Checks what dpkg and apt rely on in a binary package's control paragraph.
pub fn check_binary_control(p: &ControlParagraph) -> Result<(), ControlError> {
    for name in REQUIRED_FIELDS {
        match p.get(name) {
            None => return Err(ControlError::MissingField(name)),
            Some("") => {
                return Err(ControlError::EmptyField {
                    field: name.to_string(),
                });
            }
            Some(_) => {}
        }
    }
    check_package_name(p.get("Package").unwrap_or_default()).map_err(ControlError::BadPackage)?;
    let version = p.get("Version").unwrap_or_default();
    Version::parse(version).map_err(|e| ControlError::BadVersion {
        value: version.to_string(),
        reason: e.to_string(),
    })?;
    if let Some(source) = p.get("Source") {
        check_source(source).map_err(|reason| ControlError::BadSource {
            value: source.to_string(),
            reason,
        })?;
    }
    let arch = p.get("Architecture").unwrap_or_default();
    if !arch
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ControlError::BadArchitecture(arch.to_string()));
    }
    for field in RELATION_FIELDS {
        if let Some(f) = p.field(field) {
            Relations::parse(&f.folded()).map_err(|e| ControlError::BadRelation {
                field: f.name().to_string(),
                reason: e.to_string(),
            })?;
        }
    }
    if let Some(size) = p.get("Installed-Size")
        && size.parse::<u64>().is_err()
    {
        return Err(ControlError::BadInstalledSize(size.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(text: &str) -> Result<(), ControlError> {
        check_binary_control(&ControlParagraph::parse_single(text)?)
    }

    const GOOD: &str = "Package: libnccl2\nVersion: 2.4.2-1+cuda10.1\nArchitecture: amd64\nMaintainer: cudatools <cudatools@nvidia.com>\nDepends: libc6 (>= 2.3.4)\nDescription: NVIDIA Collectives Communication Library (NCCL) Runtime\n";

    #[test]
    fn accepts_a_real_control() {
        control(GOOD).unwrap();
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(
            control(&GOOD.replace("Package: libnccl2", "Package:")),
            Err(ControlError::EmptyField {
                field: "Package".into()
            })
        );
        assert_eq!(
            control(&GOOD.replace("Maintainer", "X-Maintainer")),
            Err(ControlError::MissingField("Maintainer"))
        );
        assert!(matches!(
            control(&GOOD.replace("libnccl2", "LibNCCL")),
            Err(ControlError::BadPackage(_))
        ));
        assert!(matches!(
            control(&GOOD.replace("2.4.2-1", "x2.4")),
            Err(ControlError::BadVersion { .. })
        ));
        assert!(matches!(
            control(&GOOD.replace("(>= 2.3.4)", "(>= )")),
            Err(ControlError::BadRelation { .. })
        ));
        assert!(matches!(
            control(&GOOD.replace("amd64", "amd 64")),
            Err(ControlError::BadArchitecture(_))
        ));
    }
}
