//! The `debforge` binary: a thin layer over the library (see src/cli/).

mod cli;

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    cli::run()
}

/// glibc gives each thread that allocates an arena of its own (up to eight
/// per core), and memory freed in one is not reused by another: a cold
/// 5,000-package build peaked at 85 MB of RSS with them, 72 MB with one
/// arena. One arena for all is one lock, though: the threads that read
/// thousands of small packages at once (each read allocates its
/// decompressors) waited on it, and took 340 ms where they take 140 ms with
/// an arena per core (at the same peak for 5,000 packages; 20,000 peak a
/// tenth higher).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = cores.clamp(1, 4) as libc::c_int;
        // SAFETY: mallopt only sets an allocator parameter; called before
        // any thread is started.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
            // Blocks of 128 KiB and more (an xz encoder's tables, a
            // vector of thousands of packages) mapped on their own and
            // given back when freed. By default glibc raises this bound
            // to the largest block freed, and later big blocks come from
            // the heap, which keeps the pages of each one freed: a cold
            // 5,000-package build held 2 MB more.
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}
