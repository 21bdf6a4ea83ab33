package health

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

var (
	eventsAccepted   = attribute.NewSet(attribute.String("outcome", "accepted"))
	eventsRejected   = attribute.NewSet(attribute.String("outcome", "rejected"))
	eventsOutOfOrder = attribute.NewSet(attribute.String("outcome", "out_of_order"))
	eventsOverLimit  = attribute.NewSet(attribute.String("outcome", "over_limit"))
	eventsThrottled  = attribute.NewSet(attribute.String("outcome", "throttled"))
	eventsClockSkew  = attribute.NewSet(attribute.String("outcome", "clock_skew"))
)

// minPushEvents is the fewest events one push may carry whatever
// push.max_targets: a push may carry more events than there are targets
// (updates of known ones), up to max(push.max_targets, minPushEvents).
const minPushEvents = 10_000

// jsonContentType is the push endpoint's only media type.
const jsonContentType = "application/json"

// pushResponse is the answer to a push: how many events were applied, how
// many were older than the state they would replace, and which were
// refused and why.
type pushResponse struct {
	Accepted   int             `json:"accepted"`
	OutOfOrder int             `json:"out_of_order"`
	Rejected   []rejectedEvent `json:"rejected,omitempty"`
	Error      string          `json:"error,omitempty"`
}

type rejectedEvent struct {
	Index int    `json:"index"`
	Error string `json:"error"`
}

// handlePush serves POST <push.path>: one health event or an array of them
// (README "Pushed events"). Invalid events are refused one by one; the
// request fails (400) only when none could be applied. A request refused as
// a whole (not JSON, wrong method or media type, too large) counts as one
// rejected event.
func (h *Health) handlePush(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsRejected))
		writePush(w, http.StatusMethodNotAllowed, pushResponse{Error: req.Method + " not allowed, use POST"})
		return
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != jsonContentType {
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsRejected))
		writePush(w, http.StatusUnsupportedMediaType, pushResponse{Error: "unsupported Content-Type " + strconv.Quote(req.Header.Get("Content-Type")) + ", use " + jsonContentType})
		return
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if errors.Is(err, admission.ErrBusy) {
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsThrottled))
		w.Header().Set("Retry-After", admission.RetryAfter)
		writePush(w, http.StatusTooManyRequests, pushResponse{Error: err.Error()})
		return
	}
	if err != nil {
		code := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsRejected))
		writePush(w, code, pushResponse{Error: "reading request body: " + err.Error()})
		return
	}
	maxPushed := h.cfg.Push.Get().MaxTargets
	if n, most := gateway.HealthEventCount(body), max(maxPushed, minPushEvents); n > most {
		// Decoding millions of events (20 MiB of {} is 7 million) took
		// gigabytes, for a push no pusher sends.
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsRejected))
		writePush(w, http.StatusRequestEntityTooLarge, pushResponse{Error: "a push carries at most " + strconv.Itoa(most) +
			" events (limits.max_pushed_targets, at least " + strconv.Itoa(minPushEvents) + "); this one carries " + strconv.Itoa(n)})
		return
	}
	events, rejected, err := gateway.DecodeHealthEvents(nil, body)
	if err != nil {
		h.tel.ReceiverGatewayHealthEvents.Add(ctx, 1, metric.WithAttributeSet(eventsRejected))
		writePush(w, http.StatusBadRequest, pushResponse{Error: err.Error()})
		return
	}
	resp := pushResponse{}
	now := time.Now()
	push := h.cfg.Push.Get()
	overLimit, skewed := 0, 0
	// Both lists are in request order; merge them so rejected stays sorted
	// by index.
	next := 0
	refuse := func(idx int, msg string) {
		for ; next < len(rejected) && rejected[next].Index < idx; next++ {
			resp.Rejected = append(resp.Rejected, rejectedEvent{Index: rejected[next].Index, Error: rejected[next].Msg})
		}
		resp.Rejected = append(resp.Rejected, rejectedEvent{Index: idx, Error: msg})
	}
	for i := range events {
		switch h.table.applyEvent(&events[i], now, maxPushed, push.MaxClockSkew) {
		case pushApplied:
			resp.Accepted++
		case pushOutOfOrder:
			resp.OutOfOrder++
		case pushOverLimit:
			overLimit++
			refuse(events[i].Index, "refused: "+strconv.Itoa(maxPushed)+
				" pushed targets are kept already (limits.max_pushed_targets); an event about a new target is refused until pushed targets expire")
		case pushClockSkew:
			skewed++
			refuse(events[i].Index, clockSkewMessage(events[i].Time, now, push.MaxClockSkew))
		}
	}
	for ; next < len(rejected); next++ {
		resp.Rejected = append(resp.Rejected, rejectedEvent{Index: rejected[next].Index, Error: rejected[next].Msg})
	}
	if resp.Accepted > 0 {
		h.notify()
	}
	h.tel.ReceiverGatewayHealthEvents.Add(ctx, int64(resp.Accepted), metric.WithAttributeSet(eventsAccepted))
	h.tel.ReceiverGatewayHealthEvents.Add(ctx, int64(resp.OutOfOrder), metric.WithAttributeSet(eventsOutOfOrder))
	h.tel.ReceiverGatewayHealthEvents.Add(ctx, int64(len(rejected)), metric.WithAttributeSet(eventsRejected))
	h.tel.ReceiverGatewayHealthEvents.Add(ctx, int64(overLimit), metric.WithAttributeSet(eventsOverLimit))
	h.pushFolds.Folded(int64(overLimit))
	h.tel.ReceiverGatewayHealthEvents.Add(ctx, int64(skewed), metric.WithAttributeSet(eventsClockSkew))
	code := http.StatusOK
	if resp.Accepted == 0 && resp.OutOfOrder == 0 && len(resp.Rejected) > 0 {
		code = http.StatusBadRequest
	}
	writePush(w, code, resp)
}

// clockSkewMessage says why an event's timestamp was refused, naming both
// clocks (a difference of centuries does not fit a time.Duration).
func clockSkewMessage(at, now time.Time, skew time.Duration) string {
	side := "behind"
	if at.After(now) {
		side = "ahead of"
	}
	return `"timestamp" ` + strconv.Quote(at.Format(time.RFC3339Nano)) + " is more than " + skew.String() + " " + side +
		" the collector's clock (" + now.UTC().Format(time.RFC3339) + "): refused (health.push.max_clock_skew)"
}

func writePush(w http.ResponseWriter, code int, resp pushResponse) {
	b, _ := json.Marshal(resp) // plain strings and ints: cannot fail
	w.Header().Set("Content-Type", jsonContentType)
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
