//! The command line's shape: every command, argument and help text (clap).
//! Parsing only; what each command does is in `commands/`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use debforge::deb::Compression;
use debforge::fetch::HttpOptions;
use debforge::pipeline::Settings;

use super::Failure;

#[derive(Parser)]
#[command(
    name = "debforge",
    version,
    about = "Build Debian packages and signed local apt repositories",
    after_help = "Exit codes: 0 success (or true), 1 false (vercmp) or problems found (verify), 2 error.\nSee README.md for a walkthrough."
)]
pub(crate) struct Cli {
    /// Only results, warnings and errors: no progress, no notes (for scripts)
    #[arg(long, short = 'q', global = true)]
    pub(crate) quiet: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        /// Output directory (replaced as a whole: it must be absent, empty, or an earlier debforge output)
        #[arg(long, short = 'o', default_value = "repo-out")]
        out: PathBuf,
        /// Replace --out even if it holds files debforge did not write
        #[arg(long)]
        force: bool,
        /// Where lab machines reach the published repository (the repo-config package's apt source); overrides repository.toml's mirror
        #[arg(long, value_name = "URL")]
        mirror: Option<String>,
        /// Keep in the pool every file the last N generations reference (linked, never copied; 1: this build's only), so `publish --generation` and `rollback` can go back to them
        #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        keep: u32,
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
        /// Publish this earlier generation instead (`debforge history` lists them): its packages and pins, a new Date, signed by --keys
        #[arg(long, value_name = "N")]
        generation: Option<u32>,
        #[command(flatten)]
        keys: KeyArgs,
        /// With --generation: the cache whose records spare reading the pool files again [default: $XDG_CACHE_HOME/debforge, else ~/.cache/debforge]
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Publish again the generation before the one TARGET serves, so lab machines go back to it with `apt-get update && apt-get dist-upgrade`
    #[command(
        after_help = "Examples:\n  debforge rollback --to /var/www/html/gpu-lab\n  debforge rollback --to s3://lab-apt/gpu --endpoint http://minio:9000 --dry-run\n\nWhich generation TARGET serves is read from TARGET itself (its indexes against the\nmanifests in .repo-out.generations/). The earlier generation's packages come from the\nbuild output's pool (`build --keep N`, default 5), nothing is rebuilt or copied; its\nindexes and Release are written anew with a fresh Date (apt 1.6 silently keeps what it\nhas when a Release is older than its own) and published in the safe order.\n`debforge publish --to TARGET --generation N` goes to any recorded generation."
    )]
    Rollback {
        /// The target: DIR, rsync://HOST/MODULE/PATH, [USER@]HOST:/PATH or s3://BUCKET/PREFIX
        #[arg(long)]
        to: String,
        /// The build output whose generations and pool are used
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
        #[command(flatten)]
        keys: KeyArgs,
        /// The cache whose records spare reading the pool files again [default: $XDG_CACHE_HOME/debforge, else ~/.cache/debforge]
        #[arg(long)]
        cache: Option<PathBuf>,
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
        /// Connections served at once; past them a client gets 503 (fewer if the open-files limit says so)
        #[arg(long, value_name = "N", default_value_t = debforge::serve::MAX_CONNECTIONS, value_parser = clap::value_parser!(usize))]
        max_connections: usize,
    },
    /// Write an air-gapped bundle (one tar: repository, keyring, pins, SHA256SUMS, install.sh), or verify one
    #[command(
        args_conflicts_with_subcommands = true,
        after_help = "Examples:\n  debforge bundle -o lab.tar                 # online: after debforge build\n  debforge bundle -o lab-2.tar --from lab.tar  # a delta onto what lab.tar left\n  debforge bundle verify lab-2.tar --from lab.tar   # on the way in\n  tar -xf lab.tar && sudo sh debforge-bundle/install.sh   # on the offline machine\n\nThe same repository gives the same bundle bytes (entries sorted, dated by the\nRelease's Date or SOURCE_DATE_EPOCH). A delta (--from the last bundle the lab\ninstalled, full or delta) carries only the files that generation lacks, and a\nmanifest signed with the repository's keys naming both generations; install.sh\napplies it onto that generation only, switching generations in one rename."
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
        /// Write a delta from the state this bundle (full or delta) left on the lab's machines
        #[arg(long, value_name = "BUNDLE")]
        from: Option<PathBuf>,
        #[command(flatten)]
        keys: KeyArgs,
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
        /// Add a key beside the existing ones (a rotation: every key signs)
        #[arg(long)]
        add: bool,
    },
    /// What the lab's base ([base] in repository.toml) lacks for the built packages, picked from a trusted source's signed index
    #[command(
        after_help = "Example:\n  debforge closure --from-source ubuntu-bionic --write && debforge build\n\nPrepares the repository's packages as build does (nothing written but the lock),\nresolves every Depends/Pre-Depends against the base, and picks what is missing from SOURCE's signed index as apt would (the first\nalternative it has, its highest version), down to what the base has. Lists each\npackage with the chain that needs it; with --write, adds a recipe for each (never\nover an existing one), which the next build locks and fetches like any other."
    )]
    Closure {
        #[command(flatten)]
        project: ProjectArgs,
        /// The source in sources.toml to pick from (e.g. the release the machines were installed from)
        #[arg(long = "from-source", value_name = "SOURCE")]
        source: String,
        #[command(flatten)]
        keys: KeyArgs,
        /// The architecture of the source's index
        #[arg(long, default_value = "amd64")]
        architecture: String,
        /// Write a recipe for each package picked
        #[arg(long)]
        write: bool,
    },
    /// Check a built or published repository as apt would, listing every problem
    #[command(
        after_help = "Examples:\n  debforge verify repo-out\n  debforge verify repo-out --against lab-machine-status\n\nChecks the signatures against the exported keyring, every index against Release\n(size, SHA256, SHA512, by-hash copies), every pool file against its stanza (size,\nhashes, control fields), Date and Valid-Until. With --against, every Depends and\nPre-Depends of the repository's packages is resolved as apt would against the\nrepository plus the base (a copy of a lab machine's /var/lib/dpkg/status: what is\ninstalled; or a release's Packages index, plain, .gz or .xz: what it offers), and\nwhat neither has is listed with the chain of packages that needs it;\n--closure-from INDEX lists what that index would have to add (apt's pick, down to\nthe base). Exit 0 when all hold, 1 when a problem was found."
    )]
    Verify {
        /// The repository root
        #[arg(default_value = "repo-out")]
        dir: PathBuf,
        /// Keyring to check signatures with [default: DIR/debforge-archive-keyring.gpg]
        #[arg(long)]
        keyring: Option<PathBuf>,
        /// The lab machines' base: a dpkg status file or a Packages index (repeat for several)
        #[arg(long, value_name = "BASE")]
        against: Vec<PathBuf>,
        /// With --against: what a trusted source's Packages index (e.g. the release's main) would have to add, and why
        #[arg(long, value_name = "INDEX", requires = "against")]
        closure_from: Option<PathBuf>,
        /// Print a JSON report
        #[arg(long)]
        json: bool,
    },
    /// List the repository's generations (one per build that changed a package, a pin or a key)
    #[command(
        after_help = "Example:\n  debforge history\n\nGenerations are kept in .repo-out.generations/ beside the output, one JSON manifest each."
    )]
    History {
        /// The built repository
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// What changed between two generations (default: the last two); exit 1 when something did
    #[command(
        after_help = "Examples:\n  debforge diff            # the last generation against the one before\n  debforge diff 3 5\n  debforge diff --upstream # the lock against what the upstreams offer now\n\n+ added, - removed, ↑ upgraded, ↓ downgraded, ! other bytes at the same version (a red\nflag: machines that have that version never get the change). Exit 0: no difference, 1: a\ndifference, 2: error."
    )]
    Diff {
        /// The older generation [default: the one before B]
        a: Option<u32>,
        /// The newer generation [default: the last]
        b: Option<u32>,
        /// The built repository
        #[arg(long, default_value = "repo-out")]
        out: PathBuf,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// Compare the lock file with what the upstreams offer now (through their signed indexes)
        #[arg(long, conflicts_with_all = ["a", "b"])]
        upstream: bool,
        #[command(flatten)]
        project: ProjectArgs,
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
pub(crate) enum BundleCommand {
    /// Check a bundle against its SHA256SUMS (every file, nothing missing or extra); a delta's signed manifest too
    Verify {
        /// The bundle
        bundle: PathBuf,
        /// A delta: the bundle it applies onto (checks the chain, and the signature with that bundle's keyring)
        #[arg(long, value_name = "BUNDLE")]
        from: Option<PathBuf>,
        /// A delta: the keyring its manifest must verify with [default: --from's, else the delta's own]
        #[arg(long)]
        keyring: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(crate) enum DebCommand {
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
pub(crate) struct RepackArgs {
    /// The package to repack
    pub(crate) input: PathBuf,
    /// Output file, or a directory (created when given with a trailing '/')
    #[arg(short, long)]
    pub(crate) output: PathBuf,
    /// Our preinst, run after upstream's
    #[arg(long, value_name = "FILE")]
    pub(crate) preinst: Option<PathBuf>,
    /// Our postinst, run after upstream's
    #[arg(long, value_name = "FILE")]
    pub(crate) postinst: Option<PathBuf>,
    /// Our prerm, run after upstream's
    #[arg(long, value_name = "FILE")]
    pub(crate) prerm: Option<PathBuf>,
    /// Our postrm, run after upstream's
    #[arg(long, value_name = "FILE")]
    pub(crate) postrm: Option<PathBuf>,
    /// Set a control field (repeatable)
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub(crate) set: Vec<String>,
    /// Append to the version to mark a local rebuild (e.g. +lab1)
    #[arg(long)]
    pub(crate) version_suffix: Option<String>,
    /// Print a JSON report
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct BuildArgs {
    /// The package tree (DIR/DEBIAN/control and the files to install)
    pub(crate) dir: PathBuf,
    /// Output file, or a directory (created when given with a trailing '/') for <package>_<version>_<arch>.deb
    #[arg(short, long, default_value = ".")]
    pub(crate) output: PathBuf,
    /// Member compression (zstd only where every client reads it)
    #[arg(short = 'Z', long = "compression", value_enum, default_value_t = CompressionArg::Xz)]
    pub(crate) compression: CompressionArg,
    /// Compression level [default: xz 6, gzip 9, zstd 3]
    #[arg(short = 'z', long = "level")]
    pub(crate) level: Option<u32>,
    /// Print a JSON report instead of text
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct ProjectArgs {
    /// The recipes directory (sources.toml, packages/*.toml, debforge.lock)
    #[arg(long, default_value = "recipes")]
    pub(crate) recipes: PathBuf,
    /// Cache of verified downloads [default: $XDG_CACHE_HOME/debforge, else ~/.cache/debforge]
    #[arg(long)]
    pub(crate) cache: Option<PathBuf>,
    /// Replace a source's base URL, e.g. nvidia-ml=http://127.0.0.1:8080/ (LAN caches, tests)
    #[arg(long = "source", value_name = "NAME=URL")]
    pub(crate) sources: Vec<String>,
    /// Work offline from a snapshot (`debforge fetch --to`) or a directory of .deb files; repeatable
    #[arg(long = "source-dir", value_name = "DIR")]
    pub(crate) source_dirs: Vec<PathBuf>,
    /// Seconds without data before a connection counts as stalled
    #[arg(long, default_value_t = 30.0)]
    pub(crate) timeout: f64,
    /// Further attempts after a transient failure (connection, 5xx, stall)
    #[arg(long, default_value_t = 3)]
    pub(crate) retries: u32,
    /// Seconds before the first retry; doubles each time
    #[arg(long, default_value_t = 0.5)]
    pub(crate) retry_wait: f64,
    /// Downloads at once
    #[arg(short = 'j', long, default_value_t = 4)]
    pub(crate) jobs: usize,
}

impl ProjectArgs {
    /// The recipes directory is there: run from elsewhere, debforge says so
    /// instead of making keys and caches in the wrong place.
    pub(crate) fn check_project(&self) -> Result<(), Failure> {
        if self.recipes.join("sources.toml").is_file() || self.recipes.join("packages").is_dir() {
            return Ok(());
        }
        let here = std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| ".".into());
        Err(Failure::new(format!(
            "not a debforge project here: no {}/ (with sources.toml or packages/) in {here}",
            self.recipes.display()
        ))
        .hint(Some(
            "run it from the project's root, or pass --recipes DIR",
        )))
    }

    /// The pipeline's settings, given the cache directory and the time.
    pub(crate) fn settings(&self, cache: PathBuf, now: i64) -> Result<Settings, Failure> {
        let mut overrides = std::collections::BTreeMap::new();
        for s in &self.sources {
            let Some((name, url)) = s.split_once('=') else {
                return Err(Failure::new(format!("--source {s:?}: expected NAME=URL")));
            };
            overrides.insert(name.to_string(), url.to_string());
        }
        Ok(Settings {
            cache,
            overrides,
            source_dirs: self.source_dirs.clone(),
            http: HttpOptions {
                timeout: seconds("--timeout", self.timeout, 0.1)?,
                retries: self.retries,
                backoff: seconds("--retry-wait", self.retry_wait, 0.0)?,
            },
            parallel: self.jobs.max(1),
            now,
        })
    }
}

#[derive(Args)]
pub(crate) struct KeyArgs {
    /// The keys directory: signing keys in KEYS/signing/*.key (mode 0600)
    #[arg(long, default_value = "keys")]
    pub(crate) keys: PathBuf,
    /// File holding the signing keys' passphrase (or set DEBFORGE_KEY_PASSPHRASE)
    #[arg(long)]
    pub(crate) passphrase_file: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AlgoArg {
    Ed25519,
    Rsa4096,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum CompressionArg {
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

/// A number of seconds from the command line: finite, at least `min`, at
/// most a day (a larger value is a typo, and `inf` would overflow).
fn seconds(flag: &str, value: f64, min: f64) -> Result<Duration, Failure> {
    if !value.is_finite() || value < min || value > 86_400.0 {
        return Err(Failure::new(format!(
            "{flag} {value}: expected a number of seconds from {min} to 86400"
        ))
        .hint(Some(format!("e.g. {flag} 30"))));
    }
    Ok(Duration::from_secs_f64(value))
}
