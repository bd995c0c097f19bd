//! Kubernetes `Status` objects for the errors cborgate answers itself
//! (docs/wire.md §4), in the client's negotiated format: CBOR when the client chose
//! CBOR, JSON otherwise, and the apiserver's pretty-printed JSON for 406.

use crate::codec::{json_to_cbor, JsonToCborOptions};

/// A failure Status: HTTP code, machine-readable reason, human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// Write `"details":{}` (go-restful's router errors carry it).
    pub empty_details: bool,
}

/// How to write a Status body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    Json,
    /// Two-space indented, with `details: {}` omitted, like the apiserver's 406.
    JsonPretty,
    Cbor,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

impl Status {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Status {
            code,
            reason,
            message: message.into(),
            empty_details: false,
        }
    }

    /// The body bytes and the Content-Type to send them with.
    pub fn render(&self, format: StatusFormat) -> (Vec<u8>, &'static str) {
        let msg = json_string(&self.message);
        match format {
            StatusFormat::JsonPretty => {
                let details = if self.empty_details {
                    "\n  \"details\": {},"
                } else {
                    ""
                };
                let body = format!(
                    "{{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {{}},\n  \"status\": \"Failure\",\n  \"message\": {msg},\n  \"reason\": \"{}\",{details}\n  \"code\": {}\n}}",
                    self.reason, self.code
                );
                (body.into_bytes(), "application/json")
            }
            StatusFormat::Json | StatusFormat::Cbor => {
                let details = if self.empty_details {
                    ",\"details\":{}"
                } else {
                    ""
                };
                let body = format!(
                    "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":{msg},\"reason\":\"{}\"{details},\"code\":{}}}",
                    self.reason, self.code
                );
                if format == StatusFormat::Cbor {
                    if let Ok(cbor) = json_to_cbor(body.as_bytes(), JsonToCborOptions::default()) {
                        return (cbor, "application/cbor");
                    }
                }
                // Go's json.Encoder ends the document with a newline, as every recorded
                // compact Status shows (`a-post-cbor`, native-1.36 `accept-app-star`).
                let mut body = body.into_bytes();
                body.push(b'\n');
                (body, "application/json")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_406_matches_the_recorded_apiserver_body() {
        let recorded = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/corpus/exchanges/b-table-cbor.body"),
        )
        .expect("tests/data/corpus/exchanges/b-table-cbor.body is in the repository");
        let s = Status::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor",
        );
        let (body, ct) = s.render(StatusFormat::JsonPretty);
        assert_eq!(ct, "application/json");
        assert_eq!(body, recorded);
    }

    #[test]
    fn cbor_status_is_self_described() {
        let (body, ct) = Status::new(400, "BadRequest", "x").render(StatusFormat::Cbor);
        assert_eq!(ct, "application/cbor");
        assert_eq!(&body[..3], &[0xd9, 0xd9, 0xf7]);
    }
}
