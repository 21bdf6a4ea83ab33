package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Kong's metrics and Kong's spans or logs from one node describe the same
// requests. Under the kong profile both would land in kong_http_requests_total
// and the latency families, and a sum over them would count every request
// twice. The rule (§1e): **pushed metrics win.** They are exact and
// unsampled, and carry service, route, consumer and workspace. For as long
// as a node pushes a family, the span and log paths leave that family alone
// for that node.
//
// The span path knows the node: a ResourceSpans' service.instance.id is
// Kong's node id, the same id its metrics' resource carries. Kong's http-log
// entries carry no node id, so a log entry is left alone when any node
// pushes the family. Either overlap is the double configuration the
// receiver reports (counted and logged).

// KongFamilySet is a set of KongFam (bit f for family f).
type KongFamilySet uint32

// Has reports whether f is in the set.
func (s KongFamilySet) Has(f KongFam) bool { return s&(1<<f) != 0 }

// With returns the set plus f.
func (s KongFamilySet) With(f KongFam) KongFamilySet { return s | 1<<f }

// KongPushedFamilies lists the families of Kong's Prometheus plugin that rm
// (a push of Kong's metrics) carries points for: what its node claims.
func KongPushedFamilies(rm pmetric.ResourceMetrics) KongFamilySet {
	var set KongFamilySet
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if r, ok := kongRules[m.Name()]; ok && PointCount(m) > 0 {
				set = set.With(r.fam)
			}
		}
	}
	return set
}

// KongClaims remembers which nodes push which families, each for ttl after
// its last push. Safe for concurrent use. The check on the span and log
// paths costs one atomic load while no node has ever pushed.
type KongClaims struct {
	ttl      time.Duration
	maxNodes int
	// active is set once any node has claimed a family: the fast path of
	// Superseded when nobody pushes metrics.
	active atomic.Bool
	mu     sync.RWMutex
	nodes  map[string]kongClaim
	// any is, per family, the last time any node claimed it (log entries
	// carry no node; nodes beyond maxNodes are only counted here).
	any [kongFamCount]time.Time
}

type kongClaim struct {
	set  KongFamilySet
	seen [kongFamCount]time.Time
}

// NewKongClaims makes a claim table. ttl is how long a push keeps its claim:
// a few of Kong's push intervals (`metrics.push_interval`, 60 s by
// default), so one late push never lets spans back in. maxNodes bounds the
// nodes remembered one by one; past it, further nodes' claims are
// receiver-wide (as for logs).
func NewKongClaims(ttl time.Duration, maxNodes int) *KongClaims {
	return &KongClaims{ttl: ttl, maxNodes: maxNodes, nodes: map[string]kongClaim{}}
}

// Claim records that node pushed the families in set at now.
func (c *KongClaims) Claim(node string, set KongFamilySet, now time.Time) {
	if set == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for f := range KongFam(kongFamCount) {
		if set.Has(f) {
			c.any[f] = now
		}
	}
	c.active.Store(true)
	if node == "" {
		return
	}
	cl, ok := c.nodes[node]
	if !ok && len(c.nodes) >= c.maxNodes {
		c.sweep(now)
		if len(c.nodes) >= c.maxNodes {
			return
		}
	}
	for f := range KongFam(kongFamCount) {
		if set.Has(f) {
			cl.set = cl.set.With(f)
			cl.seen[f] = now
		}
	}
	if !ok {
		node = cloneString(node)
	}
	c.nodes[node] = cl
}

// sweep forgets the nodes whose every claim expired; c.mu held.
func (c *KongClaims) sweep(now time.Time) {
	for n, cl := range c.nodes {
		if cl.current(now, c.ttl) == 0 {
			delete(c.nodes, n)
		}
	}
}

func (cl *kongClaim) current(now time.Time, ttl time.Duration) KongFamilySet {
	var set KongFamilySet
	for f := range KongFam(kongFamCount) {
		if cl.set.Has(f) && now.Sub(cl.seen[f]) <= ttl {
			set = set.With(f)
		}
	}
	return set
}

// Superseded returns the families of want that node's pushed metrics
// carry now: the span or log path must not count those. node "" (a Kong
// http-log entry) is superseded by any node's push; a node beyond maxNodes
// likewise.
func (c *KongClaims) Superseded(node string, want KongFamilySet, now time.Time) KongFamilySet {
	if c == nil || !c.active.Load() {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if node != "" {
		if cl, ok := c.nodes[node]; ok {
			return cl.current(now, c.ttl) & want
		}
		if len(c.nodes) < c.maxNodes {
			return 0
		}
	}
	var set KongFamilySet
	for f := range KongFam(kongFamCount) {
		if want.Has(f) && !c.any[f].IsZero() && now.Sub(c.any[f]) <= c.ttl {
			set = set.With(f)
		}
	}
	return set
}

// cloneString copies a string kept beyond the input it came from.
func cloneString(s string) string { return string([]byte(s)) }
