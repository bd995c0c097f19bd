//! Body filters: drive the codec chunk by chunk for one request or response,
//! and account codec time and bytes in the metrics; gzip a response that is to be
//! compressed ([`Gzip`]). No decisions here: the
//! plan says which direction, this only carries it out.

use super::buffers::{OutputBuffers, Transcoders};
use crate::codec::fields::Schema;
use crate::codec::{
    CborToJson, CborToJsonOptions, CodecError, JsonToCbor, JsonToCborOptions, Limits, StringMode,
    Transcoder,
};
use crate::metrics::{metrics, CodecSeries, Transcoding};
use crate::negotiate::encoding::GZIP_LEVEL;
use crate::proxy::request_labels::ResourceSeries;
use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The series a watch stream's events move, looked up once per stream (their time
/// goes to the body's codec series).
struct WatchMetrics {
    events: prometheus::IntCounter,
}

/// One body's transcoding state.
pub struct BodyCodec {
    transcoding: Transcoding,
    /// The codec families' series for this direction and pair of formats.
    series: &'static CodecSeries,
    watch: bool,
    inner: Box<dyn Transcoder>,
    codec_time: Duration,
    bytes_in: u64,
    bytes_out: u64,
    events_seen: u64,
    /// A failed watch chunk's output before the failure ([`BodyCodec::take_unsent`]).
    unsent: Option<Bytes>,
    /// A watch's metric handles, resolved once rather than per chunk.
    watch_metrics: Option<WatchMetrics>,
    /// Where chunk output buffers come from (a proxy's shared free list; a private one
    /// by default).
    buffers: Arc<OutputBuffers>,
}

impl BodyCodec {
    /// A response body (JSON → CBOR); `watch` for a watch stream. The transcoder comes
    /// from `transcoders` and goes back there when the body is done. `resource`: the
    /// request's (group, resource) labels, for the codec families.
    pub fn response(
        resource: &'static ResourceSeries,
        schema: Schema,
        watch: bool,
        window: usize,
        strings: StringMode,
        limits: Limits,
        transcoders: &Arc<Transcoders>,
    ) -> Self {
        let t = transcoders.take(JsonToCborOptions {
            strings,
            window,
            watch,
            // A Go upstream never sends duplicate keys.
            dedupe_keys: false,
            limits,
            schema,
        });
        Self::new(
            resource,
            Transcoding::ResponseJsonToCbor,
            watch,
            Box::new(t),
        )
    }

    /// A request body (CBOR → JSON); `declared_len` from Content-Length; `schema` says
    /// which fields are bytes.
    pub fn request(
        resource: &'static ResourceSeries,
        declared_len: Option<u64>,
        limits: Limits,
        schema: Schema,
    ) -> Self {
        let t = CborToJson::new(CborToJsonOptions {
            sequence: false,
            dedupe_keys: true,
            input_len: declared_len,
            limits,
            schema,
        });
        Self::new(resource, Transcoding::RequestCborToJson, false, Box::new(t))
    }

    /// Upgrade mode: a JSON request body → CBOR for a CBOR-enabled upstream.
    /// Client input may repeat keys: the last one wins, as in Go.
    pub fn request_to_cbor(
        resource: &'static ResourceSeries,
        window: usize,
        strings: StringMode,
        limits: Limits,
    ) -> Self {
        let t = JsonToCbor::new(JsonToCborOptions {
            strings,
            window,
            watch: false,
            dedupe_keys: true,
            limits,
            schema: Schema::Unstructured,
        });
        Self::new(resource, Transcoding::RequestJsonToCbor, false, Box::new(t))
    }

    /// Upgrade mode: a CBOR response (or `cbor-seq` watch) → JSON for the client.
    pub fn response_to_json(
        resource: &'static ResourceSeries,
        watch: bool,
        limits: Limits,
    ) -> Self {
        let t = CborToJson::new(CborToJsonOptions {
            sequence: watch,
            dedupe_keys: false,
            input_len: None,
            limits,
            schema: Schema::Unstructured,
        });
        Self::new(
            resource,
            Transcoding::ResponseCborToJson,
            watch,
            Box::new(t),
        )
    }

    fn new(
        resource: &'static ResourceSeries,
        transcoding: Transcoding,
        watch: bool,
        inner: Box<dyn Transcoder>,
    ) -> Self {
        let m = metrics();
        let series = resource.codec(transcoding);
        let watch_metrics = watch.then(|| WatchMetrics {
            // Transcoded or not, the events are CBOR ones (docs/wire.md §6).
            events: m.watch_events_total.with_label_values(&["cbor"]),
        });
        BodyCodec {
            watch_metrics,
            transcoding,
            series,
            watch,
            inner,
            codec_time: Duration::ZERO,
            bytes_in: 0,
            bytes_out: 0,
            events_seen: 0,
            unsent: None,
            buffers: Arc::default(),
        }
    }

    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Time spent in the codec so far.
    pub fn codec_time(&self) -> Duration {
        self.codec_time
    }

    /// Transcode one chunk (and, at the end, finish). Returns what to send on. When a
    /// watch event fails, the events before it in the same chunk are kept: see
    /// [`BodyCodec::take_unsent`].
    pub fn chunk(&mut self, data: Option<&Bytes>, end: bool) -> Result<Bytes, CodecError> {
        let room = data.map_or(0, |d| d.len() + d.len() / 2);
        let mut out = self.buffers.take(room);
        match self.chunk_into(data.map(|d| &d[..]), end, &mut out) {
            Ok(()) => Ok(self.buffers.send(out)),
            Err(e) => {
                if self.watch && !out.is_empty() {
                    self.unsent = Some(self.buffers.send(out));
                }
                Err(e)
            }
        }
    }

    /// Take chunk output buffers from `buffers` rather than allocate them.
    pub fn with_buffers(mut self, buffers: &Arc<OutputBuffers>) -> Self {
        self.buffers = Arc::clone(buffers);
        self
    }

    /// The output of a watch chunk that failed, made before the failure (whole events,
    /// as `cborgate transcode --watch` writes them): the client gets them before the
    /// stream ends abnormally.
    pub fn take_unsent(&mut self) -> Option<Bytes> {
        self.unsent.take()
    }

    /// Transcode one chunk (and, at the end, finish), appending to `out`: a body read
    /// whole grows one buffer instead of a copy per chunk.
    pub fn chunk_into(
        &mut self,
        data: Option<&[u8]>,
        end: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        let started = Instant::now();
        let before = out.len();
        let mut r = Ok(());
        if let Some(d) = data {
            self.bytes_in += d.len() as u64;
            r = self.inner.feed(d, out);
        }
        if r.is_ok() && end {
            r = self.inner.finish(out);
        }
        let spent = started.elapsed();
        self.codec_time += spent;
        self.bytes_out += (out.len() - before) as u64;
        let m = metrics();
        if let Err(e) = r {
            m.transcode_errors_total
                .with_label_values(&[self.transcoding.direction(), e.reason.as_str()])
                .inc();
            return Err(e);
        }
        if let Some(w) = &self.watch_metrics {
            let docs = self.inner.documents();
            let new = docs - self.events_seen;
            if new > 0 {
                self.events_seen = docs;
                w.events.inc_by(new);
                let per = spent.as_secs_f64() / new as f64;
                for _ in 0..new.min(64) {
                    self.series.duration.observe(per);
                }
            }
        }
        if end {
            self.account();
        }
        Ok(())
    }

    /// Record bytes (and, for single bodies, the codec time) once.
    fn account(&mut self) {
        let series = self.series;
        series.bytes_from.inc_by(self.bytes_in);
        series.bytes_to.inc_by(self.bytes_out);
        if !self.watch {
            series.duration.observe(self.codec_time.as_secs_f64());
        }
    }
}

/// The gzip stage after the codec, for an answer [`OnResponse::gzip`] says to compress:
/// at [`GZIP_LEVEL`], the apiserver's `gzip.BestSpeed` in zlib's terms; each chunk goes through the encoder and what it has ready
/// is sent on, so memory stays bounded (the deflate state, about 256 KiB with zlib's
/// defaults, plus the encoder's 32 KiB buffer), whatever the body's size. No sync
/// flush: a LIST is read whole by its client, so partial deflate blocks would only
/// cost ratio.
///
/// [`OnResponse::gzip`]: crate::negotiate::OnResponse::gzip
pub struct Gzip {
    encoder: GzEncoder<Vec<u8>>,
    time: Duration,
    /// Output buffers to hand out and reuse.
    buffers: Arc<OutputBuffers>,
}

/// The gzip encoder's output buffer.
const GZIP_BUFFER: usize = 32 * 1024;

impl Gzip {
    /// A gzip stage whose output buffers come from `buffers`.
    pub fn with_buffers(buffers: &Arc<OutputBuffers>) -> Self {
        Gzip {
            encoder: GzEncoder::new(buffers.take(GZIP_BUFFER), Compression::new(GZIP_LEVEL)),
            time: Duration::ZERO,
            buffers: Arc::clone(buffers),
        }
    }

    /// Compress one chunk (and, at the end, finish the stream): what is ready to send.
    /// What is ready goes out in the encoder's own buffer, not a copy of it.
    pub fn chunk(&mut self, data: &[u8], end: bool) -> std::io::Result<Bytes> {
        let started = Instant::now();
        self.encoder.write_all(data)?;
        if end {
            self.encoder.try_finish()?;
        }
        // What is ready goes out as it is; the encoder writes on into a kept buffer.
        let next = self.buffers.take(GZIP_BUFFER);
        let out = self
            .buffers
            .send(std::mem::replace(self.encoder.get_mut(), next));
        self.time += started.elapsed();
        Ok(out)
    }

    /// Time spent compressing so far.
    pub fn time(&self) -> Duration {
        self.time
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn gzip_stage_streams_a_valid_gzip_body() {
        let mut g = Gzip::with_buffers(&Arc::default());
        let piece: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut wire = Vec::new();
        let mut largest = 0;
        for _ in 0..20 {
            let out = g.chunk(&piece, false).unwrap();
            largest = largest.max(out.len());
            wire.extend_from_slice(&out);
        }
        wire.extend_from_slice(&g.chunk(&[], true).unwrap());
        // Output comes out as it is made, not all at the end.
        assert!(largest > 0);
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&wire[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain.len(), piece.len() * 20);
        assert!(plain.chunks(piece.len()).all(|c| c == piece));
    }

    #[test]
    fn gzip_stage_of_an_empty_body_is_an_empty_gzip_stream() {
        let mut g = Gzip::with_buffers(&Arc::default());
        let wire = g.chunk(&[], true).unwrap();
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&wire[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert!(plain.is_empty());
    }
}
