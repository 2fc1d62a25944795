//! `--metrics-native`: the profile as Prometheus native histograms, in the protobuf exposition
//! (`application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily;
//! encoding=delimited`), which is how Prometheus 2.42 and later scrape them (with
//! `--enable-feature=native-histograms`).
//!
//! The mapping. A layer of `r` buckets per octave is a native histogram of schema `log2 r` (0 to
//! 3), in **cycles**, the unit where it is exact: fsprof bucket `b ≥ 1` holds the integer
//! latencies in `[2^(b/r), 2^((b+1)/r))`, native bucket `b + 1` the values in
//! `(2^(b/r), 2^((b+1)/r)]`; they hold the same integers but `2^(b/r)` itself (an integer only when
//! `b/r` is one), which fsprof counts in bucket `b` and native's rule would put one index lower.
//! fsprof bucket 0 (latencies of 0 and 1 cycle) is the zero bucket, of threshold 1. The family is
//! `fsprof_operation_latency_cycles` (labels `layer`, `op`): divide by
//! `fsprof_clock_cycles_per_second` for seconds. The counters and gauges of the text exposition
//! come along unchanged ([`profile_store::prometheus::info_families`] and
//! [`profile_store::prometheus::other_families`]); the classic `_seconds` histogram does not (a
//! scrape that carries both keeps only the native one, which is why this is opt-in).
//!
//! The messages are the `io.prometheus.client` ones (`metrics.proto`, proto2), declared here with
//! prost's derive; only the fields written are declared.

use prost::Message;

use profile_store::Profile;
use profile_store::prometheus::{Family, info_families, other_families};

/// The content type of the protobuf exposition.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// The native histogram family.
pub const FAMILY: &str = "fsprof_operation_latency_cycles";

#[derive(Clone, PartialEq, Message)]
struct LabelPair {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Gauge {
    #[prost(double, optional, tag = "1")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct Counter {
    #[prost(double, optional, tag = "1")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    length: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    sample_sum: Option<f64>,
    #[prost(sint32, optional, tag = "5")]
    schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "false", tag = "13")]
    positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Metric {
    #[prost(message, repeated, tag = "1")]
    label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    counter: Option<Counter>,
    #[prost(message, optional, tag = "7")]
    histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    help: Option<String>,
    /// COUNTER = 0, GAUGE = 1, HISTOGRAM = 4.
    #[prost(int32, optional, tag = "3")]
    r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    metric: Vec<Metric>,
}

fn labels(pairs: &[(&str, String)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(k, v)| LabelPair {
            name: Some(k.to_string()),
            value: Some(v.clone()),
        })
        .collect()
}

fn plain(f: &Family) -> MetricFamily {
    MetricFamily {
        name: Some(f.name.clone()),
        help: Some(f.help.to_string()),
        r#type: Some(if f.counter { 0 } else { 1 }),
        metric: f
            .samples
            .iter()
            .map(|s| {
                let v = Some(s.value.as_f64());
                Metric {
                    label: labels(&s.labels),
                    counter: f.counter.then_some(Counter { value: v }),
                    gauge: (!f.counter).then_some(Gauge { value: v }),
                    histogram: None,
                }
            })
            .collect(),
    }
}

/// One operation's buckets as a native histogram of schema `log2 r` (see the module).
fn histogram(buckets: &[u64], r: u32, total: u64) -> Histogram {
    let mut h = Histogram {
        sample_count: Some(buckets.iter().sum()),
        sample_sum: Some(total as f64),
        schema: Some(r.trailing_zeros() as i32),
        zero_threshold: Some(1.0),
        zero_count: Some(buckets.first().copied().unwrap_or(0)),
        positive_span: Vec::new(),
        positive_delta: Vec::new(),
    };
    // Spans of consecutive non-empty buckets; each span's offset counts from the end of the one
    // before (the first from index 0); deltas run across spans.
    let mut last_index: Option<i64> = None;
    let mut prev = 0i64;
    for (b, &n) in buckets.iter().enumerate().skip(1) {
        if n == 0 {
            continue;
        }
        let index = b as i64 + 1;
        match last_index {
            Some(l) if l + 1 == index => {
                if let Some(s) = h.positive_span.last_mut() {
                    s.length = Some(s.length.unwrap_or(0) + 1);
                }
            }
            _ => h.positive_span.push(BucketSpan {
                offset: Some((index - last_index.map_or(0, |l| l + 1)) as i32),
                length: Some(1),
            }),
        }
        let n = n.min(i64::MAX as u64) as i64;
        h.positive_delta.push(n - prev);
        prev = n;
        last_index = Some(index);
    }
    h
}

/// The live profile `p` (clock rate `hz`) in the protobuf exposition with native histograms.
pub fn exposition(p: &Profile, hz: u64) -> Vec<u8> {
    let mut families: Vec<MetricFamily> = info_families(p, hz).iter().map(plain).collect();
    let mut hist = MetricFamily {
        name: Some(FAMILY.to_string()),
        help: Some(
            "Latency of file-system operations in clock cycles (divide by \
             fsprof_clock_cycles_per_second), from FSprof log2 buckets."
                .to_string(),
        ),
        r#type: Some(4),
        metric: Vec::new(),
    };
    for l in &p.layers {
        for o in l.ops_in_listing_order() {
            hist.metric.push(Metric {
                label: labels(&[("layer", l.name.clone()), ("op", o.name.clone())]),
                histogram: Some(histogram(&o.merged(), l.resolution.get(), o.total)),
                ..Metric::default()
            });
        }
    }
    families.push(hist);
    families.extend(other_families(p, hz).iter().map(plain));
    let mut out = Vec::new();
    for f in &families {
        // Writing into a Vec cannot fail.
        let _ = f.encode_length_delimited(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The native buckets, expanded back: (index, count) per bucket.
    fn expand(h: &Histogram) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let (mut index, mut deltas, mut count) = (0i64, h.positive_delta.iter(), 0i64);
        for s in &h.positive_span {
            index += s.offset.unwrap() as i64;
            for _ in 0..s.length.unwrap() {
                count += deltas.next().unwrap();
                out.push((index, count));
                index += 1;
            }
        }
        out
    }

    #[test]
    fn every_bucket_lands_at_its_documented_index() {
        for r in [1u32, 2, 4, 8] {
            for b in 1..64 * r as usize {
                let mut buckets = vec![0u64; 64 * r as usize];
                buckets[b] = 3;
                let h = histogram(&buckets, r, 10);
                assert_eq!(h.schema, Some(r.trailing_zeros() as i32));
                assert_eq!(expand(&h), vec![(b as i64 + 1, 3)], "r {r} b {b}");
                assert_eq!(h.sample_count, Some(3));
                assert_eq!(h.zero_count, Some(0));
            }
        }
    }

    #[test]
    fn gaps_make_spans_and_bucket_zero_is_the_zero_bucket() {
        let mut buckets = vec![0u64; 64];
        buckets[0] = 2;
        buckets[3] = 5;
        buckets[4] = 1;
        buckets[9] = 7;
        let h = histogram(&buckets, 1, 0);
        assert_eq!(h.zero_count, Some(2));
        assert_eq!(h.sample_count, Some(15));
        assert_eq!(expand(&h), vec![(4, 5), (5, 1), (10, 7)]);
        assert_eq!(h.positive_span.len(), 2);
        // Decodes as written.
        let bytes = h.encode_to_vec();
        assert_eq!(Histogram::decode(bytes.as_slice()).unwrap(), h);
    }
}
