//! A minimal HTTP/1.1 server connection: request heads, bodies with
//! `Content-Length` or `chunked` framing, responses with the apiserver's header set
//! (`Audit-Id`, `Cache-Control`, `Content-Type`, the two APF headers, `Date`,
//! `Content-Length`), chunked streaming for watches, and the raw socket for upgrades.
//! Malformed input is reported as a value, never a panic.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::util;

/// The largest request head accepted.
pub(crate) const MAX_HEAD: usize = 1 << 20;
/// The apiserver's request-body limit (3 MiB).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

pub(crate) const FLOWSCHEMA_UID: &str = "4cf56aa4-3d18-4867-9976-3c3c565016e9";
pub(crate) const PRIORITYLEVEL_UID: &str = "a00ecba9-a244-4d07-b61a-d199db3ac233";

/// A parsed request line and headers.
#[derive(Clone, Debug)]
pub(crate) struct RequestHead {
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    pub path: String,
    pub query: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first header of that name (case-insensitive), as Go's `Header.Get`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `negotiateContentEncoding`: the first `Accept-Encoding` line has a bare `gzip`
    /// token (no parameters, no `x-gzip`, no `*`).
    pub(crate) fn accepts_gzip(&self) -> bool {
        self.header("accept-encoding")
            .is_some_and(|v| v.split(',').any(|t| t.trim() == "gzip"))
    }

    pub(crate) fn header_or_empty(&self, name: &str) -> &str {
        self.header(name).unwrap_or("")
    }

    /// Whether a comma-separated header (all occurrences) has a token.
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// How the body is framed.
    pub(crate) fn body_kind(&self) -> Result<BodyKind, String> {
        let te: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
            .map(|(_, v)| v.as_str())
            .collect();
        if !te.is_empty() {
            let joined = te.join(",");
            let codings: Vec<&str> = joined.split(',').map(str::trim).collect();
            if codings.len() == 1 && codings[0].eq_ignore_ascii_case("chunked") {
                return Ok(BodyKind::Chunked);
            }
            return Err(format!("unsupported transfer encoding: {joined:?}"));
        }
        let mut len: Option<u64> = None;
        for (k, v) in &self.headers {
            if k.eq_ignore_ascii_case("content-length") {
                let v = v.trim();
                if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(format!("bad Content-Length {v:?}"));
                }
                let n: u64 = v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?;
                if len.is_some_and(|l| l != n) {
                    return Err("conflicting Content-Length headers".into());
                }
                len = Some(n);
            }
        }
        Ok(match len {
            Some(0) | None => BodyKind::None,
            Some(n) => BodyKind::Length(n),
        })
    }

    /// Go's `Request.ContentLength`: the length, 0 without a body, -1 if chunked.
    pub(crate) fn content_length(&self) -> i64 {
        match self.body_kind() {
            Ok(BodyKind::Length(n)) => n as i64,
            Ok(BodyKind::Chunked) => -1,
            _ => 0,
        }
    }

    /// Whether the connection stays open after this exchange.
    pub(crate) fn keep_alive(&self) -> bool {
        if self.has_token("connection", "close") {
            return false;
        }
        self.minor >= 1 || self.has_token("connection", "keep-alive")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyKind {
    None,
    Length(u64),
    Chunked,
}

/// Why a request could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io,
    Malformed(String),
    TooLarge,
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// One accepted connection with its read buffer.
pub(crate) struct Conn {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
    pub id: u64,
}

fn find_head_end(buf: &[u8]) -> Option<(usize, usize)> {
    // Returns (end of head content, bytes to consume), accepting bare LF too.
    let mut i = 0;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf.get(i + 1) == Some(&b'\n') {
                return Some((i, i + 2));
            }
            if buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        }
        i += 1;
    }
    None
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// Parses a request head (without its blank line).
pub(crate) fn parse_head(raw: &[u8]) -> Result<RequestHead, String> {
    let text = String::from_utf8_lossy(raw);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line {request_line:?}"));
    };
    if !is_token(method) {
        return Err(format!("invalid method {method:?}"));
    }
    let minor = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        _ => return Err(format!("unsupported protocol {version:?}")),
    };
    let target = if let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        match rest.find('/') {
            Some(i) => rest[i..].to_string(),
            None => "/".to_string(),
        }
    } else {
        target.to_string()
    };
    if !target.starts_with('/') || target.bytes().any(|c| c <= b' ' || c == 0x7f) {
        return Err(format!("invalid request target {target:?}"));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            return Err("obsolete header line folding".into());
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err(format!("malformed header line {line:?}"));
        };
        if !is_token(k) {
            return Err(format!("invalid header name {k:?}"));
        }
        headers.push((k.to_string(), v.trim_matches([' ', '\t']).to_string()));
    }
    if minor == 1 && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        return Err("missing required Host header".into());
    }
    Ok(RequestHead {
        method: method.to_string(),
        target,
        path,
        query,
        minor,
        headers,
    })
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, id: u64) -> Conn {
        Conn {
            stream,
            buf: Vec::with_capacity(8192),
            id,
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    pub(crate) async fn fill(&mut self) -> io::Result<usize> {
        self.buf.reserve(16384);
        self.stream.read_buf(&mut self.buf).await
    }

    /// The next request head; `Ok(None)` on a clean close between requests.
    pub(crate) async fn read_head(&mut self) -> Result<Option<RequestHead>, ReadError> {
        loop {
            // Tolerate blank lines before a request line (RFC 9112 §2.2).
            while self.buf.first().is_some_and(|c| *c == b'\r' || *c == b'\n') {
                self.buf.remove(0);
            }
            if let Some((end, consume)) = find_head_end(&self.buf) {
                let raw: Vec<u8> = self.buf[..end].to_vec();
                self.buf.drain(..consume);
                return parse_head(&raw).map(Some).map_err(ReadError::Malformed);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ReadError::TooLarge);
            }
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Malformed(
                        "unexpected EOF in request head".into(),
                    ))
                };
            }
        }
    }

    async fn read_line(&mut self, max: usize) -> Result<String, ReadError> {
        loop {
            if let Some(i) = self.buf.iter().position(|c| *c == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let line = String::from_utf8_lossy(&line);
                return Ok(line.trim_end_matches(['\r', '\n']).to_string());
            }
            if self.buf.len() > max {
                return Err(ReadError::Malformed("line too long in chunked body".into()));
            }
            if self.fill().await? == 0 {
                return Err(ReadError::Malformed(
                    "unexpected EOF in chunked body".into(),
                ));
            }
        }
    }

    async fn take_exact(&mut self, n: usize, out: &mut Vec<u8>) -> Result<(), ReadError> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                return Err(ReadError::Malformed(
                    "unexpected EOF in request body".into(),
                ));
            }
        }
        out.extend(self.buf.drain(..n));
        Ok(())
    }

    /// Reads (and de-chunks) a request body of at most `limit` bytes.
    pub(crate) async fn read_body(
        &mut self,
        kind: BodyKind,
        limit: usize,
    ) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        match kind {
            BodyKind::None => {}
            BodyKind::Length(n) => {
                if n > limit as u64 {
                    return Err(ReadError::TooLarge);
                }
                self.take_exact(n as usize, &mut body).await?;
            }
            BodyKind::Chunked => loop {
                let line = self.read_line(4096).await?;
                let size_text = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_text, 16)
                    .map_err(|_| ReadError::Malformed(format!("bad chunk size {size_text:?}")))?;
                if size == 0 {
                    // Trailers, up to the blank line.
                    loop {
                        if self.read_line(MAX_HEAD).await?.is_empty() {
                            break;
                        }
                    }
                    break;
                }
                if size > limit.saturating_sub(body.len()) {
                    return Err(ReadError::TooLarge);
                }
                self.take_exact(size, &mut body).await?;
                let crlf = self.read_line(2).await?;
                if !crlf.is_empty() {
                    return Err(ReadError::Malformed(
                        "chunk data not followed by CRLF".into(),
                    ));
                }
            },
        }
        Ok(body)
    }

    pub(crate) async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.stream.write_all(data).await
    }

    /// Writes one chunk of a chunked response.
    pub(crate) async fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.stream.write_all(&out).await
    }
}

/// `defaultGzipThresholdBytes`: a body longer than this is gzipped for a client that asks.
pub(crate) const GZIP_THRESHOLD: usize = 128 * 1024;

/// `body` gzipped at `gzip.BestSpeed` (`defaultGzipContentEncodingLevel`): zlib level 2,
/// because the zlib in the tree (zlib-rs) writes static-Huffman blocks only at level 1,
/// where Go's `BestSpeed` writes dynamic-Huffman ones (cborgate's `GZIP_LEVEL` says more).
pub(crate) fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::new(2),
    );
    e.write_all(body).expect("writes to a Vec");
    e.finish().expect("writes to a Vec")
}

/// A complete response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    pub extra_headers: Vec<(String, String)>,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type: content_type.to_string(),
            body,
            extra_headers: Vec::new(),
        }
    }
}

pub(crate) fn reason_phrase(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// The response head, headers in the apiserver's order. `length: None` → chunked.
pub(crate) fn response_head(
    status: u16,
    content_type: &str,
    audit_id: &str,
    extra: &[(String, String)],
    length: Option<usize>,
    close: bool,
) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
    h.push_str(&format!("Audit-Id: {audit_id}\r\n"));
    h.push_str("Cache-Control: no-cache, private\r\n");
    h.push_str(&format!("Content-Type: {content_type}\r\n"));
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str(&format!(
        "X-Kubernetes-Pf-Flowschema-Uid: {FLOWSCHEMA_UID}\r\n"
    ));
    h.push_str(&format!(
        "X-Kubernetes-Pf-Prioritylevel-Uid: {PRIORITYLEVEL_UID}\r\n"
    ));
    h.push_str(&format!("Date: {}\r\n", util::http_date(util::now_unix())));
    if close {
        h.push_str("Connection: close\r\n");
    }
    match length {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n"),
    }
    h.push_str("\r\n");
    h.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        let h = parse_head(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x\r\nAccept:  application/json \r\nTransfer-Encoding: chunked").unwrap();
        assert_eq!(h.path, "/api/v1/pods");
        assert_eq!(h.query, "watch=1");
        assert_eq!(h.header("accept"), Some("application/json"));
        assert_eq!(h.body_kind().unwrap(), BodyKind::Chunked);
        assert!(parse_head(b"GET /x HTTP/2.0\r\nHost: x").is_err());
        assert!(parse_head(b"GET x HTTP/1.1\r\nHost: x").is_err());
        assert!(parse_head(b"GET /x HTTP/1.1").is_err());
        assert!(parse_head(b"G(T /x HTTP/1.1\r\nHost: x").is_err());
        assert!(parse_head(b"\xff\xfe").is_err());
        let h = parse_head(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x").unwrap();
        assert!(h.body_kind().is_err());
    }
}
