//! apt preferences (pins) that make apt take exactly the recipe versions.
//!
//! Spec: apt_preferences(5). The first specific record that matches a
//! version decides its priority; `>= 1000` lets apt downgrade to it; a
//! negative priority means the version is never a candidate. So each package
//! gets its exact version at 1001 and then `Pin: version *` at -1, in that
//! order: apt picks the recipe's build over newer ones from any repository,
//! and with our repository gone it fails ("has no installation candidate")
//! instead of falling back to another build. A glob like `*+cuda10.1` alone
//! would still let a newer `7.6.5.32-1+cuda10.1` win.

/// The preferences file for `(package, exact version)` pairs, in the order given.
pub fn exact_pins<'a>(packages: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, version) in packages {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "Explanation: debforge: {name} exactly {version}, never another build\n\
             Package: {name}\nPin: version {version}\nPin-Priority: 1001\n\n\
             Explanation: debforge: no other version of {name} is a candidate\n\
             Package: {name}\nPin: version *\nPin-Priority: -1\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::deb822::Document;

    #[test]
    fn exact_version_first_then_the_catch_all() {
        let text = exact_pins([("libcudnn7", "7.5.0.56-1+cuda10.1")]);
        let doc = Document::parse(&text).unwrap();
        let p: Vec<_> = doc.paragraphs().collect();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].get("Pin"), Some("version 7.5.0.56-1+cuda10.1"));
        assert_eq!(p[0].get("Pin-Priority"), Some("1001"));
        assert_eq!(p[1].get("Pin"), Some("version *"));
        assert_eq!(p[1].get("Pin-Priority"), Some("-1"));
    }
}
