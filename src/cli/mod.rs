//! The command line: argument definitions (clap) and the one place that
//! decides what the user sees. Each command calls into the library and
//! hands the result to `output`.

mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use debforge::deb::{self, BuildOptions, Compression};
use debforge::format::version::{CompareOp, Version};

/// Exit codes, documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser)]
#[command(
    name = "debforge",
    version,
    about = "Build Debian packages and signed local apt repositories",
    after_help = "Exit codes: 0 success (or true), 1 false (vercmp), 2 error.\nSee README.md for a walkthrough."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compare two Debian versions exactly as `dpkg --compare-versions` does
    #[command(
        after_help = "Examples:\n  debforge vercmp 7.5.0.56-1+cuda10.1 gt 7.0.5.15-1ubuntu1   # exit 0: true\n  debforge vercmp 1.0~rc1 ge 1.0                              # exit 1: false\n\nExit codes: 0 true, 1 false, 2 invalid version or operator."
    )]
    Vercmp {
        /// First version
        a: String,
        /// One of lt le eq ne ge gt (also << <= = >= >>)
        op: String,
        /// Second version
        b: String,
    },
    /// Read and write .deb packages
    #[command(
        subcommand,
        after_help = "Examples:\n  debforge deb info pkg.deb\n  debforge deb contents pkg.deb\n  debforge deb build pkgroot -o out/"
    )]
    Deb(DebCommand),
}

#[derive(Subcommand)]
enum DebCommand {
    /// Show a package's members and control paragraph (like `dpkg-deb --info`)
    #[command(
        after_help = "Example:\n  debforge deb info libnccl2_2.4.2-1+cuda10.1_amd64.deb --json"
    )]
    Info {
        /// The .deb file
        file: PathBuf,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// List the files a package installs (like `dpkg-deb --contents`; times in UTC)
    #[command(
        after_help = "Example:\n  debforge deb contents libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb"
    )]
    Contents {
        /// The .deb file
        file: PathBuf,
        /// Print JSON (one array of entries) instead of text
        #[arg(long)]
        json: bool,
    },
    /// Build a .deb from a tree holding DEBIAN/control (like `dpkg-deb --build --root-owner-group`)
    #[command(
        after_help = "Example:\n  SOURCE_DATE_EPOCH=1556000000 debforge deb build pkgroot -o out/\n\nThe output is the same bytes for the same tree: entries sorted, owner root:root,\ntimes clamped to SOURCE_DATE_EPOCH when it is set. md5sums and Installed-Size are\nadded when DEBIAN/ does not have them. Nothing is written at the output path\nunless the whole package was built."
    )]
    Build(BuildArgs),
}

#[derive(Args)]
struct BuildArgs {
    /// The package tree (DIR/DEBIAN/control and the files to install)
    dir: PathBuf,
    /// Output file, or a directory (created when given with a trailing '/') for <package>_<version>_<arch>.deb
    #[arg(short, long, default_value = ".")]
    output: PathBuf,
    /// Member compression (zstd only where every client reads it)
    #[arg(short = 'Z', long = "compression", value_enum, default_value_t = CompressionArg::Xz)]
    compression: CompressionArg,
    /// Compression level [default: xz 6, gzip 9, zstd 3]
    #[arg(short = 'z', long = "level")]
    level: Option<u32>,
    /// Print a JSON report instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum CompressionArg {
    Xz,
    Gzip,
    Zstd,
    None,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Xz => Compression::Xz,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zstd => Compression::Zstd,
            CompressionArg::None => Compression::None,
        }
    }
}

/// A failure to show the user: the message, and what to do about it.
pub struct Failure {
    message: String,
    hint: Option<String>,
}

impl Failure {
    fn new(message: impl ToString) -> Failure {
        Failure {
            message: message.to_string(),
            hint: None,
        }
    }
    fn hint(mut self, hint: Option<impl ToString>) -> Failure {
        self.hint = hint.map(|h| h.to_string());
        self
    }
}

impl From<deb::DebError> for Failure {
    fn from(e: deb::DebError) -> Self {
        let hint = e.hint();
        Failure::new(&e).hint(hint)
    }
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Vercmp { a, op, b } => vercmp(&a, &op, &b),
        Command::Deb(DebCommand::Info { file, json }) => deb_info(&file, json),
        Command::Deb(DebCommand::Contents { file, json }) => deb_contents(&file, json),
        Command::Deb(DebCommand::Build(args)) => deb_build(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            output::error(&f.message, f.hint.as_deref());
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// `None` for dpkg's blank version (an empty argument or `<unknown>`), which
/// `dpkg --compare-versions` orders before every real version.
fn parse_version_arg(text: &str) -> Result<Option<Version>, Failure> {
    if text.is_empty() || text == "<unknown>" {
        return Ok(None);
    }
    match Version::parse_lenient(text) {
        Ok((v, None)) => Ok(Some(v)),
        Ok((v, Some(warning))) => {
            output::warning(&format!("version '{text}' has bad syntax: {warning}"));
            Ok(Some(v))
        }
        Err(e) => Err(Failure::new(format!(
            "version '{text}' has bad syntax: {e}"
        ))),
    }
}

fn vercmp(a: &str, op: &str, b: &str) -> Result<u8, Failure> {
    let op = CompareOp::parse(op).ok_or_else(|| {
        Failure::new(format!("unknown operator '{op}'"))
            .hint(Some("use one of lt le eq ne ge gt (or << <= = >= >>)"))
    })?;
    let (a, b) = (parse_version_arg(a)?, parse_version_arg(b)?);
    let ordering = match (&a, &b) {
        (Some(a), Some(b)) => a.compare(b),
        _ => a.is_some().cmp(&b.is_some()),
    };
    Ok(if op.holds(ordering) {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}

fn deb_info(file: &std::path::Path, json: bool) -> Result<u8, Failure> {
    let deb = deb::DebFile::open(file)?;
    let control = deb.control_files()?;
    output::deb_info(&deb, &control, json);
    Ok(EXIT_OK)
}

fn deb_contents(file: &std::path::Path, json: bool) -> Result<u8, Failure> {
    let deb = deb::DebFile::open(file)?;
    output::deb_contents(&deb, json)?;
    Ok(EXIT_OK)
}

fn deb_build(args: BuildArgs) -> Result<u8, Failure> {
    let source_date_epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.is_empty() => Some(v.trim().parse::<u64>().map_err(|_| {
            Failure::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a whole number of seconds"
            ))
            .hint(Some(
                "set it to e.g. $(git log -1 --format=%ct), or unset it",
            ))
        })?),
        _ => None,
    };
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
    let report = deb::build_from_dir(&args.dir, &args.output, &opts).map_err(Failure::new)?;
    output::build_report(&report, args.json);
    Ok(EXIT_OK)
}
