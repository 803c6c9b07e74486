//! Delta bundles as an air-gapped lab lives them: built and bundled here,
//! applied with `install.sh` in an Ubuntu 18.04 root (apt 1.6, gpgv 2.2,
//! no apt source but the bundle's): a full bundle, then a delta for each
//! change, in order; a delta for another base refused; a delta killed
//! midway leaves apt on the old generation and completes on the next run;
//! a manifest changed after signing refused.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::chroot::Chroot;
use crate::support::common::{debforge, ok, run};
use crate::support::standin::Lab;

/// Sets the metapackage's version and builds.
fn build_version(lab: &Lab, out: &Path, version: &str) {
    let recipe = lab.recipes.join("packages/gpu-stack-cu101.toml");
    let text = fs::read_to_string(&recipe).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("version = ") {
                format!("version = \"{version}\"\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    fs::write(&recipe, text).unwrap();
    ok(lab.cmd("build").arg("--out").arg(out));
}

fn bundle(lab: &Lab, out: &Path, name: &str, from: Option<&Path>) -> (PathBuf, String) {
    let path = lab.dir.path().join(name);
    let mut c = debforge();
    c.arg("bundle").arg("-o").arg(&path).arg("--out").arg(out);
    c.arg("--keys").arg(lab.keys());
    if let Some(f) = from {
        c.arg("--from").arg(f);
    }
    let stdout = ok(&mut c);
    (path, stdout)
}

/// The candidate apt sees for gpu-stack-cu101 after an update.
fn candidate(c: &Chroot) -> String {
    let out = c.ok_offline("apt-get update 2>&1 && apt-cache policy gpu-stack-cu101");
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .unwrap_or_else(|| panic!("no candidate:\n{out}"))
        .to_string()
}

#[test]
fn deltas_apply_in_order_atomically_and_only_onto_their_base() {
    let lab = Lab::new();
    lab.add_small_metapackage();
    let out = lab.dir.path().join("repo-out");
    build_version(&lab, &out, "1.0-1");
    let (full, _) = bundle(&lab, &out, "lab-1.tar", None);
    build_version(&lab, &out, "1.0-2");
    let (d2, said) = bundle(&lab, &out, "lab-2.tar", Some(&full));
    assert!(said.contains("a delta from generation "), "{said}");
    build_version(&lab, &out, "1.0-3");
    // A delta from a delta: the chain goes on from what the last one left.
    let (d3, _) = bundle(&lab, &out, "lab-3.tar", Some(&d2));
    // A metapackage bump carries its one new pool file, and the indexes.
    let listing = ok(std::process::Command::new("tar").arg("-tf").arg(&d2));
    let pool: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("/repo/pool/") && l.ends_with(".deb"))
        .collect();
    assert_eq!(
        pool,
        ["debforge-bundle/repo/pool/main/g/gpu-stack-cu101/gpu-stack-cu101_1.0-2_all.deb"],
        "{listing}"
    );

    // On the way in: the chain and the signature, with the base's keyring.
    let (code, checked, err) = run(debforge()
        .args(["bundle", "verify"])
        .arg(&d3)
        .arg("--from")
        .arg(&d2));
    assert_eq!(code, 0, "{checked}{err}");
    assert!(
        checked.contains("DELTA: signed by ")
            && checked.contains("all files match SHA256SUMS and the signed manifest"),
        "{checked}"
    );
    // Without the lab's keyring, a delta is not vouched for.
    let (code, alone, _) = run(debforge().args(["bundle", "verify"]).arg(&d3));
    assert_eq!(code, 1, "{alone}");
    assert!(
        alone.contains("not checked against the keyring the lab trusts"),
        "{alone}"
    );
    let (code, wrong, _) = run(debforge()
        .args(["bundle", "verify"])
        .arg(&d3)
        .arg("--from")
        .arg(&full));
    assert_eq!(code, 1, "{wrong}");
    assert!(
        wrong.contains("the delta applies onto generation"),
        "{wrong}"
    );

    let c = Chroot::new();
    // As the lab lives it: no apt source but the bundles', no network.
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let unpack = |tar: &Path, dir: &str| {
        let t = c.put(tar);
        c.ok_offline(&format!(
            "rm -rf /tmp/{dir} && mkdir /tmp/{dir} && tar -xf {t} -C /tmp/{dir}"
        ));
        format!("/tmp/{dir}/debforge-bundle/install.sh")
    };
    let (s1, s2, s3) = (unpack(&full, "b1"), unpack(&d2, "b2"), unpack(&d3, "b3"));
    let current = || {
        fs::read_link(c.path("/var/lib/debforge-bundle/current"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };

    // A delta needs the full bundle first.
    let (code, msg) = c.run_offline(&format!("sh {s2} 2>&1"));
    assert_eq!(code, 1, "{msg}");
    assert!(
        msg.contains("a delta applies onto a repository a full bundle set up"),
        "{msg}"
    );
    c.ok_offline(&format!("sh {s1} 2>&1"));
    assert_eq!(candidate(&c), "1.0-1");
    c.ok_offline("apt-get install -y gpu-stack-cu101 2>&1");
    let first = current();

    // Out of order: refused, naming both generations; nothing changed.
    let (code, msg) = c.run_offline(&format!("sh {s3} 2>&1"));
    assert_eq!(code, 1, "{msg}");
    assert!(
        msg.contains("this delta applies onto generation ")
            && msg.contains(" only; /var/lib/debforge-bundle has "),
        "{msg}"
    );
    assert_eq!(current(), first);

    // Killed while assembling, then once assembled: apt still sees the old
    // generation, whole; the next run completes.
    for at in ["first-file", "assembled"] {
        let (code, msg) = c.run_offline(&format!("DEBFORGE_BUNDLE_TEST_KILL={at} sh {s2} 2>&1"));
        assert_eq!(code, 137, "{at}: {msg}");
        assert_eq!(current(), first, "{at}");
        assert_eq!(candidate(&c), "1.0-1", "{at}");
    }
    let done = c.ok_offline(&format!("sh {s2} 2>&1"));
    assert!(
        done.contains("in force at /var/lib/debforge-bundle/current"),
        "{done}"
    );
    assert_eq!(candidate(&c), "1.0-2");
    let again = c.ok_offline(&format!("sh {s2} 2>&1"));
    assert!(again.contains("is already in force"), "{again}");

    // A manifest changed after signing (another target, still 64 hex
    // digits; its SHA256SUMS made to match): gpgv refuses it.
    c.ok_offline("rm -rf /tmp/bad && cp -r /tmp/b3 /tmp/bad && cd /tmp/bad/debforge-bundle && sed -i -e 's/^Target: 0/Target: 1/' -e t -e 's/^Target: ./Target: 0/' DELTA && grep -v '  DELTA$' SHA256SUMS > S && sha256sum DELTA >> S && mv S SHA256SUMS");
    let (code, msg) = c.run_offline("sh /tmp/bad/debforge-bundle/install.sh 2>&1");
    assert_eq!(code, 1, "{msg}");
    assert!(
        msg.contains("DELTA is not signed by a key of /var/lib/debforge-bundle/trusted.gpg"),
        "{msg}"
    );

    c.ok_offline(&format!("sh {s3} 2>&1"));
    assert_eq!(candidate(&c), "1.0-3");
    let installed = c.ok_offline(
        "apt-get install -y gpu-stack-cu101 2>&1 && dpkg-query -W -f='${Version}' gpu-stack-cu101",
    );
    assert!(installed.ends_with("1.0-3"), "{installed}");
    // Two generations kept: the one in force and the one before.
    let kept = c.ok("ls /var/lib/debforge-bundle/generations | wc -l");
    assert_eq!(kept.trim(), "2");
}

/// A machine set up by an older install.sh (the repository copied into
/// DEBFORGE_BUNDLE_DIR itself, apt reading it there) is moved to the
/// generations layout by the next full bundle; apt reads the new one.
#[test]
fn a_machine_set_up_by_the_older_install_sh_moves_to_generations() {
    let lab = Lab::new();
    lab.add_small_metapackage();
    let out = lab.dir.path().join("repo-out");
    build_version(&lab, &out, "1.0-1");
    let (v1, _) = bundle(&lab, &out, "lab-1.tar", None);
    build_version(&lab, &out, "1.0-2");
    let (v2, _) = bundle(&lab, &out, "lab-2.tar", None);
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let t1 = c.put(&v1);
    // What the older script did.
    c.ok(&format!(
        "mkdir -p /tmp/old /var/lib/debforge-bundle && tar -xf {t1} -C /tmp/old && cp -R /tmp/old/debforge-bundle/repo/. /var/lib/debforge-bundle/ && install -d /usr/share/keyrings /etc/apt/preferences.d && install -m 644 /tmp/old/debforge-bundle/repo/debforge-archive-keyring.gpg /usr/share/keyrings/debforge-bundle-archive-keyring.gpg && printf 'Types: deb\\nURIs: file:/var/lib/debforge-bundle/\\nSuites: bionic\\nComponents: main\\nSigned-By: /usr/share/keyrings/debforge-bundle-archive-keyring.gpg\\n' > /etc/apt/sources.list.d/debforge-bundle.sources"
    ));
    assert_eq!(candidate(&c), "1.0-1");
    let t2 = c.put(&v2);
    let said = c.ok(&format!(
        "mkdir -p /tmp/new && tar -xf {t2} -C /tmp/new && sh /tmp/new/debforge-bundle/install.sh 2>&1"
    ));
    assert!(
        said.contains("is now in /var/lib/debforge-bundle/old-layout"),
        "{said}"
    );
    assert!(c.path("/var/lib/debforge-bundle/old-layout/pool").is_dir());
    assert_eq!(candidate(&c), "1.0-2");
    let top = c.ok("ls -A /var/lib/debforge-bundle");
    assert_eq!(
        top.split_whitespace().collect::<Vec<_>>(),
        [
            ".lock",
            "current",
            "generations",
            "old-layout",
            "trusted.gpg"
        ],
        "{top}"
    );
    let sources =
        fs::read_to_string(c.path("/etc/apt/sources.list.d/debforge-bundle.sources")).unwrap();
    assert!(
        sources.contains("URIs: file:/var/lib/debforge-bundle/current/"),
        "{sources}"
    );
}

/// Issue 25's lab day, as the air-gapped lab lives it, with the shipped
/// recipes: the machines are Ubuntu 18.04 as released (minbase from bionic
/// `main` alone, no updates, no python3), their dpkg status the project's
/// base, and `closure` pulls what they lack from Ubuntu's real signed
/// `bionic` index (gpu-stack-cu101 needs python3 for gpu-stack-check). On
/// such a root with no apt source and no network: a full bundle, `apt-get
/// install gpu-stack-cu101`, gpu-stack-check with its Python half run; a
/// delta after a version bump, the upgrade, the check again; a delta made
/// for another base refused.
#[test]
fn the_lab_day_on_a_bare_18_04_from_the_bundles_alone() {
    use crate::support::chroot::Dist;
    use crate::support::standin::shared_lib_with;
    if crate::support::common::skipped_offline("the_lab_day_on_a_bare_18_04…") {
        return;
    }
    let lab = Lab::new();
    crate::stack::shipped_project(&lab, "http://mirror.gpu-lab.example/debforge/", |_, t| t);
    // The machine as installed from the release: its status is the base.
    let status = ok(std::process::Command::new("tar")
        .arg("-xOf")
        .arg(crate::support::chroot::base_tarball(Dist::BionicRelease))
        .arg("./var/lib/dpkg/status"));
    assert!(!status.contains("Package: python3\n"), "a bare machine");
    fs::create_dir_all(lab.recipes.join("base")).unwrap();
    fs::write(lab.recipes.join("base/lab-01.status"), status).unwrap();
    let settings = fs::read_to_string(lab.recipes.join("repository.toml")).unwrap();
    fs::write(
        lab.recipes.join("repository.toml"),
        format!(
            "{settings}\n[base]\nfiles = [\"base/lab-01.status\"]\nclosure = \"ubuntu-bionic\"\n"
        ),
    )
    .unwrap();
    // The shipped source for the release, with the shipped keyring.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = fs::read_to_string(shipped.join("recipes/sources.toml")).unwrap();
    let release = &sources[sources.find("[source.ubuntu-bionic]").unwrap()..];
    let release = &release[..release.find("\n\n").unwrap()];
    let release = release.replace(
        "key = \"keys/ubuntu-archive-keyring.gpg\"",
        &format!(
            "key = \"{}\"",
            shipped.join("keys/ubuntu-archive-keyring.gpg").display()
        ),
    );
    let mut text = fs::read_to_string(lab.recipes.join("sources.toml")).unwrap();
    text.push_str(&format!("\n{release}\n"));
    fs::write(lab.recipes.join("sources.toml"), text).unwrap();

    let out = lab.dir.path().join("repo-out");
    let build = |version: &str, locked: bool| {
        let recipe = lab.recipes.join("packages/gpu-stack-cu101.toml");
        let text = fs::read_to_string(&recipe).unwrap();
        let at = text.find("\nversion = ").unwrap() + 1;
        let end = at + text[at..].find('\n').unwrap();
        fs::write(
            &recipe,
            format!("{}version = \"{version}\"{}", &text[..at], &text[end..]),
        )
        .unwrap();
        let mut c = debforge();
        c.arg("build")
            .arg("--recipes")
            .arg(&lab.recipes)
            .arg("--cache")
            .arg(&lab.cache)
            .arg("--keys")
            .arg(lab.keys())
            .arg("--out")
            .arg(&out);
        if locked {
            c.arg("--locked");
        }
        run(&mut c)
    };
    let (code, _, err) = build("1.0-1", false);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "for the base (repository.toml [base]): 14 package(s) from source 'ubuntu-bionic'"
        ) && err.contains("new: libexpat1 2.2.5-3 (amd64), ")
            && err.contains(", python3 3.6.5-3 (amd64), "),
        "{err}"
    );
    let lock = fs::read_to_string(lab.recipes.join("debforge.lock")).unwrap();
    let picked = lock.matches("for-base = true").count();
    assert!(
        picked > 5 && lock.contains("name = \"libpython3.6-stdlib\""),
        "recorded in the lock: {lock}"
    );
    // The lock holds the closure: --locked builds it again, as it was
    // (every package, built ones included, the same bytes).
    let packages = out.join("dists/bionic/main/binary-amd64/Packages");
    let first = fs::read_to_string(&packages).unwrap();
    let (code, _, err) = build("1.0-1", true);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("for the base"), "{err}");
    assert_eq!(fs::read_to_string(&packages).unwrap(), first);
    assert_eq!(
        fs::read_to_string(lab.recipes.join("debforge.lock")).unwrap(),
        lock
    );
    let (full, _) = bundle(&lab, &out, "lab-1.tar", None);
    let (code, _, _) = build("1.0-2", false);
    assert_eq!(code, 0);
    let (d2, _) = bundle(&lab, &out, "lab-2.tar", Some(&full));
    let (code, _, _) = build("1.0-3", false);
    assert_eq!(code, 0);
    // Made for the machine at the first bundle, not at the second.
    let (d3_from_1, _) = bundle(&lab, &out, "lab-3-from-1.tar", Some(&full));

    let c = Chroot::of(Dist::BionicRelease);
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    assert!(!c.path("/usr/bin/python3").exists(), "no python3 before");
    let unpack = |tar: &Path, dir: &str| {
        let t = c.put(tar);
        c.ok_offline(&format!(
            "rm -rf /tmp/{dir} && mkdir /tmp/{dir} && tar -xf {t} -C /tmp/{dir}"
        ));
        format!("/tmp/{dir}/debforge-bundle/install.sh")
    };
    let (s1, s2, s3) = (
        unpack(&full, "b1"),
        unpack(&d2, "b2"),
        unpack(&d3_from_1, "b3"),
    );
    c.ok_offline(&format!("sh {s1} 2>&1"));
    c.ok_offline("apt-get update 2>&1 && apt-get install -y gpu-stack-cu101 2>&1");
    let report = c.ok_offline("gpu-stack-check");
    assert!(
        report.ends_with("gpu-stack-check: all checks passed\n"),
        "{report}"
    );
    // A driver (libcuda.so.1) and the CUDA 10.1 runtime, no GPU: the
    // Python half runs on the python3 the bundle brought.
    fs::write(
        c.path("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        shared_lib_with("libcuda.so.1", ""),
    )
    .unwrap();
    fs::write(
        c.path("/usr/local/cuda/lib64/libcudart.so.10.1"),
        shared_lib_with(
            "libcudart.so.10.1",
            "int cudaRuntimeGetVersion(int *v) { *v = 10010; return 0; }\n\
             int cudaGetDeviceCount(int *n) { *n = 0; return 100; }",
        ),
    )
    .unwrap();
    c.ok("ldconfig");
    let python = c.ok_offline("python3 --version 2>&1");
    assert!(python.starts_with("Python 3.6.5"), "{python}");
    let gpu = |c: &Chroot| {
        let report = c.ok_offline("gpu-stack-check");
        for line in [
            "ok:      CUDA runtime 10.1 (/usr/local/cuda/lib64/libcudart.so.10.1)\n",
            "ok:      ncclGetVersion() = 2402 (NCCL 2.4.2)\n",
            "ok:      cudnnGetVersion() = 7500 (cuDNN 7.5.0), as the package and /usr/include/cudnn.h says\n",
        ] {
            assert!(report.contains(line), "{line}: {report}");
        }
        assert!(
            report.ends_with("gpu-stack-check: all checks passed\n"),
            "{report}"
        );
    };
    gpu(&c);

    // The delta for the version bump; then one made for another base.
    c.ok_offline(&format!("sh {s2} 2>&1"));
    let installed = c.ok_offline(
        "apt-get update 2>&1 && apt-get install -y gpu-stack-cu101 2>&1 && dpkg-query -W -f='${Version}' gpu-stack-cu101",
    );
    assert!(installed.ends_with("1.0-2"), "{installed}");
    gpu(&c);
    let (code, msg) = c.run_offline(&format!("sh {s3} 2>&1"));
    assert_eq!(code, 1, "{msg}");
    assert!(
        msg.contains("this delta applies onto generation ")
            && msg.contains(" only; /var/lib/debforge-bundle has "),
        "{msg}"
    );
    assert_eq!(candidate(&c), "1.0-2");
}
