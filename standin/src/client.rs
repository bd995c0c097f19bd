//! The one HTTP/1.1 client of the test suites and the load harness: cborgate's
//! end-to-end tests (`tests/support`), the stand-in's own tests, the load test
//! (`tests/proxy_load.rs`) and `bench/load` all speak through it. One connection
//! each, keep-alive, Content-Length and chunked bodies, chunk-by-chunk reads for
//! watches, raw writes for pipelining and malformed input.
//!
//! Strict on purpose: a response framed wrongly (both Content-Length and chunked, a
//! chunk without its CRLF, a keep-alive body with neither) is an error, never read
//! around. [`Conn`] is blocking and fails the test on an I/O error, for tests on
//! threads; [`AsyncConn`] is on tokio and returns every I/O error, for callers that
//! count failures (the load test, `bench/load`) or hold thousands of connections.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// A whole response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body came chunked.
    pub chunked: bool,
}

/// The head of a response whose body is read separately.
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

/// The first header called `name` (any case).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }
    /// The body as JSON (or fail the test with the body's text).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The server said `Connection: close`.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

impl From<Head> for Resp {
    /// A response with no body read yet, to use the [`Resp`] accessors on a head.
    fn from(h: Head) -> Resp {
        Resp {
            status: h.status,
            headers: h.headers,
            body: Vec::new(),
            chunked: false,
        }
    }
}

/// How a response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Chunked,
    Length(usize),
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// How the body after this head is framed, for a request with `method`.
    pub fn framing(&self, method: &str) -> io::Result<Framing> {
        if method == "HEAD" || self.status < 200 || self.status == 204 || self.status == 304 {
            return Ok(Framing::None);
        }
        let length = self.header("content-length");
        if self
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            if length.is_some() {
                return Err(bad("both Content-Length and chunked".into()));
            }
            return Ok(Framing::Chunked);
        }
        let length = length
            .ok_or_else(|| bad("a keep-alive response needs Content-Length or chunked".into()))?;
        length
            .parse()
            .map(Framing::Length)
            .map_err(|_| bad(format!("bad Content-Length {length:?}")))
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The bytes of a request: `Host: test` unless `headers` name a Host, then
/// `headers` in order, then `Content-Length` when there is a body and `headers` do
/// not say `Transfer-Encoding` (the caller then frames `body` itself).
pub fn request_bytes(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        req.push_str("Host: test\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        if !has("transfer-encoding") {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
    }
    req.push_str("\r\n");
    let mut out = req.into_bytes();
    out.extend_from_slice(body.unwrap_or_default());
    out
}

/// The status of an `HTTP/1.x NNN reason` line.
fn status_line(line: &str) -> io::Result<u16> {
    if !line.starts_with("HTTP/1.") {
        return Err(bad(format!("bad status line {line:?}")));
    }
    line.get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {line:?}")))
}

/// One `Name: value` line (without its CRLF).
fn header_line(line: &str) -> io::Result<(String, String)> {
    let (k, v) = line
        .split_once(':')
        .ok_or_else(|| bad(format!("bad header line {line:?}")))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// The size on a chunk-size line (extensions ignored).
fn chunk_size(line: &str) -> io::Result<usize> {
    usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|_| bad(format!("bad chunk size line {line:?}")))
}

fn closed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, format!("closed {what}"))
}

/// How long [`Conn`] waits for any one read before the test fails.
const SYNC_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// A blocking client connection; every I/O or framing error fails the test. Over
/// plain TCP ([`Conn::connect`]) or any other byte stream, such as a TLS one
/// ([`Conn::over`]).
pub struct Conn<S: Read + Write = TcpStream> {
    r: BufReader<S>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(SYNC_READ_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn::over(s)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.r.get_ref().local_addr().unwrap()
    }

    /// True if the server has closed the connection: a read returns EOF within 200 ms.
    pub fn is_closed(&mut self) -> bool {
        let s = self.r.get_ref();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut b = [0u8; 1];
        let r = matches!(self.r.read(&mut b), Ok(0));
        self.r
            .get_ref()
            .set_read_timeout(Some(SYNC_READ_TIMEOUT))
            .unwrap();
        r
    }
}

impl<S: Read + Write> Conn<S> {
    /// A connection over an established stream (its read timeout is the caller's).
    pub fn over(s: S) -> Conn<S> {
        Conn {
            r: BufReader::new(s),
        }
    }

    /// The stream underneath (a TLS stream's peer certificate, say).
    pub fn stream(&self) -> &S {
        self.r.get_ref()
    }

    /// Send a request (see [`request_bytes`]). A server may answer early and close
    /// (a 413 before the body): a failed write is left for the read to show.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) {
        let _ = self
            .r
            .get_mut()
            .write_all(&request_bytes(method, path, headers, body));
    }

    /// Raw bytes, as they are (pipelined or malformed requests).
    pub fn write(&mut self, bytes: &[u8]) {
        self.r.get_mut().write_all(bytes).expect("write");
    }

    fn line(&mut self, what: &str) -> io::Result<String> {
        let mut l = String::new();
        match self.r.read_line(&mut l)? {
            0 => Err(closed(what)),
            _ => Ok(l),
        }
    }

    /// [`Conn::head`], returning the error instead of failing the test.
    pub fn try_head(&mut self) -> io::Result<Head> {
        let status = status_line(&self.line("before a response")?)?;
        let mut headers = Vec::new();
        loop {
            let l = self.line("in a response head")?;
            let l = l.trim_end();
            if l.is_empty() {
                return Ok(Head { status, headers });
            }
            headers.push(header_line(l)?);
        }
    }

    pub fn head(&mut self) -> Head {
        self.try_head().expect("a response head")
    }

    /// [`Conn::chunk`], returning the error instead of failing the test.
    pub fn try_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let size = chunk_size(&self.line("inside a chunked body")?)?;
        let mut data = vec![0; size + 2];
        self.r.read_exact(&mut data)?;
        if &data[size..] != b"\r\n" {
            return Err(bad("chunk not followed by CRLF".into()));
        }
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }

    /// One chunk of a chunked body; `None` at the terminating chunk.
    pub fn chunk(&mut self) -> Option<Vec<u8>> {
        self.try_chunk().expect("a chunk")
    }

    /// [`Conn::body`], returning the error instead of failing the test.
    pub fn try_body(&mut self, head: &Head, method: &str) -> io::Result<(Vec<u8>, bool)> {
        match head.framing(method)? {
            Framing::None => Ok((Vec::new(), false)),
            Framing::Chunked => {
                let mut body = Vec::new();
                while let Some(c) = self.try_chunk()? {
                    body.extend(c);
                }
                Ok((body, true))
            }
            Framing::Length(n) => {
                let mut body = vec![0; n];
                self.r.read_exact(&mut body)?;
                Ok((body, false))
            }
        }
    }

    /// The body after `head` (for a request with `method`), and whether it came chunked.
    pub fn body(&mut self, head: &Head, method: &str) -> (Vec<u8>, bool) {
        self.try_body(head, method).expect("a response body")
    }

    /// The next whole response to a request with `method`, or the error that cut it
    /// short (for tests of responses that must end abnormally).
    pub fn try_response(&mut self, method: &str) -> io::Result<Resp> {
        let head = self.try_head()?;
        let (body, chunked) = self.try_body(&head, method)?;
        Ok(Resp {
            status: head.status,
            headers: head.headers,
            body,
            chunked,
        })
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        self.send(method, path, headers, body);
        self.try_response(method).expect("a response")
    }

    /// Raw bytes from the socket; 0 when closed or failed.
    pub fn raw_read(&mut self, buf: &mut [u8]) -> usize {
        self.r.read(buf).unwrap_or(0)
    }

    /// Exactly `buf.len()` bytes; false at EOF or on error.
    pub fn read_exact(&mut self, buf: &mut [u8]) -> bool {
        self.r.read_exact(buf).is_ok()
    }
}

/// One request on a fresh connection.
pub fn once(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    Conn::connect(addr).request(method, path, headers, body)
}

/// A tokio client connection. Every read is bounded by the connection's read
/// timeout, if it has one (an `io::ErrorKind::TimedOut` error then).
pub struct AsyncConn {
    io: tokio::io::BufReader<tokio::net::TcpStream>,
    line: String,
    read_timeout: Option<Duration>,
}

/// `f`, failing with `TimedOut` after `limit`.
async fn within<T>(
    limit: Option<Duration>,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match limit {
        None => f.await,
        Some(d) => tokio::time::timeout(d, f)
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))),
    }
}

impl AsyncConn {
    /// A connection with no read timeout.
    pub async fn connect(addr: SocketAddr) -> io::Result<AsyncConn> {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(AsyncConn {
            // Room for a large chunk in one read (bench/load reads 100 MB watch bodies).
            io: tokio::io::BufReader::with_capacity(256 * 1024, s),
            line: String::new(),
            read_timeout: None,
        })
    }

    /// Bound every read from now on by `limit`.
    pub fn with_read_timeout(mut self, limit: Duration) -> AsyncConn {
        self.read_timeout = Some(limit);
        self
    }

    /// Raw bytes, as they are (pipelined or malformed requests, or a request made once
    /// and sent many times).
    pub async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.get_mut().write_all(bytes).await
    }

    /// Send a request (see [`request_bytes`]).
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<()> {
        self.write(&request_bytes(method, path, headers, body))
            .await
    }

    /// The next line, CRLF included; `None` at EOF.
    pub async fn read_line(&mut self) -> io::Result<Option<String>> {
        self.line.clear();
        let n = within(self.read_timeout, self.io.read_line(&mut self.line)).await?;
        Ok((n > 0).then(|| self.line.clone()))
    }

    async fn line(&mut self, what: &str) -> io::Result<String> {
        self.read_line().await?.ok_or_else(|| closed(what))
    }

    /// Exactly `n` bytes.
    pub async fn read_exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; n];
        within(self.read_timeout, self.io.read_exact(&mut buf)).await?;
        Ok(buf)
    }

    pub async fn head(&mut self) -> io::Result<Head> {
        let status = status_line(&self.line("before a response").await?)?;
        let mut headers = Vec::new();
        loop {
            let l = self.line("in a response head").await?;
            let l = l.trim_end();
            if l.is_empty() {
                return Ok(Head { status, headers });
            }
            headers.push(header_line(l)?);
        }
    }

    /// Append the next chunk of a chunked body to `out`; false at the last chunk.
    pub async fn chunk_into(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let n = chunk_size(&self.line("inside a chunked body").await?)?;
        let at = out.len();
        out.resize(at + n + 2, 0);
        within(self.read_timeout, self.io.read_exact(&mut out[at..])).await?;
        if &out[at + n..] != b"\r\n" {
            return Err(bad("chunk not followed by CRLF".into()));
        }
        out.truncate(at + n);
        Ok(n > 0)
    }

    /// The next chunk of a chunked body; `None` after the last one.
    pub async fn chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut c = Vec::new();
        Ok(self.chunk_into(&mut c).await?.then_some(c))
    }

    /// The body after `head` (for a request with `method`) into `out`, cleared first;
    /// true if it came chunked.
    pub async fn body_into(
        &mut self,
        head: &Head,
        method: &str,
        out: &mut Vec<u8>,
    ) -> io::Result<bool> {
        out.clear();
        match head.framing(method)? {
            Framing::None => Ok(false),
            Framing::Chunked => {
                while self.chunk_into(out).await? {}
                Ok(true)
            }
            Framing::Length(n) => {
                out.resize(n, 0);
                within(self.read_timeout, self.io.read_exact(out)).await?;
                Ok(false)
            }
        }
    }

    /// The next whole response to a request with `method`.
    pub async fn response_to(&mut self, method: &str) -> io::Result<Resp> {
        let head = self.head().await?;
        let mut body = Vec::new();
        let chunked = self.body_into(&head, method, &mut body).await?;
        Ok(Resp {
            status: head.status,
            headers: head.headers,
            body,
            chunked,
        })
    }

    /// The next whole response (to anything but HEAD).
    pub async fn response(&mut self) -> io::Result<Resp> {
        self.response_to("GET").await
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<Resp> {
        self.send(method, path, headers, body).await?;
        self.response_to(method).await
    }

    /// Reads until the server closes the connection: true if it does within 5 s.
    pub async fn closes(&mut self) -> bool {
        let drain = async {
            loop {
                let n = match self.io.fill_buf().await {
                    Ok([]) | Err(_) => return,
                    Ok(b) => b.len(),
                };
                self.io.consume(n);
            }
        };
        tokio::time::timeout(Duration::from_secs(5), drain)
            .await
            .is_ok()
    }
}

/// ESTABLISHED TCP connections that process `pid` holds to local port `port` (the
/// client side of connections to a listener there): its socket inodes matched against
/// `/proc/net/tcp` and `tcp6`. For counting a proxy's upstream connections.
pub fn connections_to(pid: u32, port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 9 && f[2].ends_with(&port) && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}
