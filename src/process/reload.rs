//! Certificates, keys and CA bundles read again when a file's content changes or on
//! `SIGHUP`, without a restart and without touching open connections.
//!
//! - [`Reloader`] looks at the files behind the names (a Secret volume swaps a
//!   `..data` symlink, and the files behind the names change with the same or an
//!   older mtime, so their identity and change time count, not their mtime alone),
//!   and at their contents while they changed recently; it reloads what changed and
//!   keeps the previous material when the new one does not load.
//! - The material itself ([`crate::tls`]), and the listener's client CA bundles
//!   (`crate::inbound::client_cert::ClientCas`), through [`Reloader::watch`].
//! - The earliest expiry of each file in use, in
//!   `cborgate_certificate_expiry_timestamp_seconds`.

use crate::metrics::metrics;
use crate::tls::{earliest_expiry, Kind, ServingCert, UpstreamTls};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
/// Publish the earliest `notAfter` of `path`, the certificate file in use for `kind`, in
/// `cborgate_certificate_expiry_timestamp_seconds`.
fn publish_expiry(kind: Kind, path: &str) {
    match earliest_expiry(path) {
        Ok(t) => metrics()
            .certificate_expiry_timestamp_seconds
            .with_label_values(&[kind.label()])
            .set(t),
        Err(e) => tracing::warn!(file = kind.label(), error = %e, "certificate expiry unknown"),
    }
}

/// Publish whether the last load of `kind`'s files succeeded, in
/// `cborgate_reload_last_success` (the files were loaded at start-up, or cborgate would
/// not have started).
fn publish_outcome(kind: Kind, ok: bool) {
    metrics()
        .reload_last_success
        .with_label_values(&[kind.label()])
        .set(i64::from(ok));
}

/// Reloads one set of files; an error keeps what was loaded before.
pub type ReloadFn = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

struct Watched {
    kind: Kind,
    /// The certificate (or CA bundle) file first, then the key file, if any.
    paths: Vec<String>,
    /// What the last look saw.
    seen: Seen,
    reload: ReloadFn,
}

/// Watches the configured files and reloads what changed.
pub struct Reloader {
    watched: Vec<Watched>,
}

/// What a look at a set of files saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    /// Each file's device, inode, size, modification and change time (following
    /// symlinks); a file that cannot be looked at hashes its error, so disappearing and
    /// coming back both count as changes.
    files: u64,
    /// The files' contents, as of the last time they were read.
    contents: u64,
}

/// A file whose change time is this recent is also read at each look: file times are
/// as coarse as the kernel's clock tick, so two writes of the same size within one tick
/// leave the same times behind. Once the files are older than this, a look costs one
/// `stat` per file and no read.
const RECENT: std::time::Duration = std::time::Duration::from_secs(10);

/// The files' identities and times ([`Seen::files`]), and whether any changed within
/// [`RECENT`] (or has a change time in the future).
fn stat_all(paths: &[String]) -> (u64, bool) {
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let now = std::time::SystemTime::now();
    let mut recent = false;
    for p in paths {
        match std::fs::metadata(p) {
            Ok(m) => {
                (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
                (m.ctime(), m.ctime_nsec()).hash(&mut h);
                let changed = std::time::UNIX_EPOCH
                    + std::time::Duration::new(
                        u64::try_from(m.ctime()).unwrap_or(0),
                        u32::try_from(m.ctime_nsec()).unwrap_or(0),
                    );
                recent |= now.duration_since(changed).map_or(true, |age| age < RECENT);
            }
            Err(e) => e.kind().hash(&mut h),
        }
    }
    (h.finish(), recent)
}

/// A hash of the files' contents; a file that cannot be read hashes its error.
fn contents(paths: &[String]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in paths {
        match std::fs::read(p) {
            Ok(bytes) => bytes.hash(&mut h),
            Err(e) => e.kind().hash(&mut h),
        }
    }
    h.finish()
}

impl Seen {
    fn now(paths: &[String]) -> Seen {
        Seen {
            files: stat_all(paths).0,
            contents: contents(paths),
        }
    }

    /// Look again: what is there now, when it differs from `self`.
    fn changed(self, paths: &[String]) -> Option<Seen> {
        let (files, recent) = stat_all(paths);
        if files != self.files {
            return Some(Seen {
                files,
                contents: contents(paths),
            });
        }
        if !recent {
            return None;
        }
        let now = contents(paths);
        (now != self.contents).then_some(Seen {
            files,
            contents: now,
        })
    }
}

impl Reloader {
    pub fn new(
        serving: Option<(Arc<ServingCert>, String, String)>,
        upstream: &Arc<UpstreamTls>,
        ca_file: &str,
        client: Option<(String, String)>,
    ) -> Self {
        let mut watched = Vec::new();
        let mut watch = |kind: Kind, paths: Vec<String>, reload: ReloadFn| {
            publish_expiry(kind, &paths[0]);
            publish_outcome(kind, true);
            watched.push(Watched {
                kind,
                seen: Seen::now(&paths),
                paths,
                reload,
            })
        };
        if let Some((cert, c, k)) = serving {
            let (c2, k2) = (c.clone(), k.clone());
            watch(
                Kind::Serving,
                vec![c, k],
                Box::new(move || cert.reload(&c2, &k2)),
            );
        }
        if !ca_file.is_empty() {
            let (tls, path) = (upstream.clone(), ca_file.to_string());
            watch(
                Kind::UpstreamCa,
                vec![path.clone()],
                Box::new(move || tls.reload_ca(&path)),
            );
        }
        if let Some((c, k)) = client {
            let (tls, c2, k2) = (upstream.clone(), c.clone(), k.clone());
            watch(
                Kind::UpstreamClient,
                vec![c, k],
                Box::new(move || tls.reload_client(&c2, &k2)),
            );
        }
        Reloader { watched }
    }

    /// Also watch `paths` (the certificate file first), calling `reload` when their
    /// contents change (or on SIGHUP).
    pub fn watch(&mut self, kind: Kind, paths: Vec<String>, reload: ReloadFn) {
        publish_expiry(kind, &paths[0]);
        publish_outcome(kind, true);
        self.watched.push(Watched {
            kind,
            seen: Seen::now(&paths),
            paths,
            reload,
        });
    }

    /// Reload every file set whose contents changed since the last look, or
    /// all of them when `forced` (SIGHUP). A set that fails to load keeps what
    /// it had, and is tried again when its files change again.
    pub fn check(&mut self, forced: bool) {
        for w in &mut self.watched {
            match w.seen.changed(&w.paths) {
                Some(now) => w.seen = now,
                None if forced => {}
                None => continue,
            }
            let result = (w.reload)();
            let label = if result.is_ok() { "success" } else { "failure" };
            metrics()
                .reloads_total
                .with_label_values(&[w.kind.label(), label])
                .inc();
            publish_outcome(w.kind, result.is_ok());
            if result.is_ok() {
                publish_expiry(w.kind, &w.paths[0]);
            }
            match result {
                Ok(()) => tracing::info!(
                    file = w.kind.label(),
                    paths = %w.paths.join(","),
                    "reloaded {}",
                    w.kind.keys()
                ),
                Err(e) => tracing::warn!(
                    file = w.kind.label(),
                    error = %e,
                    "{} could not be reloaded; keeping the previous one",
                    w.kind.keys()
                ),
            }
        }
    }

    /// Look every `interval` (when there is a file to look at), and at once on SIGHUP,
    /// until `shutdown` says so.
    pub async fn run(
        mut self,
        interval: std::time::Duration,
        mut shutdown: pingora::server::ShutdownWatch,
    ) {
        use tokio::signal::unix::{signal, SignalKind};
        // Registering replaces SIGHUP's default action (terminate): from here on
        // SIGHUP means "reload", even with nothing to watch.
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGHUP; reloading on file changes only");
                None
            }
        };
        // With no file to watch, nothing wakes it but SIGHUP and shutdown.
        let looks = !self.watched.is_empty();
        loop {
            let forced = tokio::select! {
                _ = tokio::time::sleep(interval), if looks => false,
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => {
                    tracing::info!("SIGHUP: reloading certificates and keys");
                    true
                }
                _ = shutdown.changed() => return,
            };
            self.check(forced);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate, PEM, valid until the start of `year`-01-02.
    fn cert_until(year: i32) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["x".to_string()]).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.not_after = rcgen::date_time_ymd(year, 1, 2);
        p.self_signed(&key).unwrap().pem()
    }

    /// A look sees every way a file changes: rewritten in place with the same size at
    /// once (the same times, a kernel tick being coarse: the contents tell), replaced by
    /// a rename, and swapped behind a symlink as a Secret volume does.
    #[test]
    fn a_look_sees_rewrites_renames_and_symlink_swaps() {
        let dir = std::env::temp_dir().join(format!("cborgate-seen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        std::fs::write(dir.join("a/tls.crt"), "first").unwrap();
        std::fs::write(dir.join("b/tls.crt"), "third").unwrap();
        std::os::unix::fs::symlink("a", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/tls.crt", dir.join("tls.crt")).unwrap();
        let paths = vec![dir.join("tls.crt").to_str().unwrap().to_string()];
        let seen = Seen::now(&paths);
        assert_eq!(seen.changed(&paths), None);
        std::fs::write(dir.join("a/tls.crt"), "other").unwrap();
        let seen = seen.changed(&paths).expect("a same-size rewrite");
        assert_eq!(seen.changed(&paths), None);
        std::fs::write(dir.join("a/new"), "newer").unwrap();
        std::fs::rename(dir.join("a/new"), dir.join("a/tls.crt")).unwrap();
        let seen = seen.changed(&paths).expect("a rename over it");
        std::os::unix::fs::symlink("b", dir.join("..data.tmp")).unwrap();
        std::fs::rename(dir.join("..data.tmp"), dir.join("..data")).unwrap();
        let seen = seen.changed(&paths).expect("the symlink swapped");
        assert_eq!(seen.changed(&paths), None);
        std::fs::remove_file(dir.join("b/tls.crt")).unwrap();
        assert!(seen.changed(&paths).is_some(), "gone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_expiry_gauge_is_the_earliest_not_after_and_follows_reloads() {
        let dir = std::env::temp_dir().join(format!("cborgate-expiry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        // 2031-01-02 and 2029-01-02 in one bundle: the earliest counts.
        std::fs::write(&ca, cert_until(2031) + &cert_until(2029)).unwrap();
        let ca = ca.to_str().unwrap();
        assert_eq!(earliest_expiry(ca).unwrap(), 1_862_006_400);
        let tls = UpstreamTls::load(ca, "", "").unwrap();
        let mut r = Reloader::new(None, &tls, ca, None);
        let gauge = || {
            metrics()
                .certificate_expiry_timestamp_seconds
                .with_label_values(&["upstream_ca"])
                .get()
        };
        assert_eq!(gauge(), 1_862_006_400);
        std::fs::write(ca, cert_until(2033)).unwrap();
        r.check(false);
        assert_eq!(gauge(), 1_988_236_800, "2033-01-02 after the reload");
        // A file that does not load keeps the previous material, and its expiry.
        std::fs::write(ca, "not a certificate").unwrap();
        r.check(false);
        assert_eq!(gauge(), 1_988_236_800);
    }
}
