//! `debforge bundle`: the air-gapped bundle, and its check.

use super::prelude::*;

use debforge::workflow::bundle::{BundleSettings, bundle};

pub(crate) fn run_bundle(cx: &Context, output: Option<PathBuf>, out: &Path) -> Result<u8, Failure> {
    let output = output.ok_or_else(|| {
        Failure::new("bundle: say where to write it with -o FILE")
            .hint(Some("debforge bundle -o lab.tar"))
    })?;
    let settings = BundleSettings {
        out: out.to_path_buf(),
        output: output.clone(),
        source_date_epoch: cx.env.dates()?.source_date_epoch,
    };
    let n = bundle(&settings, &cx.printer);
    cx.printer.finish();
    let n = n?;
    output::plain(&format!(
        "wrote {} ({n} files); on the offline machine: tar -xf {} && sudo sh debforge-bundle/install.sh\n",
        output.display(),
        output.display()
    ));
    Ok(EXIT_OK)
}

pub(crate) fn run_bundle_verify(bundle: &Path) -> Result<u8, Failure> {
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
