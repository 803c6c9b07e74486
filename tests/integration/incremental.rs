//! Builds after small changes, through the binary: the no-op `--locked`
//! build answered from stats (the build stamp), and every kind of change
//! that must build again.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::common::{EPOCH, debforge, first_sha256, ok, run};

const FROM_STATS: &str =
    "unchanged since the last build (no input or output file changed): nothing was read or written";
const UNCHANGED: &str = "unchanged since the last build: nothing was written";
const REDATED: &str =
    "unchanged since the last build but for the date: only the Release was dated and signed again";

/// A project of path recipes whose debs lie outside it.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(names: &[&str]) -> Project {
        Project::described(names, "first")
    }

    /// Packages whose Description is `description` (its synopsis, then
    /// its extended lines).
    fn described(names: &[&str], description: &str) -> Project {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(p.root().join("recipes/packages")).unwrap();
        for name in names {
            p.make_deb(name, description);
            fs::write(
                p.root().join(format!("recipes/packages/{name}.toml")),
                format!(
                    "name = \"{name}\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = {{ path = \"{}\" }}\n",
                    p.deb(name).display()
                ),
            )
            .unwrap();
        }
        p
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn deb(&self, name: &str) -> PathBuf {
        self.root().join(format!("debs/{name}_1.0_all.deb"))
    }

    fn make_deb(&self, name: &str, description: &str) {
        let tree = self.root().join("tree").join(name);
        fs::create_dir_all(tree.join("DEBIAN")).unwrap();
        fs::write(
            tree.join("DEBIAN/control"),
            format!("Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: {description}\n local.\n"),
        )
        .unwrap();
        fs::create_dir_all(self.root().join("debs")).unwrap();
        ok(debforge()
            .args(["deb", "build"])
            .arg(&tree)
            .arg("-o")
            .arg(self.deb(name)));
    }

    fn out(&self) -> PathBuf {
        self.root().join("repo-out")
    }

    fn build(&self, extra: &[&str]) -> Command {
        build_in(self.root(), extra)
    }

    /// A `--locked` build that must succeed: (stdout, stderr).
    fn locked(&self) -> (String, String) {
        let (code, stdout, err) = run(&mut self.build(&["--locked"]));
        assert_eq!(code, 0, "{err}");
        (stdout, err)
    }
}

/// `debforge build` of the project in `root` into `root/repo-out`, dated.
fn build_in(root: &Path, extra: &[&str]) -> Command {
    let mut c = debforge();
    c.current_dir(root)
        .args([
            "build",
            "--recipes",
            "recipes",
            "--cache",
            "cache",
            "--keys",
            "keys",
            "--out",
            "repo-out",
        ])
        .args(extra)
        .env("SOURCE_DATE_EPOCH", EPOCH);
    c
}

/// The Release without its Date line.
fn release_but_date(out: &Path) -> String {
    fs::read_to_string(out.join("dists/bionic/Release"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("Date:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn package_lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| l.contains(" sha256:")).collect()
}

#[test]
fn a_no_op_locked_build_is_answered_from_stats_and_any_change_builds_again() {
    let p = Project::new(&["alpha", "beta"]);
    let first = ok(&mut p.build(&[]));
    assert!(first.contains("wrote 2 packages into"), "{first}");
    // The build stamped what it read, the lock as it wrote it.
    let (third, err) = p.locked();
    assert!(third.contains(FROM_STATS), "{third}");
    assert_eq!(package_lines(&first), package_lines(&third));
    // What the stamped build said of the packages is said again; what it
    // did (the lock it wrote) is not.
    assert!(err.contains("not pinned"), "{err}");
    assert!(!err.contains("debforge.lock"), "{err}");
    ok(debforge().arg("verify").arg(p.out()));

    // A recipe touched: read again (same bytes: nothing written), then
    // answered from stats again.
    let recipe = p.root().join("recipes/packages/beta.toml");
    let text = fs::read(&recipe).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&recipe, &text).unwrap();
    assert!(p.locked().0.contains(UNCHANGED));
    assert!(p.locked().0.contains(FROM_STATS));

    // A pool file of the output removed: built again, complete.
    let mut pooled = Vec::new();
    crate::support::common::walk_files(&p.out().join("pool"), &mut |f| {
        pooled.push(f.to_path_buf())
    });
    assert_eq!(pooled.len(), 2, "{pooled:?}");
    fs::remove_file(&pooled[0]).unwrap();
    let (rebuilt, _) = p.locked();
    assert!(rebuilt.contains("wrote 2 packages into"), "{rebuilt}");
    ok(debforge().arg("verify").arg(p.out()));
    assert!(p.locked().0.contains(FROM_STATS));

    // Another date, another key set, another --keep: built again.
    let (code, stdout, err) = run(p
        .build(&["--locked"])
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("wrote 2 packages into"), "{stdout}");
    assert!(!p.locked().0.contains(FROM_STATS), "back to the first date");
    assert!(p.locked().0.contains(FROM_STATS));
    let (code, stdout, err) = run(&mut p.build(&["--locked", "--keep", "2"]));
    assert_eq!(code, 0, "{err}");
    assert!(!stdout.contains(FROM_STATS), "{stdout}");

    // A package file with other bytes, its size and modification time put
    // back: the change time still shows it, and --locked refuses the file
    // the lock does not name.
    p.locked();
    assert!(p.locked().0.contains(FROM_STATS));
    let deb = p.deb("alpha");
    let before = fs::metadata(&deb).unwrap();
    let mut bytes = fs::read(&deb).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&deb, bytes).unwrap();
    let mtime = filetime_of(&before);
    set_mtime(&deb, mtime);
    let (code, stdout, err) = run(&mut p.build(&["--locked"]));
    assert_eq!(code, 2, "answered from a stale stamp or record: {stdout}");
    let sha = debforge::digest::sha256_file(&deb).unwrap();
    assert!(
        err.contains("does not match what the recipes resolve to") && err.contains(&sha),
        "{err}"
    );
}

/// A build in place lists again only the pool's directories that changed
/// since the last build's walk (`.repo-out.walk`), and stats the names that
/// walk found in the others: a file dropped into a package's directory is
/// seen (and goes, unlisted), and what the build records of its output is
/// what a fresh walk sees (the next build is answered from stats). A
/// damaged walk file is no walk: the pool is walked afresh.
#[test]
fn a_build_in_place_lists_again_only_the_pool_directories_changed_since() {
    let p = Project::new(&["alpha", "beta", "gamma", "delta"]);
    ok(&mut p.build(&[]));
    let walk = p.root().join(".repo-out.walk");
    assert!(walk.is_file());
    // Past the racy window: the next build's walk stands for the
    // directories the first build made.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let gone = |name: &str| fs::remove_file(p.root().join(format!("recipes/packages/{name}.toml")));
    gone("gamma").unwrap();
    assert!(ok(&mut p.build(&[])).contains("wrote 3 packages into"));
    let alpha = p.out().join("pool/main/a/alpha");
    assert!(alpha.join("alpha_1.0_all.deb").is_file());
    fs::write(alpha.join("stray.deb"), b"not listed").unwrap();
    gone("beta").unwrap();
    assert!(ok(&mut p.build(&[])).contains("wrote 2 packages into"));
    assert!(
        !alpha.join("stray.deb").exists(),
        "a changed directory was not listed again"
    );
    assert!(alpha.join("alpha_1.0_all.deb").is_file());
    assert!(p.locked().0.contains(FROM_STATS));
    ok(debforge().arg("verify").arg(p.out()));
    fs::write(&walk, b"damaged").unwrap();
    fs::write(alpha.join("stray.deb"), b"not listed").unwrap();
    gone("delta").unwrap();
    assert!(ok(&mut p.build(&[])).contains("wrote 1 packages into"));
    assert!(!alpha.join("stray.deb").exists());
    assert!(p.locked().0.contains(FROM_STATS));
    ok(debforge().arg("verify").arg(p.out()));
}

#[test]
fn a_recipe_kept_from_the_last_build_is_read_again_once_edited() {
    let p = Project::new(&["alpha", "beta"]);
    let recipe = p.root().join("recipes/packages/beta.toml");
    let text = fs::read_to_string(&recipe).unwrap();
    // Same size either way: the edit below changes no file size.
    let (unpinned, pinned) = (
        format!("{text}pin = false\n"),
        format!("{text}pin = true \n"),
    );
    fs::write(&recipe, &unpinned).unwrap();
    // Older than the window in which a recipe is read again whatever its
    // identity: kept by the first build, whole.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    ok(&mut p.build(&[]));
    let kept = p.root().join("cache/recipes");
    let identity = || {
        let m = fs::metadata(&kept).expect("the recipes are kept in the cache");
        (
            std::os::unix::fs::MetadataExt::ino(&m),
            m.modified().unwrap(),
        )
    };
    let first = identity();
    // A whole build with no recipe changed (other settings: the build
    // stamp does not answer it) takes every recipe as kept: nothing to
    // keep anew.
    ok(&mut p.build(&["--keep", "2"]));
    assert_eq!(identity(), first, "every recipe taken as kept");
    let pins = || fs::read_to_string(p.out().join("debforge.pref")).unwrap_or_default();
    assert!(!pins().contains("Package: beta"), "{}", pins());
    // An edit of the same size right after the build that kept it: read
    // again.
    fs::write(&recipe, &pinned).unwrap();
    ok(&mut p.build(&[]));
    assert!(pins().contains("Package: beta"), "{}", pins());
    // A value damaged in the cache file (beta's pin, true kept as false,
    // its file untouched) is never taken: the file is none, the recipe read.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    ok(&mut p.build(&["--keep", "3"]));
    let mut bytes = fs::read(&kept).unwrap();
    // postcard: `pin` is an Option<bool>, Some(true) = 01 01, then
    // `for_base` = 00 closes the recipe; beta's is the only pinned one.
    let at = bytes
        .windows(3)
        .position(|w| w == [1, 1, 0])
        .expect("beta's pin as kept");
    bytes[at + 1] = 0;
    fs::write(&kept, &bytes).unwrap();
    ok(&mut p.build(&["--keep", "4"]));
    assert!(pins().contains("Package: beta"), "{}", pins());
    ok(debforge().arg("verify").arg(p.out()));
}

/// A package file's modification time, to put back.
fn filetime_of(m: &fs::Metadata) -> std::time::SystemTime {
    m.modified().unwrap()
}

fn set_mtime(path: &Path, t: std::time::SystemTime) {
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(t).unwrap();
}

/// A build that asks a signed source what its recipes resolve to is never
/// answered from stats: the source may have changed.
#[test]
fn a_build_that_asks_a_signed_source_is_never_answered_from_stats() {
    let lab = crate::support::standin::Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", EPOCH));
    for _ in 0..2 {
        let stdout = ok(lab
            .cmd("build")
            .arg("--locked")
            .arg("--out")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", EPOCH));
        assert!(stdout.contains(UNCHANGED), "{stdout}");
    }
    assert!(!lab.dir.path().join(".repo-out.build-stamp").exists());
}

/// Without SOURCE_DATE_EPOCH the Release is dated by the clock: a build
/// with nothing else changed dates and signs the Release again and leaves
/// every other file as it was (the same inodes), and the result verifies.
#[test]
fn a_build_dated_by_the_clock_with_nothing_else_changed_only_signs_again() {
    use std::os::unix::fs::MetadataExt;
    let p = Project::new(&["alpha", "beta"]);
    let clock = |extra: &[&str]| {
        let mut c = p.build(extra);
        c.env_remove("SOURCE_DATE_EPOCH");
        let (code, stdout, err) = run(&mut c);
        assert_eq!(code, 0, "{err}");
        stdout
    };
    let first = clock(&[]);
    assert!(first.contains("wrote 2 packages into"), "{first}");
    let packages = p.out().join("dists/bionic/main/binary-all/Packages");
    let packages = if packages.exists() {
        packages
    } else {
        p.out().join("dists/bionic/main/binary-amd64/Packages")
    };
    let inode = fs::metadata(&packages).unwrap().ino();
    let release = fs::read_to_string(p.out().join("dists/bionic/Release")).unwrap();
    let rest = release_but_date(&p.out());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let again = clock(&["--locked"]);
    assert!(again.contains(REDATED), "{again}");
    assert_eq!(package_lines(&first), package_lines(&again));
    let now = fs::read_to_string(p.out().join("dists/bionic/Release")).unwrap();
    assert_ne!(release, now, "a new date");
    assert_eq!(rest, release_but_date(&p.out()));
    assert_eq!(fs::metadata(&packages).unwrap().ino(), inode);
    ok(debforge().arg("verify").arg(p.out()));
    let history = ok(debforge().arg("history").arg("--out").arg(p.out()));
    assert_eq!(history.lines().count(), 1, "{history}");
    // And again: the stamp followed the new Release.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(clock(&[]).contains(REDATED));
    ok(debforge().arg("verify").arg(p.out()));
    // A recipe gone: a whole build again.
    fs::remove_file(p.root().join("recipes/packages/beta.toml")).unwrap();
    let fewer = clock(&[]);
    assert!(fewer.contains("wrote 1 packages into"), "{fewer}");
    ok(debforge().arg("verify").arg(p.out()));
}

/// Right after the first build (the package file now also linked into the
/// pool), its bytes rewritten in place with size and modification time put
/// back (`cp -p` over it): the next build reads it again and refuses what
/// the lock does not name; it never publishes the new bytes under the old
/// index's SHA256.
#[test]
fn bytes_rewritten_in_place_right_after_a_build_are_read_again() {
    let p = Project::new(&["alpha"]);
    ok(&mut p.build(&[]));
    let deb = p.deb("alpha");
    let mtime = fs::metadata(&deb).unwrap().modified().unwrap();
    let mut bytes = fs::read(&deb).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::thread::sleep(std::time::Duration::from_millis(20));
    // In place: the same inode (the pool's link sees it too).
    use std::io::Write;
    let mut f = fs::OpenOptions::new().write(true).open(&deb).unwrap();
    f.write_all(&bytes).unwrap();
    drop(f);
    set_mtime(&deb, mtime);
    let (code, stdout, err) = run(&mut p.build(&["--locked"]));
    assert_eq!(
        code, 2,
        "the changed bytes were taken for the recorded ones: {stdout}"
    );
    assert!(
        err.contains("does not match what the recipes resolve to"),
        "{err}"
    );
}

/// Indexes written in pieces (xz blocks, gzip segments), and those of the
/// next build made of the pieces the last one kept, as the real apt of
/// Ubuntu 18.04 reads them: each compressed form on its own (the other
/// forms removed from what is served, so apt can fall back on none).
#[test]
fn apt_on_ubuntu_18_04_reads_indexes_in_pieces_and_ones_made_of_kept_pieces() {
    use crate::support::chroot::Chroot;
    let names: Vec<String> = (0..120).map(|i| format!("piece{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    // About 2.7 KB a stanza, 320 KB in all: more than two of the largest
    // pieces (128 KiB), so at least three whatever the debs' bytes (their
    // dates, and so their digests, change from run to run and with them
    // where the content-defined cuts fall).
    let long: String = (0..32)
        .map(|i| {
            format!("\n line {i} of a description long enough for an index of several pieces .....")
        })
        .collect();
    let p = Project::described(&refs, &format!("a package{long}"));
    let dir = p.root().join("repo-out/dists/bionic/main/binary-amd64");
    let blocks = || {
        let listing = ok(Command::new("xz")
            .args(["--robot", "--list"])
            .arg(dir.join("Packages.xz")));
        let totals = listing
            .lines()
            .find(|l| l.starts_with("totals"))
            .unwrap()
            .to_string();
        totals.split('\t').nth(2).unwrap().parse::<u32>().unwrap()
    };
    let (code, _, err) = run(&mut p.build(&[]));
    assert_eq!(code, 0, "{err}");
    // The note on unpinned packages names ten of the 120 and counts the rest.
    let note = err.lines().find(|l| l.contains("not pinned")).unwrap();
    assert!(note.ends_with("piece009 and 110 more"), "{note}");
    let size = fs::metadata(dir.join("Packages")).unwrap().len();
    assert!(
        size > 2 * debforge::repo::pieces::PIECE_MAX as u64,
        "{size}"
    );
    assert!(blocks() >= 3, "{} pieces", blocks());
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let keyring = c.put(&p.out().join("debforge-archive-keyring.gpg"));
    let port = crate::publish_remote::free_port();
    c.ok(&format!(
        "echo 'deb [signed-by={keyring}] http://127.0.0.1:{port} bionic main' > /etc/apt/sources.list"
    ));
    // apt reads `form` alone (a copy of the output without the other
    // forms); the number of pieceNNN packages it then knows.
    let read_by_apt = |form: &str, gone: &str| {
        let served = p.root().join(format!("served-{form}"));
        let _ = fs::remove_dir_all(&served);
        ok(Command::new("cp").arg("-a").arg(p.out()).arg(&served));
        let index = served.join("dists/bionic/main/binary-amd64");
        for other in ["Packages".to_string(), format!("Packages.{gone}")] {
            let sha = debforge::digest::sha256_file(&index.join(&other)).unwrap();
            fs::remove_file(index.join(&other)).unwrap();
            fs::remove_file(index.join("by-hash/SHA256").join(sha)).unwrap();
        }
        let _server = crate::stack::Serve::start(&served, port);
        c.ok("rm -rf /var/lib/apt/lists/*");
        crate::stack::update_clean(&c);
        let shown = c.ok("apt-cache show piece000 piece119 2>&1");
        assert_eq!(
            shown.lines().filter(|l| *l == "Version: 1.0").count(),
            2,
            "{form}: {shown}"
        );
        assert!(
            shown.contains(" line 31 of a description"),
            "{form}: {shown}"
        );
        let known = c.ok("apt-cache pkgnames piece | wc -l");
        known.trim().parse::<u32>().unwrap()
    };

    assert_eq!(read_by_apt("xz", "gz"), 120);
    assert_eq!(read_by_apt("gz", "xz"), 120);
    // One package gone: the next indexes are made of the kept pieces but
    // the one it was in, and read the same way.
    fs::remove_file(p.root().join("recipes/packages/piece060.toml")).unwrap();
    ok(&mut p.build(&[]));
    let maps = fs::read_dir(p.root().join(".repo-out.generations/indexes"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pieces"))
        .count();
    assert_eq!(maps, 2);
    assert_eq!(read_by_apt("xz", "gz"), 119);
    assert_eq!(read_by_apt("gz", "xz"), 119);
    let (code, text) = c.run("apt-cache show piece060 2>&1");
    assert_ne!(code, 0, "{text}");
}

/// A build without `--locked` writes the lock its resolution makes; the old
/// lock file is only compared with it, never parsed (path recipes need
/// nothing it says): left as it is when it holds those bytes, written in
/// debforge's words where it says the same in others, written again where it
/// is no lock at all. A FIFO in its place is an error, and stays.
#[test]
fn a_build_without_locked_compares_the_old_lock_and_never_parses_it() {
    use std::os::unix::fs::FileTypeExt;
    let p = Project::new(&["alpha", "beta"]);
    let lock = p.root().join("recipes/debforge.lock");
    let build = |extra: &[&str]| {
        let (code, _, err) = run(&mut p.build(extra));
        assert_eq!(code, 0, "{err}");
        err
    };
    let identity = || {
        let m = fs::metadata(&lock).unwrap();
        use std::os::unix::fs::MetadataExt;
        (m.ino(), m.ctime(), m.ctime_nsec())
    };
    assert!(build(&[]).contains("wrote "), "the first build writes it");
    let canonical = fs::read_to_string(&lock).unwrap();
    let first = identity();
    // A recipe touched: built again, the lock compared and left alone.
    let recipe = p.root().join("recipes/packages/beta.toml");
    let text = fs::read(&recipe).unwrap();
    fs::write(&recipe, &text).unwrap();
    let err = build(&[]);
    assert!(!err.contains("debforge.lock"), "{err}");
    assert_eq!(identity(), first);

    // The same lock in other words (a comment of the lab's): written in
    // debforge's, and said.
    fs::write(&lock, format!("{canonical}# reviewed\n")).unwrap();
    let err = build(&[]);
    assert!(
        err.contains("wrote ") && err.contains("debforge.lock"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&lock).unwrap(), canonical);

    // No lock at all (a merge gone wrong): written again. `--locked` still
    // reads it, and says what is wrong.
    fs::write(&lock, "<<<<<<< ours\nversion = 1\n").unwrap();
    let (code, _, err) = run(&mut p.build(&["--locked"]));
    assert_ne!(code, 0);
    assert!(err.contains("debforge.lock"), "{err}");
    fs::write(&recipe, &text).unwrap();
    build(&[]);
    assert_eq!(fs::read_to_string(&lock).unwrap(), canonical);
    p.locked();

    // A lock of a newer debforge: never written over with an older version.
    let newer = canonical.replacen("version = 1", "version = 2", 1);
    fs::write(&lock, &newer).unwrap();
    let (code, _, err) = run(&mut p.build(&[]));
    assert_ne!(code, 0);
    assert!(err.contains("version 2 is not supported"), "{err}");
    assert_eq!(fs::read_to_string(&lock).unwrap(), newer);

    // A FIFO in its place: an error, and it stays.
    fs::remove_file(&lock).unwrap();
    let status = Command::new("mkfifo").arg(&lock).status().unwrap();
    assert!(status.success());
    fs::write(&recipe, &text).unwrap();
    let (code, _, err) = run(&mut p.build(&[]));
    assert_ne!(code, 0);
    assert!(err.contains("FIFO"), "{err}");
    assert!(fs::symlink_metadata(&lock).unwrap().file_type().is_fifo());
}

/// Random edits to a project, each followed by a build in place over the
/// last output and by a build from nothing (another output, another cache,
/// a copy of the recipes without their lock): both must write the same
/// repository, byte for byte (indexes, Release, pins, keyring, pool files;
/// the signatures are salted, and each output's are checked by `verify`),
/// and the same lock. What an incremental build reuses (the build stamp,
/// the pool in place, the lock compared rather than parsed, the earlier
/// generations) must never show. The seeds: two fixed ones (a regression
/// they show fails every run; the suite stays deterministic), else
/// `DEBFORGE_TEST_SEED`'s, or one from the clock with
/// `DEBFORGE_TEST_SEED=random` (other edits; a failure prints its seed).
#[test]
fn random_edits_build_in_place_what_a_build_from_nothing_writes() {
    let seeds = match std::env::var("DEBFORGE_TEST_SEED").as_deref() {
        Ok("random") => vec![
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64,
        ],
        Ok(s) => vec![s.parse().expect("DEBFORGE_TEST_SEED: a number, or random")],
        Err(_) => vec![1796548245506906491, 1796548513106625368],
    };
    for &seed in &seeds {
        random_edits(seed, 24, 40);
    }
    // Once with an index of several compressed pieces, so that pieces kept
    // from the last generation are copied (24 small packages are one).
    let p = random_edits(seeds[0], 1200, 8);
    let pieces = fs::read_dir(p.root().join(".repo-out.generations/indexes"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pieces"))
        .map(|p| fs::read_to_string(p).unwrap().matches("\"xz\"").count())
        .max()
        .unwrap_or(0);
    assert!(pieces >= 3, "the index was cut in {pieces} pieces");
}

/// `rounds` rounds of random edits to a project of `count` packages (half
/// of them in it at first); the project, for the caller to look at.
fn random_edits(seed: u64, count: usize, rounds: usize) -> Project {
    eprintln!("DEBFORGE_TEST_SEED={seed} ({count} packages)");
    let mut rng = XorShift(seed | 1);
    let p = Project::described(&[], "first");
    let names: Vec<String> = (0..count).map(|i| format!("p{i:03}")).collect();
    let base = names[0].clone();
    let debs = p.root().join("debs");
    // Each package at two versions (each made when first needed); each but
    // the first depends on the first.
    let make = |name: &str, version: &str, note: &str| {
        let tree = p.root().join("tree").join(format!("{name}-{version}"));
        let _ = fs::remove_dir_all(&tree);
        fs::create_dir_all(tree.join("DEBIAN")).unwrap();
        let depends = if name == base {
            String::new()
        } else {
            format!("Depends: {base} (>= 1.0)\n")
        };
        fs::write(
            tree.join("DEBIAN/control"),
            format!("Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: x <x@example.org>\n{depends}Description: {name} {note}\n random edits.\n"),
        )
        .unwrap();
        fs::create_dir_all(&debs).unwrap();
        let deb = debs.join(format!("{name}_{version}_all.deb"));
        // Dated: the debs' bytes (and so where the index is cut in pieces)
        // must not follow the clock from run to run.
        ok(debforge()
            .env("SOURCE_DATE_EPOCH", EPOCH)
            .args(["deb", "build"])
            .arg(&tree)
            .arg("-o")
            .arg(&deb));
    };
    let recipes = p.root().join("recipes/packages");
    let recipe = |name: &str| recipes.join(format!("{name}.toml"));
    let write_recipe = |name: &str, version: &str, pin: bool| {
        let deb = debs.join(format!("{name}_{version}_all.deb"));
        if !deb.exists() {
            make(name, version, "first");
        }
        let pin = if pin { "pin = true\n" } else { "" };
        fs::write(
            recipe(name),
            format!(
                "name = \"{name}\"\nversion = \"{version}\"\narchitecture = \"all\"\n{pin}from = {{ path = \"{}\" }}\n",
                deb.display()
            ),
        )
        .unwrap();
    };
    let present = || -> Vec<String> {
        let mut v: Vec<String> = names
            .iter()
            .filter(|n| recipe(n).exists())
            .cloned()
            .collect();
        v.sort();
        v
    };
    let read_recipe = |name: &str| fs::read_to_string(recipe(name)).unwrap();
    for name in names.iter().take(count / 2) {
        write_recipe(name, "1.0", false);
    }
    let build_in_place = |round: usize| {
        let (code, _, err) = run(&mut p.build(&["--keep", "3"]));
        assert_eq!(code, 0, "round {round} (DEBFORGE_TEST_SEED={seed}):\n{err}");
    };
    build_in_place(0);
    for round in 1..=rounds {
        let mut said = Vec::new();
        // None to three edits: a round with none is answered from the stamp.
        for _ in 0..rng.below(4) {
            let here = present();
            let pick = |rng: &mut XorShift, from: &[String]| from[rng.below(from.len())].clone();
            let others: Vec<String> = here.iter().filter(|n| **n != base).cloned().collect();
            let absent: Vec<String> = names
                .iter()
                .filter(|n| !here.contains(n))
                .cloned()
                .collect();
            match rng.below(6) {
                0 if !others.is_empty() => {
                    let n = pick(&mut rng, &others);
                    fs::remove_file(recipe(&n)).unwrap();
                    said.push(format!("{n} removed"));
                }
                1 if !absent.is_empty() => {
                    let n = pick(&mut rng, &absent);
                    let v = if rng.below(2) == 0 { "1.0" } else { "2.0" };
                    write_recipe(&n, v, false);
                    said.push(format!("{n} {v} added"));
                }
                2 => {
                    let n = pick(&mut rng, &here);
                    let text = read_recipe(&n);
                    let (from, to) = if text.contains("\"1.0\"") {
                        ("1.0", "2.0")
                    } else {
                        ("2.0", "1.0")
                    };
                    write_recipe(&n, to, text.contains("pin = true"));
                    said.push(format!("{n} {from} -> {to}"));
                }
                3 => {
                    let n = pick(&mut rng, &here);
                    fs::write(recipe(&n), read_recipe(&n)).unwrap();
                    said.push(format!("{n} rewritten as it was"));
                }
                4 => {
                    let n = pick(&mut rng, &here);
                    let text = read_recipe(&n);
                    let v = if text.contains("\"1.0\"") {
                        "1.0"
                    } else {
                        "2.0"
                    };
                    write_recipe(&n, v, !text.contains("pin = true"));
                    said.push(format!("{n} pin toggled"));
                }
                _ => {
                    // The same name, version and architecture, other bytes.
                    let n = pick(&mut rng, &here);
                    let v = if read_recipe(&n).contains("\"1.0\"") {
                        "1.0"
                    } else {
                        "2.0"
                    };
                    make(&n, v, &format!("rebuilt in round {round}"));
                    said.push(format!("{n} {v} rebuilt with other bytes"));
                }
            }
        }
        if said.is_empty() {
            said.push("no edit".to_string());
        }
        let context = format!(
            "round {round}: {} (DEBFORGE_TEST_SEED={seed})",
            said.join(", ")
        );
        build_in_place(round);
        // Now and then `--locked` over it: the lock it left holds, and
        // nothing is written. But after a round that rebuilt a package at
        // its version: that round wrote the whole output, whose swap moved
        // the change time of each package file linked in the old pool and
        // the new one with no net change to its link count, so it left no
        // build stamp; the output's stamp is keyed by the generations kept,
        // which moved with the one it recorded, and files kept only by the
        // oldest of them go now: this build writes the output again.
        if rng.below(3) == 0 {
            let (code, out, err) = run(&mut p.build(&["--locked", "--keep", "3"]));
            assert_eq!(code, 0, "{context}: --locked after it:\n{err}");
            let rebuilt = said.iter().any(|s| s.contains("rebuilt"));
            assert!(
                rebuilt || out.contains(FROM_STATS) || out.contains(UNCHANGED),
                "{context}: --locked after it wrote:\n{out}\n{err}"
            );
        }
        // From nothing: the recipes without their lock, the same keys.
        let fresh = tempfile::tempdir().unwrap();
        fs::create_dir_all(fresh.path().join("recipes/packages")).unwrap();
        for n in present() {
            fs::copy(
                recipe(&n),
                fresh.path().join(format!("recipes/packages/{n}.toml")),
            )
            .unwrap();
        }
        copy_tree(&p.root().join("keys"), &fresh.path().join("keys"));
        let (code, _, err) = run(&mut build_in(fresh.path(), &[]));
        assert_eq!(code, 0, "{context}: the build from nothing failed:\n{err}");
        let (a, b) = (p.out(), fresh.path().join("repo-out"));
        assert_eq!(
            fs::read_to_string(p.root().join("recipes/debforge.lock")).unwrap(),
            fs::read_to_string(fresh.path().join("recipes/debforge.lock")).unwrap(),
            "{context}: the locks differ"
        );
        // Everything but the pool, and every pool file the fresh one has
        // (in place, the generations kept keep more).
        let files = |root: &Path| -> Vec<String> {
            let mut v = Vec::new();
            for e in walkdir::WalkDir::new(root).sort_by_file_name() {
                let e = e.unwrap();
                if e.file_type().is_file() {
                    v.push(e.path().strip_prefix(root).unwrap().display().to_string());
                }
            }
            v
        };
        let (in_place, from_nothing) = (files(&a), files(&b));
        let not_pool = |v: &[String]| -> Vec<String> {
            v.iter()
                .filter(|f| !f.starts_with("pool/"))
                .cloned()
                .collect()
        };
        assert_eq!(not_pool(&in_place), not_pool(&from_nothing), "{context}");
        // The signatures are salted (Sequoia adds a random notation): each
        // output's are checked by `verify`, against the Release compared here.
        let signed = |f: &str| f.ends_with("/InRelease") || f.ends_with("/Release.gpg");
        for f in from_nothing.iter().filter(|f| !signed(f)) {
            let (x, y) = (
                fs::read(a.join(f)).unwrap_or_default(),
                fs::read(b.join(f)).unwrap(),
            );
            if x != y {
                // The first line that differs, where both are text.
                let (x, y) = (String::from_utf8_lossy(&x), String::from_utf8_lossy(&y));
                let first = x.lines().zip(y.lines()).find(|(l, m)| l != m);
                panic!("{context}: {f} differs: {first:?}");
            }
        }
        ok(debforge().arg("verify").arg(&a));
        ok(debforge().arg("verify").arg(&b));
    }
    p
}

/// A small xorshift generator: the test's edits follow from its seed.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dest = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A package rebuilt at its version twice within `--keep`: the earlier
/// generations list its name with two other digests, neither of which can
/// be kept (the name is the new file's). The next build of the same inputs
/// writes nothing; it wrote the whole output again, since what the output's
/// stamp was keyed by moved with the generations kept.
#[test]
fn a_package_rebuilt_at_its_version_twice_leaves_nothing_to_write_after() {
    let p = Project::new(&["alpha", "beta"]);
    let build = |extra: &[&str]| {
        let mut args = vec!["--keep", "3"];
        args.extend_from_slice(extra);
        let (code, out, err) = run(&mut p.build(&args));
        assert_eq!(code, 0, "{err}");
        out
    };
    build(&[]);
    for description in ["second", "third"] {
        p.make_deb("beta", description);
        assert!(build(&[]).contains("wrote 2 packages"));
    }
    let out = build(&["--locked"]);
    assert!(out.contains(UNCHANGED) || out.contains(FROM_STATS), "{out}");
}

/// A lock file that is a symbolic link: a change to the file it points to
/// must not be answered from the build stamp (the link's own identity does
/// not move), so `--locked` sees it.
#[test]
fn a_lock_through_a_link_is_read_by_every_locked_build() {
    let p = Project::new(&["alpha"]);
    ok(&mut p.build(&[]));
    let lock = p.root().join("recipes/debforge.lock");
    let target = p.root().join("lock-elsewhere");
    fs::rename(&lock, &target).unwrap();
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    p.locked();
    p.locked();
    let text = fs::read_to_string(&target).unwrap();
    let sha = first_sha256(&text);
    let other: String = sha.chars().rev().collect();
    fs::write(&target, text.replacen(&sha, &other, 1)).unwrap();
    let (code, _, err) = run(&mut p.build(&["--locked"]));
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("does not match"), "{err}");
}

/// A path recipe naming a link: the file it points to is the one read,
/// pooled (a regular file, never the link) and indexed, and a build after
/// the link is pointed at other bytes publishes those.
#[test]
fn a_path_recipe_through_a_link_publishes_the_file_it_points_to() {
    let p = Project::new(&["alpha"]);
    let debs = p.root().join("debs");
    fs::rename(p.deb("alpha"), debs.join("first.deb")).unwrap();
    p.make_deb("alpha", "second");
    fs::rename(p.deb("alpha"), debs.join("second.deb")).unwrap();
    let link = debs.join("link.deb");
    std::os::unix::fs::symlink("first.deb", &link).unwrap();
    fs::write(
        p.root().join("recipes/packages/alpha.toml"),
        format!(
            "name = \"alpha\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = {{ path = \"{}\" }}\n",
            link.display()
        ),
    )
    .unwrap();
    let pooled = |p: &Project| {
        let mut files = Vec::new();
        crate::support::common::walk_files(&p.out().join("pool"), &mut |f| {
            files.push(f.to_path_buf())
        });
        assert_eq!(files.len(), 1, "{files:?}");
        let meta = fs::symlink_metadata(&files[0]).unwrap();
        assert!(meta.is_file(), "{meta:?}");
        debforge::digest::sha256_file(&files[0]).unwrap()
    };
    for target in ["first.deb", "second.deb"] {
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(target, &link).unwrap();
        ok(&mut p.build(&[]));
        let sha = debforge::digest::sha256_file(&debs.join(target)).unwrap();
        assert_eq!(pooled(&p), sha, "{target}");
        let mut packages = String::new();
        crate::support::common::walk_files(&p.out().join("dists"), &mut |f| {
            if f.file_name().is_some_and(|n| n == "Packages") {
                packages += &fs::read_to_string(f).unwrap();
            }
        });
        assert!(packages.contains(&format!("SHA256: {sha}")), "{packages}");
        ok(debforge().arg("verify").arg(p.out()));
        if target == "first.deb" {
            assert!(p.locked().0.contains(FROM_STATS));
        }
    }
}
