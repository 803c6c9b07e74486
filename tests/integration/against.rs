//! `verify --against`: the repository resolved as apt would against the
//! base of real Ubuntu 18.04 machines — the dpkg status file of a minbase
//! root and the release's own `main` index, both made by the real tools
//! from Ubuntu's archive (the cached test roots).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::chroot::{Dist, base_tarball};
use crate::support::common::{debforge, ok, run};
use crate::support::standin::Lab;

/// A file of a cached root, copied out.
fn from_root(dist: Dist, member: &str, to: &Path) -> PathBuf {
    let bytes = Command::new("tar")
        .arg("-xOf")
        .arg(base_tarball(dist))
        .arg(member)
        .output()
        .unwrap();
    assert!(
        bytes.status.success(),
        "{member} is not in the {dist:?} root"
    );
    fs::write(to, bytes.stdout).unwrap();
    to.to_path_buf()
}

/// The version a status file or index gives `package`.
fn version_in(file: &Path, package: &str) -> String {
    let text = fs::read_to_string(file).unwrap();
    let stanza = text
        .split("\n\n")
        .find(|s| s.starts_with(&format!("Package: {package}\n")))
        .unwrap();
    stanza
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .unwrap()
        .to_string()
}

/// A local package with `depends` (built in `dir`), added to the project.
fn add_local(dir: &Path, recipes: &Path, name: &str, depends: &str) {
    let tree = dir.join("trees").join(name);
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: lab <lab@example.org>\nDepends: {depends}\nDescription: {name}\n local.\n"),
    )
    .unwrap();
    let deb = dir.join(format!("{name}_1.0_amd64.deb"));
    ok(debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    fs::write(
        recipes.join(format!("packages/{name}.toml")),
        format!(
            "name = \"{name}\"\nversion = \"1.0\"\narchitecture = \"amd64\"\nfrom = {{ path = \"{}\" }}\n",
            deb.display()
        ),
    )
    .unwrap();
}

fn verify_against(out: &Path, bases: &[&Path], json: bool) -> (i32, String) {
    let mut c = debforge();
    c.arg("verify").arg(out);
    for b in bases {
        c.arg("--against").arg(b);
    }
    if json {
        c.arg("--json");
    }
    let (code, stdout, err) = run(&mut c);
    assert!(code == 0 || code == 1, "{err}");
    (code, stdout)
}

#[test]
fn verify_against_real_bionic_machines_lists_what_they_lack_with_the_chain() {
    let lab = Lab::new();
    let status = from_root(
        Dist::BionicRelease,
        "./var/lib/dpkg/status",
        &lab.dir.path().join("status"),
    );
    let index = from_root(
        Dist::BionicCares,
        "./var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_main_binary-amd64_Packages",
        &lab.dir.path().join("bionic-main-Packages"),
    );
    let out = lab.dir.path().join("repo-out");

    // The lab's CUDA 10.1 stack (NVIDIA's relations: libc6 (>= 2.3.4),
    // libgcc1, libstdc++6) installs on a bare 18.04 machine.
    ok(lab.cmd("build").arg("--out").arg(&out));
    let (code, stdout) = verify_against(&out, &[&status], false);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "against {} (a dpkg status file, packages installed: ",
            status.display()
        )),
        "{stdout}"
    );

    // A tool that needs python3 and a library shaped as NVIDIA's CUDA 13
    // NCCL for Ubuntu 24.04 (its real relations) do not.
    add_local(
        lab.dir.path(),
        &lab.recipes,
        "nccl-cu13-shaped",
        "libc6 (>= 2.38), libgcc-s1 (>= 3.4), libstdc++6 (>= 12)",
    );
    add_local(
        lab.dir.path(),
        &lab.recipes,
        "lab-tools",
        "python3 (>= 3.6), nccl-cu13-shaped",
    );
    ok(lab.cmd("build").arg("--out").arg(&out));
    let libc6 = version_in(&status, "libc6");
    let libstdcxx = version_in(&status, "libstdc++6");
    let (code, stdout) = verify_against(&out, &[&status], false);
    assert_eq!(code, 1, "{stdout}");
    let problems: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("problem: not installable on the base: "))
        .collect();
    assert_eq!(
        problems,
        [
            "lab-tools 1.0 → python3 (>= 3.6): neither the base nor the repository has it".to_string(),
            format!("lab-tools 1.0 → nccl-cu13-shaped 1.0 → libc6 (>= 2.38): only libc6 {libc6} there"),
            "lab-tools 1.0 → nccl-cu13-shaped 1.0 → libgcc-s1 (>= 3.4): neither the base nor the repository has it".to_string(),
            format!("lab-tools 1.0 → nccl-cu13-shaped 1.0 → libstdc++6 (>= 12): only libstdc++6 {libstdcxx} there"),
        ],
        "{stdout}"
    );

    // What the release's index would have to add (item 3's closure): python3
    // and what it needs down to the minbase machine, each with its chain;
    // not a newer C library.
    let mut c = debforge();
    c.arg("verify")
        .arg(&out)
        .arg("--against")
        .arg(&status)
        .arg("--closure-from")
        .arg(&index);
    let (code, text, err) = run(&mut c);
    assert_eq!(code, 1, "{err}");
    let python3 = version_in(&index, "python3");
    let stdlib = version_in(&index, "libpython3.6-stdlib");
    assert!(
        text.contains(&format!(
            "  + python3 {python3} (lab-tools 1.0 → python3 (>= 3.6))\n"
        )),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "  + libpython3.6-stdlib {stdlib} (lab-tools 1.0 → python3 {python3} → "
            ))
        })
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with(")"), "{line}");
    assert!(
        text.contains(
            "  ! not in the index either: lab-tools 1.0 → nccl-cu13-shaped 1.0 → libc6 (>= 2.38)"
        ),
        "{text}"
    );

    // The release's own index offers python3 (3.6), not a newer C library.
    let (code, stdout) = verify_against(&out, &[&index], true);
    assert_eq!(code, 1, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["bases"][0]["kind"], "index");
    assert!(report["bases"][0]["packages"].as_u64().unwrap() > 3000);
    let needs: Vec<&str> = report["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["needs"].as_str().unwrap())
        .collect();
    assert_eq!(
        needs,
        [
            "libc6 (>= 2.38)",
            "libgcc-s1 (>= 3.4)",
            "libstdc++6 (>= 12)"
        ]
    );
    assert_eq!(
        report["missing"][0]["chain"],
        serde_json::json!(["lab-tools 1.0", "nccl-cu13-shaped 1.0"])
    );
    assert_eq!(
        report["missing"][0]["found"],
        serde_json::json!([format!("libc6 {}", version_in(&index, "libc6"))])
    );

    // Not a base: said before anything is checked, with what to pass.
    let (code, _, err) = run(debforge()
        .arg("verify")
        .arg(&out)
        .arg("--against")
        .arg(out.join("dists/bionic/Release")));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("neither a dpkg status file (Status fields) nor a Packages index")
            && err.contains("hint: pass a copy of a lab machine's /var/lib/dpkg/status"),
        "{err}"
    );
}

/// The project names its base (`[base]` in repository.toml): `build`
/// refuses a repository whose packages would not install there with
/// nothing else, lists the chains, and writes nothing; without the package
/// that needs what is missing, it builds.
#[test]
fn build_refuses_what_would_not_install_on_the_projects_base() {
    let lab = Lab::new();
    fs::create_dir_all(lab.recipes.join("base")).unwrap();
    let status = from_root(
        Dist::BionicRelease,
        "./var/lib/dpkg/status",
        &lab.recipes.join("base/lab-01.status"),
    );
    fs::write(
        lab.recipes.join("repository.toml"),
        "[repository]\norigin = \"GPU lab\"\nlabel = \"gpu-lab\"\n\n[base]\nfiles = [\"base/lab-01.status\"]\n",
    )
    .unwrap();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let release = fs::read(out.join("dists/bionic/Release")).unwrap();
    add_local(
        lab.dir.path(),
        &lab.recipes,
        "lab-tools",
        "python3 (>= 3.6) | python3-minimal",
    );
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the repository would not install on the lab's base (repository.toml [base])")
            && err.contains("lab-tools 1.0 → python3 (>= 3.6) | python3-minimal: neither the base nor the repository has it")
            && err.contains("nothing was written")
            && err.contains("hint: add a recipe for each missing package"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("dists/bionic/Release")).unwrap(), release);
    fs::remove_file(lab.recipes.join("packages/lab-tools.toml")).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));

    // A base that is no base, or outside the project: said before anything
    // is fetched.
    fs::write(&status, "Origin: Ubuntu\n").unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("neither a dpkg status file"), "{err}");
    fs::write(
        lab.recipes.join("repository.toml"),
        "[repository]\norigin = \"GPU lab\"\n\n[base]\nfiles = [\"../elsewhere\"]\n",
    )
    .unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("base.files"), "{err}");
}

/// The closure `verify --closure-from` lists for a package that needs
/// python3 on a bare 18.04 machine is what the real apt 1.6 there would
/// install from the release's `main` (Recommends aside, which the closure
/// does not follow): the same packages, at the same versions.
#[test]
fn the_closure_is_what_apt_would_install_on_the_base() {
    use crate::support::chroot::Chroot;
    let lab = Lab::new();
    let status = from_root(
        Dist::BionicRelease,
        "./var/lib/dpkg/status",
        &lab.dir.path().join("status"),
    );
    let index = from_root(
        Dist::BionicCares,
        "./var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_main_binary-amd64_Packages",
        &lab.dir.path().join("bionic-main-Packages"),
    );
    let inrelease = from_root(
        Dist::BionicCares,
        "./var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_InRelease",
        &lab.dir.path().join("bionic-InRelease"),
    );
    add_local(
        lab.dir.path(),
        &lab.recipes,
        "lab-tools",
        "python3 (>= 3.6)",
    );
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let (code, stdout, err) = run(debforge()
        .arg("verify")
        .arg(&out)
        .arg("--against")
        .arg(&status)
        .arg("--closure-from")
        .arg(&index)
        .arg("--json"));
    assert_eq!(code, 1, "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let mut ours: Vec<String> = report["closure"]["pulled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["package"].as_str().unwrap().to_string())
        .collect();
    ours.sort();

    // The same machine (its status is the one above), the release's main
    // as its only source, no network: what apt would install.
    let c = Chroot::of(Dist::BionicRelease);
    c.ok("rm -f /etc/apt/sources.list.d/* && echo 'deb http://archive.ubuntu.com/ubuntu bionic main' > /etc/apt/sources.list");
    fs::copy(
        &index,
        c.path(
            "/var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_main_binary-amd64_Packages",
        ),
    )
    .unwrap();
    fs::copy(
        &inrelease,
        c.path("/var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_InRelease"),
    )
    .unwrap();
    let plan = c.ok_offline("apt-get -s --no-install-recommends install python3 2>&1");
    // "Inst python3-minimal (3.6.5-3 Ubuntu:18.04/bionic [amd64])"
    let mut apt: Vec<String> = plan
        .lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap();
            let version = w.next().unwrap().trim_start_matches('(');
            format!("{name} {version}")
        })
        .collect();
    apt.sort();
    assert!(apt.len() > 5, "{plan}");
    assert_eq!(ours, apt, "{plan}");
}

/// A project whose source is Ubuntu's real signed `bionic` (the release, no
/// updates), whose base is `base` (the lines of `[base]`) beside the
/// status of a bare 18.04 machine as released (`base/lab-01.status`), and
/// whose one package, lab-tools, is a script run by python3.
fn release_project(dir: &Path, base: &str) -> PathBuf {
    let recipes = dir.join("recipes");
    fs::create_dir_all(recipes.join("packages")).unwrap();
    fs::create_dir_all(recipes.join("base")).unwrap();
    // The machine as installed from the release: minbase from bionic
    // main alone, no updates.
    from_root(
        Dist::BionicRelease,
        "./var/lib/dpkg/status",
        &recipes.join("base/lab-01.status"),
    );
    let keyring = Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/ubuntu-archive-keyring.gpg");
    fs::write(
        recipes.join("sources.toml"),
        format!(
            "[source.ubuntu-bionic]\nurl = \"http://archive.ubuntu.com/ubuntu/\"\nlayout = \"dists\"\nsuite = \"bionic\"\ncomponent = \"main\"\nkey = \"{}\"\nfingerprint = [\"790BC7277767219C42C86F933B4FE6ACC0B21F32\", \"F6ECB3762474EDA9D21B7022871920D1991BC93C\"]\n",
            keyring.display()
        ),
    )
    .unwrap();
    fs::write(
        recipes.join("repository.toml"),
        format!("[repository]\norigin = \"GPU lab\"\nlabel = \"gpu-lab\"\n\n[base]\n{base}\n"),
    )
    .unwrap();
    // lab-tools: a script run by python3.
    let tree = dir.join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::create_dir_all(tree.join("usr/bin")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: lab-tools\nVersion: 1.0\nArchitecture: all\nMaintainer: lab <lab@example.org>\nDepends: python3 (>= 3.6)\nDescription: lab tools\n python3.\n",
    )
    .unwrap();
    let script = tree.join("usr/bin/lab-tools");
    fs::write(
        &script,
        "#!/usr/bin/python3\nimport sys\nprint('lab-tools on python', sys.version.split()[0])\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let deb = dir.join("lab-tools_1.0_all.deb");
    ok(debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    fs::write(
        recipes.join("packages/lab-tools.toml"),
        format!(
            "name = \"lab-tools\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = {{ path = \"{}\" }}\n",
            deb.display()
        ),
    )
    .unwrap();
    recipes
}

/// `debforge SUB --recipes recipes --cache cache [--keys keys]` in `dir`.
fn project_cmd(dir: &Path, sub: &str) -> Command {
    let mut c = debforge();
    c.current_dir(dir)
        .arg(sub)
        .args(["--recipes", "recipes", "--cache", "cache"]);
    if sub != "fetch" {
        c.args(["--keys", "keys"]);
    }
    c
}

/// The lab's day with a base: a tool that needs python3, a bare 18.04
/// machine as released (minbase from bionic main alone, no updates).
/// `build` refuses; `closure --write` picks what the base lacks from
/// Ubuntu's real signed `bionic` index (the release the machines were
/// installed from) and writes recipes; `build` then locks and fetches them
/// through that index and passes the base check; on the bare 18.04 root,
/// with no apt source but the bundle's and no network, `apt-get install
/// lab-tools` installs from the bundle alone, and its python3 runs.
#[test]
fn the_closure_written_as_recipes_makes_the_bundle_alone_install_on_the_base() {
    use crate::support::chroot::Chroot;
    if crate::support::common::skipped_offline("the_closure_written_as_recipes…") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recipes = release_project(dir.path(), "files = [\"base/lab-01.status\"]");
    let cmd = |sub: &str| project_cmd(dir.path(), sub);
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lab-tools 1.0 → python3 (>= 3.6)"), "{err}");

    let said = ok(cmd("closure").args(["--from-source", "ubuntu-bionic", "--write"]));
    assert!(
        said.contains("  + python3 3.6.5-3 (lab-tools 1.0 → python3 (>= 3.6))")
            && said.contains("wrote ")
            && said.contains("next: debforge build"),
        "{said}"
    );
    let written = fs::read_to_string(recipes.join("packages/python3.toml")).unwrap();
    assert!(
        written.contains("from = { source = \"ubuntu-bionic\" }")
            && written.contains("version = \"3.6.5-3\""),
        "{written}"
    );
    ok(&mut cmd("build"));
    let lock = fs::read_to_string(recipes.join("debforge.lock")).unwrap();
    assert!(
        lock.contains("libpython3.6-stdlib"),
        "recorded in the lock like any recipe"
    );
    let bundle = dir.path().join("lab.tar");
    ok(debforge()
        .current_dir(dir.path())
        .args(["bundle", "-o"])
        .arg(&bundle));

    let c = Chroot::of(Dist::BionicRelease);
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let t = c.put(&bundle);
    c.ok_offline(&format!(
        "cd /tmp && tar -xf {t} && sh debforge-bundle/install.sh 2>&1"
    ));
    c.ok_offline("apt-get update 2>&1 && apt-get install -y lab-tools 2>&1");
    let ran = c.ok_offline("lab-tools");
    assert!(ran.starts_with("lab-tools on python 3.6.5"), "{ran}");
}

/// The base named through a source's signed index (`[base] sources`: the
/// lab mirrors the release inside the air gap), and the closure as a
/// setting (`[base] closure`) that follows the base: picked when the base
/// lacks it, recorded in the lock, held by `--locked`, and said when the
/// base no longer lacks it.
#[test]
fn the_base_through_a_signed_index_and_the_closure_as_a_setting() {
    if crate::support::common::skipped_offline("the_base_through_a_signed_index…") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recipes = release_project(dir.path(), "sources = [\"ubuntu-bionic\"]");
    let cmd = |sub: &str| project_cmd(dir.path(), sub);
    // The release's index offers python3: nothing is lacking.
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 0, "{err}");
    // It offers no C library of 2.38.
    add_local(dir.path(), &recipes, "needs-new-libc", "libc6 (>= 2.38)");
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs-new-libc 1.0 → libc6 (>= 2.38): only libc6 2.27-3ubuntu1 there")
            && !err.contains("python3"),
        "{err}"
    );
    fs::remove_file(recipes.join("packages/needs-new-libc.toml")).unwrap();

    // The machines as installed, and the closure from the release.
    let base = recipes.join("repository.toml");
    let text = fs::read_to_string(&base).unwrap().replace(
        "sources = [\"ubuntu-bionic\"]",
        "files = [\"base/lab-01.status\"]\nclosure = \"ubuntu-bionic\"",
    );
    fs::write(&base, text).unwrap();
    let (code, _, err) = run(cmd("build").args(["--out", "repo-out"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(", python3 3.6.5-3 (amd64), "), "{err}");
    let lock = fs::read_to_string(recipes.join("debforge.lock")).unwrap();
    assert!(lock.contains("for-base = true"), "{lock}");
    let (code, _, err) = run(cmd("build").arg("--locked"));
    assert_eq!(code, 0, "{err}");

    // Offline: the snapshot holds the picked packages and the index the
    // closure is checked against; the build there needs no network.
    let (code, _, err) = run(cmd("fetch").arg("--locked").arg("--to").arg("snap"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("[base] closure: `debforge build` picks from 'ubuntu-bionic'"),
        "{err}"
    );
    let (code, _, err) =
        run(cmd("build").args(["--locked", "--source-dir", "snap", "--out", "offline-out"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        fs::read_to_string(
            dir.path()
                .join("offline-out/dists/bionic/main/binary-amd64/Packages")
        )
        .unwrap(),
        fs::read_to_string(
            dir.path()
                .join("repo-out/dists/bionic/main/binary-amd64/Packages")
        )
        .unwrap()
    );

    // A pick its source no longer offers (a refreshed mirror): picked again.
    let at = lock.find("name = \"python3\"\n").unwrap();
    let v = at + lock[at..].find("version = \"3.6.5-3\"").unwrap();
    let stale = format!(
        "{}version = \"3.6.5-2\"{}",
        &lock[..v],
        &lock[v + "version = \"3.6.5-3\"".len()..]
    );
    fs::write(recipes.join("debforge.lock"), &stale).unwrap();
    let (code, _, err) = run(cmd("build").arg("--locked"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("python3 3.6.5-2 (amd64) is not in "), "{err}");
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the packages picked for the base are picked again"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(recipes.join("debforge.lock")).unwrap(),
        lock
    );

    // A source [base] names that sources.toml lacks: said first.
    let settings = fs::read_to_string(&base).unwrap();
    fs::write(
        &base,
        settings.replace("closure = \"ubuntu-bionic\"", "closure = \"ubuntu-bionc\""),
    )
    .unwrap();
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("[base] names the source \"ubuntu-bionc\", which sources.toml does not have (it has: ubuntu-bionic)"),
        "{err}"
    );
    fs::write(&base, settings).unwrap();

    // The lab's machines got python3 since: the base (their status) no
    // longer lacks it; --locked says so, a build drops it from the lock.
    let status = recipes.join("base/lab-01.status");
    let mut text = fs::read_to_string(&status).unwrap();
    text.push_str("\nPackage: python3\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.6.7-1~18.04\n");
    fs::write(&status, text).unwrap();
    let (code, _, err) = run(cmd("build").arg("--locked"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the packages the base lacks are not the ones")
            && err.contains("no longer needed: ")
            && err.contains("python3 3.6.5-3 (amd64)")
            && err.contains("hint: the recipes or the base changed: build once without --locked"),
        "{err}"
    );
    let (code, _, err) = run(&mut cmd("build"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no longer needed: "), "{err}");
    let lock = fs::read_to_string(recipes.join("debforge.lock")).unwrap();
    assert!(!lock.contains("for-base = true"), "{lock}");
    assert!(lock.contains("name = \"lab-tools\""), "{lock}");
}
