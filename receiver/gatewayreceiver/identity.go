package gatewayreceiver

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// hostname is os.Hostname; tests replace it.
var hostname = os.Hostname

// identity is the collector label and its value, and a warning when the
// default value cannot be told apart from another collector's (the empty
// string otherwise).
//
// collector_name wins when set. Otherwise the value is the host name and
// the port of the receiver's listener, "vm-1:14318": several collectors on
// one host (systemd instances, containers with host networking, two
// distributions side by side) cannot listen on one port, so their values
// differ, with no setting; a restart with the same config listens on the
// same port again, so the value is the same after it, unlike a random id.
// The listener is protocols.http's when it is enabled (the push and log
// paths need it, and the grpc one can be switched off without the value
// changing), else protocols.grpc's. A listener on a unix socket names its
// path instead of a port. Only the port is taken from the endpoint: the
// same port on 0.0.0.0, [::], localhost or one address is one value,
// whatever interface a config binds.
func (c *Config) identity() (health.Identity, string, error) {
	if c.CollectorLabel == "" {
		return health.Identity{}, "", nil
	}
	if c.CollectorName != "" {
		return health.Identity{Key: c.CollectorLabel, Value: c.CollectorName}, "", nil
	}
	h, err := hostname()
	if err == nil && h == "" {
		err = errors.New("empty host name")
	}
	if err != nil {
		return health.Identity{}, "", fmt.Errorf("collector_name is not set and the host name is unknown (%v); set collector_name", err)
	}
	listener, warning := c.listenerName()
	if listener == "" {
		return health.Identity{Key: c.CollectorLabel, Value: h}, warning, nil
	}
	return health.Identity{Key: c.CollectorLabel, Value: h + ":" + listener}, warning, nil
}

// listenerName is the part of the default identity that tells the
// collectors of one host apart: the port of protocols.http's endpoint, else
// of protocols.grpc's, or a unix socket's path. With port 0 (a port the
// kernel picks, different at every start) or an endpoint without a port it
// is "", with a warning naming the fix.
func (c *Config) listenerName() (string, string) {
	var endpoint, transport, key string
	switch {
	case c.Protocols.HTTP.HasValue():
		a := c.Protocols.HTTP.Get().NetAddr
		endpoint, transport, key = a.Endpoint, string(a.Transport), "protocols.http.endpoint"
	case c.Protocols.GRPC.HasValue():
		a := c.Protocols.GRPC.Get().NetAddr
		endpoint, transport, key = a.Endpoint, string(a.Transport), "protocols.grpc.endpoint"
	default:
		return "", ""
	}
	if transport == "unix" || transport == "unixgram" || transport == "unixpacket" {
		return endpoint, ""
	}
	_, port, err := net.SplitHostPort(endpoint)
	if err != nil || port == "" || port == "0" {
		return "", "the collector label's default value is the host name alone, because " + key + " (" + endpoint +
			") names no fixed port: collectors on this host may write identical series; set collector_name"
	}
	return port, ""
}
