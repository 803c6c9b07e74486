//! `debforge index`: Packages stanzas for a tree of debs.

use super::prelude::*;

pub(crate) fn run_index(
    cx: &Context,
    dir: &std::path::Path,
    cache: Option<PathBuf>,
    no_cache: bool,
) -> Result<u8, Failure> {
    use debforge::repo::{IndexCache, IndexStats, index_tree};
    let cache_dir = if no_cache {
        None
    } else {
        Some(match cache {
            Some(c) => c,
            None => cx.env.cache_dir()?.join("index"),
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
    )?;
    output::plain(&buf);
    cx.printer.note(&format!(
        "indexed {} packages ({} read, {} from the cache)",
        stats.read + stats.cached,
        stats.read,
        stats.cached
    ));
    Ok(EXIT_OK)
}
