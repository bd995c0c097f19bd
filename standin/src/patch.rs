//! Patch application: JSON merge patch (RFC 7386, also standing in for strategic
//! merge patch and for server-side apply) and JSON patch (RFC 6902: add, remove,
//! replace, move, copy, test).

use serde_json::{Map, Value};

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub(crate) fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => Map::new(),
    };
    for (k, pv) in p {
        if pv.is_null() {
            out.shift_remove(k);
        } else {
            let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), pv);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| format!("JSON pointer must start with '/': {path:?}"))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn array_index(tok: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && tok == "-" {
        return Ok(len);
    }
    let i: usize = tok
        .parse()
        .map_err(|_| format!("invalid array index {tok:?}"))?;
    if i > len || (!allow_end && i == len) {
        return Err(format!("array index {i} out of bounds"));
    }
    Ok(i)
}

fn parent_mut<'a>(doc: &'a mut Value, toks: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(t)
                .ok_or_else(|| format!("missing path element {t:?}"))?,
            Value::Array(a) => {
                let i = array_index(t, a.len(), false)?;
                &mut a[i]
            }
            _ => return Err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(cur)
}

fn get_at(doc: &Value, path: &str) -> Result<Value, String> {
    let toks = split_pointer(path)?;
    let mut cur = doc;
    for t in &toks {
        cur = match cur {
            Value::Object(m) => m
                .get(t)
                .ok_or_else(|| format!("missing value at {path:?}"))?,
            Value::Array(a) => &a[array_index(t, a.len(), false)?],
            _ => return Err(format!("missing value at {path:?}")),
        };
    }
    Ok(cur.clone())
}

fn add_at(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let toks = split_pointer(path)?;
    let Some((last, parents)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("cannot add at {path:?}")),
    }
}

fn remove_at(doc: &mut Value, path: &str) -> Result<Value, String> {
    let toks = split_pointer(path)?;
    let Some((last, parents)) = toks.split_last() else {
        return Err("cannot remove the whole document".into());
    };
    match parent_mut(doc, parents)? {
        Value::Object(m) => m
            .shift_remove(last)
            .ok_or_else(|| format!("unable to remove nonexistent key: {last}")),
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err(format!("cannot remove at {path:?}")),
    }
}

/// Applies an RFC 6902 patch document.
pub(crate) fn json_patch(target: &Value, patch: &Value) -> Result<Value, String> {
    let ops = patch
        .as_array()
        .ok_or("json patch must be an array of operations")?;
    let mut doc = target.clone();
    for op in ops {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or("operation has no \"op\"")?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("operation has no \"path\"")?;
        let value = || op.get("value").cloned().ok_or("operation has no \"value\"");
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or("operation has no \"from\"")
        };
        match name {
            "add" => add_at(&mut doc, path, value()?)?,
            "remove" => {
                remove_at(&mut doc, path)?;
            }
            "replace" => {
                let toks = split_pointer(path)?;
                *parent_mut(&mut doc, &toks)? = value()?;
            }
            "move" => {
                let v = remove_at(&mut doc, from()?)?;
                add_at(&mut doc, path, v)?;
            }
            "copy" => {
                let v = get_at(&doc, from()?)?;
                add_at(&mut doc, path, v)?;
            }
            "test" => {
                if get_at(&doc, path)? != value()? {
                    return Err(format!("testing value {path} failed"));
                }
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge() {
        let t = json!({"a": 1, "b": {"c": 2, "d": 3}});
        let p = json!({"a": null, "b": {"c": 5}, "e": [1]});
        assert_eq!(
            merge_patch(&t, &p),
            json!({"b": {"c": 5, "d": 3}, "e": [1]})
        );
    }

    #[test]
    fn json_patch_ops() {
        let t = json!({"data": {"a": "1"}, "list": [1, 2]});
        let p = json!([
            {"op": "add", "path": "/data/b", "value": "2"},
            {"op": "replace", "path": "/data/a", "value": "x"},
            {"op": "remove", "path": "/list/0"},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "copy", "from": "/data/b", "path": "/data/c"},
            {"op": "test", "path": "/data/c", "value": "2"}
        ]);
        assert_eq!(
            json_patch(&t, &p).unwrap(),
            json!({"data": {"a": "x", "b": "2", "c": "2"}, "list": [2, 3]})
        );
        assert!(json_patch(&t, &json!([{"op": "replace", "path": "/nope", "value": 1}])).is_err());
        assert!(json_patch(&t, &json!({"op": "add"})).is_err());
    }
}
