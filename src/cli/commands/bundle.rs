//! `debforge bundle`: the air-gapped bundle, and its check.

use super::prelude::*;

pub(crate) fn run_bundle(output: Option<PathBuf>, out: &std::path::Path) -> Result<u8, Failure> {
    let output = output.ok_or_else(|| {
        Failure::new("bundle: say where to write it with -o FILE")
            .hint(Some("debforge bundle -o lab.tar"))
    })?;
    let progress = progress::Progress::new();
    let n = debforge::bundle::write_bundle(out, &output, source_date_epoch()?, &progress)
        ?;
    progress.finish();
    output::plain(&format!(
        "wrote {} ({n} files); on the offline machine: tar -xf {} && sudo sh debforge-bundle/install.sh\n",
        output.display(),
        output.display()
    ));
    Ok(EXIT_OK)
}

pub(crate) fn run_bundle_verify(bundle: &std::path::Path) -> Result<u8, Failure> {
    let problems = debforge::bundle::verify_bundle(bundle)?;
    let mut text = String::new();
    for p in &problems {
        text.push_str(&format!("problem: {p}\n"));
    }
    text.push_str(&format!(
        "{}: {}\n",
        bundle.display(),
        if problems.is_empty() {
            "all files match SHA256SUMS".to_string()
        } else {
            format!("{} problem(s); do not install it", problems.len())
        }
    ));
    output::plain(&text);
    Ok(if problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
