package traffic

import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

// Kong's pushed metrics win over its spans and logs (gateway.KongClaims):
// under the kong profile, an event's Superseded set names the families of
// Kong's plugin its node pushes, and those families leave it alone.

// kongClaimOf is the claim bit of the family named name under profile
// prof: the bit of Kong's family of that name under the kong profile, 0
// otherwise.
func kongClaimOf(name, prof string) gateway.KongFamilySet {
	if prof != ProfileKong {
		return 0
	}
	for f := range gateway.KongFamilies {
		if gateway.KongFamilies[f].Name == name {
			return gateway.KongFamilySet(0).With(gateway.KongFam(f))
		}
	}
	return 0
}

// superseded reports whether every family e has a value for is in its
// Superseded set: it is counted nowhere, and admits no tuple. Called only
// for an event with a Superseded set.
func (a *Aggregator) superseded(e *gateway.Event) bool {
	for i := range a.fams {
		f := &a.fams[i]
		if f.claim&e.Superseded != 0 {
			continue
		}
		if _, ok := valueOf(f.measure, e); ok {
			return false
		}
	}
	return true
}
