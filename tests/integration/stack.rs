//! The whole chain with the shipped recipes: fetch, repack with the CUDA
//! link scripts, build gpu-stack-cu101 and the repo-config package, publish
//! signed; then lintian, and dpkg plus gpu-stack-check in a Debian chroot.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::chroot::Chroot;
use crate::common::{ok, run};
use crate::standin::Lab;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// The lab project with the shipped recipes for the NVIDIA packages, the
/// metapackage and the repo-config package; built. Returns the output.
fn shipped_build() -> (Lab, PathBuf) {
    let lab = Lab::new();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    copy_dir(&shipped.join("scripts"), &lab.recipes.join("scripts"));
    copy_dir(&shipped.join("files"), &lab.recipes.join("files"));
    for p in [
        "libcudnn7",
        "libcudnn7-dev",
        "libnccl2",
        "libnccl-dev",
        "gpu-stack-cu101",
        "gpu-lab-repo",
    ] {
        fs::copy(
            shipped.join(format!("packages/{p}.toml")),
            lab.recipes.join(format!("packages/{p}.toml")),
        )
        .unwrap();
    }
    let settings = fs::read_to_string(shipped.join("repository.toml")).unwrap();
    let settings = settings.replace(
        "http://mirror.gpu-lab.example/debforge/",
        &lab.server.url("repo/"),
    );
    fs::write(lab.recipes.join("repository.toml"), settings).unwrap();
    let out = lab.dir.path().join("repo-out");
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", crate::common::EPOCH));
    (lab, out)
}

fn pool(out: &Path, dir: &str, file: &str) -> PathBuf {
    out.join("pool/main").join(dir).join(file)
}

#[test]
fn the_metapackage_and_repo_config_are_right_and_lintian_clean() {
    let (_lab, out) = shipped_build();
    let meta = pool(&out, "g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb");
    let repo = pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb");
    let field = |d: &Path, f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(d).arg(f))
            .trim()
            .to_string()
    };
    assert_eq!(
        field(&meta, "Depends"),
        "libcudnn7 (= 7.5.0.56-1+cuda10.1), libcudnn7-dev (= 7.5.0.56-1+cuda10.1), libnccl2 (= 2.4.2-1+cuda10.1), libnccl-dev (= 2.4.2-1+cuda10.1), libc-ares-dev"
    );
    let x = out.parent().unwrap().join("x-meta");
    ok(Command::new("dpkg-deb").arg("-x").arg(&meta).arg(&x));
    let check = fs::read_to_string(x.join("usr/bin/gpu-stack-check")).unwrap();
    assert!(
        check.contains("CUDNN_DEB=\"7.5.0.56-1+cuda10.1\"") && !check.contains("@VERSION_OF"),
        "versions filled in"
    );

    let conffiles = ok(Command::new("dpkg-deb")
        .arg("-I")
        .arg(&repo)
        .arg("conffiles"));
    assert_eq!(
        conffiles,
        "/etc/apt/preferences.d/gpu-lab.pref\n/etc/apt/sources.list.d/gpu-lab.sources\n"
    );
    let xr = out.parent().unwrap().join("x-repo");
    ok(Command::new("dpkg-deb").arg("-x").arg(&repo).arg(&xr));
    let sources = fs::read_to_string(xr.join("etc/apt/sources.list.d/gpu-lab.sources")).unwrap();
    assert!(
        sources.contains("Signed-By: /usr/share/keyrings/gpu-lab-archive-keyring.gpg"),
        "{sources}"
    );
    assert!(
        sources.contains("/repo/"),
        "the mirror from repository.toml: {sources}"
    );
    assert_eq!(
        fs::read(xr.join("usr/share/keyrings/gpu-lab-archive-keyring.gpg")).unwrap(),
        fs::read(out.join("debforge-archive-keyring.gpg")).unwrap()
    );
    let pins = fs::read_to_string(xr.join("etc/apt/preferences.d/gpu-lab.pref")).unwrap();
    assert!(
        pins.contains("Package: libcudnn7\nPin: version 7.5.0.56-1+cuda10.1\nPin-Priority: 1001"),
        "{pins}"
    );

    for deb in [&meta, &repo] {
        let (_, stdout, stderr) = run(Command::new("lintian")
            .args(["--tag-display-limit", "0"])
            .arg(deb));
        let text = format!("{stdout}{stderr}");
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("E:")).collect();
        assert!(
            errors.is_empty(),
            "lintian errors for {}:\n{text}",
            deb.display()
        );
        eprintln!(
            "lintian {}:\n{text}",
            deb.file_name().unwrap().to_string_lossy()
        );
    }
}

#[test]
fn installed_in_a_chroot_gpu_stack_check_passes_and_names_what_breaks() {
    let (_lab, out) = shipped_build();
    let c = Chroot::new();
    let mut files = Vec::new();
    for (dir, f) in [
        ("libc/libcudnn7", "libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb"),
        (
            "libc/libcudnn7-dev",
            "libcudnn7-dev_7.5.0.56-1+cuda10.1_amd64.deb",
        ),
        ("libn/libnccl2", "libnccl2_2.4.2-1+cuda10.1_amd64.deb"),
        ("libn/libnccl-dev", "libnccl-dev_2.4.2-1+cuda10.1_amd64.deb"),
        ("libc/libc-ares2", "libc-ares2_1.14.0-1ubuntu0.2_amd64.deb"),
        (
            "libc/libc-ares-dev",
            "libc-ares-dev_1.14.0-1ubuntu0.2_amd64.deb",
        ),
        ("g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb"),
        ("g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"),
    ] {
        files.push(c.put(&pool(&out, dir, f)));
    }
    c.ok(&format!("dpkg -i {}", files.join(" ")));
    // Upstream's alternatives survived the repack, and our links followed.
    c.ok("test \"$(readlink -f /usr/include/cudnn.h)\" = /usr/include/x86_64-linux-gnu/cudnn_v7.h");
    let report = c.ok("gpu-stack-check");
    assert!(report.contains("all checks passed"), "{report}");
    assert!(
        report.contains(
            "/usr/local/cuda/nccl/lib/libnccl.so.2 -> /usr/lib/x86_64-linux-gnu/libnccl.so.2"
        ),
        "{report}"
    );
    let conffiles = c.ok("dpkg-query -W -f='${Conffiles}' gpu-lab-repo");
    assert!(
        conffiles.contains("/etc/apt/sources.list.d/gpu-lab.sources"),
        "{conffiles}"
    );

    // Break a link: the check says what and how to fix it.
    c.ok("rm /usr/local/cuda/lib64/libcudnn.so.7");
    let (code, report) = c.run("gpu-stack-check");
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("PROBLEM: /usr/local/cuda/lib64/libcudnn.so.7 is missing")
            && report.contains("fix: apt-get install --reinstall"),
        "{report}"
    );

    // Removing everything leaves nothing of ours.
    c.ok("dpkg -P gpu-stack-cu101 gpu-lab-repo libcudnn7-dev libnccl-dev libcudnn7 libnccl2");
    assert!(!c.path("/usr/local/cuda").exists());
    assert!(!c.path("/etc/apt/sources.list.d/gpu-lab.sources").exists());
    assert!(!c.path("/var/lib/debforge").exists());
}

#[test]
fn recipe_mistakes_are_named_before_anything_is_written() {
    let lab = Lab::new();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    copy_dir(&shipped.join("files"), &lab.recipes.join("files"));
    copy_dir(&shipped.join("scripts"), &lab.recipes.join("scripts"));
    let meta = fs::read_to_string(shipped.join("packages/gpu-stack-cu101.toml")).unwrap();
    let out = lab.dir.path().join("out");
    let fails = |needle: &str| {
        let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "missing {needle:?}:\n{err}");
        assert!(!out.exists(), "output written");
    };
    // A metapackage that names a package no recipe provides.
    fs::write(
        lab.recipes.join("packages/gpu-stack-cu101.toml"),
        meta.replace("\"libnccl-dev\"]", "\"libnccl-dev\", \"libcudnn8\"]"),
    )
    .unwrap();
    fails("gpu-stack-cu101.toml: build.depends-exact names libcudnn8, which no recipe provides");
    fs::remove_file(lab.recipes.join("packages/gpu-stack-cu101.toml")).unwrap();

    // A repack whose script is missing, or uses a placeholder nobody sets.
    let nccl = fs::read_to_string(shipped.join("packages/libnccl2.toml")).unwrap();
    fs::write(
        lab.recipes.join("packages/libnccl2.toml"),
        nccl.replace("scripts/cuda-links.postrm", "scripts/missing.postrm"),
    )
    .unwrap();
    fails("scripts/missing.postrm: cannot read the maintainer script");
    fs::write(
        lab.recipes.join("packages/libnccl2.toml"),
        nccl.replace("vars = { LINKS", "vars = { OTHER"),
    )
    .unwrap();
    fails("uses @LINKS@, which the recipe's [repack.vars] does not set");
    // A repo-config package without a mirror to point at.
    fs::write(lab.recipes.join("packages/libnccl2.toml"), &nccl).unwrap();
    fs::copy(
        shipped.join("packages/gpu-lab-repo.toml"),
        lab.recipes.join("packages/gpu-lab-repo.toml"),
    )
    .unwrap();
    fails("needs the mirror URL: set `mirror` in recipes/repository.toml");
}
