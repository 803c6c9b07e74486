//! Values from the project's configuration that land in apt's and dpkg's
//! files: the Release (Origin, Label, Description), the pins (`Pin: release
//! o=…,l=…`), a built package's control file, its data paths and
//! conffiles, and the maintainer scripts' placeholders. Each is checked
//! where it is read, so that no value can add a line, a field or a record
//! to the file it lands in.
//!
//! Specs: deb822(5) (a field is one line; continuation lines start with a
//! space), apt_preferences(5) (`Pin: release` values are fnmatch(3)
//! patterns, or regular expressions between slashes), deb-control(5)
//! (the extended description).

/// No control character (a newline or carriage return ends the field and
/// starts another; a NUL ends a C string in dpkg).
pub fn one_line(value: &str) -> Result<(), String> {
    match value.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!(
            "holds the control character {:?}: a value here is one line of text",
            c
        )),
        None => Ok(()),
    }
}

/// An Origin or Label that the pins name as `Pin: release o=VALUE,l=VALUE`:
/// one line, not empty, no surrounding space (the Release drops it, the
/// pin would keep it), and none of what apt reads as syntax there: `,`
/// (the next key), `=`, and the pattern characters `*?[]` or a leading `/`
/// (apt matches these values with fnmatch or a regular expression).
pub fn pin_value(value: &str) -> Result<(), String> {
    one_line(value)?;
    if value.trim().is_empty() {
        return Err("is empty".into());
    }
    if value.trim() != value {
        return Err(
            "starts or ends with a space, which the Release drops and the pins keep".into(),
        );
    }
    if let Some(c) = value.chars().find(|c| ",=*?[]".contains(*c)) {
        return Err(format!(
            "holds {c:?}, which apt's `Pin: release o=…,l=…` reads as syntax"
        ));
    }
    if value.starts_with('/') {
        return Err("starts with '/', which apt's pins read as a regular expression".into());
    }
    Ok(())
}

/// The extended description of a control file: every line starts with a
/// space (else it would be a field of its own), none is blank (a blank line
/// ends the paragraph; Policy writes an empty line as ` .`).
pub fn extended_description(value: &str) -> Result<(), String> {
    for (i, line) in value.trim_end_matches('\n').split('\n').enumerate() {
        one_line(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            return Err(format!(
                "line {} is blank, which would end the control paragraph (write \" .\")",
                i + 1
            ));
        }
        if !line.starts_with(' ') {
            return Err(format!(
                "line {} does not start with a space (each line of a long description does)",
                i + 1
            ));
        }
    }
    Ok(())
}

/// A path a built package installs: absolute, a file (no trailing `/`), no
/// `.`, `..` or empty component, one line (it is listed in `conffiles`),
/// and never under `/DEBIAN`, which `dpkg-deb --build` reads as the
/// package's control files (a maintainer script placed there would run).
pub fn install_path(path: &str) -> Result<(), String> {
    one_line(path)?;
    let Some(rel) = path.strip_prefix('/') else {
        return Err("is not absolute".into());
    };
    if rel.is_empty() || path.ends_with('/') {
        return Err("names a directory, not a file".into());
    }
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("has an empty, '.' or '..' component".into());
    }
    if rel.split('/').next() == Some("DEBIAN") {
        return Err(
            "is under /DEBIAN, where a package's control files and maintainer scripts live".into(),
        );
    }
    Ok(())
}

/// A value put into a maintainer script between double quotes
/// (`LINKS="@LINKS@"`): one line, and none of the characters the shell
/// reads inside double quotes (`"`, `\`, `$`, `` ` ``).
pub fn shell_quoted(value: &str) -> Result<(), String> {
    one_line(value)?;
    match value.chars().find(|c| "\"\\$`".contains(*c)) {
        Some(c) => Err(format!(
            "holds {c:?}, which the shell would read inside the script's double quotes"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_injected_pin_record_is_refused() {
        let evil = "RT\nPin-Priority: 1001\n\nPackage: *\nPin: release o=Evil\nPin-Priority: 1001\nExplanation: x";
        assert!(
            pin_value(evil)
                .unwrap_err()
                .contains("control character '\\n'")
        );
        assert!(pin_value("GPU lab\r").is_err());
        for bad in [
            "a,b", "a=b", "lab*", "lab?", "lab[1]", "/lab/", " lab", "lab ", "",
        ] {
            assert!(pin_value(bad).is_err(), "{bad:?}");
        }
        pin_value("GPU lab").unwrap();
        pin_value("gpu-lab.cu130+x").unwrap();
    }

    #[test]
    fn descriptions_paths_and_script_values() {
        extended_description(" one\n .\n two\n").unwrap();
        assert!(extended_description(" one\nPre-Depends: evil").is_err());
        assert!(extended_description(" one\n\nPackage: evil").is_err());
        assert!(extended_description(" one\n   \n two").is_err());
        install_path("/usr/bin/gpu-stack-check").unwrap();
        install_path("/usr/share/DEBIAN/ok").unwrap();
        for bad in [
            "/DEBIAN/postinst",
            "/DEBIAN",
            "usr/bin/x",
            "/usr/bin/",
            "/usr//x",
            "/usr/./x",
            "/etc/a\nb",
            "/",
        ] {
            assert!(install_path(bad).is_err(), "{bad:?}");
        }
        shell_quoted("/usr/local/cuda/lib64/libcudnn.so.7=/usr/lib/x86_64-linux-gnu/libcudnn.so.7")
            .unwrap();
        for bad in ["a\"; rm -rf /; \"", "$(id)", "`id`", "a\\", "a\nb"] {
            assert!(shell_quoted(bad).is_err(), "{bad:?}");
        }
        assert!(one_line("x <x@x>\nPre-Depends: evil").is_err());
    }
}
