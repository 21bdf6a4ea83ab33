package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// envoyClustersPath is Envoy's admin cluster status in proto3 JSON
// (gateway-formats.md §3a).
const envoyClustersPath = "/clusters?format=json"

// pollEnvoy fetches every cluster's hosts and their health flags in one
// document.
func (p *poller) pollEnvoy(ctx context.Context, gen uint64) error {
	return p.pollSingle(ctx, gen, envoyClustersPath, gateway.DecodeEnvoyClusters)
}
