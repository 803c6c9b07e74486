//! The lab's stack never breaks a machine: on every release a lab machine
//! may run (real roots from Ubuntu's and Debian's archives, each with the
//! distribution's own c-ares installed and apt's lists of its archive),
//! installing or upgrading the stack plans no removal and no downgrade of a
//! package outside it. The pins as debforge wrote them before (every
//! package of the repository, c-ares included) are tried too: they did
//! break these machines, which shows the check has teeth.

use std::fs;
use std::path::Path;

use debforge::format::version::Version;

use crate::publish_remote::free_port;
use crate::stack::{Serve, pool, shipped_build_in};
use crate::support::chroot::{Chroot, Dist};
use crate::support::standin::Lab;

/// The packages a pins file holds (its `Package:` lines).
fn pinned(pref: &str) -> Vec<String> {
    let mut names: Vec<String> = pref
        .lines()
        .filter_map(|l| l.strip_prefix("Package: "))
        .map(String::from)
        .collect();
    names.dedup();
    names
}

/// What an `apt-get -s` plan does to packages outside `stack`: each
/// removal, and each `Inst` to a lower version than the one installed.
fn outside_changes(plan: &str, stack: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    for line in plan.lines() {
        let mut words = line.split_whitespace();
        let (Some(verb), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        if stack.iter().any(|s| s == name) {
            continue;
        }
        match verb {
            "Remv" => bad.push(line.to_string()),
            "Inst" => {
                let rest: Vec<&str> = words.collect();
                let old = rest
                    .first()
                    .and_then(|w| w.strip_prefix('[')?.strip_suffix(']'));
                let new = rest
                    .iter()
                    .find_map(|w| w.strip_prefix('('))
                    .map(|w| w.trim_end_matches(')'));
                if let (Some(old), Some(new)) = (old, new) {
                    let (o, n) = (Version::parse(old).unwrap(), Version::parse(new).unwrap());
                    if n.compare(&o).is_lt() {
                        bad.push(line.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    bad
}

/// The two plans of the issue: the stack installed, and a dist-upgrade
/// once only the repo-config package is in (its pins and source alone).
fn plans(c: &Chroot) -> Vec<(String, i32, String)> {
    [
        "apt-get -s install gpu-stack-cu101",
        "apt-get -s dist-upgrade",
    ]
    .iter()
    .map(|cmd| {
        let (code, out) = c.run(&format!("{cmd} 2>&1"));
        (cmd.to_string(), code, out)
    })
    .collect()
}

#[test]
fn installing_the_stack_never_removes_or_downgrades_a_package_outside_it_on_five_releases() {
    let lab = Lab::new();
    let port = free_port();
    let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/"));
    let _server = Serve::start(&out, port);
    let pref = fs::read_to_string(out.join("debforge.pref")).unwrap();
    let stack = pinned(&pref);
    assert!(
        !stack.iter().any(|n| n.contains("c-ares")),
        "a distribution's own library is not pinned: {stack:?}"
    );
    // As builds wrote them before: every package of the repository.
    let packages = fs::read_to_string(out.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
    let mut everything: Vec<&str> = packages
        .lines()
        .filter_map(|l| l.strip_prefix("Package: "))
        .collect();
    everything.sort();
    let old_pins = debforge::format::preferences::release_pins("GPU lab", "gpu-lab", everything);
    let cfg = pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb");

    let mut report = String::new();
    for dist in Dist::WITH_CARES {
        let c = Chroot::of(dist);
        if dist == Dist::NobleCares {
            // As on a machine where sssd-common brought it in.
            c.ok("apt-mark auto libcares2");
        }
        let said = c.ok(&format!("dpkg -i {} 2>&1", c.put(&cfg)));
        let codename = c.ok(". /etc/os-release; echo $VERSION_CODENAME");
        let codename = codename.trim();
        let foreign = format!(
            "gpu-lab-repo: warning: the gpu-lab repository is built for bionic; this machine runs {codename} ("
        );
        assert_eq!(
            said.contains(&foreign),
            dist != Dist::BionicCares,
            "{dist:?}: {said}"
        );
        // Our source only: the archive's lists are the ones the root was made with.
        let update = c
            .ok("apt-get update -o Dir::Etc::sourcelist=/dev/null -o APT::List-Cleanup=false 2>&1");
        assert!(
            !update
                .lines()
                .any(|l| l.starts_with("W:") || l.starts_with("E:")),
            "{dist:?}: {update}"
        );
        let cares = c.ok("dpkg-query -W -f='${Package} ${Version}\\n' 'libc-ares*' 'libcares*' sssd-common 2>/dev/null || true");
        report.push_str(&format!(
            "== {dist:?} ({codename}); installed: {}\n",
            cares.trim().replace('\n', ", ")
        ));
        for (cmd, code, plan) in plans(&c) {
            let bad = outside_changes(&plan, &stack);
            report.push_str(&format!(
                "  {cmd}: exit {code}, {} outside the stack\n",
                bad.len()
            ));
            assert!(
                bad.is_empty(),
                "{dist:?}: {cmd} touches packages outside the stack: {bad:?}\n{plan}"
            );
            if dist == Dist::BionicCares && cmd.contains("install") {
                assert_eq!(code, 0, "{plan}");
                assert!(plan.contains("Inst gpu-stack-cu101 "), "{plan}");
            }
        }
        // The pins as they were: a system library downgraded or removed on
        // every release but the one the repository is built for.
        let installed_pins = c.path("/etc/apt/preferences.d/gpu-lab.pref");
        let now = fs::read_to_string(&installed_pins).unwrap();
        assert_eq!(now, pref, "gpu-lab-repo installs the build's pins");
        fs::write(&installed_pins, &old_pins).unwrap();
        let mut broken = Vec::new();
        let mut seen = String::new();
        for (cmd, code, plan) in plans(&c) {
            let mut bad = outside_changes(&plan, &stack);
            // apt 2.8 may also give up rather than remove: the stack cannot
            // be installed without touching the system's c-ares.
            if code != 0 && plan.contains("libcares2 : Breaks: libc-ares2") {
                bad.push(format!(
                    "{cmd}: exit {code}, libcares2 : Breaks: libc-ares2"
                ));
            }
            report.push_str(&format!(
                "  with every package pinned (before): {cmd}: exit {code}, {bad:?}\n"
            ));
            seen.push_str(&plan);
            broken.extend(bad);
        }
        assert_eq!(
            broken.is_empty(),
            dist == Dist::BionicCares,
            "{dist:?}: {broken:?}\n{report}\n{seen}"
        );
    }
    eprintln!("{report}");
}

/// The CUDA 13 example project (examples/cuda13-ubuntu2404) against a
/// stand-in of NVIDIA's ubuntu2404 repository with the real relations:
/// repacking the cuDNN 9 runtime carries libcudnn9-dev-cuda-13 along (its
/// data member byte for byte, its exact Depends retargeted), -headers stays
/// NVIDIA's file. On Ubuntu 24.04 with NVIDIA's builds installed and held,
/// as on the GPU machine, the command gpu-lab-repo-cu130 names moves them
/// to the lab's builds and removes nothing (before, apt removed
/// libcudnn9-dev-cuda-13).
#[test]
fn the_cuda13_example_carries_the_dev_package_and_moves_held_builds_on_ubuntu_24_04() {
    use std::process::Command;

    use crate::support::common::{debforge, ok, run};
    use crate::support::standin::{TestKey, cuda13_repo};

    let lab = Lab::with(|root, work| cuda13_repo(root, work, TestKey::shared()));
    let key = TestKey::shared();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cuda13-ubuntu2404");
    let project = lab.dir.path().join("cu130");
    ok(Command::new("cp").arg("-r").arg(&example).arg(&project));
    fs::write(project.join("keys/nvidia-cuda-3bf863cc.asc"), &key.public).unwrap();
    let sources = project.join("recipes/sources.toml");
    let text = fs::read_to_string(&sources).unwrap();
    fs::write(
        &sources,
        text.replace(
            "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/",
            &lab.server.url("cuda13/"),
        )
        .replace("EB693B3035CD5710E231E123A4B469963BF863CC", &key.fingerprint),
    )
    .unwrap();
    let port = free_port();
    let out = lab.dir.path().join("repo-cu130");
    let (code, stdout, err) = run(debforge()
        .arg("build")
        .arg("--recipes")
        .arg(project.join("recipes"))
        .arg("--keys")
        .arg(project.join("keys"))
        .arg("--cache")
        .arg(&lab.cache)
        .arg("--out")
        .arg(&out)
        .arg("--mirror")
        .arg(format!("http://127.0.0.1:{port}/"))
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(
        err.lines().any(|l| l
            == "libcudnn9-dev-cuda-13: +debforge1, follows libcudnn9-cuda-13 (it depends on that exact version)"),
        "{err}"
    );
    ok(debforge().arg("verify").arg(&out));
    let pooled = |name: &str| out.join("pool/main/c/cudnn").join(name);
    let upstream = |name: &str| lab.www().join("cuda13").join(name);
    // -headers: NVIDIA's file itself.
    assert_eq!(
        fs::read(pooled("libcudnn9-headers-cuda-13_9.14.0.64-1_amd64.deb")).unwrap(),
        fs::read(upstream("libcudnn9-headers-cuda-13_9.14.0.64-1_amd64.deb")).unwrap()
    );
    // -dev: the same data member, the relation retargeted, nothing else.
    let dev = pooled("libcudnn9-dev-cuda-13_9.14.0.64-1+debforge1_amd64.deb");
    let dev_up = upstream("libcudnn9-dev-cuda-13_9.14.0.64-1_amd64.deb");
    let data = |deb: &Path| {
        ok(Command::new("sh")
            .arg("-c")
            .arg(format!("ar p {} data.tar.xz | sha256sum", deb.display())))
    };
    assert_eq!(data(&dev), data(&dev_up));
    let field = |deb: &Path, f: &str| ok(Command::new("dpkg-deb").arg("-f").arg(deb).arg(f));
    assert_eq!(
        field(&dev, "Depends"),
        "libcudnn9-headers-cuda-13 (= 9.14.0.64-1), libcudnn9-cuda-13 (= 9.14.0.64-1+debforge1)\n"
    );
    for f in ["Provides", "Conflicts", "Replaces", "Breaks", "Source"] {
        assert_eq!(field(&dev, f), field(&dev_up, f), "{f}");
    }

    // Ubuntu 24.04 with NVIDIA's builds installed, held as on the GPU machine.
    let _server = Serve::start(&out, port);
    let c = Chroot::of(Dist::NobleCares);
    let mut files = Vec::new();
    for (p, v) in [
        ("libcudnn9-cuda-13", "9.14.0.64-1"),
        ("libcudnn9-headers-cuda-13", "9.14.0.64-1"),
        ("libcudnn9-dev-cuda-13", "9.14.0.64-1"),
        ("libnccl2", "2.28.3-1+cuda13.0"),
        ("libnccl-dev", "2.28.3-1+cuda13.0"),
    ] {
        files.push(c.put(&upstream(&format!("{p}_{v}_amd64.deb"))));
    }
    c.ok(&format!("dpkg -i {} 2>&1", files.join(" ")));
    c.ok("apt-mark hold libnccl2 libnccl-dev libcudnn9-cuda-13");
    let before = c.ok("dpkg-query -W -f='${Package}\\n'");
    let cfg = out.join("pool/main/g/gpu-lab-repo-cu130/gpu-lab-repo-cu130_1.0-1_all.deb");
    let said = c.ok(&format!("dpkg -i {} 2>&1", c.put(&cfg)));
    let command = "sudo apt-mark unhold libcudnn9-cuda-13 libnccl-dev libnccl2 && sudo apt-get update && sudo apt-get install gpu-stack-cu130";
    assert!(
        said.contains(&format!("to move them: {command}\n")),
        "{said}"
    );
    assert!(!said.contains("is built for"), "{said}");
    let run_it = command.replace("sudo ", "").replace(
        "apt-get update",
        "apt-get update -o Dir::Etc::sourcelist=/dev/null -o APT::List-Cleanup=false",
    );
    let plan = c.ok(&format!(
        "{} 2>&1",
        run_it.replace("apt-get install", "apt-get -s install")
    ));
    assert!(!plan.lines().any(|l| l.starts_with("Remv")), "{plan}");
    assert!(
        plan.contains("Inst libcudnn9-dev-cuda-13 [9.14.0.64-1] (9.14.0.64-1+debforge1 "),
        "{plan}"
    );
    c.ok(&format!(
        "{} 2>&1",
        run_it.replace("apt-get install", "apt-get install -y")
    ));
    assert_eq!(
        c.ok("dpkg-query -W -f='${Package} ${Version}\\n' libcudnn9-cuda-13 libcudnn9-dev-cuda-13 libcudnn9-headers-cuda-13 libnccl2 libnccl-dev"),
        "libcudnn9-cuda-13 9.14.0.64-1+debforge1\nlibcudnn9-dev-cuda-13 9.14.0.64-1+debforge1\nlibcudnn9-headers-cuda-13 9.14.0.64-1\nlibnccl-dev 2.28.3-1+cuda13.0+debforge1\nlibnccl2 2.28.3-1+cuda13.0+debforge1\n"
    );
    let after = c.ok("dpkg-query -W -f='${Package} ${Status}\\n'");
    for p in before.lines() {
        assert!(
            after.contains(&format!("{p} install ok installed")),
            "{p} removed:\n{after}"
        );
    }
    let report = c.ok("gpu-stack-check --files");
    for line in [
        "ok:      /usr/include/x86_64-linux-gnu/cudnn_version_v9.h says cuDNN 9.14.0\n",
        "ok:      /usr/local/cuda/lib64/libcudnn.so.9 -> /usr/lib/x86_64-linux-gnu/libcudnn.so.9\n",
        "ok:      /usr/local/cuda/nccl/lib/libnccl.so.2 -> /usr/lib/x86_64-linux-gnu/libnccl.so.2\n",
        "gpu-stack-check: all checks passed\n",
    ] {
        assert!(report.contains(line), "{line}: {report}");
    }
}

/// The example project ships copies of the shipped recipes' shared files
/// (recipe files must lie inside their recipes directory): the same bytes.
#[test]
fn the_examples_shared_files_are_the_shipped_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in [
        "files/gpu-stack-check",
        "files/gpu_check.py",
        "files/copyright",
        "scripts/cuda-links.postinst",
        "scripts/cuda-links.postrm",
    ] {
        assert_eq!(
            fs::read(root.join("recipes").join(f)).unwrap(),
            fs::read(root.join("examples/cuda13-ubuntu2404/recipes").join(f)).unwrap(),
            "{f}: cp recipes/{f} examples/cuda13-ubuntu2404/recipes/{f}"
        );
    }
}
