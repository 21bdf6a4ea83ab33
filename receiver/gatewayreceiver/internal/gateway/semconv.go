package gateway

// The semantic conventions' home: any gateway whose server spans follow the
// OpenTelemetry HTTP semantic conventions (docs/gateways.md §5). The common
// fields every mapper reads (route, method, status, sizes, GenAI) are read
// for every gateway in mapRoot; this gateway adds nothing to them, has no
// access log and no upstream health.
var semconvGateway = Gateway{Name: "semconv"}
