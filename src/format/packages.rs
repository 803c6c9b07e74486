//! `Packages` index stanzas.
//!
//! Spec: <https://wiki.debian.org/DebianRepository/Format#A.22Packages.22_Indices>.
//! A stanza is the package's control paragraph plus where the file is and its
//! digests, with fields in the order dpkg-scanpackages writes them
//! (Dpkg::Control::FieldsCore, CTRL_INDEX_PKG), SHA512 after SHA256, and
//! fields dpkg does not know after them sorted by name (Dpkg::Control::HashCore
//! sorts what is not in its output order). Values are copied byte for byte,
//! as apt-ftparchive copies them.

use super::control::{ControlError, check_binary_control};
use super::deb822::ControlParagraph;
use crate::digest::Digests;

/// dpkg-scanpackages' field order; fields not listed follow, sorted by name.
pub const FIELD_ORDER: [&str; 41] = [
    "Package",
    "Package-Type",
    "Source",
    "Version",
    "Kernel-Version",
    "Built-For-Profiles",
    "Auto-Built-Package",
    "Architecture",
    "Subarchitecture",
    "Installer-Menu-Item",
    "Build-Essential",
    "Essential",
    "Protected",
    "Origin",
    "Bugs",
    "Maintainer",
    "Installed-Size",
    "Pre-Depends",
    "Depends",
    "Recommends",
    "Suggests",
    "Enhances",
    "Conflicts",
    "Breaks",
    "Replaces",
    "Provides",
    "Built-Using",
    "Static-Built-Using",
    "Filename",
    "Size",
    "MD5sum",
    "SHA1",
    "SHA256",
    "SHA512",
    "Section",
    "Priority",
    "Multi-Arch",
    "Homepage",
    "Description",
    "Tag",
    "Task",
];

/// Where a package goes in the pool, named from its own control paragraph as
/// Debian's archives lay it out:
/// `pool/<component>/<prefix>/<source>/<Package>_<Version without epoch>_<Architecture>.deb`,
/// the prefix being `lib` and one more character for `lib*` sources, else
/// the first character. The paragraph is checked first (names, version,
/// `Source`), so nothing taken from a package can leave the pool directory.
pub fn pool_path(component: &str, control: &ControlParagraph) -> Result<String, ControlError> {
    check_binary_control(control)?;
    Ok(format!(
        "pool/{component}/{}",
        pool_path_in_component(control)
    ))
}

/// [`pool_path`] under `pool/<component>/`, without the paragraph's check
/// (its relations parsed: most of the cost): what a package names of its
/// pool path before the repository's component is known. Unchecked, it
/// may name anything: only for a paragraph checked apart.
pub fn pool_path_in_component(control: &ControlParagraph) -> String {
    let package = control.get("Package").unwrap_or_default();
    let source = control
        .get("Source")
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or(package);
    let version = control.get("Version").unwrap_or_default();
    let version = version.split_once(':').map_or(version, |(_, v)| v);
    let arch = control.get("Architecture").unwrap_or_default();
    // Checked names are ASCII: slicing by bytes is slicing by characters.
    // Unchecked, a name may be empty or not ASCII: sliced where it may be.
    let prefix = if source.starts_with("lib") && source.len() > 3 {
        source.get(..4)
    } else {
        source.get(..1)
    };
    let prefix = prefix.unwrap_or(source);
    format!("{prefix}/{source}/{package}_{version}_{arch}.deb")
}

/// The fields that say where the file is and what it is: never taken from
/// the control paragraph (a package cannot name its own digests).
const FILE_FIELDS: [&str; 6] = ["Filename", "Size", "MD5sum", "SHA1", "SHA256", "SHA512"];

/// The index stanza for a package whose control paragraph is `control`,
/// stored at `filename` (relative to the repository root) with `digests`:
/// Size, SHA256, and whichever of MD5sum, SHA1 and SHA512 were computed.
pub fn stanza(control: &ControlParagraph, filename: &str, digests: &Digests) -> ControlParagraph {
    let mut out = ControlParagraph::new();
    for name in FIELD_ORDER {
        if FILE_FIELDS.contains(&name) {
            let value = match name {
                "Filename" => Some(filename.to_string()),
                "Size" => Some(digests.size.to_string()),
                _ => digests.by_field(name).map(str::to_string),
            };
            if let Some(v) = value {
                out.set(name, &v);
            }
        } else if let Some(f) = control.field(name) {
            out.set_verbatim(name, f.verbatim());
        }
    }
    let mut others: Vec<_> = control
        .fields()
        .filter(|f| !FIELD_ORDER.iter().any(|n| n.eq_ignore_ascii_case(f.name())))
        .collect();
    others.sort_by(|a, b| a.name().cmp(b.name()));
    for f in others {
        out.set_verbatim(f.name(), f.verbatim());
    }
    out
}

/// [`stanza`]'s text, appended to `out`: the same bytes, written as they
/// go. A build renders a stanza for each of thousands of packages, and the
/// paragraph built field by field looked each field up again by name.
pub fn write_stanza(
    control: &ControlParagraph,
    filename: &str,
    digests: &Digests,
    out: &mut String,
) {
    render(control, out, |out| {
        write_file_fields(filename, digests, out)
    });
}

/// [`write_stanza`]'s text without the file fields, appended to `out`,
/// and where in what it appended they go: what a build renders of each
/// package where its control is read, before the package has a pool file
/// (the fields dpkg-scanpackages writes are one run in its order).
pub fn write_stanza_without_files(control: &ControlParagraph, out: &mut String) -> usize {
    let start = out.len();
    let mut split = 0;
    render(control, out, |out| split = out.len() - start);
    split
}

/// The file fields of [`write_stanza`], appended to `out`: where the
/// package is and its digests.
pub fn write_file_fields(filename: &str, digests: &Digests, out: &mut String) {
    let size = digests.size.to_string();
    for name in FILE_FIELDS {
        let value = match name {
            "Filename" => Some(filename),
            "Size" => Some(size.as_str()),
            _ => digests.by_field(name),
        };
        if let Some(v) = value {
            out.push_str(name);
            out.push(':');
            out.push_str(&super::deb822::canonical_raw(v));
            out.push('\n');
        }
    }
}

/// A stanza's fields but the file fields, with `file_fields` called where
/// those go.
fn render(control: &ControlParagraph, out: &mut String, file_fields: impl FnOnce(&mut String)) {
    // As `ControlParagraph::set_verbatim` stores a value.
    let verbatim = |out: &mut String, name: &str, value: &str| {
        let space = if value.starts_with('\n') || value.is_empty() {
            ""
        } else {
            " "
        };
        out.push_str(name);
        out.push(':');
        out.push_str(space);
        out.push_str(value);
        out.push('\n');
    };
    // The first control field of each known name, by its place in the order.
    let mut known: [Option<&str>; FIELD_ORDER.len()] = [None; FIELD_ORDER.len()];
    let mut others = Vec::new();
    for f in control.fields() {
        match FIELD_ORDER
            .iter()
            .position(|n| n.eq_ignore_ascii_case(f.name()))
        {
            Some(i) => {
                known[i].get_or_insert(f.verbatim());
            }
            None => others.push(f),
        }
    }
    let mut file_fields = Some(file_fields);
    for (name, value) in FIELD_ORDER.iter().zip(known) {
        if FILE_FIELDS.contains(name) {
            if let Some(write) = file_fields.take() {
                write(out);
            }
        } else if let Some(v) = value {
            verbatim(out, name, v);
        }
    }
    // Sorted by name; a name given twice (in any case) once, where it
    // first sorts, with the last value (as `set_verbatim` replaces).
    others.sort_by(|a, b| a.name().cmp(b.name()));
    let mut unique: Vec<(&str, &str)> = Vec::with_capacity(others.len());
    for f in others {
        match unique
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(f.name()))
        {
            Some(seen) => seen.1 = f.verbatim(),
            None => unique.push((f.name(), f.verbatim())),
        }
    }
    for (name, value) in unique {
        verbatim(out, name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_paths_come_from_the_control_paragraph() {
        let c = |extra: &str| {
            ControlParagraph::parse_single(&format!(
                "Package: libnccl2\nVersion: 1:2.4.2-1+cuda10.1+lab1\nArchitecture: amd64\nMaintainer: m <m@example.org>\nDescription: d\n{extra}"
            ))
            .unwrap()
        };
        assert_eq!(
            pool_path("main", &c("")).unwrap(),
            "pool/main/libn/libnccl2/libnccl2_2.4.2-1+cuda10.1+lab1_amd64.deb"
        );
        assert_eq!(
            pool_path("main", &c("Source: nccl (2.4.2-1)\n")).unwrap(),
            "pool/main/n/nccl/libnccl2_2.4.2-1+cuda10.1+lab1_amd64.deb"
        );
        for bad in [
            "Source: ../../../../srv/x\n",
            "Source: éx\n",
            "Source: ok (not a version)\n",
        ] {
            let e = pool_path("main", &c(bad)).unwrap_err();
            assert!(matches!(e, ControlError::BadSource { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn orders_fields_like_dpkg_scanpackages() {
        let control = ControlParagraph::parse_single(
            "Package: libnccl2\nVersion: 2.4.2-1+cuda10.1\nArchitecture: amd64\nX-Custom: yes\nMaintainer: cudatools <cudatools@nvidia.com>\nOriginal-Maintainer: x <x@example.org>\nBuild-Ids: abc\nDescription: NCCL \n long text\n .\n more\nSection: libs\n",
        )
        .unwrap();
        let d = Digests {
            size: 10,
            md5: Some("m".into()),
            sha1: Some("s1".into()),
            sha256: "s256".into(),
            sha512: Some("s512".into()),
        };
        let s = stanza(
            &control,
            "pool/main/libn/libnccl2/libnccl2_2.4.2-1+cuda10.1_amd64.deb",
            &d,
        );
        let names: Vec<&str> = s.fields().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "Package",
                "Version",
                "Architecture",
                "Maintainer",
                "Filename",
                "Size",
                "MD5sum",
                "SHA1",
                "SHA256",
                "SHA512",
                "Section",
                "Description",
                "Build-Ids",
                "Original-Maintainer",
                "X-Custom"
            ]
        );
        // The trailing space of the first line stays, as apt-ftparchive keeps it.
        assert!(
            s.to_string()
                .contains("Description: NCCL \n long text\n .\n more\n")
        );
    }

    /// A build renders each stanza in two parts where the control is read
    /// and puts the file fields between them later: the same bytes as one
    /// rendering, for a paragraph with fields on both sides, a control's
    /// own file fields, and one with none after them.
    #[test]
    fn a_stanza_without_its_file_fields_is_the_stanza_around_them() {
        let run = FIELD_ORDER
            .iter()
            .position(|n| *n == FILE_FIELDS[0])
            .unwrap();
        assert_eq!(FIELD_ORDER[run..run + FILE_FIELDS.len()], FILE_FIELDS);
        let d = Digests {
            size: 10,
            sha256: "s256".into(),
            ..Digests::default()
        };
        for text in [
            "Package: a\nVersion: 1\nArchitecture: amd64\nX-B: 2\nDescription: d\n more\nSection: libs\n",
            "Package: evil\nVersion: 1\nArchitecture: amd64\nSHA512: 1111\nSize: 1\nFilename: /etc\n",
            "Package: a\nVersion: 1\nArchitecture: all\n",
        ] {
            let control = ControlParagraph::parse_single(text).unwrap();
            let mut whole = String::from("before\n");
            write_stanza(&control, "pool/main/a/a/a_1_all.deb", &d, &mut whole);
            let mut parts = String::from("before\n");
            let split = write_stanza_without_files(&control, &mut parts);
            let tail = parts.split_off("before\n".len() + split);
            write_file_fields("pool/main/a/a/a_1_all.deb", &d, &mut parts);
            parts.push_str(&tail);
            assert_eq!(parts, whole, "{text}");
        }
    }

    #[test]
    fn lists_only_computed_digests_and_never_the_controls_own() {
        let control = ControlParagraph::parse_single(
            "Package: evil\nVersion: 1\nArchitecture: amd64\nMD5sum: 0000\nSHA512: 1111\nSize: 1\nDescription: x\n",
        )
        .unwrap();
        let d = Digests {
            size: 10,
            sha256: "s256".into(),
            ..Digests::default()
        };
        let s = stanza(&control, "pool/main/e/evil/evil_1_amd64.deb", &d);
        let names: Vec<&str> = s.fields().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "Package",
                "Version",
                "Architecture",
                "Filename",
                "Size",
                "SHA256",
                "Description"
            ]
        );
        assert_eq!(s.get("Size"), Some("10"));
    }

    /// The text written as it goes is the paragraph's, byte for byte:
    /// known and unknown fields in any case and order, given twice,
    /// multi-line, empty, with trailing blanks, and digests or not.
    #[test]
    fn the_written_stanza_is_the_paragraphs_text() {
        use proptest::prelude::*;
        let names = prop::sample::select(vec![
            "Package",
            "package",
            "Version",
            "Architecture",
            "ARCHITECTURE",
            "Depends",
            "Description",
            "Filename",
            "Size",
            "MD5sum",
            "SHA256",
            "sha512",
            "Section",
            "Installed-Size",
            "X-Extra",
            "x-extra",
            "X-B",
            "Zeta",
            "Homepage",
            "Source",
        ]);
        let values = prop::sample::select(vec![
            "v",
            " spaced",
            "trail ",
            "",
            "\n line one\n .\n two",
            "first\n more",
            "a:b",
        ]);
        let digests = (any::<u64>(), any::<bool>()).prop_map(|(size, all)| Digests {
            size,
            sha256: "ab".repeat(32),
            md5: all.then(|| "cd".repeat(16)),
            sha1: all.then(|| "ef".repeat(20)),
            sha512: all.then(|| "01".repeat(64)),
        });
        let fields = prop::collection::vec((names, values), 1..12);
        proptest!(ProptestConfig::with_cases(2000), |(fields in fields, d in digests)| {
            let text: String = fields.iter().map(|(n, v)| format!("{n}: {v}\n")).collect();
            let Ok(control) = ControlParagraph::parse_single(&text) else {
                return Ok(());
            };
            let mut written = String::new();
            write_stanza(&control, "pool/main/p/p/p_1_amd64.deb", &d, &mut written);
            let expected = stanza(&control, "pool/main/p/p/p_1_amd64.deb", &d).to_string();
            prop_assert_eq!(written, expected);
        });
    }
}
