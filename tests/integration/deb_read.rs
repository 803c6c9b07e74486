//! `debforge deb info` and `deb contents` on real packages and on packages
//! the real dpkg-deb wrote.

use std::fs;
use std::process::Command;

use crate::support::common::{EPOCH, debforge, dpkg_contents, fixture, ok, run, sample_tree};

#[test]
fn a_real_debian_package_matches_its_golden_files() {
    let deb = fixture("real/hello_2.10-3_amd64.deb");
    let golden = fs::read_to_string(fixture("real/hello_2.10-3_amd64.contents")).unwrap();
    assert_eq!(ok(debforge().args(["deb", "contents"]).arg(&deb)), golden);
    assert_eq!(
        dpkg_contents(&deb),
        golden,
        "golden file matches this machine's dpkg-deb"
    );

    let info: serde_json::Value =
        serde_json::from_str(&ok(debforge().args(["deb", "info", "--json"]).arg(&deb))).unwrap();
    let golden = fs::read_to_string(fixture("real/hello_2.10-3_amd64.control")).unwrap();
    let mut from_json = String::new();
    for (k, v) in info["control"].as_object().unwrap() {
        from_json.push_str(&format!("{k}: {}\n", v.as_str().unwrap()));
    }
    assert_eq!(from_json, golden);
    let members: Vec<_> = info["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(members, ["debian-binary", "control.tar.xz", "data.tar.xz"]);
    assert_eq!(info["members"][2]["compression"], "xz");
    assert_eq!(info["size"], fs::metadata(&deb).unwrap().len());

    let text = ok(debforge().args(["deb", "info"]).arg(&deb));
    assert!(text.contains(" Package: hello\n"), "{text}");
    assert!(text.contains("data.tar.xz"), "{text}");
}

#[test]
fn packages_written_by_dpkg_deb_in_every_compression() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    for (flag, name) in [
        ("xz", "xz"),
        ("gzip", "gzip"),
        ("zstd", "zstd"),
        ("none", "none"),
    ] {
        let deb = tmp.path().join(format!("{flag}.deb"));
        ok(Command::new("dpkg-deb")
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .arg(format!("-Z{flag}"))
            .args(["--root-owner-group", "-b"])
            .arg(&tree)
            .arg(&deb));
        assert_eq!(
            ok(debforge().args(["deb", "contents"]).arg(&deb)),
            dpkg_contents(&deb)
        );
        let info: serde_json::Value =
            serde_json::from_str(&ok(debforge().args(["deb", "info", "--json"]).arg(&deb)))
                .unwrap();
        assert_eq!(info["members"][2]["compression"], name);
        assert_eq!(info["control"]["Version"], "2.4.2-1+cuda10.1");
        let contents: serde_json::Value = serde_json::from_str(&ok(debforge()
            .args(["deb", "contents", "--json"])
            .arg(&deb)))
        .unwrap();
        let link = contents
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "symlink")
            .unwrap();
        assert_eq!(link["link"], "libnccl.so.2.4.2");
    }
}

#[test]
fn reading_the_control_part_never_decompresses_the_data_part() {
    // A package whose data member is garbage: info still works (it never
    // reads the data), contents fails with a clear error.
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    let deb = tmp.path().join("p.deb");
    ok(debforge()
        .args(["deb", "build", "-Z", "xz"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    let mut bytes = fs::read(&deb).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&ok(debforge().args(["deb", "info", "--json"]).arg(&deb))).unwrap();
    let data = &json["members"][2];
    let (off, size) = (
        data["offset"].as_u64().unwrap() as usize,
        data["size"].as_u64().unwrap() as usize,
    );
    for b in &mut bytes[off..off + size] {
        *b = 0x5a;
    }
    fs::write(&deb, &bytes).unwrap();
    ok(debforge().args(["deb", "info"]).arg(&deb));
    let (code, _, err) = run(debforge().args(["deb", "contents"]).arg(&deb));
    assert_eq!(code, 2);
    assert!(
        err.contains("data member is not a readable tar archive"),
        "{err}"
    );
}
