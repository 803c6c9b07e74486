//! `debforge vercmp` and the version ordering, checked against the real
//! `dpkg --compare-versions`.

use std::cmp::Ordering;
use std::process::Command;

use debforge::format::Version;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::support::common::{debforge, run};

fn dpkg_holds(a: &str, op: &str, b: &str) -> bool {
    let status = Command::new("dpkg")
        .args(["--compare-versions", a, op, b])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("dpkg runs");
    match status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("dpkg --compare-versions {a:?} {op} {b:?} exited {other:?}"),
    }
}

/// dpkg's ordering of a and b, from two calls.
fn dpkg_order(a: &str, b: &str) -> Ordering {
    if dpkg_holds(a, "lt", b) {
        Ordering::Less
    } else if dpkg_holds(a, "eq", b) {
        Ordering::Equal
    } else {
        Ordering::Greater
    }
}

/// Versions built from the pieces that matter: epochs, `~`, letters against
/// punctuation, `+cuda10.1`-style suffixes, leading zeros and digit runs far
/// longer than any machine integer.
fn version_strategy() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{1,3}",
        "0{1,3}[0-9]{1,2}",
        "[0-9]{25,40}",
        Just(".".to_string()),
        Just("~".to_string()),
        Just("~rc".to_string()),
        Just("+".to_string()),
        Just("+cuda10.1".to_string()),
        "[a-zA-Z]{1,2}",
    ];
    let upstream = ("[0-9]{1,3}", prop::collection::vec(piece.clone(), 0..5))
        .prop_map(|(d, p)| format!("{d}{}", p.concat()));
    let revision = prop::option::of(prop::collection::vec(
        prop_oneof![
            "[0-9]{1,2}",
            Just("ubuntu".to_string()),
            Just("+cuda10.1".to_string()),
            Just("~".to_string()),
            Just(".".to_string()),
            "[a-z]"
        ],
        1..4,
    ));
    let epoch = prop::option::of(prop_oneof!["[0-3]", "0[0-9]", "[0-9]{9}"]);
    (epoch, upstream, revision).prop_map(|(e, u, r)| {
        let mut s = String::new();
        if let Some(e) = e {
            s.push_str(&format!("{e}:"));
        }
        s.push_str(&u);
        if let Some(r) = r {
            s.push('-');
            s.push_str(&r.concat());
        }
        s
    })
}

/// Pairs that are often close: the second is frequently the first, edited.
fn pair_strategy() -> impl Strategy<Value = (String, String)> {
    (version_strategy(), version_strategy(), 0..4u8).prop_map(|(a, b, how)| match how {
        0 => (a.clone(), format!("{a}~")),
        1 => (a.clone(), format!("{a}.0")),
        2 => (a.clone(), a.replacen('.', "~", 1)),
        _ => (a, b),
    })
}

#[test]
fn ordering_matches_dpkg_on_generated_pairs() {
    let mut runner = TestRunner::new(Config {
        cases: 2500,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&pair_strategy(), |(a, b)| {
            let ours = Version::parse_lenient(&a)
                .unwrap()
                .0
                .compare(&Version::parse_lenient(&b).unwrap().0);
            prop_assert_eq!(ours, dpkg_order(&a, &b), "{} vs {}", a, b);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_binary_answers_as_dpkg_does() {
    let mut runner = TestRunner::new(Config {
        cases: 150,
        failure_persistence: None,
        ..Config::default()
    });
    let ops = ["lt", "le", "eq", "ne", "ge", "gt"];
    runner
        .run(&(pair_strategy(), 0..6usize), |((a, b), op)| {
            let (code, _, err) = run(debforge().args(["vercmp", &a, ops[op], &b]));
            let want = if dpkg_holds(&a, ops[op], &b) { 0 } else { 1 };
            prop_assert_eq!(code, want, "{} {} {}: {}", a, ops[op], b, err);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_lab_versions() {
    let cases = [
        ("7.5.0.56-1+cuda10.1", "gt", "7.0.5.15-1ubuntu1", 0),
        ("7.5.0.56-1+cuda10.1", "lt", "7.6.5.32-1+cuda10.1", 0),
        ("2.4.2-1+cuda10.1", "eq", "0:2.4.2-1+cuda10.1", 0),
        ("1.0~rc1", "ge", "1.0", 1),
        ("1:0.1", "gt", "9.9", 0),
        ("1.0", "ne", "1.0-0", 1),
    ];
    for (a, op, b, want) in cases {
        let (code, out, err) = run(debforge().args(["vercmp", a, op, b]));
        assert_eq!(code, want, "{a} {op} {b}: {err}");
        assert!(out.is_empty());
        assert_eq!(dpkg_holds(a, op, b), want == 0);
    }
}

#[test]
fn invalid_versions_and_operators_exit_2_with_a_message() {
    for (a, op, b, needle) in [
        ("1:", "lt", "2", "nothing after colon"),
        ("1.0", "lt", "a:1", "epoch in version is empty"),
        ("1 0", "lt", "2", "embedded spaces"),
        ("1-", "lt", "2", "revision number is empty"),
        ("1.0", "less", "2", "unknown operator"),
    ] {
        let (code, _, err) = run(debforge().args(["vercmp", a, op, b]));
        assert_eq!(code, 2, "{a} {op} {b}");
        assert!(err.contains(needle), "{err}");
    }
    // dpkg only warns here, and so do we; the comparison still answers.
    let (code, _, err) = run(debforge().args(["vercmp", "abc", "lt", "1.0"]));
    assert_eq!(code, if dpkg_holds("abc", "lt", "1.0") { 0 } else { 1 });
    assert!(err.contains("does not start with digit"), "{err}");
    // An empty version is dpkg's blank version, before every other.
    for (a, b) in [
        ("", "0"),
        ("", "~"),
        ("1", ""),
        ("", ""),
        ("<unknown>", "1"),
    ] {
        for op in ["lt", "le", "eq", "ne", "ge", "gt"] {
            let (code, _, _) = run(debforge().args(["vercmp", a, op, b]));
            assert_eq!(
                code,
                if dpkg_holds(a, op, b) { 0 } else { 1 },
                "{a:?} {op} {b:?}"
            );
        }
    }
}
