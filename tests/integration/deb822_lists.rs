//! Every Packages and Release file apt has downloaded on this machine
//! round-trips through the deb822 parser byte for byte.

use std::fs;
use std::io::{BufReader, Read};
use std::path::Path;

use debforge::deb::Compression;
use debforge::format::clearsign;
use debforge::format::deb822::{Document, ParagraphReader};

const LISTS: &str = "/var/lib/apt/lists";

fn decompressed(path: &Path) -> Option<Vec<u8>> {
    let name = path.file_name()?.to_str()?;
    let raw = fs::read(path).ok()?;
    let mut out = Vec::new();
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "lz4" => {
            lz4_flex::frame::FrameDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .ok()?;
        }
        "gz" | "xz" | "zst" => {
            let c = Compression::from_extension(&format!(".{ext}"))?;
            c.decoder(&raw[..]).ok()?.read_to_end(&mut out).ok()?;
        }
        _ => out = raw,
    }
    Some(out)
}

fn kind(name: &str) -> Option<&'static str> {
    let base = name
        .trim_end_matches(".lz4")
        .trim_end_matches(".gz")
        .trim_end_matches(".xz")
        .trim_end_matches(".zst");
    if base.ends_with("_Packages") {
        Some("Packages")
    } else if base.ends_with("_InRelease") {
        Some("InRelease")
    } else if base.ends_with("_Release") {
        Some("Release")
    } else {
        None
    }
}

#[test]
fn apt_lists_round_trip_byte_for_byte() {
    let mut checked = std::collections::BTreeMap::<&str, usize>::new();
    let mut stanzas = 0usize;
    for entry in fs::read_dir(LISTS).expect("apt lists exist (run apt-get update)") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(kind) = kind(&name) else { continue };
        let bytes =
            decompressed(&path).unwrap_or_else(|| panic!("cannot decompress {}", path.display()));
        let text =
            String::from_utf8(bytes).unwrap_or_else(|_| panic!("{} is not UTF-8", path.display()));
        let body = if kind == "InRelease" {
            clearsign::split(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .body
        } else {
            text
        };
        let doc = Document::parse(&body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            doc.to_string() == body,
            "{} does not round-trip",
            path.display()
        );
        let count = doc.paragraphs().count();
        assert!(count > 0, "{}: no paragraphs", path.display());
        if kind == "Packages" {
            for p in doc.paragraphs() {
                assert!(
                    p.get("Package").is_some_and(|n| !n.is_empty()),
                    "{}: line {}",
                    path.display(),
                    p.line()
                );
            }
            // The streaming reader sees the same paragraphs.
            let streamed: Vec<_> = ParagraphReader::new(BufReader::new(body.as_bytes()))
                .map(|p| p.unwrap())
                .collect();
            assert_eq!(streamed.len(), count);
            assert!(streamed.iter().zip(doc.paragraphs()).all(|(a, b)| a == b));
            stanzas += count;
        } else {
            assert!(
                doc.paragraphs().next().unwrap().field("SHA256").is_some(),
                "{}",
                path.display()
            );
        }
        *checked.entry(kind).or_default() += 1;
    }
    assert!(
        checked.get("Packages").copied().unwrap_or(0) > 0,
        "no Packages file in {LISTS}: run apt-get update"
    );
    assert!(
        checked
            .get("InRelease")
            .or(checked.get("Release"))
            .copied()
            .unwrap_or(0)
            > 0,
        "no Release file in {LISTS}"
    );
    eprintln!("round-tripped {checked:?}, {stanzas} Packages stanzas");
}
