//! Test oracles independent of the codec under test: a CBOR canonicalizer
//! (map entries sorted, every other byte kept) and a JSON canonicalizer
//! (object keys sorted, strings decoded, number text kept verbatim).
#![allow(dead_code)]

// The stand-in's base64 (independent of cborgate's codec): one encoder for both.
use cborgate_standin::base64_std;
use std::path::PathBuf;

/// The recorded data the tests compare against: `tests/data` in this
/// repository (see its README.md). Nothing outside the repository is read.
pub fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ---------------------------------------------------------------- CBOR

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

fn head_bytes(major: u8, arg: u64) -> Vec<u8> {
    let m = major << 5;
    if arg < 24 {
        vec![m | arg as u8]
    } else if arg < 256 {
        vec![m | 24, arg as u8]
    } else if arg < 65536 {
        let mut v = vec![m | 25];
        v.extend_from_slice(&(arg as u16).to_be_bytes());
        v
    } else if arg < 1 << 32 {
        let mut v = vec![m | 26];
        v.extend_from_slice(&(arg as u32).to_be_bytes());
        v
    } else {
        let mut v = vec![m | 27];
        v.extend_from_slice(&arg.to_be_bytes());
        v
    }
}

impl<'a> Reader<'a> {
    fn head(&mut self) -> (u8, u8, u64, Vec<u8>) {
        let start = self.i;
        let b0 = self.b[self.i];
        self.i += 1;
        let ai = b0 & 31;
        let n = match ai {
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => 0,
        };
        let mut arg = if ai < 24 { ai as u64 } else { 0 };
        for k in 0..n {
            arg = (arg << 8) | self.b[self.i + k] as u64;
        }
        self.i += n;
        (b0 >> 5, ai, arg, self.b[start..self.i].to_vec())
    }

    /// Canonical bytes of one item. `tag22` replaces `22(h'..')` by the byte
    /// string of its standard base64 text (what JSON→CBOR produces).
    fn item(&mut self, tag22: bool) -> Vec<u8> {
        let (major, ai, arg, head) = self.head();
        match major {
            2 | 3 if ai != 31 => {
                let mut v = head;
                v.extend_from_slice(&self.b[self.i..self.i + arg as usize]);
                self.i += arg as usize;
                v
            }
            4 => {
                let mut v = head;
                if ai == 31 {
                    while self.b[self.i] != 0xff {
                        v.extend(self.item(tag22));
                    }
                    self.i += 1;
                    v.push(0xff);
                } else {
                    for _ in 0..arg {
                        v.extend(self.item(tag22));
                    }
                }
                v
            }
            5 => {
                let mut pairs = Vec::new();
                if ai == 31 {
                    while self.b[self.i] != 0xff {
                        pairs.push((self.item(tag22), self.item(tag22)));
                    }
                    self.i += 1;
                } else {
                    for _ in 0..arg {
                        pairs.push((self.item(tag22), self.item(tag22)));
                    }
                }
                pairs.sort();
                let mut v = head;
                for (k, val) in pairs {
                    v.extend(k);
                    v.extend(val);
                }
                if ai == 31 {
                    v.push(0xff);
                }
                v
            }
            6 if tag22 && arg == 22 => {
                let inner = self.item(tag22);
                let mut r = Reader { b: &inner, i: 0 };
                let (m, _, len, h) = r.head();
                assert_eq!(m, 2, "tag 22 on a non-byte string");
                let s = base64_std(&inner[h.len()..h.len() + len as usize]);
                let mut v = head_bytes(2, s.len() as u64);
                v.extend_from_slice(s.as_bytes());
                v
            }
            6 => {
                let mut v = head;
                v.extend(self.item(tag22));
                v
            }
            _ => {
                // Indefinite strings: keep chunks verbatim.
                if ai == 31 && (major == 2 || major == 3) {
                    let mut v = head;
                    while self.b[self.i] != 0xff {
                        v.extend(self.item(tag22));
                    }
                    self.i += 1;
                    v.push(0xff);
                    return v;
                }
                head
            }
        }
    }
}

/// Canonical bytes of every item of a CBOR Sequence.
pub fn cbor_canon(bytes: &[u8], tag22: bool) -> Vec<Vec<u8>> {
    let mut r = Reader { b: bytes, i: 0 };
    let mut items = Vec::new();
    while r.i < bytes.len() {
        items.push(r.item(tag22));
    }
    items
}

// ---------------------------------------------------------------- JSON

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

struct JP<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> JP<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
    }
    fn value(&mut self) -> J {
        self.ws();
        match self.s[self.i] {
            b'{' => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.s[self.i] == b'}' {
                    self.i += 1;
                    return J::Obj(v);
                }
                loop {
                    self.ws();
                    let k = self.string();
                    self.ws();
                    assert_eq!(self.s[self.i], b':');
                    self.i += 1;
                    let val = self.value();
                    v.push((k, val));
                    self.ws();
                    let c = self.s[self.i];
                    self.i += 1;
                    if c == b'}' {
                        break;
                    }
                    assert_eq!(c, b',');
                }
                v.sort();
                J::Obj(v)
            }
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.s[self.i] == b']' {
                    self.i += 1;
                    return J::Arr(v);
                }
                loop {
                    v.push(self.value());
                    self.ws();
                    let c = self.s[self.i];
                    self.i += 1;
                    if c == b']' {
                        break;
                    }
                    assert_eq!(c, b',');
                }
                J::Arr(v)
            }
            b'"' => J::Str(self.string()),
            b't' => {
                self.i += 4;
                J::Bool(true)
            }
            b'f' => {
                self.i += 5;
                J::Bool(false)
            }
            b'n' => {
                self.i += 4;
                J::Null
            }
            _ => {
                let st = self.i;
                while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                J::Num(String::from_utf8(self.s[st..self.i].to_vec()).unwrap())
            }
        }
    }
    fn string(&mut self) -> String {
        let st = self.i;
        assert_eq!(self.s[self.i], b'"');
        self.i += 1;
        while self.s[self.i] != b'"' {
            if self.s[self.i] == b'\\' {
                self.i += 1;
            }
            self.i += 1;
        }
        self.i += 1;
        serde_json::from_slice::<String>(&self.s[st..self.i]).unwrap()
    }
}

/// Every JSON document in `text` (a single body or a watch stream), canonical.
pub fn json_canon(text: &[u8]) -> Vec<J> {
    let mut p = JP { s: text, i: 0 };
    let mut v = Vec::new();
    loop {
        p.ws();
        if p.i >= text.len() {
            return v;
        }
        v.push(p.value());
    }
}

pub mod bodies;
pub mod harness;
pub mod http;
pub mod http2;
pub mod pki;
pub mod promql;
pub mod scenario;
