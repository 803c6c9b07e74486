//! Small inputs that expand to something huge (made at test time by
//! tests/fixtures/make-bombs.py): each is refused with an error naming the
//! limit, in bounded memory (peak RSS measured with GNU time), and never
//! with a panic or an abort.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{debforge, fixture, ok};
use crate::standin::{Lab, TestKey};

/// The peak RSS, in KB, a refused bomb may take (the goal: under 64 MB).
const MAX_RSS_KB: u64 = 64 * 1024;

fn bombs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bombs");
    ok(Command::new("python3")
        .arg(fixture("make-bombs.py"))
        .arg(&out));
    (dir, out)
}

/// Runs `cmd` under GNU time: (exit code, stderr without time's line, peak RSS in KB).
fn measured(cmd: &mut Command, work: &Path) -> (i32, String, u64) {
    let report = work.join("time");
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    let rss = fs::read_to_string(&report)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rss,
    )
}

#[test]
fn packages_that_expand_to_gigabytes_are_refused_in_little_memory() {
    let (dir, bombs) = bombs();
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "control-bomb.deb",
            &["deb", "info"],
            "entry \"./md5sums\" is larger than 32 MiB, the limit for the control member",
        ),
        (
            "control-many.deb",
            &["deb", "info"],
            "the control member expands to more than 33554432 bytes, the limit for it",
        ),
        (
            "control-longname.deb",
            &["deb", "info"],
            "a GNU long name entry claims 2500000000 bytes, over the limit of 1048576",
        ),
        (
            "data-longname.deb",
            &["deb", "contents"],
            "a GNU long name entry claims 2500000000 bytes, over the limit of 1048576",
        ),
        (
            "data-longname.deb",
            &["deb", "contents", "--json"],
            "a GNU long name entry claims 2500000000 bytes",
        ),
        // The tar end marker comes before the damage: only reading the
        // member to its end (as dpkg-deb does) finds it.
        (
            "data-corrupt-tail.deb",
            &["deb", "contents"],
            "data member is not a readable tar archive: lzma data error",
        ),
    ];
    for (file, args, needle) in cases {
        let deb = bombs.join(file);
        let (code, err, rss) = measured(debforge().args(*args).arg(&deb), dir.path());
        assert_eq!(code, 2, "{file} {args:?}: {err}");
        assert!(
            err.contains(needle),
            "{file} {args:?}: missing {needle:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(rss < MAX_RSS_KB, "{file} {args:?}: {rss} KB");
        eprintln!("{file} {args:?}: refused, peak RSS {rss} KB");
    }
    // dpkg-deb refuses the damaged tail too.
    let status = Command::new("dpkg-deb")
        .arg("-c")
        .arg(bombs.join("data-corrupt-tail.deb"))
        .output()
        .unwrap()
        .status;
    assert!(!status.success());
    // Indexing a pool of bombs: refused, no panic.
    let pool = dir.path().join("pool");
    fs::create_dir_all(&pool).unwrap();
    fs::copy(
        bombs.join("control-longname.deb"),
        pool.join("x_1.0_all.deb"),
    )
    .unwrap();
    let (code, err, rss) = measured(
        debforge().args(["index", "--no-cache"]).arg(&pool),
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("GNU long name"), "{err}");
    assert!(rss < MAX_RSS_KB, "index: {rss} KB");
}

/// A signed index of a few hundred KB that is almost all blank lines (or one
/// endless line): `lock` keeps memory flat and names the limit.
#[test]
fn a_signed_index_of_blank_lines_or_one_endless_line_stays_small() {
    for (what, tail, needle) in [
        ("blank lines", "\n".repeat(200 << 20), None),
        (
            "an endless line",
            "X".repeat(8 << 20),
            Some("is longer than 1048576 bytes"),
        ),
    ] {
        let tail = tail.clone();
        let lab = Lab::with(move |www, _| {
            let repo = www.join("nvidia");
            let mut text = fs::read(repo.join("Packages")).unwrap();
            text.extend_from_slice(tail.as_bytes());
            let mut xz = Command::new("xz")
                .args(["-T1", "-c"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = xz.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                std::io::Write::write_all(&mut stdin, &text).unwrap();
            });
            let out = xz.wait_with_output().unwrap();
            writer.join().unwrap();
            fs::write(repo.join("Packages.xz"), out.stdout).unwrap();
            for f in ["Packages", "Packages.gz"] {
                fs::remove_file(repo.join(f)).unwrap();
            }
            let release = crate::standin::write_release(&repo, &[("Origin", "NVIDIA")]);
            TestKey::shared().sign_detached(&release);
        });
        let (code, err, rss) = measured(&mut lab.cmd("lock"), lab.dir.path());
        match needle {
            None => assert_eq!(code, 0, "{what}: {err}"),
            Some(n) => {
                assert_eq!(code, 2, "{what}: {err}");
                assert!(err.contains(n), "{what}: missing {n:?} in {err}");
            }
        }
        assert!(rss < MAX_RSS_KB, "{what}: {rss} KB");
        eprintln!("index with {what}: exit {code}, peak RSS {rss} KB");
    }
}
