//! The command line: argument definitions (clap) and the one place that
//! decides what the user sees. Each command calls into the library and
//! hands the result to `output`.

mod output;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use std::time::Duration;

use debforge::deb::{self, BuildOptions, Compression};
use debforge::fetch::HttpOptions;
use debforge::format::version::{CompareOp, Version};
use debforge::pipeline::{self, PipelineError, Session, Settings};

/// Exit codes, documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser)]
#[command(
    name = "debforge",
    version,
    about = "Build Debian packages and signed local apt repositories",
    after_help = "Exit codes: 0 success (or true), 1 false (vercmp) or problems found (verify), 2 error.\nSee README.md for a walkthrough."
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
    /// Resolve every recipe through its signed upstream index, fetch and verify, write recipes/debforge.lock
    #[command(
        after_help = "Example:\n  debforge lock --recipes recipes\n\nThe lock file records, for each package, the file's URL, size, SHA256 and SHA512\nand the digests of the index and Release that vouched for it. Commit it."
    )]
    Lock(ProjectArgs),
    /// Fetch and verify every package into the cache; --to DIR writes an air-gapped snapshot
    #[command(
        after_help = "Examples:\n  debforge fetch\n  debforge fetch --locked --to /media/usb/lab-snapshot\n\nOn the offline machine: debforge build --source-dir /media/usb/lab-snapshot"
    )]
    Fetch {
        #[command(flatten)]
        project: ProjectArgs,
        /// Also write a self-contained snapshot (signed Release files, indexes, debs, lock file)
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
        /// Refuse to proceed if anything differs from recipes/debforge.lock
        #[arg(long)]
        locked: bool,
    },
    /// Resolve, fetch and verify every recipe, and write the packages into the output's pool
    #[command(
        after_help = "Examples:\n  debforge build\n  debforge build --locked --source-dir /media/usb/lab-snapshot\n\nThe output directory is replaced only when everything was written."
    )]
    Build {
        #[command(flatten)]
        project: ProjectArgs,
        #[command(flatten)]
        keys: KeyArgs,
        /// Refuse to proceed if anything differs from recipes/debforge.lock
        #[arg(long)]
        locked: bool,
        /// Output directory
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
    },
    /// Publish a built repository to a mirror (a directory, rsync, S3), safely and incrementally
    #[command(
        after_help = "Examples:\n  debforge publish --to /var/www/html/gpu-lab\n  debforge publish --to lab@mirror1:/var/www/html/gpu-lab      (rsync over ssh; RSYNC_RSH to change)\n  debforge publish --to rsync://mirror1/gpu-lab                 (an rsync daemon; RSYNC_PASSWORD)\n  debforge publish --to s3://lab-apt/gpu --endpoint http://minio:9000\n\nOrder: pool files, by-hash indexes, plain indexes, Release, Release.gpg, InRelease\nlast; every file appears whole or not at all. Files the previous Release references\nare kept until the next publish. Unchanged files are not rewritten. S3 credentials\ncome from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws/credentials."
    )]
    Publish {
        /// The target: DIR, rsync://HOST/MODULE/PATH, [USER@]HOST:/PATH or s3://BUCKET/PREFIX
        #[arg(long)]
        to: String,
        /// The built repository
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
        /// For s3:// targets: an S3-compatible store (MinIO, Ceph RGW), e.g. http://minio:9000
        #[arg(long)]
        endpoint: Option<String>,
        /// List what would change, change nothing
        #[arg(long)]
        dry_run: bool,
        /// Print a JSON report
        #[arg(long)]
        json: bool,
    },
    /// Serve a built or published repository over HTTP, read-only (a quick LAN mirror)
    #[command(
        after_help = "Examples:\n  debforge serve                          # http://127.0.0.1:8080/, repo-out/\n  debforge serve --listen 0.0.0.0:8080    # open it to the LAN\n\nGET and HEAD, Range, If-Modified-Since, ETag; paths never leave the directory.\nOne log line per request on stderr."
    )]
    Serve {
        /// Address to listen on (loopback unless you say otherwise)
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// The directory to serve
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
    },
    /// Write an air-gapped bundle (one tar: repository, keyring, pins, SHA256SUMS, install.sh), or verify one
    #[command(
        args_conflicts_with_subcommands = true,
        after_help = "Examples:\n  debforge bundle -o lab.tar                 # online: after debforge build\n  debforge bundle verify lab.tar             # on the way in\n  tar -xf lab.tar && sudo sh debforge-bundle/install.sh   # on the offline machine\n\nThe same repository gives the same bundle bytes (entries sorted, dated by the\nRelease's Date or SOURCE_DATE_EPOCH)."
    )]
    Bundle {
        #[command(subcommand)]
        verify: Option<BundleCommand>,
        /// The bundle to write
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The built repository
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
    },
    /// Generate an OpenPGP v4 signing key for the repository into KEYS/signing/ (mode 0600)
    #[command(
        after_help = "Example:\n  debforge keygen --name \"GPU lab repository\" --email lab@example.org\n\nThe key signs Release.gpg and InRelease on every build; its public part is\nexported into the output as debforge-archive-keyring.gpg (for Signed-By) and .asc.\nSeveral keys in KEYS/signing/ all sign (rotation)."
    )]
    Keygen {
        /// The keys directory
        #[arg(long, default_value = "keys")]
        keys: PathBuf,
        /// Key algorithm
        #[arg(long, value_enum, default_value_t = AlgoArg::Ed25519)]
        algo: AlgoArg,
        /// The name in the key's user ID
        #[arg(long, default_value = "debforge repository signing key")]
        name: String,
        /// The email in the key's user ID
        #[arg(long)]
        email: Option<String>,
        /// Days until the key expires (default: never)
        #[arg(long)]
        expire_days: Option<u32>,
        /// Protect the key with the passphrase in this file (or DEBFORGE_KEY_PASSPHRASE)
        #[arg(long)]
        passphrase_file: Option<PathBuf>,
    },
    /// Check a built or published repository as apt would, listing every problem
    #[command(
        after_help = "Example:\n  debforge verify repo-out\n\nChecks the signatures against the exported keyring, every index against Release\n(size, SHA256, SHA512, by-hash copies), every pool file against its stanza (size,\nhashes, control fields), Date and Valid-Until. Exit 0 when all hold, 1 when a\nproblem was found."
    )]
    Verify {
        /// The repository root
        #[arg(default_value = "repo-out")]
        dir: PathBuf,
        /// Keyring to check signatures with [default: DIR/debforge-archive-keyring.gpg]
        #[arg(long)]
        keyring: Option<PathBuf>,
        /// Print a JSON report
        #[arg(long)]
        json: bool,
    },
    /// Show the version apt would pick for each package, given our repository, the pins and other indexes
    #[command(
        after_help = "Example:\n  debforge policy --with-index /var/lib/apt/lists/archive.ubuntu.com_ubuntu_dists_bionic_multiverse_binary-amd64_Packages libcudnn7\n\nThe same answer as `apt-cache policy` on a machine with our repository, its pins\n(debforge.pref) and the other repositories whose Packages files are given."
    )]
    Policy {
        /// Packages to show [default: every package in our repository]
        packages: Vec<String>,
        /// Our repository
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
        /// The preferences file [default: OUT/debforge.pref]
        #[arg(long)]
        preferences: Option<PathBuf>,
        /// Another repository's Packages file (plain, .gz or .xz); repeatable
        #[arg(long = "with-index", value_name = "PACKAGES_FILE")]
        with_index: Vec<PathBuf>,
    },
    /// Print the Packages stanzas of every .deb under DIR (like `apt-ftparchive packages DIR`)
    #[command(
        after_help = "Example:\n  debforge index repo-out/pool > Packages\n\nUnchanged files are not read again: their stanzas come from the index cache\n(--cache); a changed file (size, times, inode) is always re-read."
    )]
    Index {
        /// The directory to scan
        dir: PathBuf,
        /// Index cache [default: $XDG_CACHE_HOME/debforge/index]
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Read every file, use no cache
        #[arg(long)]
        no_cache: bool,
    },
    /// Read and write .deb packages
    #[command(
        subcommand,
        after_help = "Examples:\n  debforge deb info pkg.deb\n  debforge deb contents pkg.deb\n  debforge deb build pkgroot -o out/"
    )]
    Deb(DebCommand),
}

#[derive(Subcommand)]
enum BundleCommand {
    /// Check a bundle against its SHA256SUMS (every file, nothing missing or extra)
    Verify {
        /// The bundle
        bundle: PathBuf,
    },
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
    /// Rewrite a package's control member (fields, merged maintainer scripts); the data member is copied verbatim
    #[command(
        after_help = "Example:\n  debforge deb repack libnccl2_2.4.2-1+cuda10.1_amd64.deb -o out/ --postinst links.postinst\n\nUpstream maintainer scripts are kept: the merged script runs upstream's first (same\narguments, its own interpreter; its failure fails the script), then ours. The\nversion stays upstream's unless --version-suffix is given."
    )]
    Repack(RepackArgs),
    /// Build a .deb from a tree holding DEBIAN/control (like `dpkg-deb --build --root-owner-group`)
    #[command(
        after_help = "Example:\n  SOURCE_DATE_EPOCH=1556000000 debforge deb build pkgroot -o out/\n\nThe output is the same bytes for the same tree: entries sorted, owner root:root,\ntimes clamped to SOURCE_DATE_EPOCH when it is set. md5sums and Installed-Size are\nadded when DEBIAN/ does not have them. Nothing is written at the output path\nunless the whole package was built."
    )]
    Build(BuildArgs),
}

#[derive(Args)]
struct RepackArgs {
    /// The package to repack
    input: PathBuf,
    /// Output file, or a directory (created when given with a trailing '/')
    #[arg(short, long)]
    output: PathBuf,
    /// Our preinst, run after upstream's
    #[arg(long, value_name = "FILE")]
    preinst: Option<PathBuf>,
    /// Our postinst, run after upstream's
    #[arg(long, value_name = "FILE")]
    postinst: Option<PathBuf>,
    /// Our prerm, run after upstream's
    #[arg(long, value_name = "FILE")]
    prerm: Option<PathBuf>,
    /// Our postrm, run after upstream's
    #[arg(long, value_name = "FILE")]
    postrm: Option<PathBuf>,
    /// Set a control field (repeatable)
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    set: Vec<String>,
    /// Append to the version to mark a local rebuild (e.g. +lab1)
    #[arg(long)]
    version_suffix: Option<String>,
    /// Print a JSON report
    #[arg(long)]
    json: bool,
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

#[derive(Args)]
struct ProjectArgs {
    /// The recipes directory (sources.toml, packages/*.toml, debforge.lock)
    #[arg(long, default_value = "recipes")]
    recipes: PathBuf,
    /// Cache of verified downloads [default: $XDG_CACHE_HOME/debforge, else ~/.cache/debforge]
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Replace a source's base URL, e.g. nvidia-ml=http://127.0.0.1:8080/ (LAN caches, tests)
    #[arg(long = "source", value_name = "NAME=URL")]
    sources: Vec<String>,
    /// Work offline from a snapshot (`debforge fetch --to`) or a directory of .deb files; repeatable
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// Seconds without data before a connection counts as stalled
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Further attempts after a transient failure (connection, 5xx, stall)
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Seconds before the first retry; doubles each time
    #[arg(long, default_value_t = 0.5)]
    retry_wait: f64,
    /// Downloads at once
    #[arg(short = 'j', long, default_value_t = 4)]
    jobs: usize,
}

impl ProjectArgs {
    fn settings(&self) -> Result<Settings, Failure> {
        let mut overrides = std::collections::BTreeMap::new();
        for s in &self.sources {
            let Some((name, url)) = s.split_once('=') else {
                return Err(Failure::new(format!("--source {s:?}: expected NAME=URL")));
            };
            overrides.insert(name.to_string(), url.to_string());
        }
        let cache = match &self.cache {
            Some(c) => c.clone(),
            None => match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
                (Some(x), _) if !x.is_empty() => PathBuf::from(x).join("debforge"),
                (_, Some(h)) => PathBuf::from(h).join(".cache/debforge"),
                _ => {
                    return Err(Failure::new(
                        "no cache directory: set --cache, XDG_CACHE_HOME or HOME",
                    ));
                }
            },
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Ok(Settings {
            cache,
            overrides,
            source_dirs: self.source_dirs.clone(),
            http: HttpOptions {
                timeout: Duration::from_secs_f64(self.timeout.max(0.1)),
                retries: self.retries,
                backoff: Duration::from_secs_f64(self.retry_wait.max(0.0)),
            },
            parallel: self.jobs.max(1),
            now,
        })
    }
}

#[derive(Args)]
struct KeyArgs {
    /// The keys directory: signing keys in KEYS/signing/*.key (mode 0600)
    #[arg(long, default_value = "keys")]
    keys: PathBuf,
    /// File holding the signing keys' passphrase (or set DEBFORGE_KEY_PASSPHRASE)
    #[arg(long)]
    passphrase_file: Option<PathBuf>,
}

fn passphrase(file: Option<&std::path::Path>) -> Result<Option<String>, Failure> {
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| {
            Failure::new(format!(
                "{}: cannot read the passphrase file: {e}",
                f.display()
            ))
        })?;
        return Ok(Some(text.trim_end_matches(['\n', '\r']).to_string()));
    }
    Ok(std::env::var("DEBFORGE_KEY_PASSPHRASE")
        .ok()
        .filter(|p| !p.is_empty()))
}

#[derive(Clone, Copy, ValueEnum)]
enum AlgoArg {
    Ed25519,
    Rsa4096,
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
        Command::Lock(project) => run_lock(&project),
        Command::Fetch {
            project,
            to,
            locked,
        } => run_fetch(&project, to.as_deref(), locked),
        Command::Build {
            project,
            keys,
            locked,
            out,
        } => run_build(&project, &keys, locked, &out),
        Command::Keygen {
            keys,
            algo,
            name,
            email,
            expire_days,
            passphrase_file,
        } => run_keygen(
            &keys,
            algo,
            &name,
            email.as_deref(),
            expire_days,
            passphrase_file.as_deref(),
        ),
        Command::Index {
            dir,
            cache,
            no_cache,
        } => run_index(&dir, cache, no_cache),
        Command::Verify { dir, keyring, json } => run_verify(&dir, keyring, json),
        Command::Bundle {
            verify: Some(BundleCommand::Verify { bundle }),
            ..
        } => run_bundle_verify(&bundle),
        Command::Bundle {
            verify: None,
            output,
            out,
        } => run_bundle(output, &out),
        Command::Serve { listen, out } => run_serve(&listen, &out),
        Command::Publish {
            to,
            out,
            endpoint,
            dry_run,
            json,
        } => run_publish(&to, &out, endpoint.as_deref(), dry_run, json),
        Command::Policy {
            packages,
            out,
            preferences,
            with_index,
        } => run_policy(&packages, &out, preferences, &with_index),
        Command::Deb(DebCommand::Info { file, json }) => deb_info(&file, json),
        Command::Deb(DebCommand::Contents { file, json }) => deb_contents(&file, json),
        Command::Deb(DebCommand::Build(args)) => deb_build(args),
        Command::Deb(DebCommand::Repack(args)) => deb_repack(args),
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

fn deb_repack(args: RepackArgs) -> Result<u8, Failure> {
    let mut scripts = Vec::new();
    for (name, file) in [
        ("preinst", &args.preinst),
        ("postinst", &args.postinst),
        ("prerm", &args.prerm),
        ("postrm", &args.postrm),
    ] {
        if let Some(f) = file {
            let data = std::fs::read(f)
                .map_err(|e| Failure::new(format!("{}: cannot read --{name}: {e}", f.display())))?;
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
    let mtime = source_date_epoch()?.unwrap_or_else(|| {
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
    let report =
        debforge::deb::repack::repack(&args.input, &output, &opts).map_err(Failure::new)?;
    output::repack_report(&report, args.json);
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

impl From<PipelineError> for Failure {
    fn from(e: PipelineError) -> Self {
        let hint = match &e {
            PipelineError::LockMismatch { .. } => {
                Some("if the change is intended, run `debforge lock` and commit the lock file")
            }
            PipelineError::Fetch { .. } => {
                Some("nothing unverified was kept; run the command again to retry")
            }
            PipelineError::Upstream(_) => {
                Some("check the source's url, key and fingerprint in recipes/sources.toml")
            }
            _ => None,
        };
        Failure::new(&e).hint(hint)
    }
}

fn open_session<'a>(
    project: &ProjectArgs,
    progress: &'a progress::Progress,
) -> Result<Session<'a>, Failure> {
    let recipes = debforge::recipe::load(&project.recipes).map_err(Failure::new)?;
    Ok(Session::new(recipes, project.settings()?, progress)?)
}

/// Resolve, check the lock, fetch: what lock, fetch and build share.
fn resolve_and_fetch(
    session: &Session,
    progress: &progress::Progress,
    locked: bool,
) -> Result<
    (
        Vec<pipeline::Fetched>,
        Vec<pipeline::OpenSourceFiles>,
        debforge::recipe::lock::Lock,
    ),
    Failure,
> {
    let old = session.read_lock()?;
    let (resolved, sources) = session.resolve(old.as_ref())?;
    if locked {
        // Fail before downloading anything that the lock does not allow.
        session.check_lock(&resolved, true)?;
    }
    progress.expect_total(resolved.iter().map(|r| r.locked.size).sum());
    let fetched = session.fetch(&resolved);
    progress.finish();
    let fetched = fetched?;
    let resolved: Vec<_> = fetched.iter().map(|f| f.resolved.clone()).collect();
    let (lock, changed) = session.check_lock(&resolved, locked)?;
    if changed {
        session.write_lock(&lock)?;
        output::note(&format!("wrote {}", session.lock_path().display()));
    }
    Ok((fetched, sources, lock))
}

fn run_lock(project: &ProjectArgs) -> Result<u8, Failure> {
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, _, lock) = resolve_and_fetch(&session, &progress, false)?;
    session.write_lock(&lock)?;
    output::fetched(
        &fetched,
        &format!(
            "locked {} packages in {}",
            fetched.len(),
            session.lock_path().display()
        ),
    );
    Ok(EXIT_OK)
}

fn run_fetch(
    project: &ProjectArgs,
    to: Option<&std::path::Path>,
    locked: bool,
) -> Result<u8, Failure> {
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, sources, lock) = resolve_and_fetch(&session, &progress, locked)?;
    let mut summary = format!(
        "{} packages verified in {}",
        fetched.len(),
        session.settings.cache.display()
    );
    if let Some(dir) = to {
        pipeline::write_snapshot(dir, &fetched, &sources, &lock)?;
        summary.push_str(&format!(
            "; snapshot in {} (use it offline with --source-dir)",
            dir.display()
        ));
    }
    output::fetched(&fetched, &summary);
    Ok(EXIT_OK)
}

fn source_date_epoch() -> Result<Option<u64>, Failure> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.is_empty() => v.trim().parse::<u64>().map(Some).map_err(|_| {
            Failure::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a whole number of seconds"
            ))
            .hint(Some(
                "set it to e.g. $(git log -1 --format=%ct), or unset it",
            ))
        }),
        _ => Ok(None),
    }
}

fn run_build(
    project: &ProjectArgs,
    keys: &KeyArgs,
    locked: bool,
    out: &std::path::Path,
) -> Result<u8, Failure> {
    // Keys and settings first: a build that cannot sign fails before downloading.
    let loaded = debforge::keys::load_signing_keys(
        &keys.keys,
        passphrase(keys.passphrase_file.as_deref())?.as_deref(),
    )
    .map_err(Failure::new)?;
    for k in &loaded {
        if let Some(t) = k.expires_soon {
            let days = t
                .duration_since(std::time::SystemTime::now())
                .map(|d| d.as_secs() / 86_400)
                .unwrap_or(0);
            output::warning(&format!(
                "signing key {} expires in {days} days: rotate it (debforge keygen)",
                k.path.display()
            ));
        }
    }
    let config = debforge::recipe::load_repository(&project.recipes).map_err(Failure::new)?;
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, _, _) = resolve_and_fetch(&session, &progress, locked)?;
    let sde = source_date_epoch()?;
    let fetched = session.repack(fetched, sde)?;
    let date = match sde {
        Some(t) => t as i64,
        None => session.settings.now,
    };
    let signing: Vec<_> = loaded.into_iter().map(|k| k.key).collect();
    let (keyring, _) = debforge::openpgp::sign::export_public(&signing);
    // Versions and pins once, from the prepared packages' own control
    // paragraphs: the metapackage, the repo-config package and the output's
    // debforge.pref all get the same.
    let versions = pipeline::package_versions(&fetched, &session.recipes);
    let pins = debforge::format::preferences::exact_pins(
        versions.iter().map(|(n, v)| (n.as_str(), v.as_str())),
    );
    let mut fetched = fetched;
    fetched.extend(session.build_from_recipes(&config, &keyring, date, &versions, &pins)?);
    let params = pipeline::RepoParams {
        config,
        keys: &signing,
        date,
        digest_records: Some(session.settings.cache.join("digests")),
    };
    let report = pipeline::write_output(out, &fetched, &params, &pins)?;
    output::built(
        &report.packages,
        &format!(
            "wrote {} packages into {} (signed by {} key{}; keyring {}, pins {})",
            report.pool.len(),
            out.display(),
            signing.len(),
            if signing.len() == 1 { "" } else { "s" },
            report.keyring,
            report.preferences
        ),
    );
    Ok(EXIT_OK)
}

fn run_keygen(
    keys: &std::path::Path,
    algo: AlgoArg,
    name: &str,
    email: Option<&str>,
    expire_days: Option<u32>,
    passphrase_file: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    use debforge::openpgp::sign::KeyAlgo;
    let uid = match email {
        Some(e) => format!("{name} <{e}>"),
        None => name.to_string(),
    };
    let algo = match algo {
        AlgoArg::Ed25519 => KeyAlgo::Ed25519,
        AlgoArg::Rsa4096 => KeyAlgo::Rsa4096,
    };
    let valid = expire_days.map(|d| Duration::from_secs(u64::from(d) * 86_400));
    let pass = passphrase(passphrase_file)?;
    let (path, fpr) =
        debforge::keys::keygen(keys, &uid, algo, valid, pass.as_deref()).map_err(Failure::new)?;
    output::plain(&format!("{fpr}\n"));
    output::note(&format!(
        "wrote secret key {} (mode 0600); keep it out of version control",
        path.display()
    ));
    Ok(EXIT_OK)
}

fn run_index(dir: &std::path::Path, cache: Option<PathBuf>, no_cache: bool) -> Result<u8, Failure> {
    use debforge::repo::{IndexCache, IndexStats, index_tree};
    let cache_dir = if no_cache {
        None
    } else {
        Some(match cache {
            Some(c) => c,
            None => default_cache_dir()?.join("index"),
        })
    };
    let cache = IndexCache::new(cache_dir);
    let mut stats = IndexStats::default();
    let mut first = true;
    let start = dir.to_string_lossy().trim_end_matches('/').to_string();
    // Stanzas are written in chunks: one write per megabyte, not per line.
    let mut buf = String::new();
    index_tree(
        &cache,
        std::path::Path::new(""),
        &start,
        &mut stats,
        &mut |deb| -> Result<(), debforge::repo::IndexError> {
            if !first {
                buf.push('\n');
            }
            first = false;
            buf.push_str(&deb.stanza);
            if buf.len() > 1 << 20 {
                output::plain(&buf);
                buf.clear();
            }
            Ok(())
        },
    )
    .map_err(Failure::new)?;
    output::plain(&buf);
    output::note(&format!(
        "indexed {} packages ({} read, {} from the cache)",
        stats.read + stats.cached,
        stats.read,
        stats.cached
    ));
    Ok(EXIT_OK)
}

fn run_verify(dir: &std::path::Path, keyring: Option<PathBuf>, json: bool) -> Result<u8, Failure> {
    let keyring = keyring.unwrap_or_else(|| dir.join(format!("{}.gpg", pipeline::KEYRING_NAME)));
    let bytes = std::fs::read(&keyring).map_err(|e| {
        Failure::new(format!(
            "{}: cannot read the keyring: {e}",
            keyring.display()
        ))
        .hint(Some("pass --keyring FILE"))
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let report = debforge::repo::verify::verify(dir, &bytes, now);
    output::verify_report(&report, dir, json);
    Ok(if report.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}

fn run_policy(
    packages: &[String],
    out: &std::path::Path,
    preferences: Option<PathBuf>,
    with_index: &[PathBuf],
) -> Result<u8, Failure> {
    use debforge::format::preferences::{Offer, Preferences, candidate};
    let pref_path = preferences.unwrap_or_else(|| out.join(pipeline::PREFERENCES_NAME));
    let text = std::fs::read_to_string(&pref_path).map_err(|e| {
        Failure::new(format!(
            "{}: cannot read the preferences: {e}",
            pref_path.display()
        ))
    })?;
    let prefs = Preferences::parse(&text)
        .map_err(|e| Failure::new(format!("{}: {e}", pref_path.display())))?;
    let mut indexes: Vec<PathBuf> = Vec::new();
    let dists = out.join("dists");
    let mut stack = vec![dists.clone()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| {
            Failure::new(format!("{}: {e}", d.display()))
                .hint(Some("build the repository first, or pass --out"))
        })?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "by-hash") {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "Packages") {
                indexes.push(p);
            }
        }
    }
    indexes.sort();
    let ours = indexes.len();
    indexes.extend(with_index.iter().cloned());
    let mut offers: std::collections::BTreeMap<String, Vec<Offer>> =
        std::collections::BTreeMap::new();
    let mut our_names = Vec::new();
    for (i, path) in indexes.iter().enumerate() {
        let name = path.to_string_lossy();
        let compression = if name.ends_with(".xz") {
            Compression::Xz
        } else if name.ends_with(".gz") {
            Compression::Gzip
        } else if name.ends_with(".lz4") {
            return Err(Failure::new(format!(
                "{name}: lz4 indexes are not read; decompress it with `lz4 -d`"
            )));
        } else {
            Compression::None
        };
        let file = std::fs::File::open(path).map_err(|e| Failure::new(format!("{name}: {e}")))?;
        let reader = compression
            .decoder(std::io::BufReader::new(file))
            .map_err(|e| Failure::new(format!("{name}: {e}")))?;
        for p in debforge::format::deb822::ParagraphReader::new(std::io::BufReader::new(reader)) {
            let p = p.map_err(|e| Failure::new(format!("{name}: {e}")))?;
            let (Some(pkg), Some(ver)) = (p.get("Package"), p.get("Version")) else {
                continue;
            };
            let Ok((version, _)) = Version::parse_lenient(ver) else {
                continue;
            };
            if i < ours && !our_names.iter().any(|n| n == pkg) {
                our_names.push(pkg.to_string());
            }
            offers.entry(pkg.to_string()).or_default().push(Offer {
                version,
                index_priority: 500,
            });
        }
    }
    let wanted: Vec<String> = if packages.is_empty() {
        our_names
    } else {
        packages.to_vec()
    };
    let mut text = String::new();
    for name in &wanted {
        let (best, table) = candidate(
            &prefs,
            name,
            offers.get(name).map(Vec::as_slice).unwrap_or(&[]),
        );
        text.push_str(&format!(
            "{name}:\n  Candidate: {}\n  Version table:\n",
            best.map(|v| v.to_string())
                .unwrap_or_else(|| "(none)".into())
        ));
        for (v, p) in table {
            text.push_str(&format!("     {v} {p}\n"));
        }
    }
    output::plain(&text);
    Ok(EXIT_OK)
}

fn run_publish(
    to: &str,
    out: &std::path::Path,
    endpoint: Option<&str>,
    dry_run: bool,
    json: bool,
) -> Result<u8, Failure> {
    use debforge::publish::{PublishError, Target, publish};
    let failure = |e: PublishError| {
        let hint = e.hint();
        Failure::new(&e).hint(hint)
    };
    let target = Target::parse(to, endpoint).map_err(failure)?;
    let mut printer = output::PublishPrinter::new(json);
    let report =
        publish(out, &target, dry_run, &mut |event| printer.event(&event)).map_err(failure)?;
    printer.summary(&report);
    Ok(EXIT_OK)
}

fn run_serve(listen: &str, out: &std::path::Path) -> Result<u8, Failure> {
    if !out.is_dir() {
        return Err(
            Failure::new(format!("{}: no such directory", out.display()))
                .hint(Some("build the repository first, or pass --out DIR")),
        );
    }
    let listener = std::net::TcpListener::bind(listen).map_err(|e| {
        Failure::new(format!("cannot listen on {listen}: {e}")).hint(Some(
            "is another server on that port? try --listen 127.0.0.1:0",
        ))
    })?;
    let addr = listener.local_addr().map_err(Failure::new)?;
    output::plain(&format!("serving {} on http://{addr}/\n", out.display()));
    let log: debforge::serve::Logger = std::sync::Arc::new(|r: debforge::serve::RequestLog| {
        output::request(&format!(
            "{} {} {} {} {}",
            r.peer, r.method, r.path, r.status, r.bytes
        ));
    });
    debforge::serve::serve(listener, out, log)
        .map_err(|e| Failure::new(format!("{}: {e}", out.display())))?;
    Ok(EXIT_OK)
}

fn run_bundle(output: Option<PathBuf>, out: &std::path::Path) -> Result<u8, Failure> {
    let output = output.ok_or_else(|| {
        Failure::new("bundle: say where to write it with -o FILE")
            .hint(Some("debforge bundle -o lab.tar"))
    })?;
    let n =
        debforge::bundle::write_bundle(out, &output, source_date_epoch()?).map_err(Failure::new)?;
    output::plain(&format!(
        "wrote {} ({n} files); on the offline machine: tar -xf {} && sudo sh debforge-bundle/install.sh\n",
        output.display(),
        output.display()
    ));
    Ok(EXIT_OK)
}

fn run_bundle_verify(bundle: &std::path::Path) -> Result<u8, Failure> {
    let problems = debforge::bundle::verify_bundle(bundle).map_err(Failure::new)?;
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

fn default_cache_dir() -> Result<PathBuf, Failure> {
    match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(x), _) if !x.is_empty() => Ok(PathBuf::from(x).join("debforge")),
        (_, Some(h)) => Ok(PathBuf::from(h).join(".cache/debforge")),
        _ => Err(Failure::new(
            "no cache directory: set --cache, XDG_CACHE_HOME or HOME",
        )),
    }
}
