//! Publishing to an S3-compatible object store (AWS S3, MinIO, Ceph RGW)
//! through `object_store`. Credentials come from the usual places: the
//! `AWS_*` environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION`), else the shared credentials file
//! (`~/.aws/credentials`, profile `AWS_PROFILE` or `default`).
//!
//! A PUT replaces an object atomically, so objects go up one by one in the
//! safe order. Unchanged objects are recognised by size and ETag, which we
//! compute locally as S3 does (the MD5 of a single PUT, or of the parts'
//! MD5s for multipart uploads of fixed-size parts). Big files are streamed
//! in parts, never held whole in memory. This is the one async corner of
//! debforge: a current-thread runtime lives for the duration of a publish.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use md5::{Digest, Md5};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{
    Attribute, Attributes, ClientOptions, ObjectStore, ObjectStoreExt, PutMultipartOptions,
    PutOptions, PutPayload, RetryConfig, WriteMultipart,
};

use super::{
    PublishError, Recorder, Step, named_by_content, read_by_referenced, referenced,
    refuse_changed_pool, stale,
};

/// Files up to this size go up in one PUT; bigger ones in parts of this size.
const PART_SIZE: usize = 8 * 1024 * 1024;

pub(super) struct Location<'a> {
    pub bucket: &'a str,
    pub prefix: &'a str,
    pub endpoint: Option<&'a str>,
    pub display: &'a str,
}

pub(super) fn publish(
    out: &Path,
    files: &[String],
    loc: &Location<'_>,
    dry_run: bool,
    rec: &mut Recorder<'_>,
) -> Result<(), PublishError> {
    let (store, rt) = connect(loc)?;
    rt.block_on(run(&store, out, files, loc, dry_run, rec))
}

/// The store and the current-thread runtime a publish or a read runs on.
fn connect(loc: &Location<'_>) -> Result<(AmazonS3, tokio::runtime::Runtime), PublishError> {
    let store = store(loc)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PublishError::Store {
            target: loc.display.to_string(),
            action: "start",
            key: String::new(),
            detail: e.to_string(),
        })?;
    Ok((store, rt))
}

/// The object key of a repository path under the prefix.
fn key_of(loc: &Location<'_>, rel: &str) -> Key {
    if loc.prefix.is_empty() {
        Key::from(rel)
    } else {
        Key::from(format!("{}/{rel}", loc.prefix))
    }
}

/// Turns an object_store error on `rel` into ours.
fn err_of<'a>(
    loc: &'a Location<'_>,
    action: &'static str,
    rel: &str,
) -> impl FnOnce(object_store::Error) -> PublishError + 'a {
    let rel = rel.to_string();
    move |e| classify(e, loc.display, action, &rel)
}

/// What the bucket holds under the prefix (size and ETag by relative path),
/// its relative paths, and what its Releases reference.
async fn listing(
    store: &AmazonS3,
    loc: &Location<'_>,
) -> Result<
    (
        BTreeMap<String, (u64, Option<String>)>,
        Vec<String>,
        super::Referenced,
    ),
    PublishError,
> {
    // What the bucket holds under the prefix: size and ETag by relative path.
    let prefix_key = (!loc.prefix.is_empty()).then(|| Key::from(loc.prefix));
    let mut remote: BTreeMap<String, (u64, Option<String>)> = BTreeMap::new();
    let mut listing = store.list(prefix_key.as_ref());
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(err_of(loc, "list", ""))?;
        let full = meta.location.as_ref();
        let rel = if loc.prefix.is_empty() {
            full
        } else {
            match full
                .strip_prefix(loc.prefix)
                .and_then(|r| r.strip_prefix('/'))
            {
                Some(r) => r,
                None => continue,
            }
        };
        if rel.split('/').any(|c| c.starts_with('.')) {
            continue;
        }
        remote.insert(rel.to_string(), (meta.size, meta.e_tag.map(unquote)));
    }
    let existing: Vec<String> = remote.keys().cloned().collect();

    // What the Release in force until now still needs.
    // (`referenced` reads synchronously, so its files are fetched first.)
    // Each read whole into memory: none larger than a local index may be.
    // One that is larger is not fetched, and stops the publish only if a
    // Release lists it (a stale one goes as stale, as on any target).
    let bound = crate::input::limit::INDEX;
    let mut fetched: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    let mut too_large: BTreeMap<&str, u64> = BTreeMap::new();
    for rel in existing.iter().filter(|r| read_by_referenced(r)) {
        if let Some(&(size, _)) = remote.get(rel).filter(|(size, _)| *size > bound) {
            too_large.insert(rel, size);
            continue;
        }
        match store.get(&key_of(loc, rel)).await {
            // Grown since it was listed.
            Ok(r) if r.meta.size > bound => {
                too_large.insert(rel, r.meta.size);
            }
            Ok(r) => {
                fetched.insert(
                    rel,
                    r.bytes().await.map_err(err_of(loc, "read", rel))?.to_vec(),
                );
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(err_of(loc, "read", rel)(e)),
        }
    }
    let previous = referenced(&existing, &mut |rel| match too_large.get(rel) {
        Some(&size) => Err(PublishError::NotRead {
            target: loc.display.to_string(),
            path: rel.to_string(),
            size,
        }),
        None => Ok(fetched.remove(rel)),
    })?;
    Ok((remote, existing, previous))
}

/// What the bucket serves now (see [`super::published`]).
pub(super) fn current(loc: &Location<'_>) -> Result<super::Referenced, PublishError> {
    let (store, rt) = connect(loc)?;
    Ok(rt.block_on(listing(&store, loc))?.2)
}

async fn run(
    store: &AmazonS3,
    out: &Path,
    files: &[String],
    loc: &Location<'_>,
    dry_run: bool,
    rec: &mut Recorder<'_>,
) -> Result<(), PublishError> {
    let (remote, existing, previous) = listing(store, loc).await?;
    refuse_changed_pool(out, files, &previous, loc.display)?;

    for rel in files {
        let path = out.join(rel);
        let size = fs::metadata(&path).map_err(FileError::at(&path))?.len();
        if let Some((remote_size, etag)) = remote.get(rel)
            && *remote_size == size
        {
            let md5_like = etag.as_deref().is_some_and(looks_like_md5_etag);
            let same = match etag {
                Some(etag) if md5_like => *etag == local_etag(&path)?,
                // A store whose ETags are not MD5s (encrypted objects):
                // names that pin their content are trusted by size.
                _ => named_by_content(rel),
            };
            if same {
                rec.step(Step::Keep, rel);
                continue;
            }
        }
        rec.step(Step::Copy, rel);
        if !dry_run {
            upload(store, &path, size, &key_of(loc, rel), rel)
                .await
                .map_err(|e| match e {
                    Upload::Local(e) => e,
                    Upload::Store(e) => classify(e, loc.display, "upload", rel),
                })?;
        }
    }

    for rel in stale(&existing, files, &previous) {
        rec.step(Step::Delete, rel);
        if !dry_run {
            store
                .delete(&key_of(loc, rel))
                .await
                .map_err(err_of(loc, "delete", rel))?;
        }
    }
    Ok(())
}

fn store(loc: &Location<'_>) -> Result<AmazonS3, PublishError> {
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(loc.bucket)
        // Fail in seconds, not minutes, when the store is down.
        .with_retry(RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
            ..RetryConfig::default()
        })
        .with_client_options(
            ClientOptions::new()
                .with_connect_timeout(Duration::from_secs(10))
                .with_timeout(Duration::from_secs(600)),
        );
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        match shared_credentials() {
            Some(c) => {
                builder = builder
                    .with_access_key_id(c.key_id)
                    .with_secret_access_key(c.secret);
                if let Some(t) = c.token {
                    builder = builder.with_token(t);
                }
            }
            None if std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_none()
                && std::env::var_os("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_none() =>
            {
                return Err(PublishError::Credentials {
                    target: loc.display.to_string(),
                    detail: "no credentials: AWS_ACCESS_KEY_ID is not set and ~/.aws/credentials has none".into(),
                });
            }
            None => {}
        }
    }
    if let Some(endpoint) = loc.endpoint {
        // S3-compatible stores want path-style requests: ENDPOINT/BUCKET/KEY.
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none()
    {
        builder = builder.with_region("us-east-1");
    }
    builder.build().map_err(|e| PublishError::BadTarget {
        text: loc.display.to_string(),
        why: e.to_string(),
    })
}

struct SharedCredentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

/// The profile's keys from the AWS CLI's shared credentials file (INI).
fn shared_credentials() -> Option<SharedCredentials> {
    let file = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")))?;
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let text = crate::input::read_to_string(&file, crate::input::limit::KEY).ok()?;
    let mut section = String::new();
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
        } else if section == profile
            && let Some((k, v)) = line.split_once('=')
        {
            values.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    Some(SharedCredentials {
        key_id: values.remove("aws_access_key_id")?,
        secret: values.remove("aws_secret_access_key")?,
        token: values.remove("aws_session_token"),
    })
}

enum Upload {
    Local(PublishError),
    Store(object_store::Error),
}

async fn upload(
    store: &AmazonS3,
    path: &Path,
    size: u64,
    key: &Key,
    rel: &str,
) -> Result<(), Upload> {
    let local = |e: io::Error| Upload::Local(FileError::at(path)(e).into());
    let attributes = attributes(rel);
    let mut file = fs::File::open(path).map_err(local)?;
    if size <= PART_SIZE as u64 {
        let mut buf = Vec::with_capacity(size as usize);
        file.read_to_end(&mut buf).map_err(local)?;
        let opts = PutOptions {
            attributes,
            ..PutOptions::default()
        };
        store
            .put_opts(key, PutPayload::from(buf), opts)
            .await
            .map_err(Upload::Store)?;
        return Ok(());
    }
    let opts = PutMultipartOptions {
        attributes,
        ..PutMultipartOptions::default()
    };
    let upload = store
        .put_multipart_opts(key, opts)
        .await
        .map_err(Upload::Store)?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    let mut buf = vec![0u8; 1024 * 1024];
    loop {
        // At most four parts in flight: memory stays near 40 MiB.
        if let Err(e) = writer.wait_for_capacity(4).await {
            return Err(Upload::Store(e));
        }
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = writer.abort().await;
                return Err(local(e));
            }
        };
        writer.write(&buf[..n]);
    }
    writer.finish().await.map_err(Upload::Store)?;
    Ok(())
}

/// Content types for browsers and CDNs; indexes and Release files must be
/// revalidated (a CDN holding an old InRelease would hide a publish), pool
/// and by-hash files never change under their names.
fn attributes(rel: &str) -> Attributes {
    let mut a = Attributes::new();
    let ext = rel.rsplit_once('.').map_or("", |(_, e)| e);
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let content_type = match ext {
        "deb" | "udeb" => "application/vnd.debian.binary-package",
        "gz" => "application/gzip",
        "xz" => "application/x-xz",
        "zst" => "application/zstd",
        "gpg" => "application/pgp-keys",
        "asc" => "application/pgp-keys",
        "sh" => "text/x-shellscript",
        _ if matches!(name, "Release" | "InRelease" | "Packages" | "SHA256SUMS") => {
            "text/plain; charset=utf-8"
        }
        _ => "application/octet-stream",
    };
    a.insert(Attribute::ContentType, content_type.into());
    let cache = if named_by_content(rel) {
        "public, max-age=86400"
    } else {
        "no-cache"
    };
    a.insert(Attribute::CacheControl, cache.into());
    a
}

/// The ETag S3 gives a file uploaded as [`upload`] does.
fn local_etag(path: &Path) -> Result<String, PublishError> {
    let mut file = fs::File::open(path).map_err(FileError::at(path))?;
    let mut buf = vec![0u8; 1024 * 1024];
    let mut part = Md5::new();
    let mut part_len = 0usize;
    let mut parts: Vec<[u8; 16]> = Vec::new();
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(FileError::at(path))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let take = chunk.len().min(PART_SIZE - part_len);
            part.update(&chunk[..take]);
            part_len += take;
            chunk = &chunk[take..];
            if part_len == PART_SIZE {
                parts.push(part.finalize_reset().into());
                part_len = 0;
            }
        }
    }
    if total <= PART_SIZE as u64 {
        return Ok(match parts.first() {
            Some(p) => hex::encode(p),
            None => hex::encode(part.finalize()),
        });
    }
    if part_len > 0 {
        parts.push(part.finalize().into());
    }
    let mut whole = Md5::new();
    for p in &parts {
        whole.update(p);
    }
    Ok(format!("{}-{}", hex::encode(whole.finalize()), parts.len()))
}

fn unquote(etag: String) -> String {
    etag.trim_matches('"').to_string()
}

fn looks_like_md5_etag(etag: &str) -> bool {
    let (hash, parts) = etag.split_once('-').unwrap_or((etag, "1"));
    hash.len() == 32
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && parts.bytes().all(|b| b.is_ascii_digit())
}

fn classify(e: object_store::Error, target: &str, action: &'static str, key: &str) -> PublishError {
    let target = target.to_string();
    match e {
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => PublishError::Credentials {
            target,
            detail: format!("{action} {key}: {e}"),
        },
        other => {
            let text = error_chain(&other);
            if text.contains("InvalidAccessKeyId")
                || text.contains("SignatureDoesNotMatch")
                || text.contains("AccessDenied")
                || text.contains("403 Forbidden")
                || text.contains("InvalidClientTokenId")
            {
                PublishError::Credentials {
                    target,
                    detail: format!("{action} {key}: {text}"),
                }
            } else if text.contains("error sending request")
                || text.contains("Connection refused")
                || text.contains("dns error")
                || text.contains("timed out")
            {
                PublishError::Unreachable {
                    target,
                    detail: text,
                }
            } else if text.contains("NoSuchBucket") {
                PublishError::BadTarget {
                    text: target,
                    why: "no such bucket; create it first (aws s3 mb, mc mb)".into(),
                }
            } else {
                PublishError::Store {
                    target,
                    action,
                    key: key.to_string(),
                    detail: text,
                }
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_as_s3_computes_them() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        fs::write(&small, b"hello\n").unwrap();
        assert_eq!(
            local_etag(&small).unwrap(),
            "b1946ac92492d2347c6235b4d2611184"
        );
        let empty = dir.path().join("empty");
        fs::write(&empty, b"").unwrap();
        assert_eq!(
            local_etag(&empty).unwrap(),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        // Two and a half parts: MD5 of the three parts' MD5s, "-3".
        let big = dir.path().join("big");
        let data: Vec<u8> = (0..PART_SIZE * 5 / 2).map(|i| (i % 251) as u8).collect();
        fs::write(&big, &data).unwrap();
        let mut whole = Md5::new();
        for chunk in data.chunks(PART_SIZE) {
            whole.update(Md5::digest(chunk));
        }
        assert_eq!(
            local_etag(&big).unwrap(),
            format!("{}-3", hex::encode(whole.finalize()))
        );
        assert!(looks_like_md5_etag("b1946ac92492d2347c6235b4d2611184-3"));
        assert!(!looks_like_md5_etag("opaque"));
    }
}
