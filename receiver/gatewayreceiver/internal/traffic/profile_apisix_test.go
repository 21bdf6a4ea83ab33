package traffic

import (
	"strings"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// With prefer_name the apisix profile labels route and service by name,
// falling back to the id, as APISIX's prefer_name does.
func TestAPISIXPreferName(t *testing.T) {
	e := otelEvent("APISIX", "/pets")
	e.RouteID, e.RouteName, e.ServiceID = "r1", "pets-route", "s1"
	for _, c := range []struct {
		prefer         bool
		route, service string
	}{{false, "r1", "s1"}, {true, "pets-route", "s1"}} {
		k, _ := apisixKey(&e, &Dimensions{PreferName: c.prefer})
		if k.route != c.route || k.service != c.service {
			t.Errorf("prefer_name %v: route %q service %q, want %q %q", c.prefer, k.route, k.service, c.route, c.service)
		}
	}
}

// TestAPISIXModelLabelIsCapped: model names, client input, are cut to 128
// bytes as APISIX 3.18 cuts them, at a whole UTF-8 character.
func TestAPISIXModelLabelIsCapped(t *testing.T) {
	e := otelEvent("APISIX", "/chat")
	e.GenAI.RequestModel = strings.Repeat("m", 300)
	e.GenAI.ClientModel, e.GenAI.ClientModelLogged = strings.Repeat("a", 127)+"é", true // é is 2 bytes: 129 in all
	k, _ := apisixKey(&e, &Dimensions{})
	if k.model != strings.Repeat("m", 128) {
		t.Errorf("llm_model %d bytes, want the first 128", len(k.model))
	}
	if k.clientModel != strings.Repeat("a", 127) {
		t.Errorf("request_llm_model %q, want the 127 bytes before the cut character", k.clientModel)
	}
}

// TestAPISIXResponseSourceNginx: a span whose apisix.response_source is
// "nginx" (proxied, no upstream response headers: APISIX 3.17+
// core/response.lua) keeps that value; the kong and otel profiles name it
// as the gateway's own answer.
func TestAPISIXResponseSourceNginx(t *testing.T) {
	k := tuple{status: 502, source: gateway.SourceProxy}
	m := pcommon.NewMap()
	apisixStatusLabels(&k, m)
	if v, _ := m.Get("response_source"); v.Str() != "nginx" {
		t.Errorf("apisix response_source %q, want nginx", v.Str())
	}
	if got := sourceName(gateway.SourceProxy, "service", "kong", "kong"); got != "kong" {
		t.Errorf("kong source %q, want kong", got)
	}
}
