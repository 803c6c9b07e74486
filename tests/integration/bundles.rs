//! Hostile bundles: `bundle verify` and `install.sh` (in the Ubuntu 18.04
//! root) accept only regular files and directories under debforge-bundle/,
//! exactly the set SHA256SUMS lists once.

use std::fs;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::support::chroot::Chroot;
use crate::support::common::{ok, run};
use crate::support::standin::Lab;

/// The entries of a bundle: (path, type, link target, data).
type Entries = Vec<(String, tar::EntryType, Option<String>, Vec<u8>)>;

fn entries(bundle: &Path) -> Entries {
    let mut a = tar::Archive::new(fs::File::open(bundle).unwrap());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let path = String::from_utf8_lossy(&e.path_bytes()).into_owned();
            let kind = e.header().entry_type();
            let link = e
                .link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned());
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (path, kind, link, data)
        })
        .collect()
}

fn write(entries: &Entries, to: &Path) {
    let mut b = tar::Builder::new(fs::File::create(to).unwrap());
    for (path, kind, link, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(if kind.is_dir() { 0o755 } else { 0o644 });
        h.set_mtime(1556000000);
        h.set_size(data.len() as u64);
        match link {
            Some(l) => {
                h.set_size(0);
                b.append_link(&mut h, path, l).unwrap();
            }
            // The tar crate refuses to write `..`: a hostile name is put in
            // the header by hand.
            None if path.contains("..") => {
                let name = &mut h.as_gnu_mut().unwrap().name;
                name[..path.len()].copy_from_slice(path.as_bytes());
                h.set_cksum();
                b.append(&h, &data[..]).unwrap();
            }
            None => b.append_data(&mut h, path, &data[..]).unwrap(),
        }
    }
    b.finish().unwrap();
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Adds `line` to SHA256SUMS (the first entry).
fn listing(e: &mut Entries, line: &str) {
    e[0].3.extend_from_slice(format!("{line}\n").as_bytes());
}

#[test]
fn hostile_bundles_are_refused_by_verify_and_by_install_sh() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let good = lab.dir.path().join("good.tar");
    ok(crate::support::common::debforge()
        .args(["bundle", "-o"])
        .arg(&good)
        .arg("--out")
        .arg(&out));
    let base = entries(&good);
    assert_eq!(base[0].0, "debforge-bundle/SHA256SUMS");
    let shadow = fs::read("/etc/shadow").unwrap_or_default();
    let regular = tar::EntryType::Regular;
    type Make = Box<dyn Fn(&mut Entries)>;
    let cases: Vec<(&str, Make, &str)> = vec![
        (
            "a ../ entry listed in SHA256SUMS",
            Box::new(move |e: &mut Entries| {
                listing(e, &format!("{}  ../evil", sha(b"x")));
                e.push((
                    "debforge-bundle/../evil".into(),
                    regular,
                    None,
                    b"x".to_vec(),
                ));
            }),
            "has a `.`, `..` or empty component",
        ),
        (
            "a symlink to /etc/shadow",
            Box::new(move |e: &mut Entries| {
                listing(e, &format!("{}  repo/shadow", sha(&shadow)));
                e.push((
                    "debforge-bundle/repo/shadow".into(),
                    tar::EntryType::Symlink,
                    Some("/etc/shadow".into()),
                    Vec::new(),
                ));
            }),
            "repo/shadow: is a symlink",
        ),
        (
            "a hard link",
            Box::new(|e: &mut Entries| {
                let (p, _, _, d) = e
                    .iter()
                    .find(|x| x.0.ends_with("debforge.pref"))
                    .unwrap()
                    .clone();
                listing(e, &format!("{}  repo/again.pref", sha(&d)));
                e.push((
                    "debforge-bundle/repo/again.pref".into(),
                    tar::EntryType::Link,
                    Some(p),
                    Vec::new(),
                ));
            }),
            "repo/again.pref: is a hard link",
        ),
        (
            "a FIFO",
            Box::new(|e: &mut Entries| {
                listing(e, &format!("{}  repo/fifo", sha(b"")));
                e.push((
                    "debforge-bundle/repo/fifo".into(),
                    tar::EntryType::Fifo,
                    None,
                    Vec::new(),
                ));
            }),
            "repo/fifo: is a FIFO",
        ),
        (
            "debforge.pref as a symlink to /dev/null",
            Box::new(|e: &mut Entries| {
                let i = e
                    .iter()
                    .position(|x| x.0.ends_with("repo/debforge.pref"))
                    .unwrap();
                let name = e[i].0.clone();
                e[i] = (
                    name,
                    tar::EntryType::Symlink,
                    Some("/dev/null".into()),
                    Vec::new(),
                );
            }),
            "repo/debforge.pref: is a symlink",
        ),
        (
            "a second SHA256SUMS",
            Box::new(|e: &mut Entries| {
                // Extracted, the second one wins: it lists one file more.
                let mut second = e[0].clone();
                second
                    .3
                    .extend_from_slice(format!("{}  repo/extra\n", sha(b"x")).as_bytes());
                e.push(second);
            }),
            "SHA256SUMS: appears twice in the archive",
        ),
        (
            "a file listed twice",
            Box::new(|e: &mut Entries| {
                let line = String::from_utf8_lossy(&e[0].3)
                    .lines()
                    .nth(1)
                    .unwrap()
                    .to_string();
                listing(e, &line);
            }),
            "lists",
        ),
        (
            "a top-level file named -rf",
            Box::new(move |e: &mut Entries| {
                listing(e, &format!("{}  -rf", sha(b"x")));
                e.push(("debforge-bundle/-rf".into(), regular, None, b"x".to_vec()));
            }),
            "  -rf\" is not '<sha256>  <path>'",
        ),
        (
            "SHA256SUMS with CRLF line ends",
            Box::new(|e: &mut Entries| {
                let text = String::from_utf8(e[0].3.clone()).unwrap();
                e[0].3 = text.replace('\n', "\r\n").into_bytes();
            }),
            "\\r\" is not '<sha256>  <path>'",
        ),
    ];
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list.d/*");
    for (i, (what, make, needle)) in cases.iter().enumerate() {
        let mut e = base.clone();
        make(&mut e);
        let bad = lab.dir.path().join(format!("bad-{i}.tar"));
        write(&e, &bad);
        let (code, stdout, err) = run(crate::support::common::debforge()
            .args(["bundle", "verify"])
            .arg(&bad));
        assert_eq!(code, 1, "{what}: {stdout}{err}");
        assert!(
            stdout.contains(needle),
            "{what}: missing {needle:?} in {stdout}"
        );
        assert!(stdout.contains("do not install it"), "{what}: {stdout}");

        // install.sh refuses it too, changes nothing, and does not hang.
        let b = c.put(&bad);
        let (code, msg) = c.run(&format!(
            "cd /tmp && rm -rf x{i} && mkdir x{i} && tar -xf {b} -C x{i} 2>&1; timeout 30 sh x{i}/debforge-bundle/install.sh 2>&1"
        ));
        assert_eq!(code, 1, "{what}: {msg}");
        assert!(msg.contains("nothing was changed"), "{what}: {msg}");
        assert!(
            !c.path("/etc/apt/sources.list.d/debforge-bundle.sources")
                .exists(),
            "{what}: installed anyway"
        );
    }

    // A destination with a space: refused with a clear message; the good
    // bundle installs.
    let g = c.put(&good);
    let (code, msg) = c.run(&format!(
        "cd /tmp && tar -xf {g} && DEBFORGE_BUNDLE_DIR='/srv/lab repo' sh debforge-bundle/install.sh 2>&1"
    ));
    assert_eq!(code, 1, "{msg}");
    assert!(msg.contains("apt's file: URIs take no spaces"), "{msg}");
    c.ok("cd /tmp && sh debforge-bundle/install.sh 2>&1");
    assert!(
        c.path("/etc/apt/sources.list.d/debforge-bundle.sources")
            .exists()
    );
}
