//! The lab's stack never breaks a machine: on every release a lab machine
//! may run (real roots from Ubuntu's and Debian's archives, each with the
//! distribution's own c-ares installed and apt's lists of its archive),
//! installing or upgrading the stack plans no removal and no downgrade of a
//! package outside it. The pins as debforge wrote them before (every
//! package of the repository, c-ares included) are tried too: they did
//! break these machines, which shows the check has teeth.

use std::fs;

use debforge::format::version::Version;

use crate::chroot::{Chroot, Dist};
use crate::publish_remote::free_port;
use crate::stack::{Serve, pool, shipped_build_in};
use crate::standin::Lab;

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
