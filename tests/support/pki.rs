//! Certificates made in the test: a self-signed certificate and key as PEM files.
#![allow(dead_code)]

use std::path::Path;

/// A self-signed certificate for `cn` and its key, written as `<stem>.crt` and
/// `<stem>.key` in `dir` (overwriting them); returns both paths.
pub fn self_signed(dir: &Path, stem: &str, cn: &str) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let c = rcgen::generate_simple_self_signed(vec![cn.to_string()]).unwrap();
    let (cert, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.signing_key.serialize_pem()).unwrap();
    let s = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    (s(cert), s(key))
}
