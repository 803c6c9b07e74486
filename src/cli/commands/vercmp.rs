//! `debforge vercmp`: dpkg's version comparison.

use super::prelude::*;

/// `None` for dpkg's blank version (an empty argument or `<unknown>`), which
/// `dpkg --compare-versions` orders before every real version.
pub(crate) fn parse_version_arg(cx: &Context, text: &str) -> Result<Option<Version>, Failure> {
    if text.is_empty() || text == "<unknown>" {
        return Ok(None);
    }
    match Version::parse_lenient(text) {
        Ok((v, None)) => Ok(Some(v)),
        Ok((v, Some(warning))) => {
            cx.printer
                .warning(&format!("version '{text}' has bad syntax: {warning}"));
            Ok(Some(v))
        }
        Err(e) => Err(Failure::new(format!(
            "version '{text}' has bad syntax: {e}"
        ))),
    }
}

pub(crate) fn vercmp(cx: &Context, a: &str, op: &str, b: &str) -> Result<u8, Failure> {
    let op = CompareOp::parse(op).ok_or_else(|| {
        Failure::new(format!("unknown operator '{op}'"))
            .hint(Some("use one of lt le eq ne ge gt (or << <= = >= >>)"))
    })?;
    let (a, b) = (parse_version_arg(cx, a)?, parse_version_arg(cx, b)?);
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
