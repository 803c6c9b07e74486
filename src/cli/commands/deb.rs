//! `debforge deb info|contents|repack|build`: one package file.

use super::prelude::*;

pub(crate) fn deb_info(file: &std::path::Path, json: bool) -> Result<u8, Failure> {
    let deb = deb::DebFile::open(file)?;
    let control = deb.control_files()?;
    output::deb_info(&deb, &control, json);
    Ok(EXIT_OK)
}

pub(crate) fn deb_contents(file: &std::path::Path, json: bool) -> Result<u8, Failure> {
    let deb = deb::DebFile::open(file)?;
    output::deb_contents(&deb, json)?;
    Ok(EXIT_OK)
}

pub(crate) fn deb_repack(cx: &Context, args: RepackArgs) -> Result<u8, Failure> {
    let mut scripts = Vec::new();
    for (name, file) in [
        ("preinst", &args.preinst),
        ("postinst", &args.postinst),
        ("prerm", &args.prerm),
        ("postrm", &args.postrm),
    ] {
        if let Some(f) = file {
            // As a recipe's scripts: by type and bound.
            let data = debforge::input::read(f, debforge::input::limit::RECIPE).map_err(|e| {
                Failure::new(format!("{}: cannot read --{name}: {e}", f.display())).hint(Some(
                    "give the script as a regular file (a pipe or a device is not read)",
                ))
            })?;
            scripts.push((name.to_string(), data));
        }
    }
    let mut set = Vec::new();
    for s in &args.set {
        let Some((k, v)) = s.split_once('=') else {
            return Err(Failure::new(format!("--set {s:?}: expected Field=Value")));
        };
        set.push((k.trim().to_string(), v.trim().to_string()));
    }
    let mtime = cx
        .env
        .dates()?
        .source_date_epoch
        .map(|t| t as u64)
        .unwrap_or_else(|| {
            std::fs::metadata(&args.input)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs())
        });
    let opts = debforge::deb::repack::RepackOptions {
        scripts,
        set,
        version_suffix: args.version_suffix.clone(),
        retarget: None,
        mtime,
    };
    let mut output = args.output.clone();
    if output.as_os_str().as_encoded_bytes().ends_with(b"/") || output.is_dir() {
        std::fs::create_dir_all(&output).map_err(|e| {
            Failure::new(format!(
                "{}: cannot create the output directory: {e}",
                output.display()
            ))
        })?;
        output = output.join(args.input.file_name().unwrap_or_default());
    }
    if std::fs::canonicalize(&output).ok() == std::fs::canonicalize(&args.input).ok()
        && output.exists()
    {
        return Err(Failure::new("the output would overwrite the input")
            .hint(Some("write the repacked package elsewhere with -o DIR/")));
    }
    let report = debforge::deb::repack::repack(&args.input, &output, &opts)?;
    output::repack_report(&report, args.json);
    Ok(EXIT_OK)
}

pub(crate) fn deb_build(cx: &Context, args: BuildArgs) -> Result<u8, Failure> {
    let source_date_epoch = cx.env.dates()?.source_date_epoch.map(|t| t as u64);
    let opts = BuildOptions {
        compression: args.compression.into(),
        level: args.level,
        source_date_epoch,
        ..BuildOptions::default()
    };
    // `-o dir/` names a directory, created when missing.
    if args.output.as_os_str().as_encoded_bytes().ends_with(b"/") {
        std::fs::create_dir_all(&args.output).map_err(|e| {
            Failure::new(format!(
                "{}: cannot create the output directory: {e}",
                args.output.display()
            ))
        })?;
    }
    let report = deb::build_from_dir(&args.dir, &args.output, &opts)?;
    output::build_report(&report, args.json);
    Ok(EXIT_OK)
}
