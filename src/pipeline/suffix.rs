//! The version suffix and the packages that must follow it.
//!
//! A recipe's `version-suffix` (`+debforge1`) makes its package a local
//! rebuild that apt prefers to upstream's build of the same version. NVIDIA
//! ties its packages together with exact versions (`libcudnn7-dev` Depends
//! `libcudnn7 (= 7.5.0.56-1+cuda10.1)`, `libcudnn7-doc` on `libcudnn7-dev`):
//! a package that names the replaced version exactly would be stranded, so
//! it is carried along — rebuilt with the same suffix, its relations
//! retargeted — through any depth. Pure: control paragraphs in, a plan out.

use std::collections::BTreeMap;

use crate::format::control::RELATION_FIELDS;
use crate::format::deb822::ControlParagraph;
use crate::format::relation::retarget;

/// One package of the project, as its upstream file says.
pub struct Member<'a> {
    pub control: &'a ControlParagraph,
    /// The recipe's own `version-suffix`, if any.
    pub suffix: Option<&'a str>,
}

impl Member<'_> {
    fn key(&self) -> (String, String) {
        (
            self.control.get("Package").unwrap_or_default().to_string(),
            self.control.get("Version").unwrap_or_default().to_string(),
        )
    }
}

/// A package given a suffix because it names another's exact version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub package: String,
    pub suffix: String,
    /// The package whose exact version it names (the first, by field order).
    pub follows: String,
}

/// Which upstream builds are rebuilt under which version.
#[derive(Debug, Clone, Default)]
pub struct SuffixPlan {
    /// (package, upstream version) → (new version, suffix).
    moved: BTreeMap<(String, String), (String, String)>,
    /// Carried packages, in the order they were found (a package found in
    /// round two follows one found in round one).
    pub carried: Vec<Carried>,
}

impl SuffixPlan {
    /// Works out the plan: every member with its own suffix moves; then,
    /// until nothing changes, every member without one that names a moved
    /// version exactly moves too, with the suffix of the one it follows.
    pub fn new(members: &[Member]) -> SuffixPlan {
        let mut plan = SuffixPlan::default();
        for m in members {
            if let Some(sfx) = m.suffix {
                let (name, version) = m.key();
                plan.moved.insert(
                    (name, version.clone()),
                    (format!("{version}{sfx}"), sfx.into()),
                );
            }
        }
        loop {
            let mut found = Vec::new();
            for m in members.iter().filter(|m| m.suffix.is_none()) {
                let key = m.key();
                if plan.moved.contains_key(&key) {
                    continue;
                }
                if let Some(follows) = plan.first_named(m.control) {
                    found.push((key, follows));
                }
            }
            if found.is_empty() {
                return plan;
            }
            for ((name, version), follows) in found {
                let sfx = plan
                    .moved
                    .iter()
                    .find(|((n, _), _)| *n == follows)
                    .map(|(_, (_, s))| s.clone())
                    .unwrap_or_default();
                plan.carried.push(Carried {
                    package: name.clone(),
                    suffix: sfx.clone(),
                    follows,
                });
                plan.moved
                    .insert((name, version.clone()), (format!("{version}{sfx}"), sfx));
            }
        }
    }

    /// The version `package` at upstream `version` is rebuilt as, if it moves.
    pub fn new_version(&self, package: &str, version: &str) -> Option<&str> {
        self.moved
            .get(&(package.to_string(), version.to_string()))
            .map(|(v, _)| v.as_str())
    }

    /// The suffix a package gets although its recipe sets none.
    pub fn carried_suffix(&self, package: &str) -> Option<&Carried> {
        self.carried.iter().find(|c| c.package == package)
    }

    /// Every moved (package, upstream version) → new version: what a
    /// rebuilt package's relations are retargeted to.
    pub fn retargets(&self) -> BTreeMap<(String, String), String> {
        self.moved
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect()
    }

    /// The first package whose moved version `control` names exactly.
    fn first_named(&self, control: &ControlParagraph) -> Option<String> {
        let lookup = |n: &str, v: &str| self.new_version(n, v).map(String::from);
        RELATION_FIELDS.iter().find_map(|field| {
            let value = control.field(field)?.verbatim().to_string();
            retarget(field, &value, &lookup).1.into_iter().next()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(name: &str, version: &str, depends: &str) -> ControlParagraph {
        let mut text = format!("Package: {name}\nVersion: {version}\nArchitecture: amd64\n");
        if !depends.is_empty() {
            text.push_str(&format!("Depends: {depends}\n"));
        }
        ControlParagraph::parse_single(&text).unwrap()
    }

    #[test]
    fn doc_follows_dev_follows_runtime_and_the_rest_stays() {
        let v = "7.5.0.56-1+cuda10.1";
        let runtime = control("libcudnn7", v, "");
        let dev = control("libcudnn7-dev", v, &format!("libcudnn7 (= {v})"));
        let doc = control("libcudnn7-doc", v, &format!("libcudnn7-dev (= {v})"));
        let newer = control(
            "libcudnn7-doc",
            "7.6.5.32-1",
            "libcudnn7-dev (= 7.6.5.32-1)",
        );
        let ares = control("libc-ares-dev", "1.14.0-1", "libc-ares2 (= 1.14.0-1)");
        let loose = control("tool", "1", &format!("libcudnn7 (>= {v})"));
        // Listed doc first: found in the second round, after dev.
        let members = [
            Member {
                control: &doc,
                suffix: None,
            },
            Member {
                control: &newer,
                suffix: None,
            },
            Member {
                control: &dev,
                suffix: None,
            },
            Member {
                control: &runtime,
                suffix: Some("+debforge1"),
            },
            Member {
                control: &ares,
                suffix: None,
            },
            Member {
                control: &loose,
                suffix: None,
            },
        ];
        let plan = SuffixPlan::new(&members);
        let carried: Vec<(&str, &str)> = plan
            .carried
            .iter()
            .map(|c| (c.package.as_str(), c.follows.as_str()))
            .collect();
        assert_eq!(
            carried,
            [
                ("libcudnn7-dev", "libcudnn7"),
                ("libcudnn7-doc", "libcudnn7-dev")
            ]
        );
        assert_eq!(
            plan.new_version("libcudnn7-doc", v),
            Some("7.5.0.56-1+cuda10.1+debforge1")
        );
        assert_eq!(plan.new_version("libcudnn7-doc", "7.6.5.32-1"), None);
        assert_eq!(plan.new_version("libc-ares-dev", "1.14.0-1"), None);
        assert_eq!(plan.new_version("tool", "1"), None);
        assert_eq!(
            plan.carried_suffix("libcudnn7-doc").unwrap().suffix,
            "+debforge1"
        );
    }

    #[test]
    fn a_package_with_its_own_suffix_is_not_carried() {
        let v = "2.4.2-1+cuda10.1";
        let runtime = control("libnccl2", v, "");
        let dev = control("libnccl-dev", v, &format!("libnccl2 (= {v})"));
        let plan = SuffixPlan::new(&[
            Member {
                control: &runtime,
                suffix: Some("+lab1"),
            },
            Member {
                control: &dev,
                suffix: Some("+lab2"),
            },
        ]);
        assert!(plan.carried.is_empty());
        assert_eq!(
            plan.new_version("libnccl-dev", v),
            Some("2.4.2-1+cuda10.1+lab2")
        );
        assert_eq!(
            plan.retargets()
                .get(&("libnccl2".into(), v.into()))
                .map(String::as_str),
            Some("2.4.2-1+cuda10.1+lab1")
        );
    }
}
