//! A small, strict HTTP/1.1 client for end-to-end tests: one TCP connection,
//! keep-alive, Content-Length and chunked bodies, and incremental chunk reads
//! for watches. Strictness is the point: it fails on framing mistakes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub chunked: bool,
}

/// The first header called `name` (any case) in a parsed head.
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
}

/// The head of a response whose body is read separately.
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.w.local_addr().unwrap()
    }

    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
            {
                req.push_str(&format!("Content-Length: {}\r\n", b.len()));
            }
        }
        req.push_str("\r\n");
        // A server may answer early and close (413): read the answer anyway.
        if self.w.write_all(req.as_bytes()).is_ok() {
            if let Some(b) = body {
                let _ = self.w.write_all(b);
            }
        }
    }

    pub fn head(&mut self) -> Head {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("status line");
        assert!(line.starts_with("HTTP/1.1 "), "bad status line {line:?}");
        let status: u16 = line[9..12].parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').expect("header line");
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        Head { status, headers }
    }

    /// Read one chunk of a chunked body; `None` at the terminating chunk.
    pub fn chunk(&mut self) -> Option<Vec<u8>> {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("chunk size");
        let size = usize::from_str_radix(l.trim().split(';').next().unwrap(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {l:?}"));
        let mut data = vec![0; size];
        self.r.read_exact(&mut data).unwrap();
        let mut crlf = [0; 2];
        self.r.read_exact(&mut crlf).unwrap();
        assert_eq!(&crlf, b"\r\n");
        if size == 0 {
            None
        } else {
            Some(data)
        }
    }

    pub fn body(&mut self, head: &Head, method: &str) -> (Vec<u8>, bool) {
        let get = |n: &str| {
            head.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        if method == "HEAD" || head.status == 204 || head.status == 304 {
            return (Vec::new(), false);
        }
        if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            assert!(
                get("content-length").is_none(),
                "both Content-Length and chunked"
            );
            let mut body = Vec::new();
            while let Some(c) = self.chunk() {
                body.extend(c);
            }
            return (body, true);
        }
        let len: usize = get("content-length")
            .expect("a keep-alive response needs Content-Length or chunked")
            .parse()
            .unwrap();
        let mut body = vec![0; len];
        self.r.read_exact(&mut body).unwrap();
        (body, false)
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        self.send(method, path, headers, body);
        let head = self.head();
        let (body, chunked) = self.body(&head, method);
        Resp {
            status: head.status,
            headers: head.headers,
            body,
            chunked,
        }
    }

    /// True if the server closed the connection (read returns EOF).
    pub fn is_closed(&mut self) -> bool {
        self.w
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut b = [0u8; 1];
        let r = matches!(self.r.read(&mut b), Ok(0));
        self.w
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        r
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

impl Conn {
    /// Raw bytes from the socket; 0 when closed or failed.
    pub fn raw_read(&mut self, buf: &mut [u8]) -> usize {
        self.r.read(buf).unwrap_or(0)
    }
}

impl Conn {
    /// One raw line (0 at EOF or on error).
    pub fn read_line(&mut self, s: &mut String) -> usize {
        self.r.read_line(s).unwrap_or(0)
    }

    /// Exactly `buf.len()` bytes; false at EOF or on error.
    pub fn read_exact(&mut self, buf: &mut [u8]) -> bool {
        self.r.read_exact(buf).is_ok()
    }
}
