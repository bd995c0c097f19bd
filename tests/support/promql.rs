//! A small PromQL evaluator for the shapes deploy/README.md's "Deciding to turn CBOR on"
//! guide and deploy/monitoring's recording rules use, over one scrape of `/metrics`:
//! number literals, selectors with `=` and `!=` matchers, `rate(selector[range])`,
//! `sum [by (labels)] (...)`, `topk(k, ...)`, parentheses, and `+ - * /` between
//! scalars and vectors (vector to vector one-to-one on the whole label set, as PromQL
//! matches by default). Comment lines (`# ...`) are skipped.
//!
//! Over a single scrape, `rate(c[5m])` is taken as the counter's value: as if the window
//! began with the process, every rate is its count over the same window, so a ratio of
//! rates is the ratio of counts, and anything else is a count, not a per-second figure.
//! Anything outside these shapes is an error, never a guess.
#![allow(dead_code)]

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

/// One sample: its metric name, labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// What an expression evaluates to.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(f64),
    Vector(Vec<(Labels, f64)>),
}

impl Value {
    /// The vector's elements (a scalar is an error).
    pub fn vector(self) -> Vec<(Labels, f64)> {
        match self {
            Value::Vector(v) => v,
            Value::Scalar(s) => panic!("a scalar ({s}) where a vector was expected"),
        }
    }

    /// The vector keyed by the values of `labels` (a missing label is `""`).
    pub fn by(self, labels: &[&str]) -> BTreeMap<Vec<String>, f64> {
        self.vector()
            .into_iter()
            .map(|(l, v)| {
                let key = labels
                    .iter()
                    .map(|k| l.get(*k).cloned().unwrap_or_default())
                    .collect();
                (key, v)
            })
            .collect()
    }
}

/// Every sample of a Prometheus text exposition (HELP, TYPE and blank lines skipped).
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("not a sample line: {line}"),
        };
        let mut labels = Labels::new();
        let mut rest = rest;
        if let Some(mut r) = rest.strip_prefix('{') {
            loop {
                r = r.trim_start_matches(',');
                if let Some(after) = r.strip_prefix('}') {
                    rest = after;
                    break;
                }
                let (key, after) = r.split_once("=\"").expect("label=\"value\"");
                let mut value = String::new();
                let mut chars = after.char_indices();
                let end = loop {
                    match chars.next().expect("a closing quote") {
                        (i, '"') => break i,
                        (_, '\\') => match chars.next().expect("an escape").1 {
                            'n' => value.push('\n'),
                            c => value.push(c),
                        },
                        (_, c) => value.push(c),
                    }
                };
                labels.insert(key.to_string(), value);
                r = &after[end + 1..];
            }
        }
        let value = rest.split_whitespace().next().expect("a value");
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Str(String),
    Range,
    Punct(&'static str),
}

fn tokenize(expr: &str) -> Result<Vec<Tok>, String> {
    let text: String = expr
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            out.push(Tok::Ident(text[start..i].to_string()));
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            let n = text[start..i]
                .parse()
                .map_err(|_| format!("bad number at {start}"))?;
            out.push(Tok::Num(n));
        } else if c == '"' {
            let end = text[i + 1..].find('"').ok_or("unterminated string")?;
            out.push(Tok::Str(text[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if c == '[' {
            let end = text[i..].find(']').ok_or("unterminated range")?;
            out.push(Tok::Range);
            i += end + 1;
        } else if text[i..].starts_with("!=") {
            out.push(Tok::Punct("!="));
            i += 2;
        } else {
            let p = ["(", ")", "{", "}", ",", "=", "+", "-", "*", "/"]
                .into_iter()
                .find(|p| text[i..].starts_with(p))
                .ok_or_else(|| format!("unsupported character {c:?} in {expr}"))?;
            out.push(Tok::Punct(p));
            i += 1;
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    at: usize,
    samples: &'a [Sample],
}

/// Evaluate `expr` over `samples` (one scrape, plus any recorded series).
pub fn eval(expr: &str, samples: &[Sample]) -> Result<Value, String> {
    let mut p = Parser {
        toks: tokenize(expr)?,
        at: 0,
        samples,
    };
    let v = p.expr()?;
    match p.toks.get(p.at) {
        None => Ok(v),
        Some(t) => Err(format!("unexpected {t:?} in {expr}")),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Result<Tok, String> {
        let t = self.toks.get(self.at).cloned().ok_or("unexpected end")?;
        self.at += 1;
        Ok(t)
    }

    fn punct(&mut self, p: &str) -> Result<(), String> {
        match self.next()? {
            Tok::Punct(q) if q == p => Ok(()),
            t => Err(format!("expected {p}, got {t:?}")),
        }
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn expr(&mut self) -> Result<Value, String> {
        self.level(['+', '-'], Self::term)
    }

    fn term(&mut self) -> Result<Value, String> {
        self.level(['*', '/'], Self::unary)
    }

    /// Operands joined by `ops`, left to right.
    fn level(
        &mut self,
        ops: [char; 2],
        operand: fn(&mut Self) -> Result<Value, String>,
    ) -> Result<Value, String> {
        let mut left = operand(self)?;
        while let Some(op) = ops.into_iter().find(|op| self.is_punct(&op.to_string())) {
            self.at += 1;
            let right = operand(self)?;
            left = binary(op, left, right)?;
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Value, String> {
        match self.next()? {
            Tok::Num(n) => Ok(Value::Scalar(n)),
            Tok::Punct("(") => {
                let v = self.expr()?;
                self.punct(")")?;
                Ok(v)
            }
            Tok::Ident(f) if f == "sum" => {
                let mut by = self.by()?;
                self.punct("(")?;
                let v = self.expr()?.vector();
                self.punct(")")?;
                if by.is_none() {
                    by = self.by()?;
                }
                Ok(Value::Vector(sum(v, by)))
            }
            Tok::Ident(f) if f == "topk" => {
                self.punct("(")?;
                let Tok::Num(k) = self.next()? else {
                    return Err("topk wants a number first".into());
                };
                self.punct(",")?;
                let mut v = self.expr()?.vector();
                self.punct(")")?;
                v.sort_by(|a, b| b.1.total_cmp(&a.1));
                v.truncate(k as usize);
                Ok(Value::Vector(v))
            }
            Tok::Ident(f) if f == "rate" => {
                self.punct("(")?;
                let Tok::Ident(name) = self.next()? else {
                    return Err("rate wants a selector".into());
                };
                let v = self.selector(&name)?;
                if self.next()? != Tok::Range {
                    return Err("rate wants a range".into());
                }
                self.punct(")")?;
                Ok(v)
            }
            Tok::Ident(name) if !matches!(name.as_str(), "by" | "without") => self.selector(&name),
            t => Err(format!("unsupported {t:?}")),
        }
    }

    /// `by (a, b)`, if next.
    fn by(&mut self) -> Result<Option<Vec<String>>, String> {
        match self.peek() {
            Some(Tok::Ident(w)) if w == "by" => {
                self.at += 1;
                self.punct("(")?;
                let mut labels = Vec::new();
                loop {
                    match self.next()? {
                        Tok::Ident(l) => labels.push(l),
                        Tok::Punct(",") => {}
                        Tok::Punct(")") => break,
                        t => return Err(format!("unexpected {t:?} in by (...)")),
                    }
                }
                Ok(Some(labels))
            }
            Some(Tok::Ident(w)) if w == "without" => Err("without is not supported".into()),
            _ => Ok(None),
        }
    }

    fn selector(&mut self, name: &str) -> Result<Value, String> {
        let mut matchers: Vec<(String, bool, String)> = Vec::new();
        if self.is_punct("{") {
            self.at += 1;
            loop {
                match self.next()? {
                    Tok::Punct("}") => break,
                    Tok::Punct(",") => {}
                    Tok::Ident(label) => {
                        let equal = match self.next()? {
                            Tok::Punct("=") => true,
                            Tok::Punct("!=") => false,
                            t => return Err(format!("unsupported matcher {t:?}")),
                        };
                        let Tok::Str(value) = self.next()? else {
                            return Err("a matcher wants a string".into());
                        };
                        matchers.push((label, equal, value));
                    }
                    t => return Err(format!("unexpected {t:?} in a selector")),
                }
            }
        }
        let found = self
            .samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                matchers.iter().all(|(k, equal, v)| {
                    let have = s.labels.get(k).map_or("", String::as_str);
                    (have == v) == *equal
                })
            })
            .map(|s| (s.labels.clone(), s.value))
            .collect();
        Ok(Value::Vector(found))
    }
}

/// `sum by (labels)` (or over everything): one element per distinct value of the
/// labels, a missing label counting as absent.
fn sum(v: Vec<(Labels, f64)>, by: Option<Vec<String>>) -> Vec<(Labels, f64)> {
    let by = by.unwrap_or_default();
    let mut groups: BTreeMap<Labels, f64> = BTreeMap::new();
    for (labels, value) in v {
        let key: Labels = by
            .iter()
            .filter_map(|k| {
                labels
                    .get(k)
                    .filter(|v| !v.is_empty())
                    .map(|v| (k.clone(), v.clone()))
            })
            .collect();
        *groups.entry(key).or_default() += value;
    }
    groups.into_iter().collect()
}

fn apply(op: char, a: f64, b: f64) -> f64 {
    match op {
        '+' => a + b,
        '-' => a - b,
        '*' => a * b,
        _ => a / b,
    }
}

fn binary(op: char, left: Value, right: Value) -> Result<Value, String> {
    Ok(match (left, right) {
        (Value::Scalar(a), Value::Scalar(b)) => Value::Scalar(apply(op, a, b)),
        (Value::Scalar(a), Value::Vector(v)) => {
            Value::Vector(v.into_iter().map(|(l, b)| (l, apply(op, a, b))).collect())
        }
        (Value::Vector(v), Value::Scalar(b)) => {
            Value::Vector(v.into_iter().map(|(l, a)| (l, apply(op, a, b))).collect())
        }
        (Value::Vector(l), Value::Vector(r)) => {
            let right: BTreeMap<Labels, f64> = r.into_iter().collect();
            Value::Vector(
                l.into_iter()
                    .filter_map(|(labels, a)| {
                        let b = *right.get(&labels)?;
                        Some((labels, apply(op, a, b)))
                    })
                    .collect(),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape() -> Vec<Sample> {
        parse_exposition(
            "# HELP x_total x\n# TYPE x_total counter\n\
             x_total{a=\"1\",b=\"p\"} 2\nx_total{a=\"1\",b=\"q\"} 6\nx_total{a=\"2\",b=\"p\"} 4\n\
             y_total{a=\"1\"} 4\ny_total{a=\"2\"} 1\nweird{v=\"q\\\"u,o}te\"} 3\n",
        )
    }

    #[test]
    fn the_shapes_the_guide_uses() {
        let s = scrape();
        assert_eq!(s[5].labels["v"], "q\"u,o}te");
        let by_a = |e: &str| eval(e, &s).unwrap().by(&["a"]);
        assert_eq!(
            by_a("sum by (a) (rate(x_total[5m]))")[&vec!["1".to_string()]],
            8.0
        );
        let ratio = by_a("1 - sum by (a) (rate(y_total[5m])) / sum by (a) (rate(x_total[5m]))");
        assert_eq!(ratio[&vec!["1".to_string()]], 0.5);
        assert_eq!(ratio[&vec!["2".to_string()]], 0.75);
        let top = eval("topk(1, sum by (a) (rate(x_total{b=\"p\"}[5m])))", &s).unwrap();
        assert_eq!(
            top.by(&["a"]),
            BTreeMap::from([(vec!["2".to_string()], 4.0)])
        );
        let all = eval("# a comment\nsum(x_total{b!=\"q\"})", &s)
            .unwrap()
            .vector();
        assert_eq!(all, vec![(Labels::new(), 6.0)]);
        assert!(eval("histogram_quantile(0.9, x_total)", &s).is_err());
        assert!(eval("sum without (a) (x_total)", &s).is_err());
    }
}
