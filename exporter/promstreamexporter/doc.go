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
//     its rendered labels is I mod N. That hash is stable: every collector,
//     and the same collector after a restart, puts a series in the same
//     shard, so N scrape jobs split a family without gaps or overlaps. (With
//     label_order: as_received the rendered labels follow the order a
//     series' attributes first arrived in, and so does its shard.)
package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"
