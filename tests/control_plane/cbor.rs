//! A generic CBOR client's data model, as Python's cbor2 or Go's fxamacker/cbor
//! decoding into `interface{}` have it: every item kept as it came, tags
//! included, and written back the same way. Independent of cborgate's codec
//! (minicbor's decoder and encoder), so a round trip through it is what any
//! client that knows nothing of Kubernetes does.

use minicbor::data::{Tag, Type};
use minicbor::{Decoder, Encoder};

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Uint(u64),
    Nint(i128),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Item>),
    Map(Vec<(Item, Item)>),
    Tag(u64, Box<Item>),
    Bool(bool),
    Null,
    Float(f64),
}

impl Item {
    /// The value under text key `k` of a map.
    pub fn get(&self, k: &str) -> Option<&Item> {
        match self {
            Item::Map(m) => m.iter().find(|(key, _)| key.is_key(k)).map(|(_, v)| v),
            Item::Tag(_, inner) => inner.get(k),
            _ => None,
        }
    }

    /// Set text key `k` of a map (replacing it, or appending it).
    pub fn set(&mut self, k: &str, v: Item) {
        match self {
            Item::Map(m) => match m.iter_mut().find(|(key, _)| key.is_key(k)) {
                Some((_, old)) => *old = v,
                None => m.push((Item::Text(k.into()), v)),
            },
            Item::Tag(_, inner) => inner.set(k, v),
            _ => panic!("not a map"),
        }
    }

    /// A map key spelling `k`: Kubernetes writes keys (and strings) as byte
    /// strings holding UTF-8 (docs/wire.md §2), a generic encoder as text.
    fn is_key(&self, k: &str) -> bool {
        match self {
            Item::Text(t) => t == k,
            Item::Bytes(b) => b == k.as_bytes(),
            _ => false,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Item::Text(t) => Some(t),
            Item::Bytes(b) => std::str::from_utf8(b).ok(),
            Item::Tag(_, inner) => inner.text(),
            _ => None,
        }
    }

    pub fn map(pairs: &[(&str, Item)]) -> Item {
        Item::Map(
            pairs
                .iter()
                .map(|(k, v)| (Item::Text(k.to_string()), v.clone()))
                .collect(),
        )
    }

    pub fn str(s: &str) -> Item {
        Item::Text(s.to_string())
    }
}

/// One item from `bytes` (the whole of it must be one item).
pub fn decode(bytes: &[u8]) -> Item {
    let mut d = Decoder::new(bytes);
    let item = read(&mut d);
    assert_eq!(
        d.position(),
        bytes.len(),
        "trailing bytes after one CBOR item"
    );
    item
}

fn read(d: &mut Decoder) -> Item {
    match d.datatype().expect("a CBOR item") {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => Item::Uint(d.u64().unwrap()),
        Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => {
            Item::Nint(i128::from(d.int().unwrap()))
        }
        Type::Bytes => Item::Bytes(d.bytes().unwrap().to_vec()),
        Type::BytesIndef => {
            let mut v = Vec::new();
            for c in d.bytes_iter().unwrap() {
                v.extend_from_slice(c.unwrap());
            }
            Item::Bytes(v)
        }
        Type::String => Item::Text(d.str().unwrap().to_string()),
        Type::StringIndef => {
            let mut v = String::new();
            for c in d.str_iter().unwrap() {
                v.push_str(c.unwrap());
            }
            Item::Text(v)
        }
        Type::Array | Type::ArrayIndef => {
            let n = d.array().unwrap();
            let mut v = Vec::new();
            match n {
                Some(n) => (0..n).for_each(|_| v.push(read(d))),
                None => {
                    while d.datatype().unwrap() != Type::Break {
                        v.push(read(d));
                    }
                    d.skip().unwrap();
                }
            }
            Item::Array(v)
        }
        Type::Map | Type::MapIndef => {
            let n = d.map().unwrap();
            let mut v = Vec::new();
            match n {
                Some(n) => (0..n).for_each(|_| {
                    let k = read(d);
                    v.push((k, read(d)))
                }),
                None => {
                    while d.datatype().unwrap() != Type::Break {
                        let k = read(d);
                        v.push((k, read(d)));
                    }
                    d.skip().unwrap();
                }
            }
            Item::Map(v)
        }
        Type::Tag => {
            let t = d.tag().unwrap();
            Item::Tag(t.as_u64(), Box::new(read(d)))
        }
        Type::Bool => Item::Bool(d.bool().unwrap()),
        Type::Null | Type::Undefined => {
            d.skip().unwrap();
            Item::Null
        }
        Type::F16 | Type::F32 | Type::F64 => {
            Item::Float(d.f64().unwrap_or_else(|_| f64::from(d.f32().unwrap())))
        }
        t => panic!("unexpected CBOR type {t:?}"),
    }
}

/// `item` as CBOR, definite lengths, as a generic encoder writes it.
pub fn encode(item: &Item) -> Vec<u8> {
    let mut e = Encoder::new(Vec::new());
    write(&mut e, item);
    e.into_writer()
}

fn write(e: &mut Encoder<Vec<u8>>, item: &Item) {
    match item {
        Item::Uint(n) => {
            e.u64(*n).unwrap();
        }
        Item::Nint(n) => {
            e.int(minicbor::data::Int::try_from(*n).unwrap()).unwrap();
        }
        Item::Bytes(b) => {
            e.bytes(b).unwrap();
        }
        Item::Text(t) => {
            e.str(t).unwrap();
        }
        Item::Array(v) => {
            e.array(v.len() as u64).unwrap();
            v.iter().for_each(|i| write(e, i));
        }
        Item::Map(m) => {
            e.map(m.len() as u64).unwrap();
            for (k, v) in m {
                write(e, k);
                write(e, v);
            }
        }
        Item::Tag(t, inner) => {
            e.tag(Tag::new(*t)).unwrap();
            write(e, inner);
        }
        Item::Bool(b) => {
            e.bool(*b).unwrap();
        }
        Item::Null => {
            e.null().unwrap();
        }
        Item::Float(f) => {
            e.f64(*f).unwrap();
        }
    }
}

/// The self-described CBOR magic number a Kubernetes body starts with (tag 55799).
pub const SELF_DESCRIBED: u64 = 55799;

/// `item` as a Kubernetes CBOR request body: self-described.
pub fn body(item: &Item) -> Vec<u8> {
    encode(&Item::Tag(SELF_DESCRIBED, Box::new(item.clone())))
}

/// The complete items at the start of `buf` (a CBOR Sequence arriving in pieces)
/// and how many bytes they took; an incomplete last item is left for later.
pub fn complete_items(buf: &[u8]) -> (Vec<Item>, usize) {
    let mut d = Decoder::new(buf);
    let mut out = Vec::new();
    loop {
        let start = d.position();
        if start == buf.len() || d.skip().is_err() {
            return (out, start);
        }
        out.push(decode(&buf[start..d.position()]));
    }
}
