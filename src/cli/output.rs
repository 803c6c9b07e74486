//! Everything the user sees goes through here: text for people, `--json` for
//! scripts, errors on stderr.

use std::io::{self, Write};

use debforge::deb::listing::ContentsFormatter;
use debforge::deb::{BuildReport, ControlFiles, DebFile};
use serde_json::{Map, Value, json};

use super::Failure;

pub fn error(message: &str, hint: Option<&str>) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "debforge: error: {message}");
    if let Some(h) = hint {
        let _ = writeln!(err, "  hint: {h}");
    }
}

/// One line per package (name, version, architecture, size, sha256), then
/// a summary line.
fn package_lines<'a>(
    rows: impl Iterator<Item = (&'a str, &'a str, &'a str, u64, &'a str)>,
    summary: &str,
) {
    let mut s = String::new();
    for (name, version, arch, size, sha256) in rows {
        s.push_str(&format!(
            "{name} {version} {arch} {size} bytes sha256:{sha256}\n"
        ));
    }
    s.push_str(summary);
    s.push('\n');
    out(&s);
}

/// The packages a lock/fetch run verified, then a summary line.
pub fn fetched(fetched: &[debforge::pipeline::Fetched], summary: &str) {
    package_lines(
        fetched.iter().map(|f| {
            let l = &f.resolved.locked;
            (l.name(), l.version(), l.architecture(), l.size, l.sha256())
        }),
        summary,
    );
}

/// What `build` put into the pool: each file's own identity and digest.
pub fn built(packages: &[debforge::repo::PoolEntry], summary: &str) {
    package_lines(
        packages.iter().map(|p| {
            (
                p.package(),
                p.version(),
                p.architecture(),
                p.size,
                p.sha256(),
            )
        }),
        summary,
    );
}

/// A closure's picks (`+ package (chain → relation)`) and what `from`
/// lacks too (`!`), a line each: `verify --closure-from` and `closure`.
pub fn closure_lines(
    pulled: &[debforge::repo::against::Pulled],
    lacking: &[debforge::repo::against::Missing],
    from: &str,
) -> String {
    let mut s = String::new();
    for p in pulled {
        s.push_str(&format!(
            "  + {} ({} → {})\n",
            p.package,
            p.chain.join(" → "),
            p.needs
        ));
    }
    for m in lacking {
        s.push_str(&format!("  ! not in {from} either: {m}\n"));
    }
    s
}

pub fn verify_report(r: &debforge::repo::verify::VerifyReport, dir: &std::path::Path, json: bool) {
    if json {
        json_out(&serde_json::to_value(r).expect("report serializes"));
        return;
    }
    let mut s = String::new();
    for p in &r.problems {
        s.push_str(&format!("problem: {p}\n"));
    }
    for b in &r.bases {
        let what = match b.kind {
            debforge::repo::against::BaseKind::Status => "a dpkg status file, packages installed",
            debforge::repo::against::BaseKind::Index => "a Packages index, packages offered",
        };
        s.push_str(&format!(
            "against {} ({what}: {})\n",
            b.path.display(),
            b.packages
        ));
    }
    if let Some(c) = &r.closure {
        s.push_str(&format!(
            "closure from {}: {} package(s) to carry\n",
            c.index.display(),
            c.pulled.len()
        ));
        s.push_str(&closure_lines(&c.pulled, &c.lacking, "the index"));
    }
    let verdict = if r.problems.is_empty() {
        "all good".to_string()
    } else {
        format!("{} problem(s)", r.problems.len())
    };
    s.push_str(&format!(
        "{}: {} suite(s), {} index file(s), {} package(s) checked; {verdict}\n",
        dir.display(),
        r.suites,
        r.indexes,
        r.packages,
    ));
    out(&s);
}

/// A publish's summary (the steps were printed as they happened); with
/// `--json`, the whole report.
pub fn publish_summary(r: &debforge::publish::PublishReport, json: bool) {
    use debforge::publish::Step;
    if json {
        json_out(&serde_json::to_value(r).expect("report serializes"));
        return;
    }
    out(&format!(
        "{}{}: {} copied, {} unchanged, {} removed\n",
        if r.dry_run {
            "dry run, nothing changed: "
        } else {
            ""
        },
        r.target,
        r.count(Step::Copy),
        r.count(Step::Keep),
        r.count(Step::Delete)
    ));
}

/// Writes to stdout; a closed pipe (`| head`) ends the program quietly, any
/// other write failure (a full disk behind `>`) is an error.
fn out(text: &str) {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            error(&format!("cannot write to standard output: {e}"), None);
            std::process::exit(super::EXIT_ERROR.into());
        }
    }
}

/// Text for stdout, as it is (flushed: a script may be waiting for it).
pub fn plain(text: &str) {
    out(text);
    let _ = io::stdout().lock().flush();
}

fn json_out(value: &Value) {
    out(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).expect("JSON values serialize")
    ));
}

/// Control files by name, as dpkg-deb lists them (whatever the tar order).
fn sorted_control_files(control: &ControlFiles) -> Vec<&debforge::deb::ControlFile> {
    let mut files: Vec<_> = control.files.iter().collect();
    files.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    files
}

pub fn deb_info(deb: &DebFile, control: &ControlFiles, json: bool) {
    if json {
        let mut fields = Map::new();
        for f in control.control.fields() {
            fields.insert(f.name().to_string(), Value::String(f.value().to_string()));
        }
        let files: Vec<Value> = sorted_control_files(control)
            .into_iter()
            .map(|f| json!({"name": f.name, "mode": format!("{:04o}", f.mode), "size": f.data.len(), "lines": debforge::deb::listing::dpkg_deb_lines(&f.data)}))
            .collect();
        json_out(&json!({
            "path": deb.path(),
            "size": deb.len(),
            "format_version": deb.format_version(),
            "members": deb.members(),
            "control_files": files,
            "control": fields,
        }));
        return;
    }
    let mut s = format!(
        " new Debian package, version {}.\n size {} bytes: control archive={} bytes.\n",
        deb.format_version(),
        deb.len(),
        deb.control_member().size
    );
    s.push_str(" members:\n");
    for m in deb.members() {
        let c = m.compression.map(|c| c.to_string()).unwrap_or_default();
        s.push_str(&format!("  {:<20} {:>12} bytes  {c}\n", m.name, m.size));
    }
    s.push_str(" control files:\n");
    for f in sorted_control_files(control) {
        let lines = debforge::deb::listing::dpkg_deb_lines(&f.data);
        s.push_str(&format!(
            "  {:>8} bytes, {:>5} lines  {:04o}  {}\n",
            f.data.len(),
            lines,
            f.mode,
            f.name
        ));
    }
    for line in control.control.to_string().lines() {
        s.push(' ');
        s.push_str(line);
        s.push('\n');
    }
    out(&s);
}

pub fn deb_contents(deb: &DebFile, json: bool) -> Result<(), Failure> {
    if json {
        // Streamed, an entry at a time: memory stays flat however many
        // entries the package has.
        let mut first = true;
        deb.visit_data(|e| {
            let entry = serde_json::to_string_pretty(&e).map_err(io::Error::other)?;
            let entry = entry.replace('\n', "\n  ");
            out(&format!("{}\n  {entry}", if first { "[" } else { "," }));
            first = false;
            Ok(())
        })?;
        out(if first { "[]\n" } else { "\n]\n" });
        return Ok(());
    }
    let mut fmt = ContentsFormatter::default();
    deb.visit_data(|e| {
        out(&format!("{}\n", fmt.line(&e)));
        Ok(())
    })?;
    Ok(())
}

pub fn repack_report(r: &debforge::deb::repack::RepackReport, json: bool) {
    if json {
        json_out(&serde_json::to_value(r).expect("report serializes"));
        return;
    }
    let mut s = format!(
        "repacked {} ({} {}): {} bytes, sha256 {}\n",
        r.output.display(),
        r.package,
        r.version,
        r.size,
        r.sha256
    );
    if !r.merged.is_empty() {
        s.push_str(&format!(
            "  merged after upstream's: {}\n",
            r.merged.join(", ")
        ));
    }
    if !r.added.is_empty() {
        s.push_str(&format!("  added: {}\n", r.added.join(", ")));
    }
    out(&s);
}

pub fn build_report(r: &BuildReport, json: bool) {
    if json {
        json_out(&serde_json::to_value(r).expect("report serializes"));
        return;
    }
    let mut s = format!(
        "built {} ({} {} {}): {} bytes, sha256 {}\n",
        r.output.display(),
        r.package,
        r.version,
        r.architecture,
        r.size,
        r.sha256
    );
    if !r.generated.is_empty() {
        s.push_str(&format!("  added: {}\n", r.generated.join(", ")));
    }
    out(&s);
}

/// `debforge policy`, in `apt-cache policy`'s layout.
pub fn policy(entries: &[debforge::repo::policy::PolicyEntry]) {
    let mut text = String::new();
    for e in entries {
        text.push_str(&format!(
            "{}:\n  Candidate: {}\n  Version table:\n",
            e.package,
            e.candidate.as_deref().unwrap_or("(none)")
        ));
        for (v, p) in &e.table {
            text.push_str(&format!("     {v} {p}\n"));
        }
    }
    out(&text);
}
