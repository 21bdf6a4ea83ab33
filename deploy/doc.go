// Package deploy holds the checks of otelgateway's deployment files, run by `make lint`:
// the Kubernetes manifests decoded strictly into their k8s.io/api types, the Dockerfile through
// BuildKit's own linter (the rules of `docker build --check`), and the Grafana dashboard's shape.
// It is a module of its own so that Kubernetes and BuildKit never enter the main module.
package deploy
