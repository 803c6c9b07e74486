//! `debforge serve`: the repository over HTTP.

use super::prelude::*;

pub(crate) fn run_serve(
    cx: &Context,
    listen: &str,
    out: &std::path::Path,
    max_connections: usize,
) -> Result<u8, Failure> {
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
    debforge::serve::serve(
        listener,
        out,
        max_connections.max(1),
        std::sync::Arc::new(cx.printer.for_serve()),
    )
    .map_err(|e| Failure::new(format!("{}: {e}", out.display())))?;
    Ok(EXIT_OK)
}
