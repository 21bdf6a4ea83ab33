// Package promstreamexporter is the promstream exporter: it keeps the
// latest value of every cumulative series in a paged table
// (internal/series) and streams it to Prometheus scrapers on /metrics, in
// the exposition format each one negotiates (internal/exposition).
//
// Two hashes, two contracts:
//   - series are found by internal/identity's hashes: hash/maphash under a
//     per-process seed, valid in this process only, never persisted, sent
//     or compared across processes;
//   - ?shard=I&shards=N selects the series whose xxhash (XXH64, seed 0) of
//     its labels in canonical form (sorted by name, rendered `a="x",b="y"`)
//     is I mod N. That hash depends on the label set alone: every
//     collector, and the same collector after a restart, puts a series in
//     the same shard whatever label_order says and whatever order its
//     attributes arrived in, so N scrape jobs split a family without gaps or
//     overlaps. It is computed once per series and kept beside it, and
//     files the series of a large family in one of 64 buckets
//     (internal/series), so a shard scrape renders only its own series and,
//     when N divides 64, reads only its own buckets.
package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"
