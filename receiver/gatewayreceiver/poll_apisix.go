package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"context"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// apisixHealthPath is the APISIX control API's list of health checkers
// (default control port 9090; gateway-formats.md §2b).
const apisixHealthPath = "/v1/healthcheck"

// pollAPISIX fetches every checker's nodes in one document. A checker exists
// only once its upstream has served a request, so upstreams come and go
// with traffic; rows of a checker that vanished are swept.
func (p *poller) pollAPISIX(ctx context.Context, gen uint64) error {
	return p.pollSingle(ctx, gen, apisixHealthPath, gateway.DecodeAPISIXHealth)
}
